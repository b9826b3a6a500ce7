package repoplane

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func diffOf(t *testing.T, e *testEnv, in DiffInput) DiffOutput {
	t.Helper()
	return e.ok(ActionDiff, in).(DiffOutput)
}

func fileSummary(d DiffOutput) []string {
	var out []string
	for _, f := range d.Files {
		s := f.Status + " " + strings.Join(f.Path, "/")
		if f.OldPath != nil {
			s += " <- " + strings.Join(f.OldPath, "/")
		}
		if f.Binary {
			s += " binary"
		} else {
			s += " +" + itoa(f.Additions)[3:] + " -" + itoa(f.Deletions)[3:]
		}
		out = append(out, s)
	}
	return out
}

func TestDiff(t *testing.T) {
	e := newEnv(t)
	// unborn HEAD: a staged diff lists additions
	e.write("a.txt", "one\ntwo\nthree\n")
	e.stage("a.txt")
	sameLines(t, fileSummary(diffOf(t, e, DiffInput{Staged: true})), []string{"A a.txt +03 -00"})
	if d := diffOf(t, e, DiffInput{}); len(d.Files) != 0 || d.Truncated || d.Staged {
		t.Fatalf("unstaged diff of a fresh stage: %+v", d)
	}
	e.write("src/lib/x.go", "package lib\n")
	e.write("src/y.go", "package src\n")
	e.write("bin.dat", "\x00\x01binary")
	e.write("noeol.txt", "last line")
	e.write("gone.txt", "bye\n")
	e.write("moved.txt", "same content\n")
	commitAll(t, e.dir, "init")

	e.write("a.txt", "one\nTWO\nthree\nfour\n")
	e.write("src/lib/x.go", "package lib\n\nfunc X() {}\n")
	e.write("src/y.go", "package src // y\n")
	e.write("bin.dat", "\x00\x02binary!")
	e.write("noeol.txt", "last line changed")
	os.Remove(filepath.Join(e.dir, "gone.txt"))
	d := diffOf(t, e, DiffInput{})
	sameLines(t, fileSummary(d), []string{"M a.txt +02 -01", "M bin.dat binary", "D gone.txt +00 -01",
		"M noeol.txt +01 -01", "M src/lib/x.go +02 -00", "M src/y.go +01 -01"})
	for _, f := range d.Files {
		switch strings.Join(f.Path, "/") {
		case "a.txt":
			if !strings.Contains(f.Patch, "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,4 @@\n one\n-two\n+TWO\n three\n+four\n") {
				t.Fatalf("patch:\n%s", f.Patch)
			}
		case "bin.dat":
			if !strings.Contains(f.Patch, "Binary files a/bin.dat and b/bin.dat differ") {
				t.Fatalf("binary patch:\n%s", f.Patch)
			}
		case "noeol.txt":
			if !strings.Contains(f.Patch, "-last line\n\\ No newline at end of file\n+last line changed\n\\ No newline at end of file\n") {
				t.Fatalf("no-eol patch:\n%s", f.Patch)
			}
		}
	}
	if haveGit() {
		// byte-identical patches for plain text changes
		for _, name := range []string{"a.txt", "noeol.txt", "gone.txt", "src/y.go"} {
			want := runGit(t, e.dir, "diff", "--no-ext-diff", "--no-color", "--", name)
			var got string
			for _, f := range d.Files {
				if strings.Join(f.Path, "/") == name {
					got = f.Patch
				}
			}
			if got != want {
				t.Fatalf("%s patch:\n%s\ngit:\n%s", name, got, want)
			}
		}
		// same +/- counts as git's numstat
		out := runGit(t, e.dir, "diff", "--numstat")
		var git []string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			git = append(git, strings.Join(strings.Fields(l), " "))
		}
		var ours []string
		for _, f := range d.Files {
			if f.Binary {
				ours = append(ours, "- - "+strings.Join(f.Path, "/"))
			} else {
				ours = append(ours, itoa(f.Additions)[4:]+" "+itoa(f.Deletions)[4:]+" "+strings.Join(f.Path, "/"))
			}
		}
		sameLines(t, ours, git)
	}
	// a pathspec naming a directory
	sameLines(t, fileSummary(diffOf(t, e, DiffInput{Pathspec: specOf("src")})),
		[]string{"M src/lib/x.go +02 -00", "M src/y.go +01 -01"})
	sameLines(t, fileSummary(diffOf(t, e, DiffInput{Pathspec: specOf("src/lib", "gone.txt")})),
		[]string{"D gone.txt +00 -01", "M src/lib/x.go +02 -00"})
	// staged: modification, deletion, rename, addition
	os.Rename(filepath.Join(e.dir, "moved.txt"), filepath.Join(e.dir, "renamed.txt"))
	e.write("added.txt", "new\n")
	e.stage("a.txt", "gone.txt", "moved.txt", "renamed.txt", "added.txt")
	ds := diffOf(t, e, DiffInput{Staged: true})
	sameLines(t, fileSummary(ds), []string{"M a.txt +02 -01", "A added.txt +01 -00", "D gone.txt +00 -01",
		"R renamed.txt <- moved.txt +00 -00"})
	if p := ds.Files[3].Patch; !strings.Contains(p, "rename from moved.txt\nrename to renamed.txt") {
		t.Fatalf("rename patch:\n%s", p)
	}
	sameLines(t, fileSummary(diffOf(t, e, DiffInput{Staged: true, Pathspec: specOf("renamed.txt")})),
		[]string{"A renamed.txt +01 -00"})
}

func TestDiffCaps(t *testing.T) {
	e := newEnv(t)
	for i := range 5 {
		e.write("f"+itoa(i)[4:]+".txt", strings.Repeat("line\n", 50))
	}
	commitAll(t, e.dir, "init")
	for i := range 5 {
		e.write("f"+itoa(i)[4:]+".txt", strings.Repeat("changed\n", 50))
	}
	e.setProvider(ProviderOptions{MaxDiffFiles: 3})
	d := diffOf(t, e, DiffInput{})
	if len(d.Files) != 3 || !d.Truncated {
		t.Fatalf("file cap: %d files, truncated %v", len(d.Files), d.Truncated)
	}
	e.setProvider(ProviderOptions{MaxDiffBytes: 1000})
	d = diffOf(t, e, DiffInput{})
	total := 0
	for _, f := range d.Files {
		total += len(f.Patch)
		if f.Additions != 50 || f.Deletions != 50 {
			t.Fatalf("counts must stay exact: %+v", f)
		}
		if f.Patch != "" && !strings.HasSuffix(f.Patch, "\n") {
			t.Fatal("patch cut inside a line")
		}
	}
	if len(d.Files) != 5 || !d.Truncated || total > 1000 || d.Files[4].Patch != "" {
		t.Fatalf("byte cap: %d files, %d bytes, truncated %v", len(d.Files), total, d.Truncated)
	}
}

func TestLog(t *testing.T) {
	e := newEnv(t)
	if l := e.ok(ActionLog, nil).(LogOutput); len(l.Commits) != 0 {
		t.Fatalf("unborn log: %+v", l)
	}
	var hashes []string
	for i := range 23 {
		e.write("f.txt", itoa(i))
		e.stage("f.txt")
		hashes = append(hashes, e.commit("commit "+itoa(i)).Hash)
	}
	l := e.ok(ActionLog, nil).(LogOutput)
	if len(l.Commits) != DefaultLogCount {
		t.Fatalf("default maxCount: %d commits", len(l.Commits))
	}
	for i, c := range l.Commits {
		if c.Hash != hashes[len(hashes)-1-i] {
			t.Fatalf("commit %d is %s, want %s", i, c.Hash, hashes[len(hashes)-1-i])
		}
	}
	c := l.Commits[0]
	if !strings.HasPrefix(c.Message, "commit 00022\n\nActed-by: agent:coder\n") || len(c.Parents) != 1 ||
		c.Parents[0] != hashes[21] || c.Author.Name != "coder" || c.Author.Email != "coder@agent.sharedos.invalid" ||
		c.Committer != c.Author || !strings.HasSuffix(c.Author.Time, "+01:00") {
		t.Fatalf("commit: %+v", c)
	}
	if l := e.ok(ActionLog, LogInput{MaxCount: 3}).(LogOutput); len(l.Commits) != 3 {
		t.Fatalf("maxCount 3: %d", len(l.Commits))
	}
	all := e.ok(ActionLog, LogInput{MaxCount: 100}).(LogOutput)
	if len(all.Commits) != 23 || len(all.Commits[22].Parents) != 0 {
		t.Fatalf("full log: %d", len(all.Commits))
	}
	e.fail(ActionLog, LogInput{MaxCount: 101}, kernel.StatusFailed, CodeInvalidInput)
	// detached HEAD logs from the detached commit
	writeFile(t, filepath.Join(e.dir, ".git", "HEAD"), hashes[5]+"\n")
	if l := e.ok(ActionLog, LogInput{MaxCount: 100}).(LogOutput); len(l.Commits) != 6 || l.Commits[0].Hash != hashes[5] {
		t.Fatalf("detached log: %d", len(l.Commits))
	}
}

func TestLogMergeCommit(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("f", "base\n")
	commitAll(t, e.dir, "base")
	runGit(t, e.dir, "checkout", "-q", "-b", "side")
	e.write("g", "side\n")
	commitAll(t, e.dir, "side")
	runGit(t, e.dir, "checkout", "-q", "main")
	e.write("h", "main\n")
	commitAll(t, e.dir, "main")
	runGit(t, e.dir, "merge", "-q", "--no-edit", "side")
	l := e.ok(ActionLog, nil).(LogOutput)
	if len(l.Commits) != 4 || len(l.Commits[0].Parents) != 2 {
		t.Fatalf("merge log: %+v", l)
	}
	want := strings.Fields(runGit(t, e.dir, "log", "--format=%H"))
	var got []string
	for _, c := range l.Commits {
		got = append(got, c.Hash)
	}
	if !reflect.DeepEqual(got[:1], want[:1]) || len(got) != len(want) {
		t.Fatalf("log %v, git %v", got, want)
	}
}

func TestStage(t *testing.T) {
	e := newEnv(t)
	e.write(".gitignore", "*.log\n")
	e.write("dir/a.txt", "a\n")
	e.write("dir/sub/b.txt", "b\n")
	e.write("dir/old.txt", "old\n")
	e.write("top.txt", "t\n")
	commitAll(t, e.dir, "init")

	e.write("dir/a.txt", "a2\n")
	e.write("dir/sub/c.txt", "c\n")
	e.write("dir/debug.log", "ignored\n")
	os.Remove(filepath.Join(e.dir, "dir/old.txt"))
	e.write("top.txt", "t2\n")
	initRepo(t, filepath.Join(e.dir, "dir", "nested"))
	out := e.stage("dir")
	var got []string
	for _, s := range out.Staged {
		got = append(got, s.Status+" "+strings.Join(s.Path, "/"))
	}
	sameLines(t, got, []string{"M dir/a.txt", "D dir/old.txt", "A dir/sub/c.txt"})
	// the nested repository is not staged, and the output says so
	if len(out.Skipped) != 1 || strings.Join(out.Skipped[0].Path, "/") != "dir/nested" || !strings.Contains(out.Skipped[0].Reason, "nested git repository") {
		t.Fatalf("skipped: %+v", out.Skipped)
	}
	sameLines(t, porcelain(e.status()), []string{"M. dir/a.txt", "D. dir/old.txt", "A. dir/sub/c.txt", ".M top.txt", "?? dir/nested"})
	if haveGit() {
		runGit(t, e.dir, "fsck", "--strict", "--no-dangling")
		sameLines(t, gitPorcelain(t, e.dir), []string{"M. dir/a.txt", "D. dir/old.txt", "A. dir/sub/c.txt", ".M top.txt", "?? dir/nested/"})
		// git reads our index entry for entry
		if ls := runGit(t, e.dir, "ls-files", "-s", "dir"); !strings.Contains(ls, "dir/sub/c.txt") || strings.Contains(ls, "old.txt") {
			t.Fatalf("git ls-files:\n%s", ls)
		}
	}
	// staging again changes nothing
	if out := e.stage("dir"); len(out.Staged) != 0 {
		t.Fatalf("restage: %+v", out.Staged)
	}
	// explicitly named ignored file, missing path
	e.fail(ActionStage, StageInput{Pathspec: specOf("dir/debug.log")}, kernel.StatusFailed, CodeInvalidInput)
	e.fail(ActionStage, StageInput{Pathspec: specOf("nope")}, kernel.StatusFailed, CodeNotFound)
	// a deleted file by name
	os.Remove(filepath.Join(e.dir, "top.txt"))
	out = e.stage("top.txt")
	if len(out.Staged) != 1 || out.Staged[0].Status != "D" {
		t.Fatalf("stage deletion: %+v", out)
	}
	// an executable bit
	os.Chmod(filepath.Join(e.dir, "dir/a.txt"), 0o755)
	out = e.stage("dir/a.txt")
	if len(out.Staged) != 1 || out.Staged[0].Status != "M" {
		t.Fatalf("stage mode: %+v", out)
	}
	if haveGit() {
		if ls := runGit(t, e.dir, "ls-files", "-s", "dir/a.txt"); !strings.HasPrefix(ls, "100755 ") {
			t.Fatalf("mode: %s", ls)
		}
	}
	mustExist(t, filepath.Join(e.dir, ".git", "index.lock"), false)
}

func TestCommit(t *testing.T) {
	e := newEnv(t)
	// nothing staged on an unborn branch
	e.fail(ActionCommit, CommitInput{Message: "empty"}, kernel.StatusFailed, CodeNothingToCommit)
	e.write("a.txt", "a\n")
	e.write("d/b.txt", "b\n")
	e.stage("a.txt", "d")
	c := e.commit("  first commit  ")
	if len(c.Hash) != 40 || len(c.Parents) != 0 || c.Branch == nil || *c.Branch != "main" ||
		c.Message != "first commit\n\nActed-by: agent:coder\nOn-behalf-of: human:alice\nWorld: world-1\n" ||
		c.Author.Name != "coder" || c.Author.Email != "coder@agent.sharedos.invalid" || !strings.HasPrefix(c.Author.Time, "2025-03-04T05:06:") || !strings.HasSuffix(c.Author.Time, "+01:00") {
		t.Fatalf("commit: %+v", c)
	}
	if s := e.status(); !s.Clean || *s.Head != c.Hash {
		t.Fatalf("after commit: %+v", s)
	}
	e.fail(ActionCommit, CommitInput{Message: "again"}, kernel.StatusFailed, CodeNothingToCommit)
	// configured identity
	e.setProvider(ProviderOptions{AuthorName: "Repo Bot", AuthorEmail: "bot@example.org"})
	e.write("a.txt", "a2\n")
	e.stage("a.txt")
	c2 := e.commit("second")
	if c2.Author.Name != "Repo Bot" || c2.Author.Email != "bot@example.org" || len(c2.Parents) != 1 || c2.Parents[0] != c.Hash {
		t.Fatalf("second: %+v", c2)
	}
	if haveGit() {
		runGit(t, e.dir, "fsck", "--strict", "--no-dangling")
		log := runGit(t, e.dir, "log", "--format=%H %an <%ae>%n%(trailers:only,unfold)")
		if !strings.Contains(log, c2.Hash+" Repo Bot <bot@example.org>\nActed-by: agent:coder\nOn-behalf-of: human:alice\nWorld: world-1\n") {
			t.Fatalf("git log:\n%s", log)
		}
		if tr := runGit(t, e.dir, "log", "-1", "--format=%(trailers:key=On-behalf-of,valueonly)"); strings.TrimSpace(tr) != "human:alice" {
			t.Fatalf("trailer: %q", tr)
		}
		reflog := runGit(t, e.dir, "reflog", "--format=%H %gs")
		if !strings.Contains(reflog, c2.Hash+" commit: second") || !strings.Contains(reflog, c.Hash+" commit (initial): first commit") {
			t.Fatalf("reflog:\n%s", reflog)
		}
		// git agrees the tree is the index (nothing staged, cache tree valid)
		if out := runGit(t, e.dir, "status", "--porcelain"); out != "" {
			t.Fatalf("git status after commit: %q", out)
		}
	}
	// detached HEAD: the commit moves HEAD only
	writeFile(t, filepath.Join(e.dir, ".git", "HEAD"), c.Hash+"\n")
	e.write("a.txt", "detached\n")
	e.stage("a.txt")
	c3 := e.commit("detached work")
	if c3.Branch != nil || c3.Parents[0] != c.Hash {
		t.Fatalf("detached commit: %+v", c3)
	}
	if head, _ := os.ReadFile(filepath.Join(e.dir, ".git", "HEAD")); strings.TrimSpace(string(head)) != c3.Hash {
		t.Fatalf("HEAD = %s", head)
	}
	if main, _ := os.ReadFile(filepath.Join(e.dir, ".git", "refs", "heads", "main")); strings.TrimSpace(string(main)) != c2.Hash {
		t.Fatalf("main moved: %s", main)
	}
	// a nested branch name
	writeFile(t, filepath.Join(e.dir, ".git", "HEAD"), "ref: refs/heads/feature/x\n")
	c4 := e.commit("on a new branch")
	if *c4.Branch != "feature/x" || len(c4.Parents) != 0 {
		t.Fatalf("new branch: %+v", c4)
	}
	mustExist(t, filepath.Join(e.dir, ".git", "index.lock"), false)
	mustExist(t, filepath.Join(e.dir, ".git", "refs", "heads", "feature", "x.lock"), false)
}

func TestCommitIdentityFromActor(t *testing.T) {
	e := newEnv(t)
	e.actx.Actor = kernel.Address{Kind: kernel.KindService, ID: "ci <bot>\u00e9 x"}
	e.write("f", "1")
	e.stage("f")
	c := e.commit("m")
	if c.Author.Name != "ci bot\u00e9 x" || c.Author.Email != "ci--bot----x@service.sharedos.invalid" {
		t.Fatalf("identity: %+v", c.Author)
	}
	if !strings.Contains(c.Message, "Acted-by: service:ci <bot>\u00e9 x\n") {
		t.Fatalf("trailer: %q", c.Message)
	}
}

func TestCommitUnmerged(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("f", "base\n")
	commitAll(t, e.dir, "base")
	runGit(t, e.dir, "checkout", "-q", "-b", "side")
	e.write("f", "side\n")
	commitAll(t, e.dir, "side")
	runGit(t, e.dir, "checkout", "-q", "main")
	e.write("f", "main\n")
	commitAll(t, e.dir, "main")
	if _, err := tryGit(e.dir, "merge", "-q", "side"); err == nil {
		t.Fatal("expected a conflict")
	}
	sameLines(t, porcelain(e.status()), []string{"UU f"})
	e.fail(ActionCommit, CommitInput{Message: "m"}, kernel.StatusFailed, CodeUnmerged)
	e.write("f", "resolved\n")
	e.stage("f")
	sameLines(t, porcelain(e.status()), []string{"M. f"})
}

// TestDiffHunks compares hunk layout with git: changes 6 lines apart share a hunk
// (their contexts touch), 7 lines apart do not.
func TestDiffHunks(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	var base []string
	for i := range 40 {
		base = append(base, "line "+itoa(i))
	}
	e.write("f.txt", strings.Join(base, "\n")+"\n")
	e.write("g.txt", "x\n")
	commitAll(t, e.dir, "init")
	mod := append([]string(nil), base...)
	mod[5], mod[12], mod[20], mod[39] = "changed 5", "changed 12", "changed 20", "changed 39"
	mod = append(mod[:30], append([]string{"inserted"}, mod[30:]...)...)
	e.write("f.txt", strings.Join(mod, "\n")+"\n")
	e.write("g.txt", "")
	d := diffOf(t, e, DiffInput{})
	for _, f := range d.Files {
		name := strings.Join(f.Path, "/")
		if want := runGit(t, e.dir, "diff", "--no-color", "--", name); f.Patch != want {
			t.Fatalf("%s:\n%s\ngit:\n%s", name, f.Patch, want)
		}
	}
}
