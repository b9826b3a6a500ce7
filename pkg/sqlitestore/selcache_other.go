//go:build !unix

package sqlitestore

import (
	"errors"
	"os"
)

// statStamp: without a change time the stamp cannot be trusted; the cache is not used.
func statStamp(string) (fileStamp, bool) { return fileStamp{}, false }

// openNoFollow: the stamp is not used here (statStamp), so it is not written.
func openNoFollow(string) (*os.File, error) { return nil, errors.New("no selection stamp here") }
