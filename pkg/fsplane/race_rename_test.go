package fsplane

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// renameOver writes content to a fresh file beside rel and renames it over rel, as a
// writer's atomic replace does.
func (e *env) renameOver(rel, content string) {
	e.t.Helper()
	full := filepath.Join(e.root, filepath.FromSlash(rel))
	tmp := full + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, full); err != nil {
		e.t.Fatal(err)
	}
}

// TestReadRacingARenameIsNotAnEscape replaces the file between the moment read (and
// stat) examine its name and the moment they open it — deterministically, through the
// provider's test hook. A concurrent rename is not an escape: the call succeeds with
// the new content. A link swapped in at that moment is still refused path_escape, and
// a name replaced on every attempt fails retryable, never returning either file.
func TestReadRacingARenameIsNotAnEscape(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"files.read", "files.stat"} {
		t.Run(tool, func(t *testing.T) {
			e := newEnv(t)
			e.write("d/f.txt", "old content")
			fired := 0
			e.p.beforeOpen = func() {
				if fired == 0 {
					e.renameOver("d/f.txt", "new content!")
				}
				fired++
			}
			out := e.ok(tool, jobj{"path": pth("d", "f.txt")})
			if fired != 2 {
				t.Fatalf("the name was examined %d times, want 2 (once before the rename, once after)", fired)
			}
			want := Version([]byte("new content!"))
			if out["version"] != want {
				t.Fatalf("%s after a rename = %v, want the new file's version %s", tool, out, want)
			}
			if tool == "files.read" && out["content"] != "new content!" {
				t.Fatalf("read = %v", out)
			}

			// A link renamed over the name at that moment: refused, the target never read.
			e.write("d/private.md", "PRIVATE sibling")
			fired = 0
			e.p.beforeOpen = func() {
				if fired == 0 {
					lnk := filepath.Join(e.root, "d", "lnk.tmp")
					if err := os.Symlink("private.md", lnk); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(lnk, filepath.Join(e.root, "d", "f.txt")); err != nil {
						t.Fatal(err)
					}
				}
				fired++
			}
			msg := e.fail(tool, jobj{"path": pth("d", "f.txt")}, kernel.StatusDenied, CodePathEscape)
			if strings.Contains(msg, "PRIVATE") || !strings.Contains(msg, "symbolic link") {
				t.Fatalf("message %q", msg)
			}

			// Replaced on every attempt: a retryable failure, nothing returned.
			os.Remove(filepath.Join(e.root, "d", "f.txt"))
			e.write("d/f.txt", "v0")
			n := 0
			e.p.beforeOpen = func() {
				n++
				e.renameOver("d/f.txt", strings.Repeat("v", n))
			}
			res := e.call(tool, jobj{"path": pth("d", "f.txt")})
			if res.Status != kernel.StatusFailed || res.Error.Code != CodeProviderError || res.Error.Retryable == nil || !*res.Error.Retryable || res.Output != nil {
				t.Fatalf("endless renames: %+v", res)
			}
			if n != openAttempts {
				t.Fatalf("%d attempts, want %d", n, openAttempts)
			}
		})
	}
}

// TestReadersSeeOldOrNewNeverPartial runs concurrent readers — the provider's read and
// a plain read of the file — while replaces and snapshot restores rewrite a file
// between two large contents. Every read sees one content or the other in full (the
// write is a rename of a complete temporary file), and a provider read is never
// refused. Runs in the default (and -short) test run.
func TestReadersSeeOldOrNewNeverPartial(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := strings.Repeat("a", 128<<10)
	b := strings.Repeat("b", 96<<10) + "\n"
	e.write("f.txt", a)
	snap := e.ok("files.snapshot.create", jobj{"path": pth("f.txt")})["snapshotId"].(string)
	p, err := NewProvider(e.root, ProviderOptions{MaxReadBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var stop atomic.Bool
	var reads, writes atomic.Int64
	var wg sync.WaitGroup
	check := func(who string, got []byte) {
		if string(got) != a && string(got) != b {
			t.Errorf("%s saw a partial or mixed file: %d bytes, %d a's, %d b's", who, len(got),
				bytes.Count(got, []byte("a")), bytes.Count(got, []byte("b")))
			stop.Store(true)
		}
		reads.Add(1)
	}
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			for !stop.Load() {
				if r == 0 {
					got, err := os.ReadFile(filepath.Join(e.root, "f.txt"))
					if err != nil {
						t.Errorf("plain read: %v", err)
						return
					}
					check("a plain reader", got)
					continue
				}
				rr, err := p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "r",
					Resource: kernel.ResourceRef{Namespace: "files", Path: pth("f.txt")}, Action: ActionRead})
				if err != nil || rr.Status != kernel.StatusSucceeded {
					t.Errorf("files.read during writes: %v %+v", err, rr.Error)
					stop.Store(true)
					return
				}
				out := rr.Output.(ReadOutput)
				if out.Version != Version([]byte(out.Content)) {
					t.Errorf("version %s does not match the content read", out.Version)
				}
				check("files.read", []byte(out.Content))
			}
		}(r)
	}
	for i := 0; i < 60 && !stop.Load(); i++ {
		switch i % 3 {
		case 0:
			e.ok("files.replace", jobj{"path": pth("f.txt"), "content": b})
		case 1:
			e.ok("files.snapshot.restore", jobj{"path": pth("f.txt"), "snapshotId": snap})
		case 2:
			e.ok("files.replace", jobj{"path": pth("f.txt"), "content": b})
			e.ok("files.replace", jobj{"path": pth("f.txt"), "content": a})
		}
		writes.Add(1)
	}
	stop.Store(true)
	wg.Wait()
	if reads.Load() < 10 {
		t.Fatalf("only %d reads ran during %d writes", reads.Load(), writes.Load())
	}
	t.Logf("%d reads during %d writes", reads.Load(), writes.Load())
}

// TestReadAfterCloseFails: the read path's raw root descriptor is released by Close;
// a read afterwards is a provider fault, and never reads through a descriptor number
// the process reused for another directory.
func TestReadAfterCloseFails(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root, other := filepath.Join(base, "root"), filepath.Join(base, "other")
	os.MkdirAll(root, 0o755)
	os.MkdirAll(other, 0o755)
	os.WriteFile(filepath.Join(other, "f.txt"), []byte("OTHER directory"), 0o644)
	p, err := NewProvider(root, ProviderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	var keep []*os.File
	for i := 0; i < 8; i++ { // reuse the freed descriptor numbers
		f, err := os.Open(other)
		if err != nil {
			t.Fatal(err)
		}
		keep = append(keep, f)
	}
	defer func() {
		for _, f := range keep {
			f.Close()
		}
	}()
	rr, err := p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o",
		Resource: kernel.ResourceRef{Namespace: "files", Path: pth("f.txt")}, Action: ActionRead})
	if err == nil && rr.Status == kernel.StatusSucceeded {
		t.Fatalf("read after Close succeeded (through a reused descriptor?): %+v", rr)
	}
}
