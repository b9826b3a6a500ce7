//go:build unix

package repoplane

import (
	"os"
	"syscall"
)

// openAppendNoFollow opens a log for appending: never through a final symbolic link,
// and never blocking (a FIFO planted in its place fails to open instead of hanging).
const openAppendNoFollow = os.O_WRONLY | os.O_APPEND | os.O_CREATE | syscall.O_NOFOLLOW | syscall.O_NONBLOCK

// soleRegularFile reports whether the open file f is a regular file with exactly one
// name: a file with another hard link may be the same file as one outside the root.
func soleRegularFile(f *os.File) bool {
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 1
}
