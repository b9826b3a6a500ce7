package cmd

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// BenchmarkToolsList1000 runs `tools list -o json` in-process against a 1,000-grant file
// (process start-up excluded; bench/cli.sh measures the real binary).
func BenchmarkToolsList1000(b *testing.B) {
	benchCLI(b, "tools", "list", "-o", "json")
}

// BenchmarkToolsCall1000 runs `tools call files.read` in-process against the same file:
// the tool table, the arguments and the instant are each built or parsed once per run.
func BenchmarkToolsCall1000(b *testing.B) {
	benchCLI(b, "tools", "call", "files.read", "-a", "path=team-07/proj-0007/notes.md", "-o", "json")
}

// BenchmarkExplain1000 runs `explain files.read` in-process against the same file.
func BenchmarkExplain1000(b *testing.B) {
	benchCLI(b, "explain", "files.read", "-a", "path=team-07/proj-0007/notes.md", "-o", "json")
}

func benchCLI(b *testing.B, cmdArgs ...string) {
	dir := b.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "team-07", "proj-0007"), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "team-07", "proj-0007", "notes.md"), []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	var y strings.Builder
	y.WriteString("version: 1\ncontext:\n  actor: agent:bench\n  owner: human:ops\ngrants:\n")
	for i := range 1000 {
		fmt.Fprintf(&y, "  - id: g-%04d\n    subject: agent:bench\n    issuer: human:ops\n    capabilities:\n"+
			"      - resource: {namespace: files, path: [team-%02d, proj-%04d]}\n        actions: [read, list]\n        scope: descendants\n",
			i, i%100, i)
	}
	grants := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(grants, []byte(y.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	env := func(k string) string {
		return map[string]string{"HOME": dir, "XDG_STATE_HOME": filepath.Join(dir, "state")}[k]
	}
	args := append([]string{"--root", root, "--grants", grants, "--namespaces", "files", "--now", "2026-08-03T09:00:00Z"}, cmdArgs...)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ios, _, _, _ := Test()
		if code := MainWith(args, ios, env); code != 0 {
			b.Fatalf("exit %d", code)
		}
	}
}
