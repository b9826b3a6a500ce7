package testscripts

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
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
