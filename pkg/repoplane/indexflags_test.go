package repoplane

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// dumpCacheTree renders the TREE extension of dir's index, one node per line
// ("path count hash"; invalidated nodes have count -1 and no hash).
func dumpCacheTree(t *testing.T, dir string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := decodeIndex(data)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	var walk func(n *cacheTree, p string)
	walk = func(n *cacheTree, p string) {
		if n.count < 0 {
			b.WriteString(p + " -1\n")
		} else {
			b.WriteString(p + " " + strconv.Itoa(n.count) + " " + plumbingHex(n.hash) + "\n")
		}
		for _, c := range n.children {
			walk(c, p+c.name+"/")
		}
	}
	if idx.tree != nil {
		walk(idx.tree, "/")
	}
	return b.String()
}

func plumbingHex(h [20]byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 40)
	for i, c := range h {
		out[2*i], out[2*i+1] = hex[c>>4], hex[c&15]
	}
	return string(out)
}

// cloneDir copies a repository directory (working tree and .git) for a side-by-side run.
func cloneDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
}

// TestIntentToAddCommit: committing with intent-to-add entries (git add -N) in the index
// leaves the index git would leave: the intentions stay, the directories holding them
// have invalidated cache-tree nodes, a directory holding only intentions is not in the
// tree, git sees no phantom staged add, and a later reset and plain git commit lose no
// file.
func TestIntentToAddCommit(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	for _, p := range []string{"a/b/c.txt", "a/d.txt", "e/f.txt", "top.txt"} {
		e.write(p, p+"\n")
	}
	commitAll(t, e.dir, "init")
	e.write("a/b/new.txt", "new\n")
	e.write("only/x/ita.txt", "ita\n")
	e.write("ita-top.txt", "ita\n")
	runGit(t, e.dir, "add", "-N", "a/b/new.txt", "only/x/ita.txt", "ita-top.txt")
	e.write("e/f.txt", "changed\n")
	runGit(t, e.dir, "add", "e/f.txt")

	theirs := filepath.Join(e.root, "theirs")
	cloneDir(t, e.dir, theirs)
	runGit(t, theirs, "commit", "-q", "-m", "by git")
	c := e.commit("by us")

	if got, want := strings.TrimSpace(runGit(t, e.dir, "rev-parse", c.Hash+"^{tree}")), strings.TrimSpace(runGit(t, theirs, "rev-parse", "HEAD^{tree}")); got != want {
		t.Fatalf("tree %s, git's %s", got, want)
	}
	if got, want := dumpCacheTree(t, e.dir), dumpCacheTree(t, theirs); got != want {
		t.Fatalf("cache tree:\n%s\ngit's:\n%s", got, want)
	}
	if got, want := runGit(t, e.dir, "ls-files", "-s"), runGit(t, theirs, "ls-files", "-s"); got != want {
		t.Fatalf("index entries differ:\n%s\ngit's:\n%s", got, want)
	}
	sameLines(t, gitPorcelain(t, e.dir), gitPorcelain(t, theirs))
	sameLines(t, porcelain(e.status()), gitPorcelain(t, theirs))
	if out := runGit(t, e.dir, "diff", "--cached", "--name-status"); out != "" {
		t.Fatalf("phantom staged changes: %q", out)
	}
	runGit(t, e.dir, "fsck", "--strict", "--no-dangling")
	// git's own follow-up: stage the intentions and commit them; nothing is lost
	runGit(t, e.dir, "add", "-A")
	runGit(t, e.dir, "commit", "-q", "-m", "follow-up")
	files := runGit(t, e.dir, "ls-tree", "-r", "--name-only", "HEAD")
	for _, p := range []string{"a/b/new.txt", "only/x/ita.txt", "ita-top.txt", "a/b/c.txt", "e/f.txt"} {
		if !strings.Contains(files, p+"\n") {
			t.Fatalf("%s missing from HEAD after the follow-up commit:\n%s", p, files)
		}
	}
}

// TestIndexFlagsHonoured: skip-worktree and assume-unchanged entries are not compared
// with the working tree (git's refresh marks them up to date), so neither status, diff
// nor stage sees their changes or deletions; naming a skip-worktree path to stage fails
// as git add does; and the flags survive every index sharedos writes.
func TestIndexFlagsHonoured(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	for _, p := range []string{"sw.txt", "au.txt", "gone.txt", "d/sw.txt", "plain.txt"} {
		e.write(p, p+"\n")
	}
	commitAll(t, e.dir, "init")
	runGit(t, e.dir, "update-index", "--skip-worktree", "sw.txt", "d/sw.txt")
	runGit(t, e.dir, "update-index", "--assume-unchanged", "au.txt", "gone.txt")
	e.write("sw.txt", "changed\n")
	e.write("au.txt", "changed\n")
	os.Remove(filepath.Join(e.dir, "gone.txt"))
	os.RemoveAll(filepath.Join(e.dir, "d"))
	e.write("plain.txt", "changed\n")
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	if d := diffOf(t, e, DiffInput{}); len(d.Files) != 1 || d.Files[0].pathString() != "plain.txt" {
		t.Fatalf("diff: %+v", fileSummary(d))
	}
	e.stage("au.txt", "gone.txt", "plain.txt")
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	if out := runGit(t, e.dir, "diff", "--cached", "--name-only"); out != "plain.txt\n" {
		t.Fatalf("staged: %q", out)
	}
	msg := e.fail(ActionStage, StageInput{Pathspec: specOf("sw.txt")}, kernel.StatusFailed, CodeInvalidInput)
	if !strings.Contains(msg.Message, "skip-worktree") {
		t.Fatalf("message: %s", msg.Message)
	}
	e.commit("plain")
	if got := runGit(t, e.dir, "ls-files", "-v"); got != "h au.txt\nS d/sw.txt\nh gone.txt\nH plain.txt\nS sw.txt\n" {
		t.Fatalf("flags after our writes:\n%s", got)
	}
}

// TestConflictCodes: unmerged paths get git's two-letter codes from the stages present
// (DD, AU, UD, UA, DU, AA, UU).
func TestConflictCodes(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	blob := strings.TrimSpace(runGitIn(t, e.dir, "x\n", "hash-object", "-w", "--stdin"))
	var in strings.Builder
	for _, c := range []struct {
		path   string
		stages []int
	}{{"dd", []int{1}}, {"au", []int{2}}, {"ud", []int{1, 2}}, {"ua", []int{3}}, {"du", []int{1, 3}}, {"aa", []int{2, 3}}, {"uu", []int{1, 2, 3}}} {
		for _, s := range c.stages {
			in.WriteString("100644 " + blob + " " + strconv.Itoa(s) + "\t" + c.path + "\n")
		}
		e.write(c.path, "x\n")
	}
	runGitIn(t, e.dir, in.String(), "update-index", "--index-info")
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	// the writer keeps every conflict stage when it stages something else, and staging
	// a conflicted path resolves it as git add does
	e.write("other.txt", "o\n")
	theirs := filepath.Join(e.root, "theirs")
	cloneDir(t, e.dir, theirs)
	before := runGit(t, e.dir, "ls-files", "-s", "--", "dd", "au", "ud", "ua", "du", "aa", "uu")
	e.stage("other.txt")
	if after := runGit(t, e.dir, "ls-files", "-s", "--", "dd", "au", "ud", "ua", "du", "aa", "uu"); after != before {
		t.Fatalf("conflict stages changed:\n%s\nbefore:\n%s", after, before)
	}
	e.stage("uu", "aa", "ud")
	runGit(t, theirs, "add", "other.txt", "uu", "aa", "ud")
	if got, want := runGit(t, e.dir, "ls-files", "-s"), runGit(t, theirs, "ls-files", "-s"); got != want {
		t.Fatalf("after resolving:\n%s\ngit add:\n%s", got, want)
	}
	sameLines(t, porcelain(e.status()), gitPorcelain(t, theirs))
}

// runGitIn runs git with stdin.
func runGitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(gitPath, args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestFlaggedEntryReplacedByDirectory: a directory in place of an assume-unchanged or
// skip-worktree file still has its files listed as untracked, as git lists them.
func TestFlaggedEntryReplacedByDirectory(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("au", "a\n")
	e.write("sw", "s\n")
	commitAll(t, e.dir, "init")
	runGit(t, e.dir, "update-index", "--assume-unchanged", "au")
	runGit(t, e.dir, "update-index", "--skip-worktree", "sw")
	for _, p := range []string{"au", "sw"} {
		os.Remove(filepath.Join(e.dir, p))
		e.write(p+"/inner.txt", "i\n")
	}
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	if len(e.status().Entries) != 2 {
		t.Fatalf("status: %v", porcelain(e.status()))
	}
}
