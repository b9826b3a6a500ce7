//go:build unix

package repoplane

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestReflogNeverWritesThroughHardLink: logs/HEAD hard-linked to a file outside the
// root is left alone (the commit stands, and the branch's own log is still written);
// a FIFO in its place neither blocks the commit nor is written.
func TestReflogNeverWritesThroughHardLink(t *testing.T) {
	e := newEnv(t)
	e.write("a.txt", "a\n")
	commitAll(t, e.dir, "init")
	outside := filepath.Join(t.TempDir(), "outside.txt")
	writeFile(t, outside, "outside content\n")
	logs := filepath.Join(e.dir, ".git", "logs")
	os.MkdirAll(filepath.Join(logs, "refs", "heads"), 0o755)
	os.Remove(filepath.Join(logs, "HEAD"))
	if err := os.Link(outside, filepath.Join(logs, "HEAD")); err != nil {
		t.Skipf("hard links unavailable: %v", err)
	}
	branchLog := filepath.Join(logs, "refs", "heads", "main")
	before, _ := os.ReadFile(branchLog)

	e.write("b.txt", "b\n")
	e.stage("b.txt")
	c := e.commit("through a link")
	if got, _ := os.ReadFile(outside); string(got) != "outside content\n" {
		t.Fatalf("the commit wrote through the hard link: %q", got)
	}
	after, _ := os.ReadFile(branchLog)
	if !strings.HasPrefix(string(after), string(before)) || !strings.Contains(string(after[len(before):]), c.Hash) {
		t.Fatalf("the branch's reflog was not appended: %q", after)
	}

	// a FIFO as logs/HEAD: the commit completes, nothing blocks
	os.Remove(filepath.Join(logs, "HEAD"))
	if err := syscall.Mkfifo(filepath.Join(logs, "HEAD"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	e.write("c.txt", "c\n")
	e.stage("c.txt")
	done := make(chan kernel.ResourceResult, 1)
	go func() { done <- e.invoke(ActionCommit, CommitInput{Message: "with a fifo"}) }()
	select {
	case rr := <-done:
		if rr.Status != kernel.StatusSucceeded {
			t.Fatalf("commit with a FIFO reflog: %+v", rr.Error)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the commit blocked on a FIFO reflog")
	}
}
