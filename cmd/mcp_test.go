package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMCPStdio runs `sharedos mcp` over pipes with the go-sdk client: the listing, an
// allowed call, a denial ending with the CLI's hint, JSON logs on stderr only, and exit 0
// at end of input.
func TestMCPStdio(t *testing.T) {
	dir, env := sandbox(t)
	root, grants := readFixture(t, dir)
	run := startStdio([]string{"mcp", "--log-format", "json", "--root", root, "--grants", grants, "--namespaces", "files",
		"--state", filepath.Join(dir, "state", "state.db")}, env)
	stderr := run.stderr
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, run.transport(), nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, tool := range list.Tools {
		got = append(got, tool.Name)
	}
	if strings.Join(got, ",") != "files.list,files.read" {
		t.Fatalf("tools %v", got)
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": []string{"notes", "todo.md"}}})
	if err != nil || r.IsError {
		t.Fatalf("files.read: %v %+v", err, r)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "files.create", Arguments: map[string]any{"path": []string{"notes", "x.md"}, "content": "x"}})
	if err != nil || !r.IsError {
		t.Fatalf("files.create: %v %+v", err, r)
	}
	var text struct{ Code, Hint string }
	if err := json.Unmarshal([]byte(r.Content[0].(*mcp.TextContent).Text), &text); err != nil {
		t.Fatal(err)
	}
	// The agent reads what it can do, never an operator command (security issue 20, item 7);
	// the operator's hint is the server's log line.
	if text.Code != "tool_unavailable" || text.Hint != "this tool is not available in this session; use the tools that tools/list offers; not permitted; an operator must grant it" {
		t.Fatalf("refusal %+v", text)
	}
	if raw, _ := json.Marshal(r); strings.Contains(string(raw), "sharedos ") || strings.Contains(string(raw), "explain") {
		t.Fatalf("the agent reads operator text: %s", raw)
	}
	// The server writes its write-ahead records through a spool of its own
	// (sqlitestore.EnableSpool), present while it serves and removed when it ends.
	state := filepath.Join(dir, "state", "state.db")
	if files, _ := filepath.Glob(filepath.Join(sqlitestore.SpoolDir(state), "*.spool")); len(files) != 2 {
		t.Fatalf("spool files while serving: %q, want the server's two", files)
	}
	run.endOfInput(t, 5*time.Second)
	if files, _ := filepath.Glob(filepath.Join(sqlitestore.SpoolDir(state), "*.spool")); len(files) != 0 {
		t.Fatalf("spool files after the session: %q", files)
	}
	_ = cs.Close()
	logs := strings.TrimSpace(stderr.String())
	if logs == "" {
		t.Fatal("no log lines on stderr")
	}
	for _, line := range strings.Split(logs, "\n") {
		if !json.Valid([]byte(line)) {
			t.Fatalf("a stderr line is not JSON: %q", line)
		}
	}
	if !strings.Contains(logs, `"hint":"no grant covers this call; run 'sharedos explain files.create' with the same arguments for the grant to add"`) {
		t.Fatalf("the operator's hint is not logged:\n%s", logs)
	}
}

// TestMCPMalformedLineEndsTheSession: a line that is not JSON-RPC ends the session
// with a log line on stderr naming what was wrong, and a non-zero exit (spec 50 §2),
// over sharedos' own stdio transport.
func TestMCPMalformedLineEndsTheSession(t *testing.T) {
	dir, env := sandbox(t)
	root, grants := readFixture(t, dir)
	run := startStdio([]string{"mcp", "--log-format", "json", "--root", root, "--grants", grants, "--namespaces", "files",
		"--state", filepath.Join(dir, "state", "state.db")}, env)
	go func() { _, _ = io.Copy(io.Discard, run.out) }()
	if _, err := run.in.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-run.code:
		if c == 0 {
			t.Fatalf("exit 0 after a malformed line, stderr %s", run.stderr.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("sharedos mcp did not end its session at a malformed line")
	}
	_ = run.in.Close()
	if logs := run.stderr.String(); !strings.Contains(logs, `"msg":"session ended","err":"invalid character 'h' looking for beginning of value"`) {
		t.Fatalf("no log line names the malformed input:\n%s", logs)
	}
}

// TestMCPBadLogFormat: an unknown --log-format is a usage error before anything is served.
func TestMCPBadLogFormat(t *testing.T) {
	_, env := sandbox(t)
	code, out, errOut := run1(t, env, "mcp", "--log-format", "xml")
	if code != ExitUsage || out != "" || !strings.Contains(errOut, "log-format") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// readFixture writes, under dir, a root holding notes/todo.md and a grant file letting
// agent:helper (for human:alice) list and read the whole root.
func readFixture(t *testing.T, dir string) (root, grants string) {
	t.Helper()
	root = filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "notes"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "notes", "todo.md"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	grants = filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(grants, []byte(`version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-read
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list, read]
        scope: descendants
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, grants
}

// stdioRun is `sharedos ARGS` run in-process on pipes, as a client spawns it.
type stdioRun struct {
	in     *io.PipeWriter // the command's standard input
	out    *io.PipeReader // its standard output
	stderr *syncBuffer
	code   chan int
}

func startStdio(args []string, env func(string) string) *stdioRun {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	r := &stdioRun{in: inW, out: outR, stderr: &syncBuffer{}, code: make(chan int, 1)}
	ios := &IOStreams{In: inR, Out: outW, ErrOut: r.stderr}
	go func() {
		r.code <- MainWith(args, ios, env)
		_ = outW.Close()
	}()
	return r
}

// transport is the MCP client's side of the pipes.
func (r *stdioRun) transport() mcp.Transport { return &mcp.IOTransport{Reader: r.out, Writer: r.in} }

// endOfInput closes the command's input and requires it to exit 0 within d.
func (r *stdioRun) endOfInput(t *testing.T, d time.Duration) {
	t.Helper()
	_ = r.in.Close()
	select {
	case c := <-r.code:
		if c != 0 {
			t.Fatalf("exit %d, stderr %s", c, r.stderr.String())
		}
	case <-time.After(d):
		t.Fatal("sharedos mcp did not exit at end of input")
	}
}

// TestMCPConfigPinsEnvironment: the snippet of 'mcp config', generated where the config
// file and the state database are found through XDG_CONFIG_HOME and XDG_STATE_HOME,
// starts a server that, in an empty environment (as the MCP Inspector starts one), still
// refuses the config's frozen path, follows the same stored namespace selection and
// audits into the same state database.
func TestMCPConfigPinsEnvironment(t *testing.T) {
	dir, env := sandbox(t)
	root, grants := readFixture(t, dir)
	if err := os.WriteFile(filepath.Join(root, ".env"), []byte("SECRET=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgDir := filepath.Join(dir, "config", "sharedos")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "config.yaml"), []byte("ceiling:\n  frozenPaths: [\"files:.env\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run1(t, env, "--root", root, "--grants", grants, "namespaces", "enable", "files"); code != 0 {
		t.Fatalf("namespaces enable: %d %s", code, errOut)
	}
	code, out, errOut := run1(t, env, "--root", root, "--grants", grants, "mcp", "config", "--client", "generic")
	if code != 0 {
		t.Fatalf("mcp config: %d %s", code, errOut)
	}
	var snippet struct {
		MCPServers map[string]struct {
			Args []string          `json:"args"`
			Env  map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(out), &snippet); err != nil {
		t.Fatal(err)
	}
	server := snippet.MCPServers["sharedos"]
	if len(server.Env) != 0 || len(server.Args) == 0 || server.Args[0] != "mcp" {
		t.Fatalf("snippet %s", out)
	}
	empty := func(string) string { return "" } // no HOME, no XDG_*, no SHAREDOS_*
	run := startStdio(append(server.Args[1:len(server.Args):len(server.Args)], "mcp", "--log-format", "json"), empty)
	ctx := context.Background()
	client := mcp.NewClient(&mcp.Implementation{Name: "cmd-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, run.transport(), nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) == 0 {
		t.Fatalf("tools/list: %v %v (stderr %s)", err, list, run.stderr.String())
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": []string{".env"}}})
	if err != nil {
		t.Fatal(err)
	}
	text := r.Content[0].(*mcp.TextContent).Text
	if !r.IsError || strings.Contains(text, "SECRET") || !strings.Contains(text, "host_policy_denied") {
		t.Fatalf("files.read .env through the snippet's server: %s", text)
	}
	run.endOfInput(t, 10*time.Second)
	_ = cs.Close()
	code, out, errOut = run1(t, env, "--root", root, "audit", "list", "--calls", "--outcome", "denied", "-o", "json")
	if code != 0 || !strings.Contains(out, "host_policy_denied") || !strings.Contains(out, `"surface": "mcp"`) {
		t.Fatalf("the refusal is not in the state database mcp config named: %d %s %s", code, out, errOut)
	}
}
