//go:build !unix

package sqlitestore

import (
	"errors"
	"os"
)

// Without flock(2) a reader cannot tell a live spool from a dead one, so EnableSpool does
// nothing and every record is committed to SQLite directly.
const spoolSupported = false

func lockFile(*os.File) error { return errors.New("file locks are not supported here") }

func unlockFile(*os.File) {}

func openAppendNoFollow(string, int) (*os.File, error) {
	return nil, errors.New("no audit spool here")
}
