package repoplane

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// isolate points HOME and XDG_CONFIG_HOME at empty temporary directories, so neither
// the code under test nor a git binary run by a test can see the real user's files.
func isolate(t *testing.T) string {
	t.Helper()
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	return home
}

var gitPath, _ = exec.LookPath("git")

func haveGit() bool { return gitPath != "" }

func needGit(t *testing.T) {
	t.Helper()
	if !haveGit() {
		t.Skip("git binary not available")
	}
}

// gitEnv is a minimal environment for the git binary in tests: no system or global
// configuration and a fixed identity.
func gitEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_AUTHOR_NAME=Fixture", "GIT_AUTHOR_EMAIL=fixture@example.invalid",
		"GIT_COMMITTER_NAME=Fixture", "GIT_COMMITTER_EMAIL=fixture@example.invalid", "GIT_TERMINAL_PROMPT=0",
		"LC_ALL=C"}
}

// runGit runs the git binary in dir and returns its output; it fails the test on error.
func runGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := tryGit(dir, args...)
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// runGitStdout is runGit keeping only standard output (git's warnings go elsewhere).
func runGitStdout(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(gitPath, args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

func tryGit(dir string, args ...string) (string, error) {
	cmd := exec.Command(gitPath, args...)
	cmd.Dir = dir
	cmd.Env = gitEnv()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// initRepo creates an empty repository (branch main) at dir, with git when available.
func initRepo(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if haveGit() {
		runGit(t, dir, "init", "-q", "-b", "main")
		return
	}
	_, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")}})
	if err != nil {
		t.Fatal(err)
	}
}

var fixtureClock = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// commitAll stages everything (git add -A) and commits it, with git when available and
// go-git otherwise.
func commitAll(t *testing.T, dir, msg string) {
	t.Helper()
	if haveGit() {
		runGit(t, dir, "add", "-A")
		runGit(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
		return
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	fixtureClock = fixtureClock.Add(time.Minute)
	sig := &object.Signature{Name: "Fixture", Email: "fixture@example.invalid", When: fixtureClock}
	if _, err := w.Commit(msg, &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true}); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustExist(t *testing.T, path string, want bool) {
	t.Helper()
	_, err := os.Lstat(path)
	if got := err == nil; got != want {
		t.Fatalf("%s exists = %v, want %v", path, got, want)
	}
}

// testEnv is a provider over a temporary root holding one repository, "repo".
type testEnv struct {
	t    *testing.T
	root string
	dir  string // the repository's top directory
	p    *Provider
	actx kernel.AccessContext
	now  time.Time
}

func newEnv(t *testing.T) *testEnv {
	t.Helper()
	isolate(t)
	root := t.TempDir()
	e := &testEnv{t: t, root: root, dir: filepath.Join(root, "repo"), now: time.Date(2025, 3, 4, 5, 6, 7, 0, time.FixedZone("", 3600))}
	initRepo(t, e.dir)
	e.actx = kernel.AccessContext{World: "world-1", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "coder"},
		Authority: kernel.Address{Kind: kernel.KindHuman, ID: "alice"}, Owner: kernel.Address{Kind: kernel.KindHuman, ID: "alice"},
		Purpose: "test", TraceID: "trace-1", EnabledToolNamespaces: []string{"repo"}, Now: "2025-03-04T04:06:07.000Z"}
	e.setProvider(ProviderOptions{})
	return e
}

func (e *testEnv) setProvider(o ProviderOptions) {
	e.t.Helper()
	if o.Now == nil {
		o.Now = func() time.Time { e.now = e.now.Add(time.Second); return e.now }
	}
	p, err := NewProvider(e.root, o)
	if err != nil {
		e.t.Fatal(err)
	}
	e.p = p
}

func (e *testEnv) write(rel, content string) {
	e.t.Helper()
	writeFile(e.t, filepath.Join(e.dir, rel), content)
}

func (e *testEnv) invoke(action string, input any) kernel.ResourceResult {
	e.t.Helper()
	return e.invokeAt([]string{"repo"}, action, input)
}

func (e *testEnv) invokeAt(path []string, action string, input any) kernel.ResourceResult {
	e.t.Helper()
	rr, err := e.p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "op-1", Context: e.actx,
		Resource: kernel.ResourceRef{Namespace: Namespace, Path: path, Owner: &e.actx.Owner}, Action: action, Input: input})
	if err != nil {
		e.t.Fatalf("%s: unexpected Go error %v", action, err)
	}
	if rr.OperationID != "op-1" {
		e.t.Fatalf("operationId not echoed: %q", rr.OperationID)
	}
	if _, err := kernel.ParseTimestamp(rr.CompletedAt); err != nil {
		e.t.Fatalf("completedAt %q: %v", rr.CompletedAt, err)
	}
	if _, err := json.Marshal(rr); err != nil {
		e.t.Fatalf("result is not JSON: %v", err)
	}
	return rr
}

// ok runs an action that must succeed and returns its output.
func (e *testEnv) ok(action string, input any) any {
	e.t.Helper()
	rr := e.invoke(action, input)
	if rr.Status != kernel.StatusSucceeded {
		e.t.Fatalf("%s: %s %s: %s", action, rr.Status, rr.Error.Code, rr.Error.Message)
	}
	return rr.Output
}

// fail runs an action that must fail with code (and status) and returns the error.
func (e *testEnv) fail(action string, input any, status kernel.ToolStatus, code kernel.ErrorCode) *kernel.ProtocolError {
	e.t.Helper()
	return expectFail(e.t, e.invoke(action, input), status, code)
}

func expectFail(t *testing.T, rr kernel.ResourceResult, status kernel.ToolStatus, code kernel.ErrorCode) *kernel.ProtocolError {
	t.Helper()
	if rr.Status != status || rr.Error == nil || rr.Error.Code != code {
		msg := ""
		if rr.Error != nil {
			msg = string(rr.Error.Code) + ": " + rr.Error.Message
		}
		t.Fatalf("got %s (%s), want %s %s", rr.Status, msg, status, code)
	}
	if rr.Error.Message == "" || rr.Error.Retryable == nil {
		t.Fatalf("error lacks message or retryable: %+v", rr.Error)
	}
	if *rr.Error.Retryable != (code == CodeRepoBusy) {
		t.Fatalf("retryable = %v for %s", *rr.Error.Retryable, code)
	}
	return rr.Error
}

func (e *testEnv) status() StatusOutput { e.t.Helper(); return e.ok(ActionStatus, nil).(StatusOutput) }

func (e *testEnv) stage(paths ...string) StageOutput {
	e.t.Helper()
	return e.ok(ActionStage, StageInput{Pathspec: specOf(paths...)}).(StageOutput)
}

func (e *testEnv) commit(msg string) CommitOutput {
	e.t.Helper()
	return e.ok(ActionCommit, CommitInput{Message: msg}).(CommitOutput)
}

func specOf(paths ...string) [][]string {
	out := make([][]string, len(paths))
	for i, p := range paths {
		out[i] = strings.Split(p, "/")
	}
	return out
}

// porcelain renders status entries like `git status --porcelain=v1 -uall` lines
// ("XY path" with "." for unchanged, renames as "old -> new").
func porcelain(s StatusOutput) []string {
	var out []string
	for _, e := range s.Entries {
		p := strings.Join(e.Path, "/")
		if e.OldPath != nil {
			p = strings.Join(e.OldPath, "/") + " -> " + p
		}
		out = append(out, e.Staging+e.Worktree+" "+p)
	}
	return out
}

// gitPorcelain is git's own status in the same notation.
func gitPorcelain(t *testing.T, dir string) []string {
	t.Helper()
	out := runGitStdout(t, dir, "-c", "core.quotePath=false", "status", "--porcelain=v1", "-uall")
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l == "" {
			continue
		}
		xy := strings.ReplaceAll(l[:2], " ", ".")
		lines = append(lines, xy+" "+unquoteStatusPaths(l[3:]))
	}
	return lines
}

func sameLines(t *testing.T, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}

// unquoteStatusPaths undoes git's C-style quoting of the paths of one porcelain line
// ("path" or "old -> new", each side quoted when it holds unusual bytes).
func unquoteStatusPaths(s string) string {
	var parts []string
	for s != "" {
		if s[0] == '"' {
			end := 1
			for end < len(s) && s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			q, err := strconv.Unquote(s[:min(end+1, len(s))])
			if err != nil {
				q = s[:min(end+1, len(s))]
			}
			parts = append(parts, q)
			s = strings.TrimPrefix(s[min(end+1, len(s)):], " -> ")
			continue
		}
		if i := strings.Index(s, " -> "); i >= 0 && !strings.HasPrefix(s, "\"") {
			parts = append(parts, s[:i])
			s = s[i+4:]
			continue
		}
		parts = append(parts, s)
		break
	}
	return strings.Join(parts, " -> ")
}
