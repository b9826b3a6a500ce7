//go:build linux

package repoplane

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos/internal/dirwalk"
)

// On Linux the walker lists directories with getdents(2), lstats with fstatat(2) and
// opens children with openat(2), all relative to a plain directory descriptor
// (internal/dirwalk, golang.org/x/sys/unix): one system call per file, no path
// resolution that a concurrent rename could redirect, and no os.File (whose poller
// registration costs four fcntl and an epoll_ctl per open). A child is opened only by a
// single-component name with O_NOFOLLOW, so a link is never followed and nothing
// outside the directory is reached; other names go through the directory's os.Root.

// dirHandle is an open directory (see dirio.go).
type dirHandle struct {
	d       *dirwalk.Dir
	root    *os.Root // the directory as a root: given (the top) or opened by rootOf
	ownRoot bool     // root was opened by this handle and is closed with it
}

// openDirHandle opens root's own directory (the top of a walk, or a single lookup).
func openDirHandle(root *os.Root) (*dirHandle, error) {
	d, err := dirwalk.OpenRoot(root)
	if err != nil {
		return nil, err
	}
	return &dirHandle{d: d, root: root}, nil
}

func (d *dirHandle) close() {
	_ = d.d.Close()
	if d.ownRoot && d.root != nil {
		_ = d.root.Close()
	}
}

// list calls fn with each name of the directory and the type getdents64 gives
// (d_type); a name of unknown type (a file system without d_type) is typeUnknown and
// the walker asks lstat for it when it needs it. buf is the getdents buffer.
func (d *dirHandle) list(buf []byte, fn func(name string, typ fs.FileMode)) error {
	return d.d.List(buf, func(e dirwalk.Entry) {
		typ := fs.ModeIrregular
		switch e.Type {
		case dirwalk.Directory:
			typ = fs.ModeDir
		case dirwalk.Regular:
			typ = 0
		case dirwalk.Symlink:
			typ = fs.ModeSymlink
		case dirwalk.Unknown:
			typ = typeUnknown
		}
		fn(e.Name, typ)
	})
}

func (d *dirHandle) lstat(name string) (fileStat, error) {
	if !singleName(name) {
		root, err := d.rootOf()
		if err != nil {
			return fileStat{}, err
		}
		fi, err := root.Lstat(name)
		if err != nil {
			return fileStat{}, err
		}
		st, ok := sysStat(fi)
		if !ok {
			return fileStat{}, fmt.Errorf("lstat %s: no stat data", name)
		}
		return st, nil
	}
	var st unix.Stat_t
	if err := d.d.Lstat(name, &st); err != nil {
		return fileStat{}, err
	}
	return statFromSys(uint32(st.Mode), st.Size, uint64(st.Dev), uint64(st.Ino), uint32(st.Uid), uint32(st.Gid),
		int64(st.Ctim.Sec), int64(st.Ctim.Nsec), int64(st.Mtim.Sec), int64(st.Mtim.Nsec)), nil
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
	sub, err := d.d.OpenDir(name)
	if err != nil {
		return nil, err
	}
	return &dirHandle{d: sub}, nil
}

// rootOf returns the directory as an *os.Root, opening it on first use through
// /proc/self/fd (the very directory the descriptor holds, even if renamed since) and
// checking that the opened root is that directory.
func (d *dirHandle) rootOf() (*os.Root, error) {
	if d.root != nil {
		return d.root, nil
	}
	root, err := os.OpenRoot("/proc/self/fd/" + strconv.Itoa(d.d.Fd()))
	if err != nil {
		return nil, fmt.Errorf("open directory %s: %w", d.d.Name(), err)
	}
	var st unix.Stat_t
	fi, err := root.Stat(".")
	ss, ok := fileStat{}, false
	if err == nil {
		ss, ok = sysStat(fi)
	}
	if !ok || unix.Fstat(d.d.Fd(), &st) != nil || uint64(st.Ino) != ss.ino || uint64(st.Dev) != ss.dev {
		root.Close()
		return nil, fmt.Errorf("open directory %s: it changed while it was read", d.d.Name())
	}
	d.root, d.ownRoot = root, true
	return root, nil
}

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
	var fst unix.Stat_t
	f, err := d.d.OpenFile(name, st.dev, st.ino, &fst)
	if errors.Is(err, dirwalk.ErrChanged) {
		return nil, fmt.Errorf("%s changed while it was read", name)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	return f, nil
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
	return d.d.Readlink(name)
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
