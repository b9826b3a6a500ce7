//go:build linux

package repoplane

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// On Linux the walker lists directories with getdents(2), lstats with fstatat(2) and
// opens children with openat(2), all relative to a plain directory descriptor through
// golang.org/x/sys/unix: one system call per file, no path resolution that a
// concurrent rename could redirect, and no os.File (whose poller registration costs
// four fcntl and an epoll_ctl per open). A child is opened only by a single-component
// name (singleName) with O_NOFOLLOW, so a link is never followed and nothing outside
// the directory is reached; other names go through the directory's os.Root.

// list reads the directory's names with the types getdents64 gives (d_type); a name
// of unknown type (a file system without d_type) is typeUnknown and the walker asks
// lstat for it when it needs it.
func (d *dirHandle) list(buf []byte) ([]dirEnt, error) {
	var out []dirEnt
	for {
		n, err := unix.ReadDirent(d.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "getdents", Path: d.name, Err: err}
		}
		if n <= 0 {
			break
		}
		out = parseDirents(buf[:n], out)
	}
	if d.f != nil {
		runtime.KeepAlive(d.f)
	}
	return out, nil
}

// Layout of struct linux_dirent64 (the same on every Linux architecture):
// u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[] (NUL-terminated).
const (
	direntInoOff    = 0
	direntReclenOff = 16
	direntTypeOff   = 18
	direntNameOff   = 19
)

// parseDirents appends the entries of the getdents64 records in b to out ("." and
// ".." and deleted entries left out). A malformed record ends the parse (the kernel
// never writes one).
func parseDirents(b []byte, out []dirEnt) []dirEnt {
	for len(b) >= direntNameOff {
		reclen := int(binary.NativeEndian.Uint16(b[direntReclenOff:]))
		if reclen < direntNameOff || reclen > len(b) {
			break
		}
		ino := binary.NativeEndian.Uint64(b[direntInoOff:])
		dt := b[direntTypeOff]
		nameb := b[direntNameOff:reclen]
		if i := bytes.IndexByte(nameb, 0); i >= 0 {
			nameb = nameb[:i]
		}
		b = b[reclen:]
		if ino == 0 || len(nameb) == 0 || string(nameb) == "." || string(nameb) == ".." {
			continue
		}
		typ := fs.ModeIrregular
		switch dt {
		case unix.DT_DIR:
			typ = fs.ModeDir
		case unix.DT_REG:
			typ = 0
		case unix.DT_LNK:
			typ = fs.ModeSymlink
		case unix.DT_UNKNOWN:
			typ = typeUnknown
		}
		out = append(out, dirEnt{name: string(nameb), typ: typ})
	}
	return out
}

func (d *dirHandle) lstat(name string) (fileStat, error) {
	var st unix.Stat_t
	for {
		err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if d.f != nil {
			runtime.KeepAlive(d.f)
		}
		if err != nil {
			return fileStat{}, &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		return statFromSys(uint32(st.Mode), st.Size, uint64(st.Dev), uint64(st.Ino), uint32(st.Uid), uint32(st.Gid),
			int64(st.Ctim.Sec), int64(st.Ctim.Nsec), int64(st.Mtim.Sec), int64(st.Mtim.Nsec)), nil
	}
}

// openat opens name relative to the directory, never following a final link.
func (d *dirHandle) openat(name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(d.fd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if d.f != nil {
			runtime.KeepAlive(d.f)
		}
		if err != nil {
			if err == unix.ELOOP { // a link where a directory or file was expected
				err = unix.ENOTDIR
			}
			return -1, &fs.PathError{Op: "openat", Path: name, Err: err}
		}
		return fd, nil
	}
}

// openSub opens the child directory name (a link is never followed: a link in its
// place is "not a directory").
func (d *dirHandle) openSub(name string) (*dirHandle, error) {
	if !singleName(name) {
		root, err := d.rootOf()
		if err != nil {
			return nil, err
		}
		sub, err := root.OpenRoot(name)
		if err != nil {
			return nil, err
		}
		h, err := openDirHandle(sub)
		if err != nil {
			sub.Close()
			return nil, err
		}
		h.ownRoot = true
		return h, nil
	}
	fd, err := d.openat(name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &dirHandle{fd: fd, name: d.name + "/" + name}, nil
}

func (d *dirHandle) closeFd() { _ = unix.Close(d.fd) }

// rootOf returns the directory as an *os.Root, opening it on first use through
// /proc/self/fd (the very directory the descriptor holds, even if renamed since) and
// checking that the opened root is that directory.
func (d *dirHandle) rootOf() (*os.Root, error) {
	if d.root != nil {
		return d.root, nil
	}
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(d.fd))
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", d.name, err)
	}
	var st unix.Stat_t
	fi, err := root.Stat(".")
	ss, ok := fileStat{}, false
	if err == nil {
		ss, ok = sysStat(fi)
	}
	if !ok || unix.Fstat(d.fd, &st) != nil || uint64(st.Ino) != ss.ino || uint64(st.Dev) != ss.dev {
		root.Close()
		return nil, fmt.Errorf("open directory %s: it changed while it was read", d.name)
	}
	d.root, d.ownRoot = root, true
	return root, nil
}

// fdFile is a regular file open on a plain descriptor (read with read(2), no poller).
type fdFile struct {
	fd   int
	name string
}

func (f *fdFile) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(f.fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, &fs.PathError{Op: "read", Path: f.name, Err: err}
		}
		if n == 0 && len(b) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

func (f *fdFile) Close() error { return unix.Close(f.fd) }

// openChecked opens the regular file name without following a link and checks it is
// the file lstat described (a file swapped for another in between is refused, not
// read). O_NONBLOCK: a FIFO put in its place does not block the open.
func (d *dirHandle) openChecked(name string, st fileStat) (io.ReadCloser, error) {
	if !singleName(name) {
		root, err := d.rootOf()
		if err != nil {
			return nil, err
		}
		return openChecked(root, name, st)
	}
	fd, err := d.openat(name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	var fst unix.Stat_t
	if unix.Fstat(fd, &fst) != nil || fst.Mode&unix.S_IFMT != unix.S_IFREG || uint64(fst.Ino) != st.ino || uint64(fst.Dev) != st.dev {
		unix.Close(fd)
		return nil, fmt.Errorf("%s changed while it was read", name)
	}
	return &fdFile{fd: fd, name: name}, nil
}

// readlink reads the link name in the directory.
func (d *dirHandle) readlink(name string) (string, error) {
	if !singleName(name) {
		root, err := d.rootOf()
		if err != nil {
			return "", err
		}
		return root.Readlink(name)
	}
	buf := make([]byte, 256)
	for {
		n, err := unix.Readlinkat(d.fd, name, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return "", &fs.PathError{Op: "readlinkat", Path: name, Err: err}
		}
		if n < len(buf) {
			return string(buf[:n]), nil
		}
		buf = make([]byte, 2*len(buf))
	}
}

// readFileLimited reads the regular file name in the directory (refusing links and
// files larger than limit).
func (d *dirHandle) readFileLimited(name string, limit int64) ([]byte, error) {
	if !singleName(name) {
		root, err := d.rootOf()
		if err != nil {
			return nil, err
		}
		return readFileLimited(root, name, limit)
	}
	st, err := d.lstat(name) // nothing but a regular file is opened
	if err != nil {
		return nil, err
	}
	if !st.mode.IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if st.size > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	f, err := d.openChecked(name, st)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, limit+1))
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
