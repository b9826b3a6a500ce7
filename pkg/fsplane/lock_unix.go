//go:build unix

package fsplane

import (
	"context"
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock(2) on the directory dir (opened through os.Root),
// waiting while another process or goroutine holds it, and returns the open directory
// (for fsync) and the function that releases the lock. flock locks belong to the open
// file description, so two handles in one process exclude each other too; the kernel
// drops the lock when its holder dies, so a crashed writer never blocks the next one.
func lockDir(ctx context.Context, dir *os.Root) (*os.File, func(), error) {
	f, err := dir.Open(".")
	if err != nil {
		return nil, nil, err
	}
	fd := int(f.Fd())
	wait := 200 * time.Microsecond
	for {
		err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, nil, err
		}
		if err := ctx.Err(); err != nil {
			f.Close()
			return nil, nil, err
		}
		time.Sleep(wait)
		if wait < 5*time.Millisecond {
			wait *= 2
		}
	}
	return f, func() {
		unix.Flock(fd, unix.LOCK_UN)
		f.Close()
	}, nil
}
