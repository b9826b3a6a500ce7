package par

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestTaskRunsOnce: whoever claims it, f runs exactly once and its effects are visible
// after Wait, from any number of waiters.
func TestTaskRunsOnce(t *testing.T) {
	for range 1000 {
		var runs atomic.Int32
		v := 0
		task := Go(func() { runs.Add(1); v = 42 })
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				task.Wait()
				if v != 42 {
					t.Error("Wait returned before f ran")
				}
			}()
		}
		task.Wait()
		wg.Wait()
		if v != 42 || runs.Load() != 1 {
			t.Fatalf("v=%d, %d runs", v, runs.Load())
		}
	}
}

// TestWaitRunsUnstartedTask: a task no goroutine has claimed yet runs on its waiter.
func TestWaitRunsUnstartedTask(t *testing.T) {
	runs := 0
	task := &Task{done: make(chan struct{}), f: func() { runs++ }} // as Go builds it, before its goroutine runs
	task.Wait()
	if runs != 1 {
		t.Fatal("an unstarted task did not run on its waiter")
	}
	if task.claim() || runs != 1 {
		t.Fatal("the task ran twice")
	}
}

// TestAbandon: an abandoned task that had not started never runs; one that had is waited
// for.
func TestAbandon(t *testing.T) {
	ran := false
	task := &Task{done: make(chan struct{}), f: func() { ran = true }}
	if task.Abandon() || ran {
		t.Fatal("an abandoned task ran")
	}
	task.Wait() // returns at once: abandoned
	if task.claim() || ran {
		t.Fatal("an abandoned task ran after all")
	}
	started := make(chan struct{})
	release := make(chan struct{})
	task = Go(func() { close(started); <-release; ran = true })
	<-started
	go close(release)
	if !task.Abandon() || !ran {
		t.Fatal("Abandon did not wait for a running task")
	}
}
