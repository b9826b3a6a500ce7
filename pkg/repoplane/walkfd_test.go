//go:build linux

package repoplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A walk of a clean working tree allocates about one small object per tracked file
// (the C string of its name for fstatat, which the typed system-call wrappers make)
// and a few per directory: the listing's names share one string per getdents call, a
// directory's name map is reused from a finished directory, and nothing is allocated
// on the path of a file whose lstat succeeds. Counted, not timed: allocations are the
// same on any machine.
func TestCleanWalkAllocations(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	const dirs, perDir = 20, 25
	old := time.Now().Add(-time.Hour) // out of the racy-timestamp window: nothing is hashed
	for d := range dirs {
		for f := range perDir {
			p := filepath.Join(e.dir, fmt.Sprintf("dir%02d", d), fmt.Sprintf("file-%02d.txt", f))
			writeFile(t, p, "x\n")
			must(t, os.Chtimes(p, old, old))
		}
	}
	commitAll(t, e.dir, "files")
	r, oe := e.p.open([]string{"repo"})
	if oe != nil {
		t.Fatal(oe)
	}
	defer r.close()
	idx, idxSec, err := r.loadIndex()
	must(t, err)
	files := len(idx.entries)
	var out []wtChange
	allocs := testing.AllocsPerRun(5, func() {
		w := newWalker(context.Background(), r, idxSec, true, nil)
		if err := w.run(idx.entries); err != nil {
			t.Fatal(err)
		}
		out = w.out
	})
	if len(out) != 0 {
		t.Fatalf("the tree is not clean: %+v", out)
	}
	// per file: the fstatat name; per directory: the listing string, the handle and
	// its descriptor, the directory's path, a few spare; plus the walker's own buffers
	limit := float64(files) + 10*float64(dirs+1) + 32
	t.Logf("%.0f allocations for %d files in %d directories (limit %.0f)", allocs, files, dirs, limit)
	if allocs > limit {
		t.Fatalf("a clean walk of %d files allocates %.0f times, over %.0f", files, allocs, limit)
	}
}

// The swap a hostile process can make during a status: a tracked directory, already
// listed as a directory, is replaced by a link to a directory outside the repository
// before the walker opens it. The link is not followed: the directory's files are
// deleted, and nothing outside is read or listed.
func TestDirSwappedForLinkDuringStatusIsNotFollowed(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("sub/f", "inside\n")
	e.write("top", "x\n")
	commitAll(t, e.dir, "files")
	outside := filepath.Join(e.root, "..", "outside-"+filepath.Base(e.root))
	must(t, os.MkdirAll(outside, 0o755))
	t.Cleanup(func() { os.RemoveAll(outside) })
	writeFile(t, filepath.Join(outside, "f"), "OUTSIDE\n")
	writeFile(t, filepath.Join(outside, "extra"), "secret\n")
	swapped := false
	testHookListed = func(prefix string) {
		if prefix == "" && !swapped {
			swapped = true
			must(t, os.RemoveAll(filepath.Join(e.dir, "sub")))
			must(t, os.Symlink(outside, filepath.Join(e.dir, "sub")))
		}
	}
	t.Cleanup(func() { testHookListed = nil })
	st := e.status()
	if !swapped {
		t.Fatal("the hook never ran")
	}
	got := porcelain(st)
	sameLines(t, got, []string{".D sub/f"})
}
