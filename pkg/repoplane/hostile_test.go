package repoplane

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// hostileEnv is a repository with one commit, staged and unstaged changes, plus an
// "outside" directory beside the provider root holding a marker-writing program and a
// complete second repository (a target for redirections).
type hostileEnv struct {
	*testEnv
	outside string // not beneath the provider root
	marker  string // created by evil.sh if anything ever runs it
	evil    string // the program
	other   string // a repository outside the root
}

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	e := newEnv(t)
	h := &hostileEnv{testEnv: e, outside: t.TempDir()}
	h.marker = filepath.Join(h.outside, "MARKER")
	h.evil = filepath.Join(h.outside, "evil.sh")
	writeFile(t, h.evil, "#!/bin/sh\necho ran \"$@\" >> '"+h.marker+"'\ncat\n")
	os.Chmod(h.evil, 0o755)
	h.other = filepath.Join(h.outside, "other")
	initRepo(t, h.other)
	writeFile(t, filepath.Join(h.other, "secret.txt"), "outside secret\n")
	commitAll(t, h.other, "outside")
	e.write("a.txt", "a\n")
	e.write("b.txt", "b\n")
	commitAll(t, e.dir, "init")
	e.write("a.txt", "a changed\n")
	e.write("c.txt", "c\n")
	return h
}

// runAll runs every tool once (stage and commit included) and returns the results.
func (h *hostileEnv) runAll() map[string]kernel.ResourceResult {
	h.t.Helper()
	return map[string]kernel.ResourceResult{
		"status":       h.invoke(ActionStatus, nil),
		"diff":         h.invoke(ActionDiff, DiffInput{}),
		"diff-staged":  h.invoke(ActionDiff, DiffInput{Staged: true}),
		"log":          h.invoke(ActionLog, nil),
		"stage":        h.invoke(ActionStage, StageInput{Pathspec: specOf("a.txt", "c.txt")}),
		"diff-staged2": h.invoke(ActionDiff, DiffInput{Staged: true}),
		"commit":       h.invoke(ActionCommit, CommitInput{Message: "hostile"}),
	}
}

// snapshot lists every file beneath dir with its size and modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		lines = append(lines, fmt.Sprintf("%s %v %d %d", p, fi.Mode(), fi.Size(), fi.ModTime().UnixNano()))
		return nil
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func (h *hostileEnv) gitConfig(text string) {
	h.t.Helper()
	f, err := os.OpenFile(filepath.Join(h.dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	f.WriteString(strings.ReplaceAll(strings.ReplaceAll(text, "EVIL", h.evil), "OUTSIDE", h.outside))
}

// TestHostileConfigurationNeverRuns: every way a repository can make git run a
// program is configured; all five tools still work and the marker never appears.
func TestHostileConfigurationNeverRuns(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("shell scripts")
	}
	cases := []struct {
		name  string
		setup func(h *hostileEnv)
	}{
		{"hooks in .git/hooks", func(h *hostileEnv) {
			for _, hook := range []string{"pre-commit", "post-commit", "commit-msg", "prepare-commit-msg",
				"reference-transaction", "post-index-change", "pre-auto-gc", "post-checkout", "fsmonitor-watchman"} {
				writeFile(h.t, filepath.Join(h.dir, ".git", "hooks", hook), "#!/bin/sh\nexec '"+h.evil+"' "+hook+"\n")
				os.Chmod(filepath.Join(h.dir, ".git", "hooks", hook), 0o755)
			}
		}},
		{"core.hooksPath", func(h *hostileEnv) {
			for _, hook := range []string{"pre-commit", "post-commit", "commit-msg", "post-index-change"} {
				writeFile(h.t, filepath.Join(h.outside, "hooks", hook), "#!/bin/sh\nexec '"+h.evil+"' "+hook+"\n")
				os.Chmod(filepath.Join(h.outside, "hooks", hook), 0o755)
			}
			h.gitConfig("[core]\n\thooksPath = OUTSIDE/hooks\n")
		}},
		{"clean filter", func(h *hostileEnv) {
			h.write(".gitattributes", "* filter=evil\n")
			h.gitConfig("[filter \"evil\"]\n\tclean = EVIL clean\n\trequired = true\n")
		}},
		{"smudge and process filters", func(h *hostileEnv) {
			h.write(".gitattributes", "*.txt filter=evil\n")
			h.gitConfig("[filter \"evil\"]\n\tsmudge = EVIL smudge\n\tprocess = EVIL process\n")
		}},
		{"diff textconv", func(h *hostileEnv) {
			h.write(".gitattributes", "*.txt diff=evil\n")
			h.gitConfig("[diff \"evil\"]\n\ttextconv = EVIL textconv\n\tcommand = EVIL command\n")
		}},
		{"external diff", func(h *hostileEnv) {
			h.gitConfig("[diff]\n\texternal = EVIL\n")
		}},
		{"core.fsmonitor", func(h *hostileEnv) {
			h.gitConfig("[core]\n\tfsmonitor = EVIL\n\tuntrackedCache = true\n")
		}},
		{"credential helper", func(h *hostileEnv) {
			h.gitConfig("[credential]\n\thelper = !EVIL\n[remote \"origin\"]\n\turl = https://example.invalid/x\n")
		}},
		{"pager, editor, ssh, askpass, signing", func(h *hostileEnv) {
			h.gitConfig("[core]\n\tpager = EVIL\n\teditor = EVIL\n\tsshCommand = EVIL\n\taskPass = EVIL\n" +
				"[sequence]\n\teditor = EVIL\n[gpg]\n\tprogram = EVIL\n[commit]\n\tgpgSign = true\n" +
				"[gc]\n\tauto = 1\n[alias]\n\tstatus = !EVIL\n")
		}},
		{"global and system configuration", func(h *hostileEnv) {
			home := os.Getenv("HOME")
			evilCfg := fmt.Sprintf("[core]\n\thooksPath = %s/hooks\n\tfsmonitor = %s\n\texcludesFile = %s/ign\n"+
				"[user]\n\tname = Evil Global\n\temail = evil@global\n[include]\n\tpath = %s/more\n"+
				"[filter \"g\"]\n\tclean = %s\n", h.outside, h.evil, h.outside, h.outside, h.evil)
			writeFile(h.t, filepath.Join(home, ".gitconfig"), evilCfg)
			writeFile(h.t, filepath.Join(home, ".config", "git", "config"), evilCfg)
			writeFile(h.t, filepath.Join(h.outside, "global"), evilCfg)
			writeFile(h.t, filepath.Join(h.outside, "ign"), "*.txt\n")
			writeFile(h.t, filepath.Join(home, ".config", "git", "attributes"), "* filter=g\n")
			h.t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(h.outside, "global"))
			h.t.Setenv("GIT_CONFIG_SYSTEM", filepath.Join(h.outside, "global"))
			h.t.Setenv("GIT_CONFIG_NOSYSTEM", "")
			h.t.Setenv("GIT_DIR", filepath.Join(h.other, ".git"))
			h.t.Setenv("GIT_WORK_TREE", h.other)
			h.t.Setenv("GIT_AUTHOR_NAME", "Evil Env")
			h.t.Setenv("GIT_EXTERNAL_DIFF", h.evil)
			h.t.Setenv("GIT_CONFIG_COUNT", "1")
			h.t.Setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
			h.t.Setenv("GIT_CONFIG_VALUE_0", h.outside)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHostileEnv(t)
			c.setup(h)
			before := snapshot(t, h.outside)
			res := h.runAll()
			// a path with a filter attribute is never staged: the filter's clean
			// command would have to run (issue 26), so stage is refused by name and
			// there is nothing to commit
			filtered := strings.Contains(c.name, "filter")
			for name, rr := range res {
				switch {
				case filtered && name == "stage":
					expectFail(t, rr, kernel.StatusFailed, CodeFilterRequired)
				case filtered && name == "commit":
					expectFail(t, rr, kernel.StatusFailed, CodeNothingToCommit)
				case rr.Status != kernel.StatusSucceeded:
					t.Fatalf("%s: %s %+v", name, rr.Status, rr.Error)
				}
			}
			mustExist(t, h.marker, false)
			if after := snapshot(t, h.outside); after != before {
				t.Fatalf("outside changed:\n%s\n---\n%s", before, after)
			}
			if filtered {
				if st := res["status"].Output.(StatusOutput); !containsLine(porcelain(st), ".M a.txt") {
					t.Fatalf("status: %v", porcelain(st))
				}
				return
			}
			// content was taken byte for byte (no clean filter), identity is ours
			c := res["commit"].Output.(CommitOutput)
			if c.Author.Name != "coder" {
				t.Fatalf("author %+v", c.Author)
			}
			st := res["status"].Output.(StatusOutput)
			if got := porcelain(st); !containsLine(got, "?? c.txt") || !containsLine(got, ".M a.txt") {
				t.Fatalf("status read the wrong repository or applied global excludes: %v", got)
			}
			if haveGit() {
				if blob := runGit(t, h.dir, "-c", "core.hooksPath=/dev/null", "cat-file", "-p", "HEAD:a.txt"); blob != "a changed\n" {
					t.Fatalf("staged content %q", blob)
				}
			}
			mustExist(t, h.marker, false)
		})
	}
}

func containsLine(lines []string, l string) bool {
	for _, x := range lines {
		if x == l {
			return true
		}
	}
	return false
}

// TestHostileLayoutRefused: every layout that would make git read or write outside the
// repository is refused before anything is read, for all five tools.
func TestHostileLayoutRefused(t *testing.T) {
	cases := []struct {
		name  string
		setup func(h *hostileEnv)
		code  kernel.ErrorCode
		only  []string // the tools that must refuse (default all); the others never read the planted data
	}{
		{".git is a gitdir file", func(h *hostileEnv) {
			os.RemoveAll(filepath.Join(h.dir, ".git"))
			writeFile(h.t, filepath.Join(h.dir, ".git"), "gitdir: "+filepath.Join(h.other, ".git")+"\n")
		}, CodeNotPermitted, nil},
		{".git is a symbolic link", func(h *hostileEnv) {
			os.RemoveAll(filepath.Join(h.dir, ".git"))
			symlink(h.t, filepath.Join(h.other, ".git"), filepath.Join(h.dir, ".git"))
		}, CodeNotPermitted, nil},
		{"objects/info/alternates", func(h *hostileEnv) {
			writeFile(h.t, filepath.Join(h.dir, ".git", "objects", "info", "alternates"), filepath.Join(h.other, ".git", "objects")+"\n")
		}, CodeNotPermitted, nil},
		{"commondir", func(h *hostileEnv) {
			writeFile(h.t, filepath.Join(h.dir, ".git", "commondir"), filepath.Join(h.other, ".git")+"\n")
		}, CodeNotPermitted, nil},
		{"core.worktree", func(h *hostileEnv) { h.gitConfig("[core]\n\tworktree = OUTSIDE/other\n") }, CodeNotPermitted, nil},
		{"include.path", func(h *hostileEnv) {
			writeFile(h.t, filepath.Join(h.outside, "inc"), "[core]\n\tworktree = "+h.other+"\n")
			h.gitConfig("[include]\n\tpath = OUTSIDE/inc\n")
		}, CodeNotPermitted, nil},
		{"core.worktree in config.worktree", func(h *hostileEnv) {
			h.gitConfig("[extensions]\n\tworktreeConfig = true\n")
			writeFile(h.t, filepath.Join(h.dir, ".git", "config.worktree"), "[core]\n\tworktree = "+h.other+"\n")
		}, CodeNotPermitted, nil},
		{"includeIf", func(h *hostileEnv) {
			h.gitConfig("[includeIf \"gitdir:/\"]\n\tpath = OUTSIDE/inc\n")
		}, CodeNotPermitted, nil},
		{"objects directory is a symbolic link", func(h *hostileEnv) {
			os.RemoveAll(filepath.Join(h.dir, ".git", "objects"))
			symlink(h.t, filepath.Join(h.other, ".git", "objects"), filepath.Join(h.dir, ".git", "objects"))
		}, CodeNotPermitted, nil},
		{"refs directory is a symbolic link", func(h *hostileEnv) {
			os.RemoveAll(filepath.Join(h.dir, ".git", "refs"))
			symlink(h.t, filepath.Join(h.other, ".git", "refs"), filepath.Join(h.dir, ".git", "refs"))
		}, CodeNotPermitted, nil},
		{"HEAD points outside refs/heads", func(h *hostileEnv) {
			writeFile(h.t, filepath.Join(h.dir, ".git", "HEAD"), "ref: refs/heads/../../../../other/.git/HEAD\n")
		}, CodeNotPermitted, nil},
		{"index entry escapes with ..", func(h *hostileEnv) { h.plantIndexEntry("../outside.txt") }, CodeNotPermitted, readsIndex},
		{"index entry under .git", func(h *hostileEnv) { h.plantIndexEntry(".git/hooks/pre-commit") }, CodeNotPermitted, readsIndex},
		{"index entry under .GIT (case)", func(h *hostileEnv) { h.plantIndexEntry("sub/.GIT/config") }, CodeNotPermitted, readsIndex},
		{"index entry with absolute path", func(h *hostileEnv) { h.plantIndexEntry("/etc/passwd") }, CodeNotPermitted, readsIndex},
		{"tree entry named .git", func(h *hostileEnv) { h.plantTreeEntry(".git") }, CodeNotPermitted, []string{"status", "diff-staged"}},
		{"tree entry named ..", func(h *hostileEnv) { h.plantTreeEntry("..") }, CodeNotPermitted, []string{"status", "diff-staged"}},
		{"sha256 object format", func(h *hostileEnv) {
			h.gitConfig("[core]\n\trepositoryformatversion = 1\n[extensions]\n\tobjectformat = sha256\n")
		}, CodeNotPermitted, nil},
		{"bare repository", func(h *hostileEnv) { h.gitConfig("[core]\n\tbare = true\n") }, CodeNotARepository, nil},
	}
	if len(cases) < 15 {
		t.Fatal("the hostile table must keep at least 15 layouts")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHostileEnv(t)
			c.setup(h)
			before := snapshot(t, h.outside)
			for name, rr := range h.runAll() {
				if c.only != nil && !containsLine(c.only, name) {
					continue
				}
				status := kernel.StatusDenied
				if c.code == CodeNotARepository {
					status = kernel.StatusFailed
				}
				if rr.Status != status || rr.Error.Code != c.code {
					t.Fatalf("%s: %s %+v, want %s", name, rr.Status, rr.Error, c.code)
				}
				if strings.Contains(rr.Error.Message, "outside secret") {
					t.Fatal("outside content leaked")
				}
			}
			if after := snapshot(t, h.outside); after != before {
				t.Fatalf("outside changed:\n%s\n---\n%s", before, after)
			}
			mustExist(t, filepath.Join(h.dir, ".git", "index.lock"), false)
		})
	}
}

var readsIndex = []string{"status", "diff", "diff-staged", "stage", "diff-staged2", "commit"}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skip("symbolic links unavailable:", err)
	}
}

// plantIndexEntry rewrites the index with one extra entry named name.
func (h *hostileEnv) plantIndexEntry(name string) {
	h.t.Helper()
	p := filepath.Join(h.dir, ".git", "index")
	data, err := os.ReadFile(p)
	if err != nil {
		h.t.Fatal(err)
	}
	idx, err := decodeIndex(data)
	if err != nil {
		h.t.Fatal(err)
	}
	bad := *idx.entries[0]
	bad.name = name
	idx.entries = append(idx.entries, &bad)
	idx.tree = nil
	if err := os.WriteFile(p, encodeIndex(idx), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// plantTreeEntry makes HEAD a commit whose tree has an entry called name.
func (h *hostileEnv) plantTreeEntry(name string) {
	h.t.Helper()
	r, oe := h.p.open([]string{"repo"})
	if oe != nil {
		h.t.Fatal(oe)
	}
	defer r.close()
	blob, _ := r.writeObject(0x3, []byte("x"))
	tree, _ := r.writeObject(0x2, append([]byte("100644 "+name+"\x00"), blob[:]...))
	commit, _ := r.writeObject(0x1, []byte("tree "+tree.String()+"\nauthor a <a> 1 +0000\ncommitter a <a> 1 +0000\n\nevil\n"))
	writeFile(h.t, filepath.Join(h.dir, ".git", "refs", "heads", "main"), commit.String()+"\n")
}

// TestRefusedPaths: the repository path and pathspecs never reach through links or .git.
func TestRefusedPaths(t *testing.T) {
	h := newHostileEnv(t)
	os.MkdirAll(filepath.Join(h.dir, "realdir"), 0o755)
	h.write("realdir/f.txt", "f\n")
	symlink(t, "realdir", filepath.Join(h.dir, "linkdir"))
	symlink(t, "a.txt", filepath.Join(h.dir, "link.txt"))
	symlink(t, h.other, filepath.Join(h.root, "linked-repo"))
	os.MkdirAll(filepath.Join(h.root, "plain", "dir"), 0o755)
	before := snapshot(t, h.dir+"/.git")

	for _, c := range []struct {
		name   string
		path   []string
		action string
		input  any
		status kernel.ToolStatus
		code   kernel.ErrorCode
	}{
		{"repository through a link", []string{"linked-repo"}, ActionStatus, nil, kernel.StatusDenied, CodePathEscape},
		{"repository path naming .git", []string{"repo", ".git"}, ActionStatus, nil, kernel.StatusDenied, CodeNotPermitted},
		{"repository path naming .Git", []string{"repo", ".Git"}, ActionLog, nil, kernel.StatusDenied, CodeNotPermitted},
		{"missing repository", []string{"missing"}, ActionStatus, nil, kernel.StatusFailed, CodeNotFound},
		{"directory without .git", []string{"plain"}, ActionStatus, nil, kernel.StatusFailed, CodeNotARepository},
		{"subdirectory of a repository", []string{"repo", "realdir"}, ActionStatus, nil, kernel.StatusFailed, CodeNotARepository},
		{"invalid path segment", []string{"repo", ".."}, ActionStatus, nil, kernel.StatusFailed, CodeInvalidInput},
		{"stage a symbolic link", []string{"repo"}, ActionStage, StageInput{Pathspec: specOf("link.txt")}, kernel.StatusDenied, CodeNotPermitted},
		{"stage through a linked directory", []string{"repo"}, ActionStage, StageInput{Pathspec: specOf("linkdir/f.txt")}, kernel.StatusDenied, CodeNotPermitted},
		{"stage a directory holding a link", []string{"repo"}, ActionStage, StageInput{Pathspec: specOf("a.txt", "realdir", "linkdir")}, kernel.StatusDenied, CodeNotPermitted},
		{"stage under .git", []string{"repo"}, ActionStage, StageInput{Pathspec: specOf(".git/config")}, kernel.StatusDenied, CodeNotPermitted},
		{"stage .git itself", []string{"repo"}, ActionStage, StageInput{Pathspec: specOf(".git")}, kernel.StatusDenied, CodeNotPermitted},
		{"stage under .GIT", []string{"repo"}, ActionStage, StageInput{Pathspec: specOf("x/.GIT/hooks")}, kernel.StatusDenied, CodeNotPermitted},
		{"stage under git~1", []string{"repo"}, ActionStage, StageInput{Pathspec: specOf("GIT~1/config")}, kernel.StatusDenied, CodeNotPermitted},
		{"diff under .git", []string{"repo"}, ActionDiff, DiffInput{Pathspec: specOf(".git")}, kernel.StatusDenied, CodeNotPermitted},
	} {
		t.Run(c.name, func(t *testing.T) {
			expectFail(t, h.invokeAt(c.path, c.action, c.input), c.status, c.code)
		})
	}
	// an untracked link inside a staged directory is refused, not followed; nothing was written
	if after := snapshot(t, h.dir+"/.git"); after != before {
		t.Fatalf(".git changed by refused operations")
	}
	// unstaged link targets are shown as links (never read through)
	st := h.status()
	if got := porcelain(st); !containsLine(got, "?? link.txt") || !containsLine(got, "?? linkdir") {
		t.Fatalf("status: %v", got)
	}
}

func TestProviderInputValidation(t *testing.T) {
	e := newEnv(t)
	e.write("f", "1")
	commitAll(t, e.dir, "init")
	raw := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	// JSON-shaped inputs (as a generic host would pass them) are decoded strictly
	if rr := e.invoke(ActionDiff, raw(`{"staged":true,"pathspec":[["f"]]}`)); rr.Status != kernel.StatusSucceeded {
		t.Fatalf("generic diff input: %+v", rr.Error)
	}
	if rr := e.invoke(ActionLog, raw(`{"maxCount":2}`)); rr.Status != kernel.StatusSucceeded {
		t.Fatalf("generic log input: %+v", rr.Error)
	}
	for _, c := range []struct {
		action string
		input  any
	}{
		{ActionStatus, raw(`{"x":1}`)},
		{ActionDiff, raw(`{"staged":"yes"}`)},
		{ActionDiff, raw(`{"path":["x"]}`)},
		{ActionDiff, nil},
		{ActionLog, raw(`{"maxCount":0}`)},
		{ActionLog, raw(`{"count":1}`)},
		{ActionStage, raw(`{"pathspec":[]}`)},
		{ActionStage, StageInput{}},
		{ActionStage, StageInput{Pathspec: [][]string{{"a", ".."}}}},
		{ActionCommit, CommitInput{Message: "two\nlines"}},
		{ActionCommit, raw(`{"message":""}`)},
		{ActionCommit, LogInput{MaxCount: 3}},
		{ActionCommit, DiffInput{Staged: true}},
		{ActionLog, &DiffInput{}},
		{ActionStage, CommitInput{Message: "m"}},
		{"push", nil},
	} {
		rr := e.invoke(c.action, c.input)
		code := CodeInvalidInput
		if c.action == "push" {
			code = CodeUnsupportedAction
		}
		expectFail(t, rr, kernel.StatusFailed, code)
	}
	rr, _ := e.p.Invoke(t.Context(), kernel.ResourceOperation{OperationID: "x", Resource: kernel.ResourceRef{Namespace: "files"}, Action: ActionStatus})
	expectFail(t, rr, kernel.StatusFailed, CodeInvalidInput)
	// a cancelled context runs nothing
	ctx, cancel := contextWithCancel(t)
	cancel()
	if _, err := e.p.Invoke(ctx, kernel.ResourceOperation{OperationID: "x", Resource: kernel.ResourceRef{Namespace: "repo", Path: []string{"repo"}}, Action: ActionStatus}); err == nil {
		t.Fatal("cancelled context ignored")
	}
	if _, err := NewProvider("", ProviderOptions{}); err == nil {
		t.Fatal("empty root accepted")
	}
	if p, err := NewProvider(filepath.Join(e.root, "does-not-exist-yet"), ProviderOptions{}); err != nil || p.Namespace() != "repo" {
		t.Fatal("NewProvider must not touch the file system")
	}
}
