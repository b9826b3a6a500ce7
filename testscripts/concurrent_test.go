package testscripts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestConcurrentNamespaceToggles starts 20 sharedos processes at once against one fresh
// state database, each enabling its own namespace: every process succeeds and all 20
// namespaces are in the stored selection afterwards (atomic patches, guarded schema
// migration, busy waiting instead of failing).
func TestConcurrentNamespaceToggles(t *testing.T) {
	const n = 20
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"HOME="+filepath.Join(dir, "home"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"XDG_CACHE_HOME="+filepath.Join(dir, "cache"),
		"SHAREDOS_ROOT="+root,
		"SHAREDOS_AS=agent:helper",
		"SHAREDOS_OWNER=human:alice",
		"SHAREDOS_STATE="+filepath.Join(dir, "shared", "state.db"),
	)
	cmds := make([]*exec.Cmd, n)
	outs := make([]*bytes.Buffer, n)
	for i := range cmds {
		c := exec.Command("sharedos", "namespaces", "enable", fmt.Sprintf("ns-%02d", i))
		c.Env = env
		outs[i] = &bytes.Buffer{}
		c.Stdout, c.Stderr = outs[i], outs[i]
		cmds[i] = c
	}
	for i, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("process %d failed: %v\n%s", i, err, outs[i])
		}
	}
	list := exec.Command("sharedos", "namespaces", "list", "-o", "json")
	list.Env = env
	out, err := list.Output()
	if err != nil {
		t.Fatalf("namespaces list: %v", err)
	}
	var got struct {
		EffectiveSelection []string `json:"effectiveSelection"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decode %s: %v", out, err)
	}
	for i := range n {
		if ns := fmt.Sprintf("ns-%02d", i); !slices.Contains(got.EffectiveSelection, ns) {
			t.Errorf("namespace %s missing from %v", ns, got.EffectiveSelection)
		}
	}
	if len(got.EffectiveSelection) != n {
		t.Errorf("selection has %d namespaces, want %d: %v", len(got.EffectiveSelection), n, got.EffectiveSelection)
	}
}
