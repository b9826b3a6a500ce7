//go:build !linux

package repoplane

import (
	"io"
	"io/fs"
	"os"
)

// dirEnt is one name of a directory listing with its file type (fs.ModeDir,
// fs.ModeSymlink, 0 for a regular file, fs.ModeIrregular for anything else, or
// typeUnknown when the listing does not say).
type dirEnt struct {
	name string
	typ  fs.FileMode
}

// dirHandle is an open directory (see dirio.go): its os.Root, and the root's own
// directory open for listing.
type dirHandle struct {
	root    *os.Root
	ownRoot bool     // root was opened by this handle and is closed with it
	f       *os.File // the listing handle
}

// openDirHandle opens root's own directory (the top of a walk, or a single lookup).
func openDirHandle(root *os.Root) (*dirHandle, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	return &dirHandle{root: root, f: f}, nil
}

func (d *dirHandle) close() {
	_ = d.f.Close()
	if d.ownRoot {
		_ = d.root.Close()
	}
}

// list calls fn with each name of the directory and its type.
func (d *dirHandle) list(_ []byte, fn func(name string, typ fs.FileMode)) error {
	list, err := listTypes(d.f)
	if err != nil {
		return err
	}
	for _, de := range list {
		fn(de.name, de.typ)
	}
	return nil
}

func (d *dirHandle) rootOf() (*os.Root, error) { return d.root, nil }

// openSub opens the child directory name through the directory's root.
func (d *dirHandle) openSub(name string) (*dirHandle, error) {
	sub, err := d.root.OpenRoot(name)
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

func (d *dirHandle) openChecked(name string, st fileStat) (io.ReadCloser, error) {
	return openChecked(d.root, name, st)
}

func (d *dirHandle) readlink(name string) (string, error) { return d.root.Readlink(name) }

func (d *dirHandle) readFileLimited(name string, limit int64) ([]byte, error) {
	return readFileLimited(d.root, name, limit)
}

func (d *dirHandle) lstat(name string) (fileStat, error) {
	fi, err := d.root.Lstat(name)
	if err != nil {
		return fileStat{}, err
	}
	return statFromInfo(fi), nil
}

func sameFile(st fileStat, f *os.File) bool {
	si, err := f.Stat()
	return err == nil && si.Mode().IsRegular() && st.fi != nil && os.SameFile(st.fi, si)
}

// statOf extracts the portable part of git's index stat data (times and size); the
// fields this platform does not expose stay zero and are then not compared.
func statOf(fi fs.FileInfo) statData {
	t := fi.ModTime()
	sd := statData{size: uint32(fi.Size()), mtimeS: uint32(t.Unix()), mtimeN: uint32(t.Nanosecond())}
	sd.ctimeS, sd.ctimeN = sd.mtimeS, sd.mtimeN
	return sd
}

// statFromInfo converts an os.FileInfo (the portable path).
func statFromInfo(fi fs.FileInfo) fileStat {
	return fileStat{mode: fi.Mode(), size: fi.Size(), sd: statOf(fi), fi: fi}
}

// listTypes reads a directory's names with their types; anything but a directory, a
// link or a regular file is irregular.
func listTypes(f *os.File) ([]dirEnt, error) {
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]dirEnt, len(des))
	for i, de := range des {
		t := de.Type()
		if t != fs.ModeDir && t != fs.ModeSymlink && t != 0 {
			t = fs.ModeIrregular
		}
		out[i] = dirEnt{name: de.Name(), typ: t}
	}
	return out, nil
}
