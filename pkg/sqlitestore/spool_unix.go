//go:build unix

package sqlitestore

import (
	"os"

	"golang.org/x/sys/unix"
)

const spoolSupported = true

// lockFile takes an exclusive flock(2) on f without waiting; it is held until f is closed
// (by this process: a crash releases it).
func lockFile(f *os.File) error {
	return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
}

// unlockFile releases lockFile's lock (closing f releases it too).
func unlockFile(f *os.File) { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// openAppendNoFollow opens path with flags, refusing a symbolic link.
func openAppendNoFollow(path string, flags int) (*os.File, error) {
	return os.OpenFile(path, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
}
