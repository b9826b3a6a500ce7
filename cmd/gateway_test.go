package cmd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/internal/fakemcp"
)

// gatewayFixture is the sandbox of the gateway tests: the fake upstream (streamable HTTP,
// bearer token given by reference), a config file mapping two of its tools, a grant file
// allowing acme/app only, and a root.
func gatewayFixture(t *testing.T) (env func(string) string, args []string, token string) {
	t.Helper()
	token = "tok-mcp-0a9b8c7d"
	upstream := httptest.NewServer(fakemcp.Handler(token))
	t.Cleanup(upstream.Close)
	t.Setenv("GW_TOKEN", token)

	dir, env := sandbox(t)
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`mcpServers:
  - id: github
    url: %s
    headers: {Authorization: {fromEnv: GW_TOKEN, prefix: "Bearer "}}
    unmapped: gate
    tools:
      get_file_contents:
        action: read
        resource: {path: [{arg: /owner}, {arg: /repo}, contents, {arg: /path, split: "/"}]}
      create_issue:
        action: "issue:create"
        resource: {path: [{arg: /owner}, {arg: /repo}, issues]}
`, upstream.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	grants := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(grants, []byte(`version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-app
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: github, path: [acme, app]}
        actions: [read, "issue:create"]
        scope: descendants
      - resource: {namespace: github, path: []}
        actions: [call]
        scope: descendants
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return env, []string{"mcp", "--config", cfg, "--root", root, "--grants", grants, "--namespaces", "github",
		"--state", filepath.Join(dir, "state", "state.db")}, token
}

// gatewayClient connects the go-sdk client over tr; changed receives list_changed.
func gatewayClient(t *testing.T, tr mcp.Transport) (*mcp.ClientSession, chan struct{}) {
	t.Helper()
	changed := make(chan struct{}, 8)
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} }})
	cs, err := client.Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	return cs, changed
}

// driveGateway: per-resource gating (acme/app allowed, acme/other denied
// no_matching_grant), structured output passed through, and the upstream's list_changed
// forwarded as our own list_changed with the new tool listed after it.
func driveGateway(t *testing.T, cs *mcp.ClientSession, changed chan struct{}) {
	t.Helper()
	ctx := context.Background()
	names := func() []string {
		list, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range list.Tools {
			out = append(out, tool.Name)
		}
		return out
	}
	if got := names(); !slices.Contains(got, "github.get_file_contents") || slices.Contains(got, "github.late_tool") {
		t.Fatalf("tools %v", got)
	}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	r := call("github.get_file_contents", map[string]any{"owner": "acme", "repo": "app", "path": "src/main.go"})
	if r.IsError || r.Content[0].(*mcp.TextContent).Text != "contents of acme/app/src/main.go" {
		t.Errorf("allowed call: %+v", r)
	}
	r = call("github.get_file_contents", map[string]any{"owner": "acme", "repo": "other", "path": "src/main.go"})
	if !r.IsError || r.Meta["sharedos/code"] != "no_matching_grant" {
		t.Errorf("denied call: %+v", r)
	}
	r = call("github.create_issue", map[string]any{"owner": "acme", "repo": "app", "title": "t"})
	if r.IsError || r.StructuredContent == nil {
		t.Errorf("structured output: %+v", r)
	}
	for len(changed) > 0 {
		<-changed
	}
	if r := call("github.add_tool", map[string]any{}); r.IsError {
		t.Fatalf("add_tool: %+v", r)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed after the upstream's list changed")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(names(), "github.late_tool") {
		if time.Now().After(deadline) {
			t.Fatal("github.late_tool not listed after list_changed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := call("github.late_tool", map[string]any{}); r.IsError {
		t.Errorf("late_tool: %+v", r)
	}
}

// TestMCPGateway serves `sharedos mcp` over pipes with an external MCP server and drives
// it with the go-sdk client (driveGateway). The token is in no log line.
func TestMCPGateway(t *testing.T) {
	env, args, token := gatewayFixture(t)
	run := startStdio(args, env)
	cs, changed := gatewayClient(t, run.transport())
	driveGateway(t, cs, changed)
	run.endOfInput(t, 10*time.Second)
	_ = cs.Close()
	if strings.Contains(run.stderr.String(), token) {
		t.Errorf("the token is in the logs: %s", run.stderr.String())
	}
}

// TestMCPListenGateway: the same over streamable HTTP (`mcp --listen`): an HTTP session's
// host holds the upstream connection as a stdio session's does, so the upstream's
// list_changed reaches the HTTP client.
func TestMCPListenGateway(t *testing.T) {
	env, args, token := gatewayFixture(t)
	l := startListen(t, env, "http", append(args, "--listen", "127.0.0.1:0")...)
	cs, changed := gatewayClient(t, &mcp.StreamableClientTransport{Endpoint: l.url,
		HTTPClient: &http.Client{Transport: bearerRT{l.token, http.DefaultTransport}}, MaxRetries: -1})
	driveGateway(t, cs, changed)
	_ = cs.Close()
	l.cancel()
	select {
	case err := <-l.done:
		if err != nil {
			t.Fatalf("exit after cancel: %v", err)
		}
	case <-time.After(12 * time.Second):
		t.Fatal("the server did not stop within the grace period")
	}
	if strings.Contains(l.stderr.String(), token) {
		t.Errorf("the token is in the logs: %s", l.stderr.String())
	}
}
