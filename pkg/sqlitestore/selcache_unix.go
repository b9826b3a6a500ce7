//go:build unix

package sqlitestore

import (
	"errors"
	"os"
	"syscall"
)

// statStamp stats the stamp file; ok is false when the cache cannot be used (an error
// other than the file not existing).
func statStamp(path string) (fileStamp, bool) {
	var st syscall.Stat_t
	err := syscall.Stat(path, &st)
	if errors.Is(err, os.ErrNotExist) {
		return fileStamp{}, true
	}
	if err != nil {
		return fileStamp{}, false
	}
	return fileStamp{ok: true, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano(), ino: uint64(st.Ino)}, true
}

// openNoFollow creates or truncates path for writing, refusing a symbolic link.
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
}
