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
