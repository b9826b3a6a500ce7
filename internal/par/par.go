// Package par runs a function on another goroutine without making its caller wait for a
// goroutine that has not started: a short-lived process on few, shared cores overlaps
// independent work, and when the other goroutine was not scheduled in time (no idle
// core, a thread still being started) the caller that needs the result runs the
// function itself instead of waiting for the scheduler.
package par

import "sync/atomic"

// Task is a function started with Go: it runs exactly once, on the goroutine Go started
// or on the first caller of Wait, whichever claims it first.
type Task struct {
	state atomic.Int32 // 0 not started, 1 claimed, 2 abandoned
	done  chan struct{}
	f     func()
}

// Go starts f on a new goroutine.
func Go(f func()) *Task {
	t := &Task{f: f, done: make(chan struct{})}
	go t.claim()
	return t
}

func (t *Task) claim() bool {
	if !t.state.CompareAndSwap(0, 1) {
		return false
	}
	defer close(t.done)
	t.f()
	return true
}

// Wait returns once f has run: it runs f on the caller's goroutine if no goroutine has
// started it yet, else it waits for it.
func (t *Task) Wait() {
	if !t.claim() {
		<-t.done
	}
}

// Abandon makes sure f never starts if it has not yet, and otherwise waits for it to
// finish. It reports whether f ran (or is running and was waited for).
func (t *Task) Abandon() bool {
	if t.state.CompareAndSwap(0, 2) {
		close(t.done)
		return false
	}
	<-t.done
	return t.state.Load() == 1
}
