package repoplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// gitState is what a refused commit must leave as it was: refs, HEAD, index, logs.
func gitState(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for _, name := range []string{"HEAD", "index", "refs/heads/main", "logs/HEAD", "logs/refs/heads/main", "packed-refs"} {
		data, err := os.ReadFile(filepath.Join(dir, ".git", name))
		b.WriteString(name + "=" + string(data) + "|" + errString(err) + "\n")
	}
	return b.String()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return "missing"
}

// TestCommitRefusedWhenBranchMoves: another writer moves the branch (or detached HEAD,
// or creates the unborn branch) after repo.commit read HEAD and before it takes the ref
// lock: the commit is refused repo_busy, the other writer's commit is kept, and
// nothing else changed (only the unreferenced new objects remain, as with git).
func TestCommitRefusedWhenBranchMoves(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(e *testEnv)
		target string
	}{
		{"branch", func(e *testEnv) {}, "refs/heads/main"},
		{"unborn branch", nil, "refs/heads/main"},
		{"detached HEAD", func(e *testEnv) {
			h := strings.TrimSpace(runGitOrRead(t, e, "refs/heads/main"))
			writeFile(t, filepath.Join(e.dir, ".git", "HEAD"), h+"\n")
		}, "HEAD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				e.write("a.txt", "a\n")
				commitAll(t, e.dir, "init")
				tc.setup(e)
			}
			// the other writer's commit, made now and published in the window; until
			// then the branch is rewound, as if it had not been published yet
			e.write("other.txt", "other\n")
			e.stage("other.txt")
			other := e.commit("the other writer").Hash
			rewind(t, e, tc.target, other)
			e.write("mine.txt", "mine\n")
			e.stage("mine.txt")

			var before string
			beforeRefLock = func(r *repo) {
				writeFile(t, filepath.Join(e.dir, ".git", tc.target), other+"\n")
				before = gitState(t, e.dir)
			}
			defer func() { beforeRefLock = nil }()
			pe := e.fail(ActionCommit, CommitInput{Message: "mine"}, kernel.StatusFailed, CodeRepoBusy)
			if !strings.Contains(pe.Message, "moved") {
				t.Fatal(pe.Message)
			}
			if after := gitState(t, e.dir); after != before {
				t.Fatalf("the refused commit changed the repository:\n%s\n---\n%s", before, after)
			}
			if got := strings.TrimSpace(runGitOrRead(t, e, tc.target)); got != other {
				t.Fatalf("%s = %s, want the other writer's %s", tc.target, got, other)
			}
			for _, name := range []string{"index.lock", tc.target + ".lock"} {
				mustExist(t, filepath.Join(e.dir, ".git", name), false)
			}
			// and once the window is closed the commit goes through on top of it
			beforeRefLock = nil
			c := e.commit("mine")
			if len(c.Parents) != 1 || c.Parents[0] != other {
				t.Fatalf("retried commit parents %v, want [%s]", c.Parents, other)
			}
		})
	}
}

// runGitOrRead reads a ref file of the test repository.
func runGitOrRead(t *testing.T, e *testEnv, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(e.dir, ".git", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// rewind moves target back to the parent of commit other (or deletes the unborn
// branch), leaving the index as it is.
func rewind(t *testing.T, e *testEnv, target, other string) {
	t.Helper()
	r, oe := e.p.open([]string{"repo"})
	if oe != nil {
		t.Fatal(oe)
	}
	defer r.close()
	c, err := r.getCommit(plumbing.NewHash(other))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(e.dir, ".git", target)
	if len(c.ParentHashes) == 0 {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		return
	}
	writeFile(t, p, c.ParentHashes[0].String()+"\n")
}
