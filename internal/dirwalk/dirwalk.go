//go:build linux

package dirwalk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Type is the kind of file a listing reports for a name (getdents64's d_type).
type Type uint8

const (
	// Unknown: the file system does not give types (DT_UNKNOWN); lstat decides.
	Unknown Type = iota
	Regular
	Directory
	Symlink
	// Other is a FIFO, socket or device: never opened for reading by a walker.
	Other
)

// Entry is one name of a directory listing.
type Entry struct {
	Name string
	Type Type
}

// ValidName reports whether name is one path component naming a child of a
// directory: not empty, not "." or "..", no "/" and no NUL. Only such names are
// looked up relative to a descriptor.
func ValidName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}

// Layout of struct linux_dirent64 (the same on every Linux architecture):
// u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[] (NUL-terminated).
const (
	direntInoOff    = 0
	direntReclenOff = 16
	direntTypeOff   = 18
	direntNameOff   = 19
)

// Parse appends the entries of the getdents64 records in b to out (see ParseFunc).
func Parse(b []byte, out []Entry) []Entry {
	ParseFunc(b, func(e Entry) { out = append(out, e) })
	return out
}

// ParseFunc calls fn for each entry of the getdents64 records in b. "." and "..",
// deleted entries (inode 0) and names that are not one component (ValidName: the
// kernel never writes one) are left out; a malformed record (a length shorter than a
// header or past the end of b) ends the parse. The names of one call share a single
// string allocation (a name kept long after the listing holds that string: copy it
// with strings.Clone if that matters).
func ParseFunc(b []byte, fn func(Entry)) {
	var s string // b as a string, made once the first name is kept
	off := 0
	for len(b)-off >= direntNameOff {
		rec := b[off:]
		reclen := int(binary.NativeEndian.Uint16(rec[direntReclenOff:]))
		if reclen < direntNameOff || reclen > len(rec) {
			break
		}
		ino := binary.NativeEndian.Uint64(rec[direntInoOff:])
		dt := rec[direntTypeOff]
		nameb := rec[direntNameOff:reclen]
		if i := bytes.IndexByte(nameb, 0); i >= 0 {
			nameb = nameb[:i]
		}
		start := off + direntNameOff
		off += reclen
		if ino == 0 || len(nameb) == 0 || len(nameb) <= 2 && (string(nameb) == "." || string(nameb) == "..") ||
			bytes.IndexByte(nameb, '/') >= 0 {
			continue
		}
		if s == "" {
			s = string(b)
		}
		fn(Entry{Name: s[start : start+len(nameb)], Type: typeOf(dt)})
	}
}

func typeOf(dt byte) Type {
	switch dt {
	case unix.DT_REG:
		return Regular
	case unix.DT_DIR:
		return Directory
	case unix.DT_LNK:
		return Symlink
	case unix.DT_UNKNOWN:
		return Unknown
	}
	return Other
}

// Dir is an open directory on a plain descriptor.
type Dir struct {
	fd   int
	name string // for error messages
}

// OpenRoot opens root's own directory (a duplicate of its descriptor: the walk cannot
// reach outside root by any name it opens, and root may be closed independently).
func OpenRoot(root *os.Root) (*Dir, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd, derr := -1, error(nil)
	if err := sc.Control(func(raw uintptr) {
		fd, derr = unix.FcntlInt(raw, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if derr != nil {
		return nil, &fs.PathError{Op: "dup", Path: root.Name(), Err: derr}
	}
	return &Dir{fd: fd, name: root.Name()}, nil
}

// Open opens the directory at path (the top of a walk: a path the caller trusts; a
// final link is not followed).
func Open(path string) (*Dir, error) {
	for {
		fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "open", Path: path, Err: notDir(err)}
		}
		return &Dir{fd: fd, name: path}, nil
	}
}

// Fd is the directory's descriptor (valid until Close).
func (d *Dir) Fd() int { return d.fd }

// Name is the directory's display name (the path it was opened by).
func (d *Dir) Name() string { return d.name }

// Close closes the descriptor.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// ReadAll lists the directory from its current offset to the end, appending to out
// (see List).
func (d *Dir) ReadAll(buf []byte, out []Entry) ([]Entry, error) {
	err := d.List(buf, func(e Entry) { out = append(out, e) })
	return out, err
}

// List calls fn for each name of the directory from its current offset to the end;
// buf is the getdents64 buffer (at least a few hundred bytes; 32-64 KiB lists most
// directories in one call).
func (d *Dir) List(buf []byte, fn func(Entry)) error {
	for {
		n, err := unix.Getdents(d.fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "getdents", Path: d.name, Err: err}
		}
		if n <= 0 {
			return nil
		}
		ParseFunc(buf[:n], fn)
	}
}

// Lstat is fstatat(name, AT_SYMLINK_NOFOLLOW) relative to the directory.
func (d *Dir) Lstat(name string, st *unix.Stat_t) error {
	if !ValidName(name) {
		return &fs.PathError{Op: "lstat", Path: name, Err: unix.EINVAL}
	}
	for {
		err := unix.Fstatat(d.fd, name, st, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "lstat", Path: name, Err: err}
		}
		return nil
	}
}

// openat opens the child name with flags|O_NOFOLLOW|O_CLOEXEC. A link in name's place
// is never followed: ELOOP is reported as ENOTDIR ("not a directory").
func (d *Dir) openat(name string, flags int) (int, error) {
	if !ValidName(name) {
		return -1, &fs.PathError{Op: "openat", Path: name, Err: unix.EINVAL}
	}
	for {
		fd, err := unix.Openat(d.fd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return -1, &fs.PathError{Op: "openat", Path: name, Err: notDir(err)}
		}
		return fd, nil
	}
}

func notDir(err error) error {
	if err == unix.ELOOP {
		return unix.ENOTDIR
	}
	return err
}

// OpenDir opens the child directory name. A link, file or anything else in its place
// is "not a directory" (errors.Is(err, unix.ENOTDIR)); a name that is not one
// component is refused (EINVAL).
func (d *Dir) OpenDir(name string) (*Dir, error) {
	fd, err := d.openat(name, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		return nil, err
	}
	return &Dir{fd: fd, name: d.name + "/" + name}, nil
}

// File is a regular file open for reading on a plain descriptor (read(2), no poller).
type File struct {
	fd   int
	name string
}

// ErrChanged is returned by OpenFile when the name no longer is the regular file the
// caller inspected.
var ErrChanged = errors.New("changed while it was read")

// OpenFile opens the child name for reading, without following a link and without
// blocking (O_NONBLOCK: a FIFO put in its place does not hang the open), and checks
// that what was opened is a regular file; when ino or dev is not zero, also that it is
// that file (dev, ino from the caller's lstat: a file swapped in between is refused
// with ErrChanged, never read). st receives the opened file's fstat.
func (d *Dir) OpenFile(name string, dev, ino uint64, st *unix.Stat_t) (*File, error) {
	fd, err := d.openat(name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	if err := unix.Fstat(fd, st); err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "fstat", Path: name, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || (dev != 0 || ino != 0) && (uint64(st.Ino) != ino || uint64(st.Dev) != dev) {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: name, Err: ErrChanged}
	}
	return &File{fd: fd, name: name}, nil
}

func (f *File) Read(b []byte) (int, error) {
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

// Fd is the file's descriptor (valid until Close).
func (f *File) Fd() int { return f.fd }

// Close closes the descriptor.
func (f *File) Close() error { return unix.Close(f.fd) }

// Readlink reads the link name in the directory.
func (d *Dir) Readlink(name string) (string, error) {
	if !ValidName(name) {
		return "", &fs.PathError{Op: "readlinkat", Path: name, Err: unix.EINVAL}
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
