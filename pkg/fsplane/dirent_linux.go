package fsplane

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
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

// Layout of struct linux_dirent64 (the same on every Linux architecture):
// u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[] (NUL-terminated).
const (
	direntInoOff    = 0
	direntReclenOff = 16
	direntTypeOff   = 18
	direntNameOff   = 19
)

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

// parseDirents appends the entries of the getdents64 records in b to out ("." and
// ".." and deleted entries left out), classifying DT_UNKNOWN entries with unknown. A
// malformed record ends the parse (the kernel never writes one).
func parseDirents(b []byte, out []dirent, unknown func(name string) int) []dirent {
	for len(b) >= direntNameOff {
		reclen := int(binary.NativeEndian.Uint16(b[direntReclenOff:]))
		if reclen < direntNameOff || reclen > len(b) {
			break
		}
		ino := binary.NativeEndian.Uint64(b[direntInoOff:])
		dt := b[direntTypeOff]
		nameb := b[direntNameOff:reclen]
		for i, c := range nameb {
			if c == 0 {
				nameb = nameb[:i]
				break
			}
		}
		b = b[reclen:]
		name := string(nameb)
		if ino == 0 || name == "" || name == "." || name == ".." {
			continue
		}
		typ := typeOther
		switch dt {
		case unix.DT_DIR:
			typ = typeDir
		case unix.DT_REG:
			typ = typeFile
		case unix.DT_UNKNOWN:
			typ = unknown(name)
		}
		out = append(out, dirent{name: name, typ: typ})
	}
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
