package fsplane

import (
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sharedos/sharedos/internal/dirwalk"
)

// dirent types the walker cares about.
const (
	typeOther = iota
	typeDir
	typeFile
)

type dirent struct {
	name string
	typ  int
}

// readDirents lists the directory open as fd (from its current offset) with the types
// getdents64 reports; an entry of unknown type (a file system without d_type) is
// classified by fstat of an O_PATH|O_NOFOLLOW handle (which opens nothing: not a
// device, not a FIFO, not a link's target).
func readDirents(fd int, buf []byte) ([]dirent, error) {
	var out []dirent
	for {
		n, err := unix.ReadDirent(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return out, err
		}
		if n <= 0 {
			return out, nil
		}
		out = parseDirents(buf[:n], out, func(name string) int { return typeOfUnknown(fd, name) })
	}
}

// parseDirents appends the entries of the getdents64 records in b to out, as
// dirwalk.ParseFunc reads them ("." and "..", deleted entries and names that are not one
// component left out; a malformed record ends the parse), classifying DT_UNKNOWN entries
// with unknown. Each name is its own string: a name can outlive the listing in a
// result's path, and must not hold the whole listing's bytes.
func parseDirents(b []byte, out []dirent, unknown func(name string) int) []dirent {
	dirwalk.ParseFunc(b, func(e dirwalk.Entry) {
		typ := typeOther
		switch e.Type {
		case dirwalk.Directory:
			typ = typeDir
		case dirwalk.Regular:
			typ = typeFile
		case dirwalk.Unknown:
			typ = unknown(e.Name)
		}
		out = append(out, dirent{name: strings.Clone(e.Name), typ: typ})
	})
	return out
}

func typeOfUnknown(dirfd int, name string) int {
	fd, err := openatNoFollow(dirfd, name, unix.O_PATH)
	if err != nil {
		return typeOther
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return typeOther
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return typeDir
	case unix.S_IFREG:
		return typeFile
	}
	return typeOther
}
