package repoplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// lsTree renders a tree like `git ls-files -s` renders the index (mode hash 0\tpath).
func lsTree(t *testing.T, dir, tree string) string {
	t.Helper()
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSpace(runGit(t, dir, "ls-tree", "-r", tree)), "\n") {
		// "100644 blob <hash>\t<path>"
		f := strings.SplitN(l, "\t", 2)
		m := strings.Fields(f[0])
		b.WriteString(m[0] + " " + m[2] + " 0\t" + f[1] + "\n")
	}
	return b.String()
}

// TestCacheTreeInterop: the index sharedos writes (entries and cache tree) is one git
// trusts: git write-tree, which reuses valid cache-tree nodes, builds exactly the tree
// of the index entries after sharedos staged, and after sharedos committed.
func TestCacheTreeInterop(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	for _, p := range []string{"a/b/c.txt", "a/b/d.txt", "a/e.txt", "f/g.txt", "h.txt"} {
		e.write(p, p+"\n")
	}
	commitAll(t, e.dir, "init")
	e.write("a/b/c.txt", "changed\n")
	e.write("a/new/n.txt", "n\n")
	os.Remove(filepath.Join(e.dir, "f/g.txt"))
	e.stage("a", "f")
	check := func() {
		t.Helper()
		tree := strings.TrimSpace(runGit(t, e.dir, "write-tree"))
		if got, want := lsTree(t, e.dir, tree), runGit(t, e.dir, "ls-files", "-s"); got != want {
			t.Fatalf("git write-tree from our index:\n%s\nindex:\n%s", got, want)
		}
	}
	check()
	c := e.commit("ours")
	check()
	if tree := strings.TrimSpace(runGit(t, e.dir, "write-tree")); tree != strings.TrimSpace(runGit(t, e.dir, "rev-parse", c.Hash+"^{tree}")) {
		t.Fatal("the cache tree written with the commit does not name the commit's tree")
	}
	// git commits on top of our index, we on top of git's
	e.write("h.txt", "by git\n")
	runGit(t, e.dir, "add", "h.txt")
	runGit(t, e.dir, "commit", "-q", "-m", "git")
	e.write("a/e.txt", "by us\n")
	e.stage("a/e.txt")
	e.commit("ours again")
	runGit(t, e.dir, "fsck", "--strict", "--no-dangling")
	if out := runGit(t, e.dir, "status", "--porcelain"); out != "" {
		t.Fatalf("git status: %q", out)
	}
	if s := e.status(); !s.Clean {
		t.Fatalf("our status: %v", porcelain(s))
	}
}

// TestIndexVersions: indexes of format 2, 3 (extended flags) and 4 (path compression)
// written by git are read; sharedos rewrites them in a format git reads back.
func TestIndexVersions(t *testing.T) {
	needGit(t)
	for _, v := range []string{"2", "3", "4"} {
		t.Run("v"+v, func(t *testing.T) {
			e := newEnv(t)
			for _, p := range []string{"dir/one.txt", "dir/one.txt.bak", "dir/two.txt", "dir-x/three.txt", "z.txt"} {
				e.write(p, p)
			}
			commitAll(t, e.dir, "init")
			runGit(t, e.dir, "update-index", "--index-version", v)
			if v == "3" {
				e.write("ita.txt", "intent")
				runGit(t, e.dir, "add", "-N", "ita.txt")
			}
			e.write("dir/two.txt", "changed")
			want := gitPorcelain(t, e.dir)
			sameLines(t, porcelain(e.status()), want)
			e.stage("dir")
			sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
			runGit(t, e.dir, "ls-files", "-s") // git reads what we wrote
		})
	}
}

func TestUnsupportedIndexRefused(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("f.txt", "f")
	commitAll(t, e.dir, "init")
	runGit(t, e.dir, "update-index", "--split-index")
	msg := e.fail(ActionStatus, nil, kernel.StatusDenied, CodeNotPermitted)
	if !strings.Contains(msg.Message, "split index") || !strings.Contains(msg.Message, "--no-split-index") || strings.Contains(msg.Message, "\n") {
		t.Fatalf("message: %s", msg.Message)
	}
	e.fail(ActionStage, StageInput{Pathspec: specOf("f.txt")}, kernel.StatusDenied, CodeNotPermitted)
	mustExist(t, filepath.Join(e.dir, ".git", "index.lock"), false)
}

// TestIndexCorruptionDetected: a flipped byte in the index is reported, never trusted.
func TestIndexCorruptionDetected(t *testing.T) {
	e := newEnv(t)
	e.write("f.txt", "f")
	e.stage("f.txt")
	p := filepath.Join(e.dir, ".git", "index")
	data, _ := os.ReadFile(p)
	data[20] ^= 0xff
	os.WriteFile(p, data, 0o644)
	e.fail(ActionStatus, nil, kernel.StatusFailed, CodeProviderError)
}

func TestIndexRoundTrip(t *testing.T) {
	idx := &gitIndex{version: 2, entries: []*idxEntry{
		{name: "a/b.txt", mode: modeRegular, size: 3, mtimeS: 10, hash: [20]byte{1}},
		{name: "a/c.txt", mode: modeExecutable, size: 4, hash: [20]byte{2}, ext: extIntentToAdd},
		{name: strings.Repeat("x", 5000), mode: modeSymlink, hash: [20]byte{3}},
	}, tree: &cacheTree{count: -1, children: []*cacheTree{{name: "a", count: 2, hash: [20]byte{9}}}}}
	back, err := decodeIndex(encodeIndex(idx))
	if err != nil {
		t.Fatal(err)
	}
	if back.version != 3 || len(back.entries) != 3 || back.entries[2].name != idx.entries[2].name ||
		back.entries[1].ext != extIntentToAdd || back.entries[0].mtimeS != 10 || back.tree == nil ||
		back.tree.count != -1 || back.tree.child("a") == nil || back.tree.child("a").hash != [20]byte{9} {
		t.Fatalf("round trip: %+v", back)
	}
	for _, bad := range []string{"", "a//b", "/a", "a/", ".git/x", "a/../b", "./a", "x/.GiT", "x/.git. ", "GIT~1/a", "a/\u200c.git"} {
		if validIndexPath(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	for _, good := range []string{"a", ".gitignore", "a/.github/x", "git", "x/.gitx"} {
		if !validIndexPath(good) {
			t.Errorf("%q refused", good)
		}
	}
}

// TestPackedRepository: objects in packs (with deltas) and refs in packed-refs are read;
// a commit on a packed branch writes a loose ref git honours.
func TestPackedRepository(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	for i := range 5 {
		e.write("big.txt", strings.Repeat("line of text\n", 200)+itoa(i))
		e.write("d/f"+itoa(i)+".txt", itoa(i))
		commitAll(t, e.dir, "c"+itoa(i))
	}
	runGit(t, e.dir, "gc", "-q", "--aggressive")
	runGit(t, e.dir, "pack-refs", "--all")
	mustExist(t, filepath.Join(e.dir, ".git", "refs", "heads", "main"), false)
	if l := e.ok(ActionLog, nil).(LogOutput); len(l.Commits) != 5 {
		t.Fatalf("log: %d", len(l.Commits))
	}
	e.write("big.txt", "short now\n")
	if d := diffOf(t, e, DiffInput{}); len(d.Files) != 1 || d.Files[0].Deletions != 201 {
		t.Fatalf("diff: %+v", fileSummary(d))
	}
	e.stage("big.txt")
	c := e.commit("after gc")
	if got := strings.TrimSpace(runGit(t, e.dir, "rev-parse", "main")); got != c.Hash {
		t.Fatalf("main = %s, want %s", got, c.Hash)
	}
	runGit(t, e.dir, "fsck", "--strict", "--no-dangling")
}
