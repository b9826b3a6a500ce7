//go:build linux

package repoplane

import (
	"io/fs"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// On Linux the walker lists directories with getdents(2) and lstats with fstatat(2)
// relative to the directory descriptor, both through golang.org/x/sys/unix: one system
// call per file, and no path resolution that a concurrent rename could redirect.

// list reads the directory's names with unix.ReadDirent and unix.ParseDirent. Their
// types are left unknown (typeUnknown): the walker asks lstat (fstatat on this
// descriptor) for the few it needs, the directories and the untracked names.
func (d *dirHandle) list(buf []byte) ([]dirEnt, error) {
	fd := int(d.f.Fd())
	var names []string
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "getdents", Path: d.f.Name(), Err: err}
		}
		if n <= 0 {
			break
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
	runtime.KeepAlive(d.f)
	out := make([]dirEnt, len(names))
	for i, n := range names {
		out[i] = dirEnt{name: n, typ: typeUnknown}
	}
	return out, nil
}

func (d *dirHandle) lstat(name string) (fileStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(int(d.f.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		runtime.KeepAlive(d.f)
		if err != nil {
			return fileStat{}, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		return statFromSys(uint32(st.Mode), st.Size, uint64(st.Dev), uint64(st.Ino), uint32(st.Uid), uint32(st.Gid),
			int64(st.Ctim.Sec), int64(st.Ctim.Nsec), int64(st.Mtim.Sec), int64(st.Mtim.Nsec)), nil
	}
}

// statFromSys builds a fileStat from the fields of a stat(2) result.
func statFromSys(m uint32, size int64, dev, ino uint64, uid, gid uint32, ctS, ctN, mtS, mtN int64) fileStat {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	return fileStat{mode: mode, size: size, dev: dev, ino: ino, sd: statData{
		ctimeS: uint32(ctS), ctimeN: uint32(ctN), mtimeS: uint32(mtS), mtimeN: uint32(mtN),
		dev: uint32(dev), ino: uint32(ino), uid: uid, gid: gid, size: uint32(size)}}
}

// sysStat is the stat(2) result behind an os.FileInfo.
func sysStat(fi fs.FileInfo) (fileStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileStat{}, false
	}
	return statFromSys(uint32(st.Mode), st.Size, uint64(st.Dev), uint64(st.Ino), uint32(st.Uid), uint32(st.Gid),
		int64(st.Ctim.Sec), int64(st.Ctim.Nsec), int64(st.Mtim.Sec), int64(st.Mtim.Nsec)), true
}

// sameFile reports whether the open file f is the file st described.
func sameFile(st fileStat, f *os.File) bool {
	si, err := f.Stat()
	if err != nil {
		return false
	}
	ss, ok := sysStat(si)
	return ok && ss.ino == st.ino && ss.dev == st.dev && si.Mode().IsRegular()
}

// statOf extracts git's index stat data from an os.FileInfo.
func statOf(fi fs.FileInfo) statData {
	if ss, ok := sysStat(fi); ok {
		return ss.sd
	}
	t := fi.ModTime()
	return statData{size: uint32(fi.Size()), mtimeS: uint32(t.Unix()), mtimeN: uint32(t.Nanosecond())}
}
