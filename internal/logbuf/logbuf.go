// Package logbuf is the writer of a server's log lines (serve's access log: one JSON line
// per request): a Write appends the line to a buffer and returns, and a goroutine of the
// writer's own writes what has gathered, many lines in one write(2).
//
// Why (issue 22): log/slog's handlers hold their mutex across the Write of each record.
// Writing a line per request straight to stderr put one write(2) per request inside that
// mutex, so every request of a loaded server queued behind the line being written — and
// behind a thread the kernel descheduled in the middle of it. A runtime trace of `serve`
// under 64 connections showed a request spending 11 % of its time in the server (20 % for
// the slowest 5 %) waiting for that mutex. With this writer the mutex is held for a copy.
//
// Lines keep their order, and nothing is lost but what a crash of the process catches in
// the buffer (microseconds' worth: the goroutine is woken by each Write). The buffer is
// bounded: when the destination is slower than the lines come (a full pipe), Write waits
// until the goroutine has written enough, as an unbuffered writer would have waited.
// Close writes what is left and stops the goroutine; a Write after Close goes straight to
// the destination.
package logbuf

import (
	"io"
	"sync"
)

// DefaultMax is the buffer's bound in bytes (New's max when it is not positive).
const DefaultMax = 1 << 20

// Writer is an io.Writer that writes through a goroutine of its own (see the package
// documentation). Its methods are safe for concurrent use.
type Writer struct {
	w   io.Writer
	max int

	mu      sync.Mutex
	room    sync.Cond // signalled when the goroutine took the buffer, and at Close
	buf     []byte    // lines not yet taken by the goroutine
	spare   []byte    // the goroutine's last written buffer, reused
	closed  bool
	wake    chan struct{}
	stopped chan struct{} // closed when the goroutine returned
	done    chan struct{} // closed when Close wrote the last buffered lines
}

// waitHook, when set (by a test), is called when a Write waits for room.
var waitHook func()

// New returns a Writer over w whose buffer holds up to max bytes (DefaultMax when max is
// not positive; a single larger line is still written whole).
func New(w io.Writer, max int) *Writer {
	if max <= 0 {
		max = DefaultMax
	}
	b := &Writer{w: w, max: max, wake: make(chan struct{}, 1), stopped: make(chan struct{}), done: make(chan struct{})}
	b.room.L = &b.mu
	go b.loop()
	return b
}

// Write appends p to the buffer (a copy: p may be reused once Write returns) and wakes
// the goroutine. It waits only while the buffer is full. It always reports len(p), nil:
// an error of the destination is not the caller's (a log line has nowhere else to go).
func (b *Writer) Write(p []byte) (int, error) {
	b.mu.Lock()
	for !b.closed && len(b.buf) > 0 && len(b.buf)+len(p) > b.max {
		if waitHook != nil {
			waitHook()
		}
		b.room.Wait()
	}
	if b.closed {
		b.mu.Unlock()
		<-b.done // after the lines Close writes
		_, _ = b.w.Write(p)
		return len(p), nil
	}
	b.buf = append(b.buf, p...)
	select { // under mu: Close closes wake only once closed is set
	case b.wake <- struct{}{}:
	default: // already woken: it takes this line with the others
	}
	b.mu.Unlock()
	return len(p), nil
}

// loop writes the buffer's lines each time it is woken, until Close.
func (b *Writer) loop() {
	defer close(b.stopped)
	for range b.wake {
		b.flush()
	}
}

// flush takes the buffer and writes it (the goroutine's, and Close's once it stopped).
func (b *Writer) flush() {
	b.mu.Lock()
	out := b.buf
	b.buf = b.spare[:0]
	b.spare = nil
	b.room.Broadcast()
	b.mu.Unlock()
	if len(out) > 0 {
		_, _ = b.w.Write(out)
	}
	b.mu.Lock()
	if cap(out) <= 2*b.max {
		b.spare = out[:0]
	}
	b.mu.Unlock()
}

// Close writes the lines still buffered and stops the goroutine; later Writes go
// straight to the destination. It returns nil; calling it again does nothing.
func (b *Writer) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.room.Broadcast()
	b.mu.Unlock()
	close(b.wake) // no Write sends any more: each checks closed under mu first
	<-b.stopped
	b.flush()
	close(b.done)
	return nil
}
