//go:build unix

package tokens

import (
	"os"
	"syscall"
)

// inode is the file's inode number (a replaced file is a change even with the same size
// and time).
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}
