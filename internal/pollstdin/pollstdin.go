// Package pollstdin hands a server the standard input it was given as a pipe through Go's
// network poller instead of blocking reads (issue 28, item 5).
//
// A goroutine blocked in read(2) on a blocking pipe holds its thread in a system call:
// the runtime's monitor takes its P away after 20 µs and wakes another thread, and when
// input arrives the reading thread has to get a P back, so every message costs a few
// more thread wake-ups. On a loaded machine each wake-up waits for a CPU, which is most
// of why an MCP round trip through `sharedos mcp` grew with the machine's load. Through
// the poller, a read that would block parks the goroutine, and the thread that polls
// runs it.
package pollstdin

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Open returns a reader over f's descriptor that reads through the poller, and a
// function that closes it and restores the descriptor's blocking mode; f is not closed.
// It applies only to a pipe or a socket (a terminal or a file shares its mode with
// others, e.g. the shell): for anything else, or on an error, it returns f itself and a
// no-op.
//
// O_NONBLOCK belongs to the open file description, which the process that spawned this
// one may share; it is set only while serving and cleared again by the returned
// function.
func Open(f *os.File) (io.ReadCloser, func()) {
	noop := func() {}
	fd := int(f.Fd())
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return io.NopCloser(f), noop
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO && st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return io.NopCloser(f), noop
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_NONBLOCK != 0 {
		return io.NopCloser(f), noop
	}
	dup, err := unix.Dup(fd)
	if err != nil {
		return io.NopCloser(f), noop
	}
	if err := unix.SetNonblock(dup, true); err != nil {
		_ = unix.Close(dup)
		return io.NopCloser(f), noop
	}
	// os.NewFile sees the descriptor is non-blocking and registers it with the poller.
	pf := os.NewFile(uintptr(dup), f.Name())
	return pf, func() {
		_ = pf.Close()
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFL, flags)
	}
}
