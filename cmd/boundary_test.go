package cmd

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spf13/cobra"
)

// stateCommands are the commands that open the state database, each with arguments it
// accepts; TestStateBoundaryEveryCommand runs each of them with the state database inside
// --root.
var stateCommands = map[string][]string{
	"sharedos tools list":          {"tools", "list"},
	"sharedos tools describe":      {"tools", "describe", "files.read"},
	"sharedos tools call":          {"tools", "call", "files.read", "-a", "path=a.md"},
	"sharedos explain":             {"explain", "files.read", "-a", "path=a.md"},
	"sharedos namespaces list":     {"namespaces", "list"},
	"sharedos namespaces enable":   {"namespaces", "enable", "files"},
	"sharedos namespaces disable":  {"namespaces", "disable", "files"},
	"sharedos namespaces update":   {"namespaces", "update", "--enable", "files"},
	"sharedos audit list":          {"audit", "list"},
	"sharedos audit export":        {"audit", "export", "--as-test"},
	"sharedos escalations list":    {"escalations", "list", "--all"},
	"sharedos escalations resolve": {"escalations", "resolve", "1", "--approve"},
	"sharedos messages inbox":      {"--as", "agent:x", "messages", "inbox"},
	"sharedos messages show":       {"messages", "show", "m-1"},
	"sharedos messages wait":       {"--as", "agent:x", "messages", "wait", "m-1"},
	"sharedos messages reply":      {"--as", "agent:x", "messages", "reply", "m-1", "--payload", "1"},
	"sharedos messages send":       {"--as", "agent:x", "messages", "send", "--to", "agent:y", "--payload", "1"},
	"sharedos gateway lint":        {"gateway", "lint"},
	"sharedos gateway tools":       {"gateway", "tools", "gh"},
	"sharedos mcp":                 {"mcp"},
	"sharedos mcp config":          {"mcp", "config", "--client", "generic"},
	"sharedos serve":               {"serve", "--listen", "127.0.0.1:0"},
	"sharedos store prune":         {"store", "prune", "--retention", "90d"},
}

// statelessCommands are the runnable commands that never open the state database.
// (completion: the shell's TAB completion opens it quietly and completes nothing when it
// is refused; test: each scenario file gets a state database of its own; store migrate:
// only a PostgreSQL database, which no --root holds, and refuses a file.)
var statelessCommands = []string{"sharedos completion", "sharedos grants lint", "sharedos test",
	"sharedos tokens create", "sharedos tokens list", "sharedos tokens revoke", "sharedos version", "sharedos store migrate"}

// TestStateBoundaryEveryCommand: every command that opens the state database runs the
// one trust-boundary check — with the state database inside --root (directly, or through
// a link into it) each exits 2 with exactly the error of 'tools call', prints nothing on
// stdout and creates nothing inside the root. The table covers every runnable command:
// a new one must be classified here.
func TestStateBoundaryEveryCommand(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := Test()
	var runnable []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c.HasParent() && !c.HasSubCommands() || c.Name() == "mcp" {
			runnable = append(runnable, c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(NewRootCmd(&Factory{IOStreams: ios}))
	for _, p := range runnable {
		if _, ok := stateCommands[p]; !ok && !slices.Contains(statelessCommands, p) && p != "sharedos help" && p != "sharedos flags" {
			t.Errorf("%s is in neither stateCommands nor statelessCommands", p)
		}
	}

	dir, env := sandbox(t)
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.md"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	grants := filepath.Join(dir, "grants.yaml")
	config := filepath.Join(dir, "config.yaml")
	for name, text := range map[string]string{
		grants: "version: 1\ncontext: {actor: agent:helper, owner: human:alice}\ngrants: []\n",
		config: "mcpServers:\n  - id: gh\n    url: http://127.0.0.1:1/mcp\n    unmapped: gate\n",
	} {
		if err := os.WriteFile(name, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, state := range []string{filepath.Join(root, "sub", "state.db"), filepath.Join(dir, "link", "sub", "state.db")} {
		global := []string{"--root", root, "--state", state, "--grants", grants, "--config", config, "-o", "table"}
		code, _, want := run1(t, env, append(global, stateCommands["sharedos tools call"]...)...)
		if code != ExitUsage || want == "" {
			t.Fatalf("tools call: exit %d, stderr %q", code, want)
		}
		for name, args := range stateCommands {
			code, out, errOut := run1(t, env, append(global, args...)...)
			if code != ExitUsage || out != "" || errOut != want {
				t.Errorf("state %s: %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", state, name, code, out, errOut, want)
			}
			entries, _ := os.ReadDir(root)
			if len(entries) != 1 || entries[0].Name() != "a.md" {
				t.Fatalf("%s created something inside the root: %v", name, entries)
			}
		}
	}
}
