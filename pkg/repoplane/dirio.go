package repoplane

import (
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

// typeUnknown is the type of a listed name whose type the listing does not give.
const typeUnknown = ^fs.FileMode(0)

// typeOf is the listing type of an lstat mode.
func typeOf(m fs.FileMode) fs.FileMode {
	switch t := m.Type(); t {
	case fs.ModeDir, fs.ModeSymlink, 0:
		return t
	}
	return fs.ModeIrregular
}

// fileStat is what the walker needs of an lstat: the type and permission bits, the
// size, git's index stat data, and the identity of the file (to check that a file
// opened later is the one that was inspected).
type fileStat struct {
	mode     fs.FileMode
	size     int64
	sd       statData
	dev, ino uint64
	//lint:ignore U1000 read where the platform has no device and inode numbers (dirio_other.go)
	fi fs.FileInfo
}

// dirHandle is an open directory: its root (to open children without leaving it) and a
// descriptor of the directory itself (to list it and lstat its children relative to it).
type dirHandle struct {
	root *os.Root
	f    *os.File
}

func openDirHandle(root *os.Root) (*dirHandle, error) {
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	return &dirHandle{root: root, f: f}, nil
}

func (d *dirHandle) close() { _ = d.f.Close() }
