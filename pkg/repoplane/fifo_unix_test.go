//go:build unix

package repoplane

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestFIFOsNeverBlock: FIFOs planted where git keeps files (the index, a ref, a
// worktree file) make operations fail or skip, never hang.
func TestFIFOsNeverBlock(t *testing.T) {
	h := newHostileEnv(t)
	idx := filepath.Join(h.dir, ".git", "index")
	os.Remove(idx)
	if err := syscall.Mkfifo(idx, 0o644); err != nil {
		t.Skip("mkfifo:", err)
	}
	done := make(chan map[string]kernel.ResourceResult, 1)
	go func() { done <- h.runAll() }()
	select {
	case res := <-done:
		for _, name := range []string{"status", "stage", "commit"} {
			if res[name].Status == kernel.StatusSucceeded {
				t.Fatalf("%s succeeded on a FIFO index", name)
			}
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an operation blocked on a FIFO")
	}
	os.Remove(idx)
	os.Remove(filepath.Join(h.dir, ".git", "index.lock"))
	// a FIFO in the working tree is not content: listed nowhere, never opened
	syscall.Mkfifo(filepath.Join(h.dir, "pipe"), 0o644)
	go func() { done <- map[string]kernel.ResourceResult{"status": h.invoke(ActionStatus, nil)} }()
	select {
	case res := <-done:
		if res["status"].Status != kernel.StatusSucceeded {
			t.Fatalf("status: %+v", res["status"].Error)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("status blocked on a FIFO")
	}
}
