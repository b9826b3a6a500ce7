package testscripts

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadmeFirstCommand runs the README's first set-up command on a fresh machine (no
// state, no config) and requires a non-empty catalogue; the shipped grant files lint
// without errors.
func TestReadmeFirstCommand(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(),
		"HOME="+filepath.Join(dir, "home"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
	)
	c := exec.Command("sharedos", "--config", "examples/config.yaml", "tools", "list", "-o", "json")
	c.Dir = ".."
	c.Env = env
	out, err := c.Output()
	if err != nil {
		t.Fatalf("tools list: %v\n%s", err, out)
	}
	var tools []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(out, &tools); err != nil {
		t.Fatalf("decode: %v\n%s", err, out)
	}
	names := map[string]bool{}
	for _, tl := range tools {
		names[tl.Name] = true
	}
	for _, want := range []string{"files.read", "files.list", "sharedos.escalate"} {
		if !names[want] {
			t.Errorf("catalogue lacks %s: %s", want, out)
		}
	}
	lint := exec.Command("sharedos", "grants", "lint", "examples/grants/reader.yaml", "examples/grants/writer.yaml")
	lint.Dir = ".."
	lint.Env = env
	if out, err := lint.CombinedOutput(); err != nil {
		t.Fatalf("the example grant files do not lint: %v\n%s", err, out)
	}
}

// TestExampleCeilingHoldsOverSubtrees: the shipped example promises that nothing under
// workspace/private can be reached whatever the grants say — grep and search over the
// whole root, and a listing of it, never show the frozen file; reading it is refused.
func TestExampleCeilingHoldsOverSubtrees(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(),
		"HOME="+filepath.Join(dir, "home"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
	)
	run := func(wantExit int, args ...string) string {
		t.Helper()
		c := exec.Command("sharedos", append([]string{"--config", "examples/config.yaml"}, args...)...)
		c.Dir = ".."
		c.Env = env
		out, err := c.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != wantExit {
			t.Fatalf("%v: exit %d, want %d\n%s", args, code, wantExit, out)
		}
		return string(out)
	}
	for _, args := range [][]string{
		{"tools", "call", "files.grep", "-a", "path=", "-a", "pattern=e"},
		{"tools", "call", "files.grep", "-a", "path=", "-a", "pattern=agents"},
		{"tools", "call", "files.search", "-a", "path=", "-a", "query=agents"},
		{"tools", "call", "files.list", "-a", "path="},
	} {
		out := run(0, append(args, "-o", "json")...)
		if strings.Contains(out, "private") || strings.Contains(out, "not for agents") {
			t.Errorf("%v reaches the frozen subtree:\n%s", args, out)
		}
	}
	if out := run(3, "tools", "call", "files.read", "-a", "path=private/secret.md", "-o", "json"); !strings.Contains(out, "host_policy_denied") {
		t.Errorf("reading the frozen file: %s", out)
	}
}
