package pollstdin

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func blockingPipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	r, w = os.NewFile(uintptr(p[0]), "r"), os.NewFile(uintptr(p[1]), "w")
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	return r, w
}

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return flags&unix.O_NONBLOCK != 0
}

// A blocking pipe is read through the poller: data arrives, and closing the reader
// unblocks a Read that waits (a blocking read(2) would stay blocked); afterwards the
// descriptor is blocking again, as it was given.
func TestPipeIsReadThroughThePoller(t *testing.T) {
	r, w := blockingPipe(t)
	pr, restore := Open(r)
	if !nonblocking(t, r) {
		t.Fatal("the pipe is still in blocking mode while serving")
	}
	if _, err := w.Write([]byte("hi\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n, err := pr.Read(buf); err != nil || string(buf[:n]) != "hi\n" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := pr.Read(buf)
		done <- err
	}()
	time.Sleep(10 * time.Millisecond) // let the Read block (it passes either way if it has not yet)
	if err := pr.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a Read after Close returned no error")
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not unblock a waiting Read: the pipe is not read through the poller")
	}
	restore()
	if nonblocking(t, r) {
		t.Fatal("the pipe was left in non-blocking mode")
	}
	if _, err := w.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if n, err := r.Read(buf); err != nil || n != 1 {
		t.Fatalf("the original descriptor after restore: %d, %v", n, err)
	}
}

// A regular file (like a terminal, its mode shared with others) is left as it is.
func TestRegularFileIsLeftAlone(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, restore := Open(f)
	defer restore()
	if nonblocking(t, f) {
		t.Fatal("a regular file was switched to non-blocking mode")
	}
}
