//go:build linux && (amd64 || arm64)

package repoplane

import (
	"encoding/binary"
	"io/fs"
	"os"
	"runtime"
	"syscall"
	"unsafe"
)

// On Linux the walker lists directories with getdents64 (whose d_type spares an lstat
// of every untracked entry) and lstats tracked files with fstatat relative to the
// directory descriptor: one system call per file, no allocation, and no path
// resolution that a concurrent rename could redirect.

func (d *dirHandle) list(buf []byte) ([]dirEnt, error) {
	fd := int(d.f.Fd())
	var names []byte
	type span struct {
		a, b int
		typ  fs.FileMode
	}
	var spans []span
	for {
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "getdents", Path: d.f.Name(), Err: err}
		}
		if n <= 0 {
			break
		}
		for off := 0; off+19 <= n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 19 || off+reclen > n {
				break
			}
			ino := binary.NativeEndian.Uint64(buf[off:])
			typ := buf[off+18]
			name := buf[off+19 : off+reclen]
			for i, c := range name {
				if c == 0 {
					name = name[:i]
					break
				}
			}
			off += reclen
			if ino == 0 || string(name) == "." || string(name) == ".." {
				continue
			}
			var t fs.FileMode
			switch typ {
			case syscall.DT_DIR:
				t = fs.ModeDir
			case syscall.DT_LNK:
				t = fs.ModeSymlink
			case syscall.DT_REG:
				t = 0
			case syscall.DT_UNKNOWN:
				t = ^fs.FileMode(0)
			default:
				t = fs.ModeIrregular
			}
			spans = append(spans, span{len(names), len(names) + len(name), t})
			names = append(names, name...)
		}
	}
	runtime.KeepAlive(d.f)
	all := string(names)
	out := make([]dirEnt, len(spans))
	for i, s := range spans {
		out[i] = dirEnt{name: all[s.a:s.b], typ: s.typ}
		if s.typ == ^fs.FileMode(0) { // the file system did not say: ask
			st, err := d.lstat(out[i].name)
			if err != nil {
				out[i].typ = fs.ModeIrregular
			} else {
				out[i].typ = st.mode.Type()
			}
		}
	}
	return out, nil
}

func (d *dirHandle) lstat(name string) (fileStat, error) {
	var st syscall.Stat_t
	for {
		err := fstatat(int(d.f.Fd()), name, &st)
		if err == syscall.EINTR {
			continue
		}
		runtime.KeepAlive(d.f)
		if err != nil {
			return fileStat{}, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		return statFromSys(&st), nil
	}
}

func statFromSys(st *syscall.Stat_t) fileStat {
	mode := fs.FileMode(st.Mode & 0o777)
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		mode |= fs.ModeDir
	case syscall.S_IFLNK:
		mode |= fs.ModeSymlink
	case syscall.S_IFREG:
	default:
		mode |= fs.ModeIrregular
	}
	return fileStat{mode: mode, size: st.Size, dev: uint64(st.Dev), ino: uint64(st.Ino), sd: statData{
		ctimeS: uint32(st.Ctim.Sec), ctimeN: uint32(st.Ctim.Nsec),
		mtimeS: uint32(st.Mtim.Sec), mtimeN: uint32(st.Mtim.Nsec),
		dev: uint32(st.Dev), ino: uint32(st.Ino), uid: st.Uid, gid: st.Gid, size: uint32(st.Size)}}
}

// sameFile reports whether the open file f is the file st described.
func sameFile(st fileStat, f *os.File) bool {
	si, err := f.Stat()
	if err != nil {
		return false
	}
	sys, ok := si.Sys().(*syscall.Stat_t)
	return ok && uint64(sys.Ino) == st.ino && uint64(sys.Dev) == st.dev && si.Mode().IsRegular()
}

// statOf extracts git's index stat data from an os.FileInfo.
func statOf(fi fs.FileInfo) statData {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return statFromSys(st).sd
	}
	t := fi.ModTime()
	return statData{size: uint32(fi.Size()), mtimeS: uint32(t.Unix()), mtimeN: uint32(t.Nanosecond())}
}

const atSymlinkNofollow = 0x100

// fstatat is fstatat(2) with AT_SYMLINK_NOFOLLOW (package syscall exports it only on
// some architectures).
func fstatat(fd int, name string, st *syscall.Stat_t) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, e := syscall.Syscall6(fstatatTrap, uintptr(fd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(st)),
		atSymlinkNofollow, 0, 0)
	runtime.KeepAlive(p)
	if e != 0 {
		return e
	}
	return nil
}
