//go:build !unix

package repoplane

import "os"

const openAppendNoFollow = os.O_WRONLY | os.O_APPEND | os.O_CREATE

// soleRegularFile reports whether f is a regular file; link counts are not available
// on this platform.
func soleRegularFile(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode().IsRegular()
}
