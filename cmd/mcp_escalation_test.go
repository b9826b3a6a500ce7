package cmd

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// escalationGrants lets agent:helper (for human:alice) list and read the whole root,
// create under drafts and ask for an escalation.
const escalationGrants = `version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-read
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list, read]
        scope: descendants
  - id: g-drafts
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [create]
        scope: descendants
  - id: g-escalate
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos, path: [escalation]}
        actions: [request]
        scope: exact
`

// escalationFixture writes the root (notes/todo.md, an empty drafts) and the grant file
// under dir, and returns the flags every command of the test takes.
func escalationFixture(t *testing.T, dir string) (root string, flags []string) {
	t.Helper()
	root = filepath.Join(dir, "root")
	for _, d := range []string{"notes", "drafts"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "notes", "todo.md"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	grants := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(grants, []byte(escalationGrants), 0o600); err != nil {
		t.Fatal(err)
	}
	return root, []string{"--root", root, "--grants", grants, "--namespaces", "files,sharedos",
		"--state", filepath.Join(dir, "state", "state.db")}
}

// TestMCPStdioEscalationLatch: `sharedos mcp` on stdio, with its real session, state
// database and resolver: after sharedos.escalate every call is refused
// escalation_pending until `sharedos escalations resolve` records a decision.
func TestMCPStdioEscalationLatch(t *testing.T) {
	dir, env := sandbox(t)
	root, flags := escalationFixture(t, dir)
	run := startStdio(append([]string{"mcp", "--log-format", "json"}, flags...), env)
	client := mcp.NewClient(&mcp.Implementation{Name: "latch-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), run.transport(), nil)
	if err != nil {
		t.Fatal(err)
	}
	escalationLatch(t, cs, env, root, flags)
	run.endOfInput(t, 10*time.Second)
	_ = cs.Close()
}

// TestMCPListenEscalationLatch is TestMCPStdioEscalationLatch over `mcp --listen`.
func TestMCPListenEscalationLatch(t *testing.T) {
	dir, env := sandbox(t)
	root, flags := escalationFixture(t, dir)
	l := startListen(t, env, "http", append(append([]string{"mcp", "--log-format", "json"}, flags...), "--listen", "127.0.0.1:0")...)
	client := mcp.NewClient(&mcp.Implementation{Name: "latch-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: l.url,
		HTTPClient: &http.Client{Transport: bearerRT{l.token, http.DefaultTransport}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	escalationLatch(t, cs, env, root, flags)
	_ = cs.Close()
	l.cancel()
	select {
	case err := <-l.done:
		if err != nil {
			t.Fatalf("exit after cancel: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the server did not stop")
	}
}

// escalationLatch drives one session through two escalations: the first approved, the
// second denied, each resolved by the `escalations resolve` command on the session's
// state database. While one is pending, every call — of any tool, allowed or not — is
// refused escalation_pending and changes nothing; after its resolution the next call
// runs and carries the resolution once, and nothing is granted by it.
func escalationLatch(t *testing.T, cs *mcp.ClientSession, env func(string) string, root string, flags []string) {
	t.Helper()
	ctx := context.Background()
	callTool := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	codeOf := func(r *mcp.CallToolResult) string {
		t.Helper()
		if !r.IsError {
			return ""
		}
		var text struct{ Code string }
		if err := json.Unmarshal([]byte(r.Content[0].(*mcp.TextContent).Text), &text); err != nil {
			t.Fatal(err)
		}
		return text.Code
	}
	read := map[string]any{"path": []string{"notes", "todo.md"}}
	draft := filepath.Join(root, "drafts", "x.md")
	create := map[string]any{"path": []string{"drafts", "x.md"}, "content": "x"}
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "sharedos.escalate") {
		t.Fatalf("sharedos.escalate not offered: %v", names)
	}
	if r := callTool("files.read", read); r.IsError {
		t.Fatalf("files.read before any escalation: %s", codeOf(r))
	}

	type pendingRow struct {
		ID     int64
		CallID string `json:"callId"`
		Status string
	}
	escalate := func(reason string) pendingRow {
		t.Helper()
		if r := callTool("sharedos.escalate", map[string]any{"reason": reason}); r.IsError {
			t.Fatalf("escalate: %s", codeOf(r))
		}
		code, out, errOut := run1(t, env, append([]string{"escalations", "list", "--status", "pending", "-o", "json"}, flags...)...)
		var rows []pendingRow
		if code != 0 || json.Unmarshal([]byte(out), &rows) != nil || len(rows) != 1 || rows[0].Status != "pending" || rows[0].CallID == "" {
			t.Fatalf("escalations list --status pending: exit %d %s %s", code, out, errOut)
		}
		return rows[0]
	}
	latched := func(esc pendingRow) {
		t.Helper()
		for i, c := range []struct {
			name string
			args map[string]any
		}{{"files.read", read}, {"files.list", map[string]any{"path": []string{"notes"}}}, {"files.create", create},
			{"files.delete", map[string]any{"path": []string{"notes", "todo.md"}}}, {"files.read", read}} {
			r := callTool(c.name, c.args)
			if code := codeOf(r); code != "escalation_pending" {
				t.Fatalf("call %d (%s) while escalation %d is pending: code %q, want escalation_pending", i+1, c.name, esc.ID, code)
			}
			if text := r.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "(escalation "+strconv.FormatInt(esc.ID, 10)+")") {
				t.Fatalf("call %d (%s) while escalation %d is pending does not name it as the CLI does: %s", i+1, c.name, esc.ID, text)
			}
		}
		if _, err := os.Stat(draft); !os.IsNotExist(err) {
			t.Fatalf("a latched files.create wrote %s: %v", draft, err)
		}
		if b, err := os.ReadFile(filepath.Join(root, "notes", "todo.md")); err != nil || string(b) != "buy milk\n" {
			t.Fatalf("notes/todo.md after latched calls: %q %v", b, err)
		}
	}
	resolve := func(esc pendingRow, decision, note string) {
		t.Helper()
		code, out, errOut := run1(t, env, append([]string{"escalations", "resolve", strconv.FormatInt(esc.ID, 10), "--" + decision, "--note", note}, flags...)...)
		if code != 0 {
			t.Fatalf("escalations resolve %d --%s: exit %d %s %s", esc.ID, decision, code, out, errOut)
		}
	}
	resolvedOnce := func(esc pendingRow, status, note string) {
		t.Helper()
		r := callTool("files.read", read)
		if r.IsError {
			t.Fatalf("the first call after the %s resolution: %s", status, codeOf(r))
		}
		// The same id as the CLI's: the ID column of `escalations list`, the number
		// `escalations resolve` took (a JSON number), with the call's id beside it.
		got, _ := r.Meta["sharedos/escalation"].(map[string]any)
		if got["id"] != float64(esc.ID) || got["callId"] != esc.CallID || got["status"] != status || got["note"] != note {
			t.Fatalf("_meta of the first call after the resolution: %v, want id %d status %s note %q", r.Meta, esc.ID, status, note)
		}
		// The model reads content, not _meta: one line after the result's own text.
		verb := map[string]string{"approved": "approved", "denied": "denied"}[status]
		want := "the operator " + verb + " your request (escalation " + strconv.FormatInt(esc.ID, 10) + "): " + note
		if len(r.Content) != 2 || r.Content[1].(*mcp.TextContent).Text != want {
			t.Fatalf("content of the first call after the resolution: %d items, last %#v, want %q", len(r.Content), r.Content[len(r.Content)-1], want)
		}
		if r := callTool("files.read", read); r.IsError || r.Meta["sharedos/escalation"] != nil || len(r.Content) != 1 {
			t.Fatalf("the second call after the resolution: %s %v", codeOf(r), r.Meta)
		}
		// resolving granted nothing
		if code := codeOf(callTool("files.delete", map[string]any{"path": []string{"notes", "todo.md"}})); code != "tool_unavailable" {
			t.Fatalf("files.delete after the resolution: %q, want tool_unavailable", code)
		}
	}

	first := escalate("need to delete a note")
	latched(first)
	resolve(first, "approve", "go ahead")
	resolvedOnce(first, "approved", "go ahead")
	if r := callTool("files.create", create); r.IsError {
		t.Fatalf("files.create once the latch is lifted: %s", codeOf(r))
	}
	if err := os.Remove(draft); err != nil {
		t.Fatal(err)
	}

	second := escalate("need to delete another note")
	if second.ID == first.ID || second.CallID == first.CallID {
		t.Fatalf("the second escalation is the first: %+v", second)
	}
	latched(second)
	resolve(second, "deny", "not now")
	resolvedOnce(second, "denied", "not now")
}
