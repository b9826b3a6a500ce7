package repoplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// The twin harness (issue 26): a situation is built once with the real git, the
// repository is copied, and then sharedos acts on one copy and git on the other. The
// copies are compared by what git itself reads back: status, the staged index (git
// ls-files -s), and the commit (git cat-file -p HEAD without the author, committer
// and message lines, so the tree and every parent are compared).

type twin struct {
	t      *testing.T
	e      *testEnv
	theirs string
}

func newTwin(t *testing.T, build func(dir string)) *twin {
	t.Helper()
	needGit(t)
	e := newEnv(t)
	build(e.dir)
	tw := &twin{t: t, e: e, theirs: filepath.Join(e.root, "theirs")}
	cloneDir(t, e.dir, tw.theirs)
	return tw
}

func (tw *twin) git(args ...string) string {
	tw.t.Helper()
	return runGit(tw.t, tw.theirs, args...)
}

// sameStatus compares repo.status with git status on the twin.
func (tw *twin) sameStatus() {
	tw.t.Helper()
	sameLines(tw.t, porcelain(tw.e.status()), gitPorcelainExact(tw.t, tw.theirs))
}

// sameIndex compares the two indexes as git ls-files -s lists them.
func (tw *twin) sameIndex() {
	tw.t.Helper()
	if got, want := runGitStdout(tw.t, tw.e.dir, "ls-files", "-s"), runGitStdout(tw.t, tw.theirs, "ls-files", "-s"); got != want {
		tw.t.Fatalf("index:\n%s\ngit:\n%s", got, want)
	}
}

// headObject is git cat-file -p HEAD reduced to its tree and parent lines.
func headObject(t *testing.T, dir string) string {
	t.Helper()
	var keep []string
	for _, l := range strings.Split(runGitStdout(t, dir, "cat-file", "-p", "HEAD"), "\n") {
		if strings.HasPrefix(l, "tree ") || strings.HasPrefix(l, "parent ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// commitBoth commits with repo.commit and git commit and compares the results.
func (tw *twin) commitBoth() CommitOutput {
	tw.t.Helper()
	out := tw.e.commit("ours")
	tw.git("commit", "-q", "-m", "theirs")
	if got, want := headObject(tw.t, tw.e.dir), headObject(tw.t, tw.theirs); got != want {
		tw.t.Fatalf("commit:\n%s\ngit commit:\n%s", got, want)
	}
	tw.sameIndex()
	tw.sameStatus()
	return out
}

// gitSays reports whether git status (long format) on dir holds phrase.
func gitSays(t *testing.T, dir, phrase string) bool {
	t.Helper()
	return strings.Contains(runGitStdout(t, dir, "status"), phrase)
}

// conflictRepo builds main and side editing a.txt differently (and side adding s.txt).
func conflictRepo(t *testing.T, dir string) {
	t.Helper()
	writeFile(t, filepath.Join(dir, "a.txt"), "base\n")
	commitAll(t, dir, "base")
	runGit(t, dir, "checkout", "-q", "-b", "side")
	writeFile(t, filepath.Join(dir, "a.txt"), "side\n")
	writeFile(t, filepath.Join(dir, "s.txt"), "side file\n")
	commitAll(t, dir, "side")
	runGit(t, dir, "checkout", "-q", "main")
	writeFile(t, filepath.Join(dir, "a.txt"), "main\n")
	commitAll(t, dir, "main")
}

// TestTwinMergeCommit: a commit with MERGE_HEAD present records it as the second
// parent and clears the merge state, exactly as git commit.
func TestTwinMergeCommit(t *testing.T) {
	tw := newTwin(t, func(dir string) {
		conflictRepo(t, dir)
		if _, err := tryGit(dir, "merge", "-q", "side"); err == nil {
			t.Fatal("the merge did not conflict")
		}
		writeFile(t, filepath.Join(dir, "a.txt"), "resolved\n")
		runGit(t, dir, "add", "a.txt")
	})
	st := tw.e.status()
	if strings.Join(st.InProgress, ",") != "merge" || !gitSays(t, tw.theirs, "still merging") {
		t.Fatalf("inProgress = %v; git status:\n%s", st.InProgress, runGitStdout(t, tw.theirs, "status"))
	}
	tw.sameStatus()
	out := tw.commitBoth()
	if len(out.Parents) != 2 {
		t.Fatalf("parents %v", out.Parents)
	}
	for _, name := range mergeStateFiles {
		mustExist(t, filepath.Join(tw.e.dir, ".git", name), false)
	}
	if st := tw.e.status(); len(st.InProgress) != 0 {
		t.Fatalf("inProgress after the commit: %v", st.InProgress)
	}
	if got := runGitStdout(t, tw.e.dir, "reflog", "-1", "--format=%gs"); !strings.HasPrefix(got, "commit (merge): ours") {
		t.Fatalf("reflog %q", got)
	}
}

// TestTwinMergeOursTree: a merge whose result equals HEAD's tree (-s ours) is still
// committed, as git commit does.
func TestTwinMergeOursTree(t *testing.T) {
	tw := newTwin(t, func(dir string) {
		conflictRepo(t, dir)
		runGit(t, dir, "merge", "-q", "--no-commit", "-s", "ours", "side")
	})
	tw.sameStatus()
	if out := tw.commitBoth(); len(out.Parents) != 2 {
		t.Fatalf("parents %v", out.Parents)
	}
}

// TestTwinRefusedOperations: a commit during a cherry-pick, revert or rebase is refused
// with operation_in_progress and changes nothing; status names the operation as git
// status does. During a bisect, commit works as git commit does.
func TestTwinRefusedOperations(t *testing.T) {
	cases := []struct {
		op, phrase string
		start      func(t *testing.T, dir string)
	}{
		{"cherry-pick", "cherry-picking", func(t *testing.T, dir string) {
			if _, err := tryGit(dir, "cherry-pick", "side"); err == nil {
				t.Fatal("no conflict")
			}
		}},
		{"revert", "reverting", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "a.txt"), "main 2\n")
			commitAll(t, dir, "main 2")
			if _, err := tryGit(dir, "revert", "--no-edit", "HEAD~1"); err == nil {
				t.Fatal("no conflict")
			}
		}},
		{"rebase", "rebase in progress", func(t *testing.T, dir string) {
			if _, err := tryGit(dir, "rebase", "side"); err == nil {
				t.Fatal("no conflict")
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.op, func(t *testing.T) {
			tw := newTwin(t, func(dir string) {
				conflictRepo(t, dir)
				c.start(t, dir)
				writeFile(t, filepath.Join(dir, "a.txt"), "resolved\n")
				runGit(t, dir, "add", "a.txt")
			})
			if st := tw.e.status(); strings.Join(st.InProgress, ",") != c.op || !gitSays(t, tw.theirs, c.phrase) {
				t.Fatalf("inProgress = %v; git status:\n%s", st.InProgress, runGitStdout(t, tw.theirs, "status"))
			}
			tw.sameStatus()
			before := runGitStdout(t, tw.e.dir, "rev-parse", "HEAD")
			idx, _ := os.ReadFile(filepath.Join(tw.e.dir, ".git", "index"))
			tw.e.fail(ActionCommit, CommitInput{Message: "ours"}, kernel.StatusFailed, CodeOperationInProgress)
			if after := runGitStdout(t, tw.e.dir, "rev-parse", "HEAD"); after != before {
				t.Fatalf("HEAD moved: %s -> %s", before, after)
			}
			if idx2, _ := os.ReadFile(filepath.Join(tw.e.dir, ".git", "index")); string(idx2) != string(idx) {
				t.Fatal("the index changed")
			}
			tw.sameStatus()
		})
	}
	t.Run("bisect", func(t *testing.T) {
		tw := newTwin(t, func(dir string) {
			conflictRepo(t, dir)
			runGit(t, dir, "bisect", "start")
			writeFile(t, filepath.Join(dir, "b.txt"), "b\n")
			runGit(t, dir, "add", "b.txt")
		})
		if st := tw.e.status(); strings.Join(st.InProgress, ",") != "bisect" || !gitSays(t, tw.theirs, "bisecting") {
			t.Fatalf("inProgress = %v", st.InProgress)
		}
		tw.commitBoth()
		mustExist(t, filepath.Join(tw.e.dir, ".git", "BISECT_LOG"), true)
	})
}

// TestTwinExcludesFiles: the operator's excludes files act as git's core.excludesFile
// does (below .git/info/exclude and .gitignore, which may re-include), and the
// repository's own core.excludesFile, pointing outside the root, is never read.
func TestTwinExcludesFiles(t *testing.T) {
	tw := newTwin(t, func(dir string) {
		writeFile(t, filepath.Join(dir, "README"), "r\n")
		commitAll(t, dir, "init")
		for _, p := range []string{"app/.env", "app/key.pem", "app/keep.pem", "app/main.go", "app/x.log"} {
			writeFile(t, filepath.Join(dir, p), "secret\n")
		}
		writeFile(t, filepath.Join(dir, "app/.gitignore"), "!keep.pem\n")
	})
	excl := filepath.Join(t.TempDir(), "ignore")
	writeFile(t, excl, ".env\n*.pem\n*.log\n")
	writeFile(t, filepath.Join(tw.e.dir, ".git/info/exclude"), "!x.log\n")
	writeFile(t, filepath.Join(tw.theirs, ".git/info/exclude"), "!x.log\n")
	tw.git("config", "core.excludesFile", excl)
	// a repository's own setting naming a file outside the root: never followed
	evil := filepath.Join(t.TempDir(), "evil")
	writeFile(t, evil, "*.go\n")
	runGit(t, tw.e.dir, "config", "core.excludesFile", evil)
	tw.e.setProvider(ProviderOptions{ExcludesFiles: []string{excl}})
	tw.sameStatus()
	tw.e.stage("app")
	tw.git("add", "app")
	tw.sameIndex()
	tw.sameStatus()
	tw.e.fail(ActionStage, StageInput{Pathspec: specOf("app/.env")}, kernel.StatusFailed, CodeInvalidInput)
	tw.sameIndex()
}

// lfsTwin builds a repository whose d/*.bin files have filter=lfs, with the filter
// configured for git as a stand-in for git-lfs (clean keeps the first line, the
// "pointer"; smudge is the identity). sharedos never runs it: the filter is in
// .git/config of both copies. File times are set an hour back so that no entry is
// racily clean.
func lfsTwin(t *testing.T) *twin {
	past := time.Now().Add(-time.Hour)
	return newTwin(t, func(dir string) {
		runGit(t, dir, "config", "filter.lfs.clean", "head -n 1")
		runGit(t, dir, "config", "filter.lfs.smudge", "cat")
		writeFile(t, filepath.Join(dir, ".gitattributes"), "*.bin filter=lfs\n")
		writeFile(t, filepath.Join(dir, "d/big.bin"), "ptr v1\nBIG SMUDGED CONTENT\n")
		writeFile(t, filepath.Join(dir, "d/a.txt"), "a\n")
		for _, p := range []string{".gitattributes", "d/big.bin", "d/a.txt"} {
			os.Chtimes(filepath.Join(dir, p), past, past)
		}
		commitAll(t, dir, "init")
		if got := runGitStdout(t, dir, "cat-file", "-p", "HEAD:d/big.bin"); got != "ptr v1\n" {
			t.Fatalf("the clean filter did not run: %q", got)
		}
	})
}

// TestTwinFilterTouched: a filtered file whose stat data changed but not its size is
// not reported as modified (git runs the clean filter and finds the same pointer).
func TestTwinFilterTouched(t *testing.T) {
	tw := lfsTwin(t)
	earlier := time.Now().Add(-30 * time.Minute)
	for _, dir := range []string{tw.e.dir, tw.theirs} {
		os.Chtimes(filepath.Join(dir, "d/big.bin"), earlier, earlier)
	}
	tw.sameStatus()
	if st := tw.e.status(); !st.Clean {
		t.Fatalf("status: %+v", st.Entries)
	}
	// staging the directory changes nothing, as git add does
	tw.e.stage("d")
	tw.git("add", "d")
	tw.sameIndex()
	tw.sameStatus()
}

// TestTwinFilterChanged: a changed or new filtered file is reported with its filter,
// skipped by directory staging (never stored raw), and refused by name.
func TestTwinFilterChanged(t *testing.T) {
	tw := lfsTwin(t)
	past := time.Now().Add(-time.Hour)
	for _, dir := range []string{tw.e.dir, tw.theirs} {
		writeFile(t, filepath.Join(dir, "d/big.bin"), "ptr v2\nNEW AND LONGER SMUDGED CONTENT\n")
		writeFile(t, filepath.Join(dir, "d/new.bin"), "ptr n\nNEW SMUDGED\n")
		writeFile(t, filepath.Join(dir, "d/a.txt"), "a 2\n")
		for _, p := range []string{"d/big.bin", "d/new.bin", "d/a.txt"} {
			os.Chtimes(filepath.Join(dir, p), past, past)
		}
	}
	tw.sameStatus()
	for _, e := range tw.e.status().Entries {
		p := strings.Join(e.Path, "/")
		if want := map[bool]string{true: "lfs", false: ""}[strings.HasSuffix(p, ".bin")]; e.Filter != want {
			t.Fatalf("%s: filter %q, want %q", p, e.Filter, want)
		}
	}
	d := diffOf(t, tw.e, DiffInput{})
	for _, f := range d.Files {
		if f.pathString() == "d/big.bin" && (!f.Binary || f.BinaryReason != binaryFilter || f.Filter != "lfs") {
			t.Fatalf("diff of d/big.bin: %+v", f)
		}
	}
	idx, _ := os.ReadFile(filepath.Join(tw.e.dir, ".git", "index"))
	for _, p := range []string{"d/big.bin", "d/new.bin"} {
		tw.e.fail(ActionStage, StageInput{Pathspec: specOf(p)}, kernel.StatusFailed, CodeFilterRequired)
		if idx2, _ := os.ReadFile(filepath.Join(tw.e.dir, ".git", "index")); string(idx2) != string(idx) {
			t.Fatal("the index changed")
		}
	}
	out := tw.e.stage("d")
	if len(out.Skipped) != 2 || strings.Join(out.Skipped[0].Path, "/") != "d/big.bin" || !strings.Contains(out.Skipped[0].Reason, "filter=lfs") {
		t.Fatalf("skipped: %+v", out.Skipped)
	}
	tw.git("add", "d/a.txt") // what sharedos agreed to stage; git add d would run the filter
	tw.sameIndex()
	for _, p := range []string{"d/big.bin", "d/new.bin"} {
		raw := strings.TrimSpace(runGitStdout(t, tw.e.dir, "hash-object", "--no-filters", p))
		if _, err := tryGit(tw.e.dir, "cat-file", "-e", raw); err == nil {
			t.Fatalf("the smudged bytes of %s were stored", p)
		}
	}
	tw.commitBoth()
}

// TestLinkedWorktreeAndBareRefusals: a linked worktree (a .git file) is refused with a
// message naming its .git sanely, also when it is the root itself; a bare repository
// is refused not_a_repository, as the package doc says.
func TestLinkedWorktreeAndBareRefusals(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	e.write("f.txt", "f\n")
	commitAll(t, e.dir, "init")
	wt := filepath.Join(e.root, "wt")
	runGit(t, e.dir, "worktree", "add", "-q", wt)
	for _, c := range []struct {
		root string
		path []string
		want string
	}{{e.root, []string{"wt"}, "wt/.git is a file"}, {wt, []string{}, ".git is a file"}} {
		p, err := NewProvider(c.root, ProviderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e.p = p
		for _, action := range []string{ActionStatus, ActionDiff, ActionLog} {
			var in any
			if action == ActionDiff {
				in = DiffInput{}
			}
			pe := expectFail(t, e.invokeAt(c.path, action, in), kernel.StatusDenied, CodeNotPermitted)
			if !strings.HasPrefix(pe.Message, c.want) || strings.Contains(pe.Message, "//") {
				t.Fatalf("%s at %v: %q", action, c.path, pe.Message)
			}
		}
	}
	e.setProvider(ProviderOptions{})
	runGit(t, e.root, "init", "-q", "--bare", "bare.git")
	pe := expectFail(t, e.invokeAt([]string{"bare.git"}, ActionStatus, nil), kernel.StatusFailed, CodeNotARepository)
	if !strings.Contains(pe.Message, "bare repository") {
		t.Fatalf("bare: %q", pe.Message)
	}
	runGit(t, e.dir, "config", "core.bare", "true")
	pe = e.fail(ActionStatus, nil, kernel.StatusFailed, CodeNotARepository)
	if !strings.Contains(pe.Message, "bare repository") {
		t.Fatalf("core.bare: %q", pe.Message)
	}
	if !strings.Contains(packageDoc(t), "bare repository\n//     (its layout at the path, or core.bare set) is refused with not_a_repository") {
		t.Fatal("the package doc does not name not_a_repository for bare repositories")
	}
}

func packageDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestAttributeTableMatchesDoc: the package doc's attribute table is attributeTable,
// and every attribute it calls applied or declined is one the lookup reads.
func TestAttributeTableMatchesDoc(t *testing.T) {
	doc := packageDoc(t)
	i := strings.Index(doc, "// # Attributes\n")
	if i < 0 {
		t.Fatal("no Attributes section in doc.go")
	}
	sec := doc[i+len("// # Attributes\n"):]
	sec = sec[:strings.Index(sec, "// # ")]
	var rows []string
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "//\t") {
			f := strings.Fields(strings.TrimPrefix(l, "//\t"))
			rows = append(rows, f[0]+" "+f[1]+" "+strings.Join(f[2:], " "))
		}
	}
	var want []string
	for _, a := range attributeTable {
		want = append(want, a.name+" "+a.handling+" "+strings.Join(strings.Fields(a.what), " "))
	}
	sameLines(t, rows, want)
	e := newEnv(t)
	var line strings.Builder
	line.WriteString("f")
	for _, a := range attributeTable {
		line.WriteString(" " + a.name + "=v")
	}
	e.write(".gitattributes", line.String()+"\n")
	r, oe := e.p.open([]string{"repo"})
	if oe != nil {
		t.Fatal(oe)
	}
	defer r.close()
	at := r.attributes().lookup("f")
	got := map[string]attrState{"text": at.text, "eol": at.eol, "crlf": at.crlf, "diff": at.diff,
		"filter": at.filter, "ident": at.ident, "working-tree-encoding": at.wtEncoding}
	for _, a := range attributeTable {
		if a.handling == "ignored" || a.name == "binary" {
			continue
		}
		if s := got[a.name]; !s.set || s.value != "v" {
			t.Errorf("%s is %s but the lookup does not read it", a.name, a.handling)
		}
	}
}

// TestTwinIdent: ident collapses "$Id: …$" when staging and comparing, as git does.
func TestTwinIdent(t *testing.T) {
	past := time.Now().Add(-time.Hour)
	tw := newTwin(t, func(dir string) {
		writeFile(t, filepath.Join(dir, ".gitattributes"), "*.c ident\n")
		writeFile(t, filepath.Join(dir, "x.c"), "a\n$Id$\n")
		commitAll(t, dir, "init")
		// what checkout would leave: the expanded form, stat-dirty
		os.Remove(filepath.Join(dir, "x.c"))
		runGit(t, dir, "checkout", "--", "x.c") // expands $Id$ and records its stat data
		if data, _ := os.ReadFile(filepath.Join(dir, "x.c")); !strings.HasPrefix(string(data), "a\n$Id: ") {
			t.Fatalf("checkout wrote %q", data)
		}
		os.Chtimes(filepath.Join(dir, "x.c"), past, past) // stat-dirty, same size
		writeFile(t, filepath.Join(dir, "y.c"), "$Id: a $ b $Id: c\nd$ $Id$ $Id:$ $I\n$Id: e $")
	})
	tw.sameStatus()
	if st := tw.e.status(); len(st.Entries) != 1 {
		t.Fatalf("x.c should be clean: %v", porcelain(st))
	}
	for _, dir := range []string{tw.e.dir, tw.theirs} {
		writeFile(t, filepath.Join(dir, "x.c"), "b\n$Id: 0123 $\n")
	}
	tw.sameStatus()
	tw.e.stage("x.c", "y.c")
	tw.git("add", "x.c", "y.c")
	tw.sameIndex()
	if got := runGitStdout(t, tw.e.dir, "cat-file", "-p", ":y.c"); got != "$Id$ b $Id: c\nd$ $Id$ $Id$ $I\n$Id$" {
		t.Fatalf("y.c staged as %q", got)
	}
	tw.commitBoth()
}

// TestTwinWorkingTreeEncoding: working-tree-encoding is converted to UTF-8 when
// staging and comparing, as git does with iconv; a file git cannot convert either
// (unknown encoding, invalid bytes, a missing or prohibited byte order mark) is
// refused with encoding_unsupported, never stored raw.
func TestTwinWorkingTreeEncoding(t *testing.T) {
	u16le := func(s string) string {
		var b []byte
		for _, r := range s {
			b = append(b, byte(r), byte(r>>8))
		}
		return string(b)
	}
	tw := newTwin(t, func(dir string) {
		writeFile(t, filepath.Join(dir, ".gitattributes"), "*.le working-tree-encoding=UTF-16LE\n*.u16 working-tree-encoding=UTF-16\n"+
			"*.lat working-tree-encoding=ISO-8859-1\n*.bad working-tree-encoding=NO-SUCH-ENCODING\n*.u8 working-tree-encoding=UTF-8\n")
		writeFile(t, filepath.Join(dir, "README"), "r\n")
		commitAll(t, dir, "init")
		writeFile(t, filepath.Join(dir, "d/a.le"), u16le("héllo\nwörld\n"))
		writeFile(t, filepath.Join(dir, "d/b.u16"), "\xff\xfe"+u16le("bom\n"))
		writeFile(t, filepath.Join(dir, "d/c.lat"), "caf\xe9\n")
		writeFile(t, filepath.Join(dir, "d/e.u8"), "plain\n")
		writeFile(t, filepath.Join(dir, "bad/x.bad"), "x\n")
		writeFile(t, filepath.Join(dir, "odd/y.le"), "abc")
		writeFile(t, filepath.Join(dir, "nobom/z.u16"), u16le("z\n"))
		writeFile(t, filepath.Join(dir, "bom/w.le"), "\xff\xfe"+u16le("w\n"))
	})
	tw.sameStatus()
	tw.e.stage("d")
	tw.git("add", "d")
	tw.sameIndex()
	if got := runGitStdout(t, tw.e.dir, "cat-file", "-p", ":d/a.le"); got != "héllo\nwörld\n" {
		t.Fatalf("a.le staged as %q", got)
	}
	idx, _ := os.ReadFile(filepath.Join(tw.e.dir, ".git", "index"))
	for _, p := range []string{"bad/x.bad", "odd/y.le", "nobom/z.u16", "bom/w.le"} {
		if _, err := tryGit(tw.theirs, "add", p); err == nil {
			t.Fatalf("git add %s succeeded", p)
		}
		tw.e.fail(ActionStage, StageInput{Pathspec: specOf(p)}, kernel.StatusFailed, CodeEncodingUnsupported)
		if idx2, _ := os.ReadFile(filepath.Join(tw.e.dir, ".git", "index")); string(idx2) != string(idx) {
			t.Fatalf("the index changed after refusing %s", p)
		}
	}
	tw.sameIndex()
	// stat-dirty but unchanged: clean once converted
	later := time.Now().Add(time.Hour)
	for _, dir := range []string{tw.e.dir, tw.theirs} {
		os.Chtimes(filepath.Join(dir, "d/a.le"), later, later)
	}
	tw.sameStatus()
	tw.commitBoth()
}

// TestTwinUnaddressableNames: names status reports that a pathspec cannot hold are
// marked addressable:false, and staging their directory stages them as git add does.
func TestTwinUnaddressableNames(t *testing.T) {
	weird := []string{"d/tab\tname.txt", "d/back\\slash.txt", "d/ lead.txt", "d/trail.txt ", "d/ctl\x01.txt", "d/sub\x7f/x.txt"}
	tw := newTwin(t, func(dir string) {
		writeFile(t, filepath.Join(dir, "README"), "r\n")
		commitAll(t, dir, "init")
		for _, p := range append([]string{"d/ok.txt"}, weird...) {
			writeFile(t, filepath.Join(dir, p), p+"\n")
		}
	})
	tw.sameStatus()
	for _, e := range tw.e.status().Entries {
		p := strings.Join(e.Path, "/")
		isWeird := p != "d/ok.txt"
		if got := e.Addressable != nil && !*e.Addressable; got != isWeird {
			t.Fatalf("%q: addressable %v", p, e.Addressable)
		}
		if !isWeird {
			continue
		}
		// what status calls unaddressable is indeed refused by name
		if rr := tw.e.invoke(ActionStage, StageInput{Pathspec: [][]string{e.Path}}); rr.Status == kernel.StatusSucceeded {
			t.Fatalf("%q staged by name", p)
		}
	}
	tw.e.stage("d")
	tw.git("add", "d")
	tw.sameIndex()
	tw.sameStatus()
	tw.commitBoth()
}

// TestTwinSubmoduleContents: a submodule with modified or untracked content inside is
// what git status shows as " M sub"; repo.status does not inspect submodule contents
// and says so: every line git has and status lacks is a listed submodule.
func TestTwinSubmoduleContents(t *testing.T) {
	tw := newTwin(t, func(dir string) {
		src := filepath.Join(filepath.Dir(dir), "src-sub")
		initRepo(t, src)
		writeFile(t, filepath.Join(src, "s.txt"), "s\n")
		commitAll(t, src, "sub init")
		runGit(t, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, "mod")
		runGit(t, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, "unt")
		runGit(t, dir, "-c", "protocol.file.allow=always", "submodule", "add", "-q", src, "clean")
		writeFile(t, filepath.Join(dir, "top.txt"), "t\n")
		commitAll(t, dir, "init")
		writeFile(t, filepath.Join(dir, "mod/s.txt"), "changed\n")
		writeFile(t, filepath.Join(dir, "unt/new.txt"), "n\n")
		writeFile(t, filepath.Join(dir, "top.txt"), "t2\n")
	})
	st := tw.e.status()
	var listed []string
	for _, p := range st.SubmodulesNotInspected {
		listed = append(listed, strings.Join(p, "/"))
	}
	if strings.Join(listed, ",") != "clean,mod,unt" {
		t.Fatalf("submodulesNotInspected: %v", listed)
	}
	ours := map[string]bool{}
	for _, l := range porcelain(st) {
		ours[l] = true
	}
	var gitOnly []string
	for _, l := range gitPorcelainExact(t, tw.theirs) {
		if !ours[l] {
			gitOnly = append(gitOnly, l)
		}
		delete(ours, l)
	}
	if len(ours) != 0 || strings.Join(gitOnly, ",") != ".M mod,.M unt" {
		t.Fatalf("ours only %v, git only %v", ours, gitOnly)
	}
}

// TestTwinNonUTF8Text: text that is not UTF-8 has its lines counted as git's numstat
// does, and is shown as binary with binaryReason "encoding" (no patch text that JSON
// would have to alter), unstaged and staged.
func TestTwinNonUTF8Text(t *testing.T) {
	tw := newTwin(t, func(dir string) {
		writeFile(t, filepath.Join(dir, "latin.txt"), "caf\xe9\nb\n")
		writeFile(t, filepath.Join(dir, "nul.bin"), "a\x00b\n")
		commitAll(t, dir, "init")
		writeFile(t, filepath.Join(dir, "latin.txt"), "caf\xe9\nc\nd\xff\n")
		writeFile(t, filepath.Join(dir, "nul.bin"), "a\x00c\n")
	})
	check := func(staged bool) {
		t.Helper()
		d := diffOf(t, tw.e, DiffInput{Staged: staged})
		var args []string
		if staged {
			args = []string{"--cached"}
		}
		sameLines(t, numstat(d), gitNumstat(t, tw.theirs, args...))
		for _, f := range d.Files {
			want := map[string]string{"latin.txt": binaryEncoding, "nul.bin": binaryNUL}[f.pathString()]
			if !f.Binary || f.BinaryReason != want || strings.Contains(f.Patch, "\ufffd") || !strings.Contains(f.Patch, "Binary files") {
				t.Fatalf("%s: %+v", f.pathString(), f)
			}
		}
		if f := d.Files[0]; f.pathString() != "latin.txt" || f.Additions != 2 || f.Deletions != 1 {
			t.Fatalf("latin.txt counted %+v", f)
		}
	}
	check(false)
	tw.e.stage("latin.txt", "nul.bin")
	tw.git("add", "latin.txt", "nul.bin")
	tw.sameIndex()
	check(true)
}
