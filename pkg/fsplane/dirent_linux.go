package fsplane

import (
	"syscall"
	"unsafe"
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
		n, err := syscall.ReadDirent(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return out, err
		}
		if n <= 0 {
			return out, nil
		}
		b := buf[:n]
		for len(b) >= 19 {
			// struct linux_dirent64 { u64 ino; s64 off; u16 reclen; u8 type; char name[]; }
			reclen := int(*(*uint16)(unsafe.Pointer(&b[16])))
			if reclen < 19 || reclen > len(b) {
				break
			}
			ino := *(*uint64)(unsafe.Pointer(&b[0]))
			dt := b[18]
			nameb := b[19:reclen]
			for i, c := range nameb {
				if c == 0 {
					nameb = nameb[:i]
					break
				}
			}
			b = b[reclen:]
			name := string(nameb)
			if ino == 0 || name == "." || name == ".." {
				continue
			}
			typ := typeOther
			switch dt {
			case syscall.DT_DIR:
				typ = typeDir
			case syscall.DT_REG:
				typ = typeFile
			case syscall.DT_UNKNOWN:
				typ = typeOfUnknown(fd, name)
			}
			out = append(out, dirent{name: name, typ: typ})
		}
	}
}

// oPath is O_PATH (the same value on every Linux architecture Go supports).
const oPath = 0x200000

func typeOfUnknown(dirfd int, name string) int {
	fd, err := openatNoFollow(dirfd, name, oPath)
	if err != nil {
		return typeOther
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if syscall.Fstat(fd, &st) != nil {
		return typeOther
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return typeDir
	case syscall.S_IFREG:
		return typeFile
	}
	return typeOther
}
