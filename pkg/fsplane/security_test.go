package fsplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"golang.org/x/sys/unix"
)

const secret = "TOP-SECRET"

// attack is one attempt to reach outside the root, or into a repository's internals.
type attack struct {
	name  string
	setup func(e *env)
	// Either a tool call…
	tool string
	args any
	// …or a direct provider operation (a non-tool caller).
	action string
	path   []string
	input  any
	// Expected outcome: status and code; an empty code means "succeeds".
	status kernel.ToolStatus
	code   kernel.ErrorCode
	// after checks the root (optional).
	after func(t *testing.T, e *env)
}

func repoSetup(e *env) {
	e.write(".git/config", "[core] GITSECRET")
	e.write(".git/hooks/pre-commit", "#!/bin/sh GITSECRET")
	e.write("repo/.GIT/HEAD", "GITSECRET")
}

func attacks() []attack {
	linkOut := func(e *env) { e.symlink(e.outside, "lnk") }
	midLink := func(e *env) { e.mkdir("a"); e.symlink(e.outside, "a/lnk") }
	lastLink := func(e *env) { e.mkdir("a"); e.symlink(filepath.Join(e.outside, "secret.txt"), "a/f.txt") }
	inLink := func(e *env) { e.write("b/x.txt", "inside"); e.symlink("../b", "a/in") }
	inFileLink := func(e *env) { e.write("b/x.txt", "inside"); e.symlink("../b/x.txt", "a/f.txt") }
	dotdot := func(e *env) { e.mkdir("a"); e.symlink("..", "a/up") }
	dotdot2 := func(e *env) { e.mkdir("a"); e.symlink("../..", "a/up2") }
	dangling := func(e *env) { e.mkdir("a"); e.symlink(filepath.Join(e.outside, "new.txt"), "a/dangling") }
	gitLink := func(e *env) { repoSetup(e); e.symlink(".git", "notgit") }
	long := strings.Repeat("x", 256)
	longMB := strings.Repeat("é", 256)
	deep := make([]string, 64)
	for i := range deep {
		deep[i] = strings.Repeat("d", 60)
	}
	deepFile := append(append([]string{}, deep[:63]...), "f.txt")
	return []attack{
		// Links: first, middle, last component; outside, inside, absolute, "..".
		{name: "read via first-component link", setup: linkOut, tool: "files.read", args: jobj{"path": pth("lnk", "secret.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "list via first-component link", setup: linkOut, tool: "files.list", args: jobj{"path": pth("lnk")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "read via middle link", setup: midLink, tool: "files.read", args: jobj{"path": pth("a", "lnk", "secret.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "read nested via middle link", setup: midLink, tool: "files.read", args: jobj{"path": pth("a", "lnk", "dir", "inner.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "read last-component link (absolute target)", setup: lastLink, tool: "files.read", args: jobj{"path": pth("a", "f.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "stat last-component link", setup: lastLink, tool: "files.stat", args: jobj{"path": pth("a", "f.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "replace through last-component link", setup: lastLink, tool: "files.replace", args: jobj{"path": pth("a", "f.txt"), "content": "pwned"}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "append through last-component link", setup: lastLink, tool: "files.append", args: jobj{"path": pth("a", "f.txt"), "content": "pwned"}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "create over last-component link", setup: lastLink, tool: "files.create", args: jobj{"path": pth("a", "f.txt"), "content": "pwned"}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "delete last-component link", setup: lastLink, tool: "files.delete", args: jobj{"path": pth("a", "f.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "create through middle link", setup: midLink, tool: "files.create", args: jobj{"path": pth("a", "lnk", "new.txt"), "content": "pwned"}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "create dirs through middle link", setup: midLink, tool: "files.create", args: jobj{"path": pth("a", "lnk", "n1", "n2.txt"), "content": "pwned"}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "create through dangling link", setup: dangling, tool: "files.create", args: jobj{"path": pth("a", "dangling"), "content": "pwned"}, status: kernel.StatusDenied, code: CodePathEscape, after: notExistsOutside("new.txt")},
		{name: "append through dangling link", setup: dangling, tool: "files.append", args: jobj{"path": pth("a", "dangling"), "content": "pwned"}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "read via link to inside dir", setup: inLink, tool: "files.read", args: jobj{"path": pth("a", "in", "x.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "replace via link to inside dir", setup: inLink, tool: "files.replace", args: jobj{"path": pth("a", "in", "x.txt"), "content": "changed"}, status: kernel.StatusDenied, code: CodePathEscape,
			after: func(t *testing.T, e *env) {
				if s, _ := e.readFile("b/x.txt"); s != "inside" {
					t.Fatalf("b/x.txt = %q", s)
				}
			}},
		{name: "read link to inside file", setup: inFileLink, tool: "files.read", args: jobj{"path": pth("a", "f.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "read via link to ..", setup: dotdot, tool: "files.read", args: jobj{"path": pth("a", "up", "a")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "read via link to ../..", setup: dotdot2, tool: "files.read", args: jobj{"path": pth("a", "up2", "outside", "secret.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "list via link to ../..", setup: dotdot2, tool: "files.list", args: jobj{"path": pth("a", "up2")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "grep root skips links", setup: func(e *env) { linkOut(e); lastLink(e); dotdot2(e) }, tool: "files.grep", args: jobj{"path": pth(), "pattern": "SECRET"}, status: kernel.StatusSucceeded},
		{name: "grep a link path", setup: lastLink, tool: "files.grep", args: jobj{"path": pth("a", "f.txt"), "pattern": "SECRET"}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "search root skips links", setup: func(e *env) { linkOut(e); lastLink(e); dotdot2(e) }, tool: "files.search", args: jobj{"path": pth(), "query": "top-secret inner"}, status: kernel.StatusSucceeded},
		{name: "search through middle link", setup: midLink, tool: "files.search", args: jobj{"path": pth("a", "lnk"), "query": "secret"}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "snapshot a link", setup: lastLink, tool: "files.snapshot.create", args: jobj{"path": pth("a", "f.txt")}, status: kernel.StatusDenied, code: CodePathEscape},
		{name: "snapshot root with links, then restore", setup: func(e *env) { linkOut(e); lastLink(e) }, tool: "files.snapshot.create", args: jobj{"path": pth()}, status: kernel.StatusSucceeded,
			after: func(t *testing.T, e *env) {
				out := e.ok("files.snapshot.list", jobj{"path": pth()})
				id := out["snapshots"].([]any)[0].(map[string]any)["snapshotId"]
				rr := e.op(ActionSnapshotRestore, pth(), SnapshotRestoreInput{SnapshotID: id.(string)})
				if rr.Status != kernel.StatusSucceeded {
					t.Fatalf("restore: %+v", rr.Error)
				}
				blobs, _ := filepath.Glob(filepath.Join(e.snaps, "blobs", "*", "*"))
				for _, b := range blobs {
					if c, _ := os.ReadFile(b); strings.Contains(string(c), secret) {
						t.Fatal("a snapshot captured outside content")
					}
				}
			}},
		{name: "delete recursive dir holding an outward link", setup: func(e *env) {
			e.mkdir("c")
			e.symlink(e.outside, "c/lnk")
			e.symlink(filepath.Join(e.outside, "secret.txt"), "c/f")
		},
			tool: "files.delete", args: jobj{"path": pth("c"), "recursive": true}, status: kernel.StatusSucceeded},
		{name: "restore into a parent replaced by a link", setup: func(e *env) {
			e.write("r/f.txt", "v1")
			out := e.ok("files.snapshot.create", jobj{"path": pth("r", "f.txt")})
			os.WriteFile(filepath.Join(e.root, "snapid"), []byte(out["snapshotId"].(string)), 0o644)
			os.RemoveAll(filepath.Join(e.root, "r"))
			e.symlink(e.outside, "r")
		}, action: ActionSnapshotRestore, path: pth("r", "f.txt"), input: "snapid", status: kernel.StatusDenied, code: CodePathEscape,
			after: notExistsOutside("f.txt")},
		// Repository internals.
		{name: "read .git/config", setup: repoSetup, tool: "files.read", args: jobj{"path": pth(".git", "config")}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "read .GIT/config", setup: repoSetup, tool: "files.read", args: jobj{"path": pth(".GIT", "config")}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "replace .Git/config", setup: repoSetup, tool: "files.replace", args: jobj{"path": pth(".Git", "config"), "content": "pwned"}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "create a hook", setup: repoSetup, tool: "files.create", args: jobj{"path": pth("repo", ".git", "hooks", "pre-commit"), "content": "#!/bin/sh"}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "append to .gIt/HEAD", setup: repoSetup, tool: "files.append", args: jobj{"path": pth("repo", ".gIt", "HEAD"), "content": "x"}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "delete .git", setup: repoSetup, tool: "files.delete", args: jobj{"path": pth(".git"), "recursive": true}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "delete the root (direct)", setup: repoSetup, action: ActionDelete, path: pth(), input: DeleteInput{Recursive: true}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "delete a dir holding .GIT", setup: repoSetup, tool: "files.delete", args: jobj{"path": pth("repo"), "recursive": true}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "list .git", setup: repoSetup, tool: "files.list", args: jobj{"path": pth(".git")}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "snapshot .git", setup: repoSetup, tool: "files.snapshot.create", args: jobj{"path": pth(".git")}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "grep skips .git", setup: repoSetup, tool: "files.grep", args: jobj{"path": pth(), "pattern": "GITSECRET"}, status: kernel.StatusSucceeded},
		{name: "read .git via a link", setup: gitLink, tool: "files.read", args: jobj{"path": pth("notgit", "config")}, status: kernel.StatusDenied, code: CodePathEscape},
		// Temporary files.
		{name: "read a temp file", setup: func(e *env) { e.write(TempPrefix+"x", "partial") }, tool: "files.read", args: jobj{"path": pth(TempPrefix + "x")}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "create a temp-named file", tool: "files.create", args: jobj{"path": pth("d", TempPrefix+"abc"), "content": "x"}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "temp prefix in another case", tool: "files.create", args: jobj{"path": pth(".SHAREDOS-TMP-abc"), "content": "x"}, status: kernel.StatusDenied, code: CodeNotPermitted},
		{name: "temp-named directory", tool: "files.create", args: jobj{"path": pth(TempPrefix+"d", "f"), "content": "x"}, status: kernel.StatusDenied, code: CodeNotPermitted},
		// Path encoding, through a non-tool caller.
		{name: "NUL in a segment", action: ActionRead, path: pth("a\x00b"), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "NUL-terminated traversal", action: ActionCreate, path: pth("x\x00/../../outside/secret.txt"), input: WriteInput{Content: []byte(`"pwned"`)}, status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "control character", action: ActionRead, path: pth("a\x01"), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "newline", action: ActionCreate, path: pth("a\nb"), input: WriteInput{Content: []byte(`"x"`)}, status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "DEL", action: ActionRead, path: pth("a\x7f"), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "dot-dot segment", action: ActionRead, path: pth("..", "outside", "secret.txt"), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "dot segment", action: ActionList, path: pth("."), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "separator in a segment", action: ActionRead, path: pth("../outside/secret.txt"), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "absolute segment", action: ActionRead, path: pth("/etc/passwd"), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "backslash", action: ActionRead, path: pth("..\\outside"), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "empty segment", action: ActionRead, path: pth(""), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "padded segment", action: ActionRead, path: pth(" .."), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "257-character segment", action: ActionCreate, path: pth(long + "x"), input: WriteInput{Content: []byte(`"x"`)}, status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "256-byte segment (over NAME_MAX)", action: ActionCreate, path: pth(long), input: WriteInput{Content: []byte(`"x"`)}, status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "768-byte segment", action: ActionCreate, path: pth(longMB), input: WriteInput{Content: []byte(`"x"`)}, status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "65 segments", action: ActionRead, path: make65(), status: kernel.StatusDenied, code: CodeInvalidPath},
		{name: "64 deep segments (3,900 bytes)", action: ActionCreate, path: deepFile, input: WriteInput{Content: []byte(`"deep"`)}, status: kernel.StatusSucceeded,
			after: func(t *testing.T, e *env) {
				if rr := e.op(ActionRead, deepFile, nil); rr.Status != kernel.StatusSucceeded {
					t.Fatalf("deep read: %+v", rr.Error)
				}
			}},
		{name: "other namespace", action: ActionRead, path: pth("a"), input: nil, status: kernel.StatusFailed, code: CodeInvalidInput},
	}
}

func notExistsOutside(rel string) func(t *testing.T, e *env) {
	return func(t *testing.T, e *env) {
		if _, err := os.Lstat(filepath.Join(e.outside, rel)); err == nil {
			t.Fatalf("outside/%s was created", rel)
		}
	}
}

func TestSecurityAttacks(t *testing.T) {
	t.Parallel()
	as := attacks()
	if len(as) < 40 {
		t.Fatalf("only %d attacks", len(as))
	}
	for _, a := range as {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			if a.setup != nil {
				a.setup(e)
			}
			before := e.snapshotOutside()
			var status kernel.ToolStatus
			var code kernel.ErrorCode
			var output any
			if a.tool != "" {
				res, err := e.tryCall(a.tool, a.args)
				if err != nil {
					t.Fatalf("call failed: %v", err)
				}
				status, output = res.Status, res.Output
				if res.Error != nil {
					code = res.Error.Code
				}
			} else {
				in := a.input
				if s, ok := in.(string); ok && s == "snapid" {
					b, _ := os.ReadFile(filepath.Join(e.root, "snapid"))
					in = SnapshotRestoreInput{SnapshotID: string(b)}
				}
				ns := "files"
				if a.name == "other namespace" {
					ns = "repo"
				}
				rr, err := e.p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o", Context: e.actx,
					Resource: kernel.ResourceRef{Namespace: ns, Path: a.path}, Action: a.action, Input: in})
				if err != nil {
					t.Fatalf("provider error: %v", err)
				}
				status, output = rr.Status, rr.Output
				if rr.Error != nil {
					code = rr.Error.Code
				}
			}
			if status != a.status || code != a.code {
				t.Fatalf("got %s %s, want %s %s", status, code, a.status, a.code)
			}
			b, _ := json.Marshal(output)
			if strings.Contains(string(b), secret) || strings.Contains(string(b), "GITSECRET") {
				t.Fatalf("output leaks protected content: %s", b)
			}
			if fmt.Sprint(before) != fmt.Sprint(e.snapshotOutside()) {
				t.Fatal("something outside the root changed")
			}
			for _, f := range []string{"config", "hooks/pre-commit"} {
				if c, err := os.ReadFile(filepath.Join(e.root, ".git", f)); err == nil && !strings.Contains(string(c), "GITSECRET") {
					t.Fatalf(".git/%s changed", f)
				}
			}
			if a.after != nil {
				a.after(t, e)
			}
		})
	}
}

// exchange atomically swaps two paths (renameat2 RENAME_EXCHANGE): the worst-case
// attacker, who replaces a directory by a link with no window where neither exists.
func exchange(a, b string) error {
	return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
}

// TestSymlinkSwapRace swaps a directory (and a file) for links — to outside the root
// and to a repository's .git — while reads, writes, listings, greps and snapshots run.
// Nothing outside the root or inside .git may be read or changed.
func TestSymlinkSwapRace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	repoSetup(e)
	e.write("swap/x.txt", "inside x")
	e.write("swap/hooks/pre-commit", "inside hook")
	e.write("fswap.txt", "inside f")
	e.symlink(e.outside, "swap.evil")
	e.symlink(filepath.Join(e.outside, "secret.txt"), "fswap.evil")
	e.symlink(".git", "swap.git")
	if err := exchange(filepath.Join(e.root, "swap"), filepath.Join(e.root, "swap.evil")); err != nil {
		t.Skipf("renameat2(RENAME_EXCHANGE) unavailable: %v", err)
	}
	exchange(filepath.Join(e.root, "swap"), filepath.Join(e.root, "swap.evil"))
	before := e.snapshotOutside()
	gitBefore := readTree(t, filepath.Join(e.root, ".git"))

	var stop atomic.Bool
	var swaps atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		pairs := [][2]string{{"swap", "swap.evil"}, {"fswap.txt", "fswap.evil"}, {"swap", "swap.git"}}
		for i := 0; !stop.Load() || swaps.Load() < 1000; i++ {
			pr := pairs[i%len(pairs)]
			a, b := filepath.Join(e.root, pr[0]), filepath.Join(e.root, pr[1])
			if exchange(a, b) == nil {
				swaps.Add(1)
				runtime.Gosched()
				exchange(a, b)
				swaps.Add(1)
			}
			time.Sleep(10 * time.Microsecond)
		}
	}()
	calls := []struct {
		tool string
		args jobj
	}{
		{"files.read", jobj{"path": pth("swap", "x.txt")}},
		{"files.read", jobj{"path": pth("fswap.txt")}},
		{"files.stat", jobj{"path": pth("swap", "secret.txt")}},
		{"files.list", jobj{"path": pth("swap")}},
		{"files.replace", jobj{"path": pth("swap", "x.txt"), "content": "written x"}},
		{"files.replace", jobj{"path": pth("fswap.txt"), "content": "written f"}},
		{"files.append", jobj{"path": pth("swap", "secret.txt"), "content": "pwned"}},
		{"files.create", jobj{"path": pth("swap", "hooks", "post-checkout"), "content": "pwned"}},
		{"files.replace", jobj{"path": pth("swap", "hooks", "pre-commit"), "content": "pwned"}},
		{"files.delete", jobj{"path": pth("swap", "dir"), "recursive": true}},
		{"files.grep", jobj{"path": pth(), "pattern": "SECRET"}},
		{"files.search", jobj{"path": pth("swap"), "query": "secret"}},
		{"files.snapshot.create", jobj{"path": pth("swap")}},
	}
	n := 0
	outcomes := map[string]int{}
	for ; n < 650 || swaps.Load() < 1000 || (n < 6000 && (outcomes[string(CodePathEscape)] == 0 || outcomes["succeeded"] == 0)); n++ {
		c := calls[n%len(calls)]
		res := e.call(c.tool, c.args)
		if res.Error != nil {
			outcomes[string(res.Error.Code)]++
		} else {
			outcomes["succeeded"]++
		}
		b, _ := json.Marshal(res)
		if strings.Contains(string(b), secret) || strings.Contains(string(b), "GITSECRET") {
			t.Fatalf("call %d %s leaked: %s", n, c.tool, b)
		}
	}
	stop.Store(true)
	wg.Wait()
	t.Logf("%d calls, %d swaps, outcomes %v", n, swaps.Load(), outcomes)
	if outcomes["succeeded"] == 0 || outcomes[string(CodePathEscape)] == 0 {
		t.Fatalf("the race was not exercised: %v", outcomes)
	}
	if fmt.Sprint(before) != fmt.Sprint(e.snapshotOutside()) {
		t.Fatal("something outside the root changed")
	}
	if gitAfter := readTree(t, filepath.Join(e.root, ".git")); fmt.Sprint(gitAfter) != fmt.Sprint(gitBefore) {
		t.Fatalf(".git changed: %v", gitAfter)
	}
	// Snapshots never captured outside content.
	blobs, _ := filepath.Glob(filepath.Join(e.snaps, "blobs", "*", "*"))
	for _, b := range blobs {
		if c, _ := os.ReadFile(b); strings.Contains(string(c), secret) || strings.Contains(string(c), "GITSECRET") {
			t.Fatal("a snapshot captured protected content")
		}
	}
}

func readTree(t *testing.T, dir string) map[string]string {
	m := map[string]string{}
	filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			m[p] = string(b)
		} else if err == nil {
			m[p] = info.Mode().String()
		}
		return nil
	})
	return m
}
