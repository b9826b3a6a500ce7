package repoplane

import (
	"flag"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The differential harness: small repositories are generated with the real git, a
// random change set is applied to each (edits, touches, deletions, new and ignored
// files, mode changes, file↔directory and file↔link swaps, renames, partial staging,
// intent-to-add), and every repo tool is compared with git on the result:
//
//   - repo.status against git status --porcelain -uall;
//   - repo.diff (unstaged and staged, whole and with a pathspec) against git diff
//     --name-status, and each patch is applied with git apply to the side it was made
//     from, which must then give exactly the other side's tree;
//   - repo.stage against git add on a copy, then repo.commit: git fsck --strict, git
//     status and git diff --cached agree, and the commit's tree is git write-tree's;
//   - repo.log against git log.
//
// go test runs -seeds seeds (default 4); more by hand: go test -run Differential -seeds 200.
var (
	diffSeeds = flag.Int("seeds", 4, "differential harness: number of random repositories")
	diffSeed0 = flag.Int64("seed0", 1, "differential harness: first seed")
	diffText  = flag.Bool("difftext", false, "differential harness: also require patch text identical to git diff's (hunk placement may legitimately differ)")
)

func TestDifferential(t *testing.T) {
	needGit(t)
	for s := *diffSeed0; s < *diffSeed0+int64(*diffSeeds); s++ {
		t.Run("seed"+strconv.FormatInt(s, 10), func(t *testing.T) { runDifferential(t, s) })
	}
}

var (
	diffDirs  = []string{"", "", "src", "src/lib", "docs", "a b", "ünï", "logs", "x"}
	diffNames = []string{"main.go", "util.go", "README", "notes.txt", "run.sh", "data.bin", "keep.o", "x.log", ".gitkeep", "sp ace.txt", "é.md", "Makefile", "a.bat"}
	diffWords = []string{"alpha", "beta", "gamma", "func main() {", "}", "\treturn nil", "// comment", "x := 1", "", "end"}
	diffIgn   = []string{"*.o\n", "!keep.o\n", "logs/**\n!logs/.gitkeep\n", "/x/\n", "*.log\n", "build/\n", "#c\n", "[!n]otes.txt\n", "\xef\xbb\xbf*.tmp\n"}
	diffAttrs = []string{"* text=auto\n", "*.bat eol=crlf\n", "*.bin binary\n", "*.md -text\n", "*.sh text eol=lf\n"}
)

type diffRepo struct {
	t   *testing.T
	rng *rand.Rand
	e   *testEnv
	dir string
	clk time.Time
}

func (d *diffRepo) content() string {
	if d.rng.Intn(12) == 0 {
		return "bin\x00ary\x01" + strconv.Itoa(d.rng.Intn(1000)) // binary
	}
	n := 1 + d.rng.Intn(12)
	var b strings.Builder
	crlf := d.rng.Intn(6) == 0
	for range n {
		b.WriteString(diffWords[d.rng.Intn(len(diffWords))])
		if d.rng.Intn(3) == 0 {
			b.WriteString(" " + strconv.Itoa(d.rng.Intn(50)))
		}
		if crlf {
			b.WriteString("\r")
		}
		b.WriteString("\n")
	}
	s := b.String()
	if d.rng.Intn(8) == 0 {
		s = strings.TrimSuffix(s, "\n") // no newline at end
	}
	return s
}

func (d *diffRepo) randPath() string {
	dir := diffDirs[d.rng.Intn(len(diffDirs))]
	name := diffNames[d.rng.Intn(len(diffNames))]
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func (d *diffRepo) git(env []string, args ...string) string {
	d.t.Helper()
	cmd := exec.Command(gitPath, args...)
	cmd.Dir = d.dir
	cmd.Env = append(gitEnv(), env...)
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		d.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	return string(out)
}

func (d *diffRepo) gitCommit(msg string) {
	// committer times repeat so that log's order among equal times is exercised
	if d.rng.Intn(2) == 0 {
		d.clk = d.clk.Add(time.Duration(d.rng.Intn(3)) * time.Hour)
	}
	date := strconv.FormatInt(d.clk.Unix(), 10) + " +0000"
	d.git([]string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}, "commit", "-q", "--allow-empty", "-m", msg)
}

// files lists the regular files and links under the working tree (not .git).
func (d *diffRepo) files() []string {
	var out []string
	filepath.Walk(d.dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(d.dir, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		if !fi.IsDir() {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

func (d *diffRepo) write(p, content string) {
	fp := filepath.Join(d.dir, p)
	if fi, err := os.Lstat(filepath.Dir(fp)); err == nil && !fi.IsDir() {
		os.Remove(filepath.Dir(fp))
	}
	if fi, err := os.Lstat(fp); err == nil && fi.IsDir() {
		os.RemoveAll(fp)
	}
	if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
		return // a parent is a file further up; skip
	}
	os.Remove(fp)
	os.WriteFile(fp, []byte(content), 0o644)
}

// setup builds the repository and its history.
func (d *diffRepo) setup() {
	d.write(".gitignore", strings.Join(pick(d.rng, diffIgn, 1+d.rng.Intn(4)), ""))
	if d.rng.Intn(2) == 0 {
		d.write(".gitattributes", strings.Join(pick(d.rng, diffAttrs, 1+d.rng.Intn(3)), ""))
	}
	if d.rng.Intn(4) == 0 {
		d.git(nil, "config", "core.autocrlf", []string{"true", "input", "false"}[d.rng.Intn(3)])
	}
	commits := 2 + d.rng.Intn(4)
	for c := range commits {
		for range 4 + d.rng.Intn(8) {
			d.write(d.randPath(), d.content())
		}
		if d.rng.Intn(4) == 0 {
			os.Chmod(filepath.Join(d.dir, d.randPath()), 0o755)
		}
		d.git(nil, "-c", "core.safecrlf=false", "add", "-A")
		d.gitCommit("commit " + strconv.Itoa(c))
		if c == 1 && d.rng.Intn(2) == 0 { // a merge, for log's topological order
			d.git(nil, "checkout", "-q", "-b", "side", "HEAD~1")
			d.write("side.txt", d.content())
			d.git(nil, "add", "-A")
			d.gitCommit("side")
			d.git(nil, "checkout", "-q", "main")
			date := strconv.FormatInt(d.clk.Unix(), 10) + " +0000"
			d.git([]string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}, "merge", "-q", "--no-ff", "-m", "merge", "side")
		}
	}
}

func pick(rng *rand.Rand, from []string, n int) []string {
	idx := rng.Perm(len(from))[:min(n, len(from))]
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = from[j]
	}
	return out
}

// mutate applies a random change set.
func (d *diffRepo) mutate() []string {
	var log []string
	tracked := strings.Split(strings.TrimRight(d.git(nil, "ls-files"), "\n"), "\n")
	n := 2 + d.rng.Intn(8)
	later := time.Now().Add(time.Duration(1+d.rng.Intn(100)) * time.Second)
	for range n {
		p := tracked[d.rng.Intn(len(tracked))]
		fp := filepath.Join(d.dir, p)
		switch k := d.rng.Intn(16); k {
		case 0, 1, 2: // edit
			old, _ := os.ReadFile(fp)
			lines := strings.SplitAfter(string(old), "\n")
			i := d.rng.Intn(len(lines) + 1)
			ins := d.content()
			if d.rng.Intn(2) == 0 && i < len(lines) {
				lines = append(lines[:i], append([]string{ins}, lines[i+1:]...)...)
			} else {
				lines = append(lines[:i], append([]string{ins}, lines[i:]...)...)
			}
			os.WriteFile(fp, []byte(strings.Join(lines, "")), 0o644)
			log = append(log, "edit "+p)
		case 3: // touch only
			os.Chtimes(fp, later, later)
			log = append(log, "touch "+p)
		case 4: // delete
			os.Remove(fp)
			log = append(log, "rm "+p)
		case 5: // mode
			if fi, err := os.Lstat(fp); err == nil && fi.Mode().IsRegular() {
				os.Chmod(fp, fi.Mode()^0o100)
			}
			log = append(log, "chmod "+p)
		case 6: // file -> link
			os.Remove(fp)
			os.Symlink("target-"+filepath.Base(p), fp)
			log = append(log, "symlink "+p)
		case 7: // file -> directory
			os.Remove(fp)
			d.write(p+"/inner.txt", d.content())
			log = append(log, "f->dir "+p)
		case 8: // directory -> file
			if dir := filepath.Dir(p); dir != "." {
				os.RemoveAll(filepath.Join(d.dir, dir))
				d.write(dir, d.content())
				log = append(log, "dir->f "+dir)
			}
		case 9: // rename
			np := d.randPath()
			if _, err := os.Lstat(filepath.Join(d.dir, np)); err != nil {
				data, err := os.ReadFile(fp)
				if err == nil {
					os.Remove(fp)
					d.write(np, string(data))
					log = append(log, "mv "+p+" "+np)
				}
			}
		case 10: // stage something with git
			if _, err := tryGit(d.dir, "-c", "core.safecrlf=false", "add", "-A", "--", p); err == nil {
				log = append(log, "git add "+p)
			}
		case 11: // a new file, maybe ignored, maybe intended
			np := d.randPath()
			if _, err := os.Lstat(filepath.Join(d.dir, np)); err != nil {
				d.write(np, d.content())
				log = append(log, "new "+np)
				if d.rng.Intn(3) == 0 {
					if _, err := tryGit(d.dir, "add", "-N", "--", np); err == nil {
						log = append(log, "git add -N "+np)
					}
				}
			}
		case 12: // rewrite the same bytes with a new time
			if data, err := os.ReadFile(fp); err == nil {
				os.WriteFile(fp, data, 0o644)
				os.Chtimes(fp, later, later)
				log = append(log, "rewrite "+p)
			}
		case 14: // flags git's refresh honours
			flag := []string{"--assume-unchanged", "--skip-worktree"}[d.rng.Intn(2)]
			if _, err := tryGit(d.dir, "update-index", flag, "--", p); err == nil {
				log = append(log, "update-index "+flag+" "+p)
			}
		case 15: // intent to add an existing new file, then change it
			np := d.randPath()
			if _, err := os.Lstat(filepath.Join(d.dir, np)); err != nil {
				d.write(np, d.content())
				if _, err := tryGit(d.dir, "add", "-N", "--", np); err == nil {
					d.write(np, d.content())
					log = append(log, "git add -N + edit "+np)
				}
			}
		case 13: // remove from the index only
			if _, err := tryGit(d.dir, "rm", "-q", "--cached", "--", p); err == nil {
				log = append(log, "git rm --cached "+p)
			}
		}
	}
	return log
}

func runDifferential(t *testing.T, seed int64) {
	e := newEnv(t)
	d := &diffRepo{t: t, rng: rand.New(rand.NewSource(seed)), e: e, dir: e.dir, clk: time.Unix(1700000000, 0)}
	d.setup()
	changes := d.mutate()
	t.Logf("changes: %s", strings.Join(changes, "; "))
	defer func() {
		if t.Failed() {
			t.Logf("seed %d; changes: %s", seed, strings.Join(changes, "; "))
		}
	}()

	// status
	theirs := filepath.Join(e.root, "theirs")
	cloneDir(t, e.dir, theirs)
	sameLines(t, porcelain(e.status()), gitPorcelainExact(t, theirs))

	// diff, unstaged and staged, whole and with a pathspec
	specs := [][]string{nil}
	for _, p := range pick(d.rng, append(d.files(), strings.Split(strings.TrimRight(d.git(nil, "ls-files"), "\n"), "\n")...), 2) {
		segs := strings.Split(p, "/")
		specs = append(specs, []string{strings.Join(segs[:1+d.rng.Intn(len(segs))], "/")})
	}
	for _, staged := range []bool{false, true} {
		for _, spec := range specs {
			if !validSpec(spec) {
				continue
			}
			in := DiffInput{Staged: staged}
			args := []string{"-c", "core.quotePath=false", "-c", "core.safecrlf=false", "diff", "--name-status", "--no-renames"}
			if staged {
				args = append(args, "--cached")
			}
			if spec != nil {
				in.Pathspec = specOf(spec...)
				args = append(append(args, "--"), spec...)
			}
			got := diffOf(t, e, in)
			want := runGitStdout(t, theirs, args...)
			if g, w := nameStatus(got), gitNameStatus(want); strings.Join(g, "\n") != strings.Join(w, "\n") {
				t.Fatalf("diff staged=%v pathspec=%v:\n%s\ngit:\n%s", staged, spec, strings.Join(g, "\n"), strings.Join(w, "\n"))
			}
			if spec == nil {
				checkPatchApplies(t, theirs, got, staged)
			}
			if *diffText && !got.Truncated {
				gargs := []string{"-c", "core.safecrlf=false", "diff", "--no-color", "--no-ext-diff"}
				if staged {
					gargs = append(gargs, "--cached")
				}
				if spec != nil {
					gargs = append(append(gargs, "--"), spec...)
				}
				if g, w := patchText(got), runGitStdout(t, theirs, gargs...); g != w {
					t.Errorf("patch text (staged=%v, pathspec=%v) differs from git's:\n%s\ngit:\n%s", staged, spec, g, w)
				}
			}
		}
	}

	// stage and commit
	var stageSpec []string
	for _, p := range pick(d.rng, d.files(), 1+d.rng.Intn(4)) {
		segs := strings.Split(p, "/")
		stageSpec = append(stageSpec, strings.Join(segs[:1+d.rng.Intn(len(segs))], "/"))
	}
	stageSpec = dedupe(stageSpec)
	if !validSpec(stageSpec) {
		return
	}
	theirs2 := filepath.Join(e.root, "theirs2")
	cloneDir(t, e.dir, theirs2)
	_, gitErr := tryGit(theirs2, append([]string{"-c", "core.safecrlf=false", "add", "--"}, stageSpec...)...)
	rr := e.invoke(ActionStage, StageInput{Pathspec: specOf(stageSpec...)})
	if gitErr != nil {
		// git add refused the pathspec (an ignored path, a path beyond a link…)
		if rr.Status == "succeeded" && len(stageSpec) == 1 {
			t.Fatalf("git add %v failed but repo.stage succeeded: %+v", stageSpec, rr.Output)
		}
		return
	}
	if rr.Status != "succeeded" {
		msg := ""
		if rr.Error != nil {
			msg = rr.Error.Message
		}
		if strings.Contains(msg, "symbolic link") {
			return // sharedos never stages links; git does
		}
		t.Fatalf("repo.stage %v: %s %s (git add succeeded)", stageSpec, rr.Status, msg)
	}
	if got, want := runGitStdout(t, e.dir, "ls-files", "-s"), runGitStdout(t, theirs2, "ls-files", "-s"); got != want {
		t.Fatalf("after staging %v:\n%s\ngit add:\n%s", stageSpec, got, want)
	}
	sameLines(t, porcelain(e.status()), gitPorcelainExact(t, theirs2))
	cr := e.invoke(ActionCommit, CommitInput{Message: "ours"})
	if cr.Status == "succeeded" {
		if out, err := tryGit(e.dir, "fsck", "--strict", "--no-dangling"); err != nil {
			// git's own commit of the same index must fail fsck the same way (a link
			// named .gitattributes staged by git, say)
			runGit(t, theirs2, "-c", "core.safecrlf=false", "commit", "-q", "-m", "theirs")
			if _, err2 := tryGit(theirs2, "fsck", "--strict", "--no-dangling"); err2 == nil {
				t.Fatalf("git fsck --strict after our commit: %s", out)
			}
			return
		}
		if out := runGitStdout(t, e.dir, "diff", "--cached", "--name-only"); out != "" {
			t.Fatalf("git diff --cached after our commit: %q", out)
		}
		tree := strings.TrimSpace(runGitStdout(t, theirs2, "write-tree"))
		if got := strings.TrimSpace(runGitStdout(t, e.dir, "rev-parse", "HEAD^{tree}")); got != tree {
			t.Fatalf("commit tree %s, git write-tree %s", got, tree)
		}
		runGit(t, theirs2, "-c", "core.safecrlf=false", "commit", "-q", "-m", "theirs")
		sameLines(t, gitPorcelain(t, e.dir), gitPorcelain(t, theirs2))
		sameLines(t, porcelain(e.status()), gitPorcelainExact(t, theirs2))
	}

	// log
	lo := e.ok(ActionLog, LogInput{MaxCount: 100}).(LogOutput)
	var got []string
	for _, c := range lo.Commits {
		got = append(got, c.Hash+" "+strings.Join(c.Parents, " ")+" "+c.Author.Name+" "+c.Committer.Time)
	}
	var want []string
	for _, l := range strings.Split(strings.TrimRight(runGitStdout(t, e.dir, "log", "-n", "100", "--format=%H %P %an %cI"), "\n"), "\n") {
		want = append(want, strings.Join(strings.Fields(l), " "))
	}
	for i := range got {
		got[i] = strings.Join(strings.Fields(got[i]), " ")
	}
	sameLines(t, got, want)
}

func validSpec(spec []string) bool {
	for _, p := range spec {
		if checkPathspec(specOf(p)) != nil {
			return false
		}
	}
	return true
}

func dedupe(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, p := range s {
		if i == 0 || p != s[i-1] {
			out = append(out, p)
		}
	}
	return out
}

// nameStatus renders a diff like git diff --name-status --no-renames.
func nameStatus(d DiffOutput) []string {
	var out []string
	for _, f := range d.Files {
		p := strings.Join(f.Path, "/")
		if f.Status == "R" {
			out = append(out, "D\t"+strings.Join(f.OldPath, "/"), "A\t"+p)
			continue
		}
		out = append(out, f.Status+"\t"+p)
	}
	sort.Strings(out)
	return out
}

func gitNameStatus(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l == "" {
			continue
		}
		st, p, _ := strings.Cut(l, "\t")
		out = append(out, st+"\t"+unquoteStatusPaths(p))
	}
	sort.Strings(out)
	return out
}

// checkPatchApplies applies the concatenated patches of d with git apply to the side
// they were made from (HEAD for a staged diff, the index otherwise) in a scratch index,
// which must then hold the other side exactly. Binary patches cannot be applied (they
// carry no data), so a diff holding one is only checked for the other files.
func checkPatchApplies(t *testing.T, dir string, d DiffOutput, staged bool) {
	t.Helper()
	if d.Truncated {
		return
	}
	var patch strings.Builder
	var binary []string
	for _, f := range d.Files {
		if f.Binary {
			binary = append(binary, strings.Join(f.Path, "/"))
			if f.OldPath != nil {
				binary = append(binary, strings.Join(f.OldPath, "/"))
			}
			continue
		}
		patch.WriteString(f.Patch)
	}
	scratch := filepath.Join(t.TempDir(), "index")
	env := []string{"GIT_INDEX_FILE=" + scratch}
	target := filepath.Join(t.TempDir(), "target")
	envT := []string{"GIT_INDEX_FILE=" + target}
	run := func(env []string, stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command(gitPath, args...)
		cmd.Dir = dir
		cmd.Env = append(gitEnv(), env...)
		cmd.Stdin = strings.NewReader(stdin)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v\n%s\npatch:\n%s", strings.Join(args, " "), err, stderr.String(), patch.String())
		}
		return string(out)
	}
	idxData, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		idxData = nil
	}
	if staged {
		if _, err := tryGit(dir, "rev-parse", "-q", "--verify", "HEAD"); err != nil {
			run(env, "", "read-tree", "--empty")
		} else {
			run(env, "", "read-tree", "HEAD")
		}
		os.WriteFile(target, idxData, 0o644)
	} else {
		os.WriteFile(scratch, idxData, 0o644)
		os.WriteFile(target, idxData, 0o644)
		// the other side as git's own diff describes it
		if gp := run(nil, "", "-c", "core.safecrlf=false", "diff", "--binary", "--no-renames"); gp != "" {
			run(envT, gp, "apply", "--cached", "--whitespace=nowarn", "-")
		}
	}
	// binary files are not compared (their patches carry no data)
	for _, env := range [][]string{env, envT} {
		for _, p := range binary {
			tryGitEnv(dir, env, "rm", "-q", "--cached", "--ignore-unmatch", "--", p)
		}
	}
	if patch.Len() > 0 {
		run(env, patch.String(), "apply", "--cached", "--whitespace=nowarn", "-")
	}
	// write-tree: what the index holds for a commit (intentions to add are not in it)
	strip := func(env []string) string {
		tree := strings.TrimSpace(run(env, "", "write-tree"))
		return run(env, "", "ls-tree", "-r", tree)
	}
	if got, want := strip(env), strip(envT); got != want {
		t.Fatalf("git apply of our patch (staged=%v) gives:\n%s\nwant:\n%s\npatch:\n%q", staged, got, want, patch.String())
	}
}

func tryGitEnv(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command(gitPath, args...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// gitPorcelainExact is git status in porcelain notation with only exact renames kept:
// sharedos pairs identical contents only (git's similarity-based detection is not
// attempted), so a rename git found by similarity is split back into a deletion and an
// addition.
func gitPorcelainExact(t *testing.T, dir string) []string {
	t.Helper()
	lines := gitPorcelain(t, dir)
	inexact := func(args ...string) map[string]bool { // "old\x00new"
		m := map[string]bool{}
		out := runGitStdout(t, dir, append([]string{"-c", "core.quotePath=false", "-c", "core.safecrlf=false", "diff", "-M", "--name-status", "-z"}, args...)...)
		f := strings.Split(out, "\x00")
		for i := 0; i+1 < len(f); {
			st := f[i]
			if (st[0] == 'R' || st[0] == 'C') && i+2 < len(f) {
				if st != "R100" {
					m[f[i+1]+"\x00"+f[i+2]] = true
				}
				i += 3
				continue
			}
			i += 2 // a status and one path
		}
		return m
	}
	staged, unstaged := inexact("--cached"), inexact()
	var res []string
	for _, l := range lines {
		if old, nw, ok := strings.Cut(l[3:], " -> "); ok {
			if l[0] == 'R' && staged[old+"\x00"+nw] {
				res = append(res, "D"+l[1:2]+" "+old, "A"+l[1:2]+" "+nw)
				continue
			}
			if l[1] == 'R' && unstaged[old+"\x00"+nw] {
				res = append(res, l[:1]+"D "+old, l[:1]+"A "+nw)
				continue
			}
		}
		res = append(res, l)
	}
	// git orders entries by path (a rename by its new path), untracked ones last
	key := func(l string) string {
		if _, nw, ok := strings.Cut(l[3:], " -> "); ok {
			return nw
		}
		return l[3:]
	}
	sort.SliceStable(res, func(i, j int) bool {
		ui, uj := strings.HasPrefix(res[i], "??"), strings.HasPrefix(res[j], "??")
		if ui != uj {
			return uj
		}
		return key(res[i]) < key(res[j])
	})
	return res
}
