package repoplane

import (
	"io/fs"
	"strings"
)

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

// dirHandle is an open directory: a descriptor of the directory itself (to list it and
// lstat and open its children relative to it) and, where needed, the directory as an
// *os.Root. On Linux the descriptor is a plain one (internal/dirwalk, dirio_fast.go: no
// poller registration, no os.File) and the root is opened on first use; elsewhere both
// are os types (dirio_other.go). The struct is defined per platform.

// singleName reports whether name is one path component that names a child of a
// directory: not empty, not "." or "..", no separator. Only such names are opened
// relative to a descriptor; anything else goes through the directory's os.Root.
func singleName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00")
}
