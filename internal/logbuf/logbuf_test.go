package logbuf

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// gate is a destination whose writes wait until it is opened; it keeps what it got and
// the size of each write.
type gate struct {
	open   chan struct{}
	mu     sync.Mutex
	got    bytes.Buffer
	writes []int
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	g.got.Write(p)
	g.writes = append(g.writes, len(p))
	return len(p), nil
}

// TestWriteDoesNotWaitForTheDestination: the lines of a slog logger over a Writer are
// accepted while the destination is stuck (a log line no longer holds the handler's
// mutex, and so every other request, across a write(2)), then all written, in order, by
// Close. With a Write that wrote through, the first log call would never return.
func TestWriteDoesNotWaitForTheDestination(t *testing.T) {
	g := newGate()
	w := New(g, 0)
	log := slog.New(slog.NewJSONHandler(w, nil))
	for i := range 100 {
		log.Info("request", "n", i) // returns: the destination is still closed
	}
	close(g.open)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(g.got.String(), "\n"), "\n")
	if len(lines) != 100 {
		t.Fatalf("%d lines written, want 100:\n%s", len(lines), g.got.String())
	}
	for i, l := range lines {
		if !strings.Contains(l, fmt.Sprintf(`"n":%d}`, i)) {
			t.Fatalf("line %d is %q", i, l)
		}
	}
}

// TestConcurrentLinesWholeAndInOrder: lines written by many goroutines at once are each
// written whole, and each goroutine's in its order.
func TestConcurrentLinesWholeAndInOrder(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, 256) // small: Writes also wait for room
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				fmt.Fprintf(w, "g%d line %03d %s\n", g, i, strings.Repeat("x", i%50))
			}
		})
	}
	wg.Wait()
	w.Close()
	next := map[string]int{}
	n := 0
	for l := range strings.SplitSeq(strings.TrimSuffix(out.String(), "\n"), "\n") {
		var g string
		var i int
		if _, err := fmt.Sscanf(l, "%s line %d", &g, &i); err != nil || !strings.HasSuffix(l, " "+strings.Repeat("x", i%50)) && i%50 != 0 {
			t.Fatalf("torn line %q", l)
		}
		if i != next[g] {
			t.Fatalf("%s: line %d after %d", g, i, next[g]-1)
		}
		next[g]++
		n++
	}
	if n != 8*200 {
		t.Fatalf("%d lines, want %d", n, 8*200)
	}
}

// TestBufferIsBounded: while the destination is slow the buffer holds at most max bytes:
// no write the destination gets is larger (without the bound, the lines that came while
// it was stuck would reach it in one large write).
func TestBufferIsBounded(t *testing.T) {
	g := newGate()
	waiting := make(chan struct{}, 1)
	waitHook = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	defer func() { waitHook = nil }()
	w := New(g, 100)
	line := strings.Repeat("y", 39) + "\n" // 40 bytes: two fit, a third waits
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 50 {
			io.WriteString(w, line)
		}
	}()
	// The destination stays stuck until a Write waits for room (bounded), or all 50
	// returned (unbounded: the 49 lines after the first then reach it in one write).
	select {
	case <-waiting:
	case <-done:
	}
	close(g.open)
	<-done
	w.Close()
	if g.got.Len() != 50*40 {
		t.Fatalf("%d bytes written, want %d", g.got.Len(), 50*40)
	}
	for _, n := range g.writes {
		if n > 100 {
			t.Fatalf("a write of %d bytes reached the destination (bound 100): %v", n, g.writes)
		}
	}
}

// TestWriteAfterClose goes straight to the destination, after the lines buffered before.
func TestWriteAfterClose(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, 0)
	io.WriteString(w, "first\n")
	w.Close()
	io.WriteString(w, "second\n")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out.String() != "first\nsecond\n" {
		t.Fatalf("got %q", out.String())
	}
}
