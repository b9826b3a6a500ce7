package repoplane

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/go-git/go-billy/v5"
)

// rootFS is a billy.Filesystem over an *os.Root: every access is resolved by the kernel
// relative to the root's directory descriptor and can never leave it, whatever symbolic
// links or ".." the names contain (a link inside the root is followed only while it
// stays inside). go-git's object and reference storage runs on it for the .git
// directory, so a hostile repository cannot make go-git read or write elsewhere, and a
// .git swapped for a link after it was checked changes nothing (the descriptor is held).
type rootFS struct {
	root *os.Root
	name string // display name (the absolute path), for Root() and messages
}

var _ billy.Filesystem = (*rootFS)(nil)

// rootFile is an *os.File opened through the root; Name is relative to the root (go-git
// renames temporary files by their Name). Lock is a no-op: go-git uses flock only to
// coordinate with itself, and sharedos coordinates with git through git's lock files.
type rootFile struct {
	*os.File
	name string
}

func (f *rootFile) Name() string  { return f.name }
func (f *rootFile) Lock() error   { return nil }
func (f *rootFile) Unlock() error { return nil }

// clean maps a billy name onto a root-relative name ("/" and "" are the root itself).
func (r *rootFS) clean(name string) string {
	name = filepath.ToSlash(name)
	name = strings.TrimPrefix(path.Clean("/"+name), "/")
	if name == "" {
		return "."
	}
	return name
}

func (r *rootFS) Create(name string) (billy.File, error) {
	return r.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

// Open opens for reading without blocking (a FIFO planted in .git cannot hang go-git).
func (r *rootFS) Open(name string) (billy.File, error) { return r.OpenFile(name, openReadNonBlock, 0) }

func (r *rootFS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	n := r.clean(name)
	if flag&os.O_CREATE != 0 {
		if err := r.root.MkdirAll(path.Dir(n), 0o777); err != nil && path.Dir(n) != "." {
			return nil, err
		}
	}
	f, err := r.root.OpenFile(n, flag, perm)
	if err != nil {
		return nil, err
	}
	return &rootFile{File: f, name: n}, nil
}

func (r *rootFS) Stat(name string) (os.FileInfo, error) { return r.root.Stat(r.clean(name)) }

func (r *rootFS) Lstat(name string) (os.FileInfo, error) { return r.root.Lstat(r.clean(name)) }

func (r *rootFS) Rename(from, to string) error {
	t := r.clean(to)
	if d := path.Dir(t); d != "." {
		if err := r.root.MkdirAll(d, 0o777); err != nil {
			return err
		}
	}
	return r.root.Rename(r.clean(from), t)
}

func (r *rootFS) Remove(name string) error { return r.root.Remove(r.clean(name)) }

func (r *rootFS) Join(elem ...string) string { return path.Join(elem...) }

func (r *rootFS) TempFile(dir, prefix string) (billy.File, error) {
	d := r.clean(dir)
	if err := r.root.MkdirAll(d, 0o777); err != nil {
		return nil, err
	}
	for range 100 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		n := path.Join(d, prefix+hex.EncodeToString(b[:]))
		f, err := r.root.OpenFile(n, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o444) // read-only once renamed, like git's objects
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &rootFile{File: f, name: n}, nil
	}
	return nil, errors.New("cannot create a temporary file")
}

func (r *rootFS) ReadDir(name string) ([]os.FileInfo, error) {
	n := r.clean(name)
	f, err := r.root.Open(n)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]os.FileInfo, 0, len(ents))
	for _, e := range ents {
		fi, err := r.root.Lstat(path.Join(n, e.Name()))
		if err != nil {
			continue
		}
		out = append(out, fi)
	}
	return out, nil
}

func (r *rootFS) MkdirAll(name string, perm os.FileMode) error {
	return r.root.MkdirAll(r.clean(name), perm)
}

// Symlink is refused: sharedos never creates links inside a repository.
func (r *rootFS) Symlink(target, link string) error {
	return errors.New("symbolic links are not created by sharedos")
}

func (r *rootFS) Readlink(name string) (string, error) { return r.root.Readlink(r.clean(name)) }

func (r *rootFS) Chroot(name string) (billy.Filesystem, error) {
	n := r.clean(name)
	sub, err := r.root.OpenRoot(n)
	if err != nil {
		return nil, err
	}
	return &rootFS{root: sub, name: filepath.Join(r.name, filepath.FromSlash(n))}, nil
}

func (r *rootFS) Root() string { return r.name }
