package testscripts

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sharedos/sharedos/cmd"
	"github.com/sharedos/sharedos/internal/fakemcp"
)

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"sharedos": func() {
			if os.Getenv(remoteEnv) == "1" {
				os.Exit(cmd.MainRemoteHarness())
			}
			os.Exit(cmd.Main())
		},
		// fakemcp: the gateway's fake upstream MCP server (FAKEMCP_MODE picks it)
		"fakemcp": func() { os.Exit(fakemcp.Main()) },
	})
}

// TestScripts runs each folder of scripts as a subtest.
func TestScripts(t *testing.T) {
	dirs := scriptDirs(t)
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			testscript.Run(t, params(dir))
		})
	}
}

// remoteEnv, set to 1 by TestScriptsRemote, makes the scripts' sharedos command run
// against an in-process serve (cmd.MainRemoteHarness).
const remoteEnv = "SHAREDOS_SCRIPTS_REMOTE"

// remoteDirs are the folders of scripts of the commands that talk to the kernel (issue 22
// item 7): TestScriptsRemote runs each of their scripts a second time, every command that
// obtains its backend from the factory going through --server of an in-process serve,
// against the same golden output. `test` is not among them: it runs scenario files over
// hosts of its own, never the factory's backend.
var remoteDirs = []string{"tools", "explain", "namespaces", "escalations", "audit", "messages"}

// remoteExcluded are the scripts of remoteDirs that cannot run remotely, each with why.
var remoteExcluded = map[string]string{
	"tools/interrupt": "Ctrl-C cancels the HTTP request: the client never reads the server's cancelled result, " +
		"so --server prints the cancellation as an error where embedded prints the failed result",
}

// TestScriptsRemote runs the scripts of remoteDirs with every kernel command going through
// an in-process serve (see remoteEnv), with the same golden output as TestScripts.
func TestScriptsRemote(t *testing.T) {
	for _, dir := range remoteDirs {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			p := params(dir)
			setup := p.Setup
			p.Setup = func(env *testscript.Env) error {
				if reason, ok := remoteExcluded[dir+"/"+strings.TrimPrefix(filepath.Base(env.WorkDir), "script-")]; ok {
					env.T().Skip("embedded only: " + reason)
				}
				env.Setenv(remoteEnv, "1")
				return setup(env)
			}
			p.UpdateScripts = false
			testscript.Run(t, p)
		})
	}
}

func scriptDirs(t *testing.T) []string {
	t.Helper()
	dirs, err := ScriptDirs(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no scripts found")
	}
	return dirs
}

func params(dir string) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("UPDATE_SCRIPTS") == "1",
		Setup: func(env *testscript.Env) error {
			// Never the real home or state: everything lives under the script's $WORK.
			for k, sub := range map[string]string{"HOME": "home", "XDG_STATE_HOME": "xdg/state",
				"XDG_CONFIG_HOME": "xdg/config", "XDG_CACHE_HOME": "xdg/cache"} {
				p := filepath.Join(env.WorkDir, sub)
				if err := os.MkdirAll(p, 0o755); err != nil {
					return err
				}
				env.Setenv(k, p)
			}
			// A fixed git identity for scripts that build repositories with the git binary.
			env.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			env.Setenv("GIT_AUTHOR_NAME", "Script")
			env.Setenv("GIT_AUTHOR_EMAIL", "script@example.invalid")
			env.Setenv("GIT_COMMITTER_NAME", "Script")
			env.Setenv("GIT_COMMITTER_EMAIL", "script@example.invalid")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"appendfile": appendFile,
			"sametext":   sameText,
			"exits":      exits,
			"parses":     parses,
			"jsonvar":    jsonvar,
			"servestart": serveStart,
		},
	}
}

// appendfile DST SRC appends the content of SRC ("stdout" or "stderr" for the last
// command's output) to the file DST.
func appendFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: appendfile DST SRC")
	}
	data := ts.ReadFile(args[1])
	f, err := os.OpenFile(ts.MkAbs(args[0]), os.O_WRONLY|os.O_APPEND, 0)
	ts.Check(err)
	_, err = f.WriteString(data)
	ts.Check(err)
	ts.Check(f.Close())
}

// sametext A B succeeds when files A and B have equal content (stdout/stderr allowed);
// unlike cmp it never rewrites scripts and prints both on failure.
func sameText(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: sametext A B")
	}
	a, b := ts.ReadFile(args[0]), ts.ReadFile(args[1])
	eq := bytes.Equal([]byte(a), []byte(b))
	if eq == neg {
		ts.Fatalf("%s and %s %s:\n--- %s\n%s--- %s\n%s", args[0], args[1],
			map[bool]string{true: "are equal", false: "differ"}[eq], args[0], a, args[1], b)
	}
}

// exits N PROG [ARGS...] runs PROG like exec and requires its exit status to be N
// (exec only distinguishes zero from non-zero).
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits N PROG [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}
