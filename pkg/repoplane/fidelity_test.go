package repoplane

import (
	"crypto/sha1"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// gitDiffText is git's own patch text for comparison with ours.
func gitDiffText(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return runGitStdout(t, dir, append([]string{"-c", "core.quotePath=true", "-c", "diff.noprefix=false", "-c", "diff.mnemonicPrefix=false",
		"diff", "--no-color", "--no-ext-diff"}, args...)...)
}

func patchText(d DiffOutput) string {
	var b strings.Builder
	for _, f := range d.Files {
		b.WriteString(f.Patch)
	}
	return b.String()
}

// TestLogOrderAndTimes: commits with equal committer times come in git log's order (the
// order they were reached, so a child before its parent), and times carry a numeric
// offset (+00:00), as git log's %cI prints them.
func TestLogOrderAndTimes(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	date := []string{"GIT_AUTHOR_DATE=1700000000 +0000", "GIT_COMMITTER_DATE=1700000000 +0000"}
	commit := func(msg string) {
		cmd := []string{"commit", "-q", "--allow-empty", "-m", msg}
		d := &diffRepo{t: t, dir: e.dir}
		d.git(date, cmd...)
	}
	for i := range 6 {
		commit("c" + itoa(i))
	}
	d := &diffRepo{t: t, dir: e.dir}
	d.git(nil, "checkout", "-q", "-b", "side", "HEAD~3")
	commit("side 1")
	commit("side 2")
	d.git(nil, "checkout", "-q", "main")
	d.git(date, "merge", "-q", "--no-ff", "-m", "merge", "side")
	lo := e.ok(ActionLog, LogInput{MaxCount: 100}).(LogOutput)
	var got []string
	for _, c := range lo.Commits {
		got = append(got, c.Hash+" "+c.Committer.Time+" "+c.Author.Time)
	}
	want := strings.Split(strings.TrimSpace(runGit(t, e.dir, "log", "--format=%H %cI %aI")), "\n")
	sameLines(t, got, want)
	if !strings.HasSuffix(lo.Commits[0].Committer.Time, "+00:00") {
		t.Fatalf("time %q", lo.Commits[0].Committer.Time)
	}
}

// TestTypeChangeIsTwoPatches: a file that became a link (and back) is a deletion and a
// creation, the form git writes and git apply accepts.
func TestTypeChangeIsTwoPatches(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("f", "one\ntwo\n")
	e.write("g", "x\n")
	commitAll(t, e.dir, "init")
	os.Remove(filepath.Join(e.dir, "f"))
	os.Symlink("target", filepath.Join(e.dir, "f"))
	d := diffOf(t, e, DiffInput{})
	if len(d.Files) != 1 || d.Files[0].Status != "T" || strings.Count(d.Files[0].Patch, "diff --git ") != 2 {
		t.Fatalf("diff: %+v", d.Files)
	}
	if got, want := patchText(d), gitDiffText(t, e.dir); got != want {
		t.Fatalf("patch:\n%s\ngit:\n%s", got, want)
	}
	runGitIn(t, e.dir, patchText(d), "apply", "--cached", "-")
	if out := runGitStdout(t, e.dir, "diff", "--name-only"); out != "" {
		t.Fatalf("after git apply of our patch, git diff: %q", out)
	}
}

// TestEmptyFileHeaders: an empty file created or deleted has no ---/+++ lines (git
// writes none without hunks).
func TestEmptyFileHeaders(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("old-empty", "")
	e.write("keep", "k\n")
	commitAll(t, e.dir, "init")
	e.write("new-empty", "")
	e.stage("new-empty")
	check := func() {
		t.Helper()
		d := diffOf(t, e, DiffInput{Staged: true})
		if got, want := patchText(d), gitDiffText(t, e.dir, "--cached"); got != want {
			t.Fatalf("patch:\n%s\ngit:\n%s", got, want)
		}
		if strings.Contains(patchText(d), "---") || len(d.Files) != 1 {
			t.Fatalf("---/+++ lines for an empty file:\n%s", patchText(d))
		}
	}
	check()
	e.commit("empty")
	os.Remove(filepath.Join(e.dir, "old-empty"))
	e.stage("old-empty")
	check()
}

// TestStageInsideFileThatBecameDirectory: staging f/inner.txt where the tracked file f
// is now a directory replaces f's entry, as git add does.
func TestStageInsideFileThatBecameDirectory(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("f", "file\n")
	e.write("other", "o\n")
	commitAll(t, e.dir, "init")
	os.Remove(filepath.Join(e.dir, "f"))
	e.write("f/inner.txt", "inner\n")
	theirs := filepath.Join(e.root, "theirs")
	cloneDir(t, e.dir, theirs)
	out := e.stage("f/inner.txt")
	runGit(t, theirs, "add", "f/inner.txt")
	if got, want := runGit(t, e.dir, "ls-files", "-s"), runGit(t, theirs, "ls-files", "-s"); got != want {
		t.Fatalf("index:\n%s\ngit add:\n%s", got, want)
	}
	var st []string
	for _, s := range out.Staged {
		st = append(st, s.Status+" "+strings.Join(s.Path, "/"))
	}
	sameLines(t, st, []string{"D f", "A f/inner.txt"})
}

// TestPatchHeadersQuoteNames: names with quotes, backslashes, control characters
// (newlines and tabs included) and non-ASCII bytes are C-quoted in every header line
// exactly as git quotes them, so a hostile name cannot forge patch lines; names with a
// space get git's trailing tab on the ---/+++ lines.
func TestPatchHeadersQuoteNames(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	names := []string{"sp ace", "tab\there", "é.md", "q\"uote", "back\\slash", "evil\n+++ b/forged\ndiff --git a/x b/x", "bell\a", "del\x7f"}
	for _, n := range names {
		e.write(n, "old\n")
	}
	e.write("bin é", "\x00")
	commitAll(t, e.dir, "init")
	for _, n := range names {
		e.write(n, "new\n")
	}
	e.write("new é sp", "n\n")
	e.write("bin é", "\x00\x01")
	d := diffOf(t, e, DiffInput{})
	if got, want := patchText(d), gitDiffText(t, e.dir); got != want {
		t.Fatalf("patch:\n%s\ngit:\n%s", got, want)
	}
	for _, l := range strings.Split(patchText(d), "\n") {
		if strings.HasPrefix(l, "+++ b/forged") || l == "diff --git a/x b/x" {
			t.Fatalf("forged header line %q", l)
		}
	}
	e.stage("new é sp", "é.md")
	runGit(t, e.dir, "mv", "é.md", "ü.md")
	if got, want := patchText(diffOf(t, e, DiffInput{Staged: true})), gitDiffText(t, e.dir, "--cached"); got != want {
		t.Fatalf("staged patch:\n%s\ngit:\n%s", got, want)
	}
	// core.quotePath=false leaves non-ASCII bytes alone, as git does
	runGit(t, e.dir, "config", "core.quotePath", "false")
	if got, want := patchText(diffOf(t, e, DiffInput{Staged: true})), runGitStdout(t, e.dir, "diff", "--cached", "--no-color"); got != want {
		t.Fatalf("quotePath=false:\n%s\ngit:\n%s", got, want)
	}
}

// TestStagedDiffPathspecInsideDirectoryThatBecameFile: a staged diff limited to a path
// inside a directory that is now a file lists that path's deletion, as git does.
func TestStagedDiffPathspecInsideDirectoryThatBecameFile(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("d/x", "x\n")
	e.write("d/sub/y", "y\n")
	e.write("keep", "k\n")
	commitAll(t, e.dir, "init")
	os.RemoveAll(filepath.Join(e.dir, "d"))
	e.write("d", "now a file\n")
	runGit(t, e.dir, "add", "-A")
	for _, spec := range []string{"d/x", "d/sub", "d"} {
		got := nameStatus(diffOf(t, e, DiffInput{Staged: true, Pathspec: specOf(spec)}))
		want := gitNameStatus(runGitStdout(t, e.dir, "diff", "--cached", "--name-status", "--no-renames", "--", spec))
		sameLines(t, got, want)
	}
}

// TestNonUTF8ContentIsBinary: content that is not UTF-8 (Latin-1 here) cannot travel in a
// JSON patch unaltered, so it is reported as binary rather than silently changed.
func TestNonUTF8ContentIsBinary(t *testing.T) {
	e := newEnv(t)
	e.write("latin1.txt", "caf\xe9\n")
	e.write("utf8.txt", "café\n")
	commitAll(t, e.dir, "init")
	e.write("latin1.txt", "caf\xe9 cr\xe8me\n")
	e.write("utf8.txt", "café crème\n")
	d := diffOf(t, e, DiffInput{})
	sameLines(t, fileSummary(d), []string{"M latin1.txt binary", "M utf8.txt +01 -01"})
	for _, f := range d.Files {
		if !utf8.ValidString(f.Patch) {
			t.Fatalf("%s: patch is not UTF-8", f.pathString())
		}
	}
	if !strings.Contains(d.Files[0].Patch, "Binary files a/latin1.txt and b/latin1.txt differ") {
		t.Fatalf("patch: %q", d.Files[0].Patch)
	}
}

// TestDotGitSpellingsInStatus: on a case-sensitive file system only ".git" itself is
// hidden; ".GIT/" and "sub/.Git/" are untracked names, as git status shows them, and
// staging them is refused (git add fails on them too).
func TestDotGitSpellingsInStatus(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write(".GIT/x", "x\n")
	e.write("sub/.Git/z", "z\n")
	e.write("sub/y", "y\n")
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	if _, err := tryGit(e.dir, "add", "sub"); err == nil {
		t.Fatal("git add accepted sub/.Git/z")
	}
	msg := e.fail(ActionStage, StageInput{Pathspec: specOf("sub")}, kernel.StatusDenied, CodeNotPermitted)
	if !strings.Contains(msg.Message, "sub/.Git/z") {
		t.Fatalf("message: %s", msg.Message)
	}
	if out := runGit(t, e.dir, "ls-files"); out != "" {
		t.Fatalf("index: %q", out)
	}
}

// TestJustStagedFilesStatClean: files staged (and committed) within the same second stay
// stat-clean for git diff-files, which trusts stat data without re-reading; a file that
// changes after it was staged in the same second is still caught.
func TestJustStagedFilesStatClean(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("a.txt", "a\n")
	e.write("b.txt", "b\n")
	e.stage("a.txt", "b.txt")
	if out := runGitStdout(t, e.dir, "diff-files", "--name-only"); out != "" {
		t.Fatalf("git diff-files after repo.stage: %q", out)
	}
	e.commit("one")
	if out := runGitStdout(t, e.dir, "diff-files", "--name-only"); out != "" {
		t.Fatalf("git diff-files after repo.commit: %q", out)
	}
	// same size, same second: only the racy-timestamp rule can see it
	e.write("a.txt", "A\n")
	e.write("b.txt", "B\n")
	e.stage("b.txt")
	sameLines(t, porcelain(e.status()), []string{".M a.txt", "M. b.txt"})
	sameLines(t, gitPorcelain(t, e.dir), []string{".M a.txt", "M. b.txt"})
}

// TestRenamePairingPrefersSameBasename: among identical files, a rename pairs a new path
// with a deleted one of the same file name first, as git's exact rename detection does.
func TestRenamePairingPrefersSameBasename(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("a1", "same\n")
	e.write("x/same.txt", "same\n")
	commitAll(t, e.dir, "init")
	runGit(t, e.dir, "rm", "-q", "--cached", "-r", ".")
	os.RemoveAll(filepath.Join(e.dir, "x"))
	os.Remove(filepath.Join(e.dir, "a1"))
	e.write("m/same.txt", "same\n")
	e.write("z1", "same\n")
	runGit(t, e.dir, "add", "m", "z1")
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	sameLines(t, porcelain(e.status()), []string{"R. x/same.txt -> m/same.txt", "R. a1 -> z1"})
}

// TestSubmoduleNewCommits: a submodule (absorbed into .git/modules, or with its own .git
// directory) whose checked-out commit moved is modified in status and diff, and staging
// it records the new commit, as git does.
func TestSubmoduleNewCommits(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	src := filepath.Join(e.root, "src-sub")
	initRepo(t, src)
	writeFile(t, filepath.Join(src, "s.txt"), "s\n")
	commitAll(t, src, "sub init")
	runGit(t, e.dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, "absorbed")
	inner := filepath.Join(e.dir, "embedded")
	initRepo(t, inner)
	writeFile(t, filepath.Join(inner, "i.txt"), "i\n")
	commitAll(t, inner, "inner init")
	runGit(t, e.dir, "add", "embedded")
	e.write("top.txt", "t\n")
	commitAll(t, e.dir, "init")
	sameLines(t, porcelain(e.status()), nil)
	for _, sub := range []string{"absorbed", "embedded"} {
		writeFile(t, filepath.Join(e.dir, sub, "new.txt"), "n\n")
		commitAll(t, filepath.Join(e.dir, sub), "moved")
	}
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	if got, want := patchText(diffOf(t, e, DiffInput{})), gitDiffText(t, e.dir, "--submodule=short"); got != want {
		t.Fatalf("diff:\n%s\ngit:\n%s", got, want)
	}
	theirs := filepath.Join(e.root, "theirs")
	cloneDir(t, e.dir, theirs)
	e.stage("absorbed", "embedded")
	runGit(t, theirs, "add", "absorbed", "embedded")
	if got, want := runGit(t, e.dir, "ls-files", "-s"), runGit(t, theirs, "ls-files", "-s"); got != want {
		t.Fatalf("staged:\n%s\ngit add:\n%s", got, want)
	}
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	if got, want := patchText(diffOf(t, e, DiffInput{Staged: true})), gitDiffText(t, e.dir, "--cached", "--submodule=short"); got != want {
		t.Fatalf("staged diff:\n%s\ngit:\n%s", got, want)
	}
}

// TestBuiltinFuncnamePatterns: with diff=<driver> set, hunk headers name the function the
// way git's built-in driver patterns do.
func TestBuiltinFuncnamePatterns(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	body := func(n int) string { return strings.Repeat("\tx := 1\n", n) }
	files := map[string]string{
		"a.go":   "package a\n\ntype T struct {\n\tA int\n}\n\nfunc (t *T) Method(a int) error {\n" + body(8) + "}\n",
		"a.py":   "import os\n\nclass C:\n    x = 1\n\n    async def run(self):\n" + strings.Repeat("        y = 1\n", 8) + "\n",
		"a.md":   "intro\n\n## Section two\n\n" + strings.Repeat("text\n", 8),
		"a.rb":   "module M\n  def go(x)\n" + strings.Repeat("    y = 1\n", 8) + "  end\nend\n",
		"a.rs":   "use x;\n\npub(crate) async fn run(a: i32) -> i32 {\n" + strings.Repeat("    let y = 1;\n", 8) + "}\n",
		"A.java": "public class A {\n    public static int run(int a) {\n        if (a) {\n" + strings.Repeat("            y = 1;\n", 8) + "        }\n    }\n}\n",
		"a.cpp":  "int global;\nstatic int run(int a)\n{\nlabel:\n" + strings.Repeat("    y = 1;\n", 8) + "}\n",
		"a.txt":  "Plain heading\n" + strings.Repeat(" indented\n", 8),
	}
	e.write(".gitattributes", "*.go diff=golang\n*.py diff=python\n*.md diff=markdown\n*.rb diff=ruby\n*.rs diff=rust\n*.java diff=java\n*.cpp diff=cpp\n*.txt diff=nosuchdriver\n")
	for p, c := range files {
		e.write(p, c)
	}
	commitAll(t, e.dir, "init")
	for p, c := range files {
		lines := strings.SplitAfter(c, "\n")
		lines[len(lines)-3] = "changed\n"
		e.write(p, strings.Join(lines, ""))
	}
	got, want := patchText(diffOf(t, e, DiffInput{})), gitDiffText(t, e.dir)
	if got != want {
		t.Fatalf("patch:\n%s\ngit:\n%s", got, want)
	}
	if !strings.Contains(got, "@@ func (t *T) Method(a int) error {") && !strings.Contains(got, " @@ func (t *T) Method(a int) error {") {
		t.Fatalf("golang driver not applied:\n%s", got)
	}
}

// TestAbbreviationsExtendOnAmbiguity: patch headers abbreviate object names as git does:
// longer than 7 characters when another object (loose or packed) shares the prefix,
// and at least core.abbrev when it is set.
func TestAbbreviationsExtendOnAmbiguity(t *testing.T) {
	needGit(t)
	// two contents whose blob ids share 7 hex digits (a birthday search)
	seen := map[string]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		c := "content " + strconv.Itoa(i) + "\n"
		p := blobHash(sha1.New(), []byte(c)).String()[:7]
		if o, ok := seen[p]; ok {
			a, b = o, c
		}
		seen[p] = c
	}
	for _, packed := range []bool{false, true} {
		e := newEnv(t)
		e.write("f.txt", "base\n")
		e.write("g.txt", b)
		commitAll(t, e.dir, "init")
		if packed {
			runGit(t, e.dir, "gc", "-q")
			if out := runGit(t, e.dir, "count-objects", "-v"); !strings.Contains(out, "count: 0\n") {
				t.Fatalf("objects left loose:\n%s", out)
			}
		}
		e.write("f.txt", a)
		got, want := patchText(diffOf(t, e, DiffInput{})), gitDiffText(t, e.dir)
		if got != want {
			t.Fatalf("packed=%v patch:\n%s\ngit:\n%s", packed, got, want)
		}
		if strings.Contains(got, ".."+blobHash(sha1.New(), []byte(a)).String()[:7]+" ") {
			t.Fatalf("packed=%v: not extended:\n%s", packed, got)
		}
		runGit(t, e.dir, "config", "core.abbrev", "12")
		if got, want := patchText(diffOf(t, e, DiffInput{})), gitDiffText(t, e.dir); got != want {
			t.Fatalf("core.abbrev=12 patch:\n%s\ngit:\n%s", got, want)
		}
	}
}

// TestStageFileReplacingDirectory: staging a file where a directory was replaces every
// index entry beneath it, assume-unchanged ones included (the index never holds both
// "d" and "d/x"), as git add does.
func TestStageFileReplacingDirectory(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("docs/util.go", "u\n")
	e.write("docs/b.txt", "b\n")
	commitAll(t, e.dir, "init")
	runGit(t, e.dir, "update-index", "--assume-unchanged", "docs/util.go")
	os.RemoveAll(filepath.Join(e.dir, "docs"))
	e.write("docs", "now a file\n")
	theirs := filepath.Join(e.root, "theirs")
	cloneDir(t, e.dir, theirs)
	e.stage("docs")
	runGit(t, theirs, "add", "docs")
	if got, want := runGit(t, e.dir, "ls-files", "-s"), runGit(t, theirs, "ls-files", "-s"); got != want {
		t.Fatalf("staged:\n%s\ngit add:\n%s", got, want)
	}
}

// TestWorktreeRenameOfIntentToAdd: a deleted file and an intent-to-add file of the same
// content are a rename in the worktree column (" R old -> new"), as git status shows.
func TestWorktreeRenameOfIntentToAdd(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("a.txt", "same content\n")
	e.write("keep.txt", "k\n")
	commitAll(t, e.dir, "init")
	os.Rename(filepath.Join(e.dir, "a.txt"), filepath.Join(e.dir, "b.txt"))
	runGit(t, e.dir, "add", "-N", "b.txt")
	sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	sameLines(t, porcelain(e.status()), []string{".R a.txt -> b.txt"})
}
