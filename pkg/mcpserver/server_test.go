package mcpserver

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

const baseGrants = `version: 1
context:
  actor: agent:helper
  owner: human:alice
grants:
  - id: g-read
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list, stat, read, search]
        scope: descendants
  - id: g-drafts
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [create, replace]
        scope: descendants
`

const escalateGrant = `  - id: g-escalate
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos, path: [escalation]}
        actions: [request]
        scope: exact
`

const deleteGrant = `  - id: g-delete
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [delete]
        scope: descendants
`

// env is a host on a temporary root, state and grant file, served by a Server, with one
// in-memory client session.
type env struct {
	t       testing.TB
	dir     string
	grants  string
	state   string
	host    *host.Host
	sess    *host.Session
	srv     *Server
	cs      *mcp.ClientSession
	changed chan struct{}
	ids     atomic.Int64
	lastID  atomic.Value
}

type envOptions struct {
	grants     string
	namespaces []string // default selection (stored selection when nil: files, sharedos)
	resolver   EscalationResolver
	hint       func(*kernel.ToolDefinition, kernel.ToolResult) string // operator hint (default: operatorHint)
	logger     *slog.Logger
	frozen     []string // host ceiling frozen paths
}

// operatorHint is the test's operator hint: text an agent must never read (it names the
// commands that write grant files).
func operatorHint(_ *kernel.ToolDefinition, res kernel.ToolResult) string {
	return "operator: run 'sharedos explain " + res.Tool + "' with the same arguments --apply grants/x.yaml (" + string(res.Error.Code) + ")"
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), changed: make(chan struct{}, 16)}
	root := filepath.Join(e.dir, "root")
	must(t, os.MkdirAll(filepath.Join(root, "notes"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "drafts"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "notes", "todo.md"), []byte("buy milk\n"), 0o644))
	e.grants = filepath.Join(e.dir, "grants.yaml")
	if o.grants == "" {
		o.grants = baseGrants
	}
	must(t, os.WriteFile(e.grants, []byte(o.grants), 0o600))
	e.state = filepath.Join(e.dir, "state", "state.db")
	ns := o.namespaces
	if ns == nil {
		ns = []string{"files", "sharedos"}
	}
	settings := &host.Settings{Root: root, State: e.state, Grants: []string{e.grants}, DefaultNamespaces: ns, FrozenPaths: o.frozen}
	p, err := host.Prepare(settings, time.Now, host.Needs{Planes: true, Actor: true, Workload: host.WorkloadServer})
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	e.host, err = p.Open(context.Background())
	must(t, err)
	e.sess, err = e.host.NewSession(time.Now)
	must(t, err)
	hint := o.hint
	if hint == nil {
		hint = operatorHint
	}
	e.srv = New(Options{Backend: sessionBackend(e.sess), OperatorHint: hint, Escalations: o.resolver, PollInterval: 200 * time.Millisecond, Logger: o.logger,
		NewID: func() string {
			id := "id-" + time.Now().Format("150405") + "-" + itoa(e.ids.Add(1))
			e.lastID.Store(id)
			return id
		}})
	e.cs = e.connect("test-client", "1.2.3")
	return e
}

// sessionBackend is the server's backend over a host session (what mcphttp.Backend is;
// this package's tests cannot import mcphttp).
func sessionBackend(s *host.Session) Backend {
	return func(meta map[string]any) Service { return s.Service(meta, "", "mcp") }
}

func (e *env) connect(name, version string) *mcp.ClientSession {
	e.t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := e.srv.Connect(ctx, st)
	must(e.t, err)
	e.t.Cleanup(func() { _ = ss.Close() })
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: version}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case e.changed <- struct{}{}:
			default:
			}
		}})
	cs, err := client.Connect(ctx, ct, nil)
	must(e.t, err)
	e.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func (e *env) list() *mcp.ListToolsResult {
	e.t.Helper()
	r, err := e.cs.ListTools(context.Background(), nil)
	must(e.t, err)
	return r
}

func (e *env) call(name string, args any) *mcp.CallToolResult {
	e.t.Helper()
	r, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	must(e.t, err)
	return r
}

func (e *env) audit() []kernel.AuditEvent {
	e.t.Helper()
	evs, err := e.host.Store.ListAudit(context.Background(), sqlitestore.AuditFilter{Oldest: true})
	must(e.t, err)
	return evs
}

func (e *env) waitChanged(within time.Duration) {
	e.t.Helper()
	select {
	case <-e.changed:
	case <-time.After(within):
		e.t.Fatalf("no notifications/tools/list_changed within %s", within)
	}
}

func (e *env) drainChanged() {
	for {
		select {
		case <-e.changed:
		default:
			return
		}
	}
}

func (e *env) writeGrants(content string) {
	e.t.Helper()
	tmp := e.grants + ".tmp"
	must(e.t, os.WriteFile(tmp, []byte(content), 0o600))
	must(e.t, os.Rename(tmp, e.grants))
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// afterCalls is how many calls the latches refused, over every session.
func (s *Server) afterCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, st := range s.sessions {
		st.mu.Lock()
		n += st.afterCalls
		st.mu.Unlock()
	}
	return n
}

func names(tools []*mcp.Tool) []string {
	out := make([]string, len(tools))
	for i, t := range tools {
		out[i] = t.Name
	}
	return out
}

func resultText(t *testing.T, r *mcp.CallToolResult) string {
	t.Helper()
	if len(r.Content) != 1 {
		t.Fatalf("content: %d items, want 1", len(r.Content))
	}
	tc, ok := r.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content is %T, want text", r.Content[0])
	}
	return tc.Text
}

// refusalOf checks an isError result and decodes its text.
func refusalOf(t *testing.T, r *mcp.CallToolResult, status kernel.ToolStatus, code kernel.ErrorCode) refusalText {
	t.Helper()
	if !r.IsError {
		t.Fatalf("isError false, want a %s %s refusal: %s", status, code, resultText(t, r))
	}
	var rt refusalText
	if err := json.Unmarshal([]byte(resultText(t, r)), &rt); err != nil {
		t.Fatalf("refusal text is not JSON: %v", err)
	}
	if rt.Status != status || rt.Code != code {
		t.Fatalf("refusal %s %s, want %s %s (%s)", rt.Status, rt.Code, status, code, rt.Message)
	}
	if r.Meta[MetaStatus] != string(status) || r.Meta[MetaCode] != string(code) {
		t.Fatalf("_meta %v, want status %s code %s", r.Meta, status, code)
	}
	if r.StructuredContent != nil {
		t.Fatalf("a refusal carries structuredContent")
	}
	return rt
}

// TestListMatchesKernel: tools/list is the kernel's filtered catalogue for the context
// (what `sharedos tools list` prints), sorted, in spec 30 §3.5's shape, with a catalogue
// hash; the dry-run projection the server uses for aliases and polling is the same set.
func TestListMatchesKernel(t *testing.T) {
	e := newEnv(t, envOptions{})
	res := e.list()
	cli, err := e.host.Turn.ListTools(context.Background())
	must(t, err)
	want := make([]string, len(cli))
	for i := range cli {
		want[i] = cli[i].Name
	}
	slices.Sort(want)
	got := names(res.Tools)
	if !slices.Equal(got, want) {
		t.Fatalf("tools/list %v\nsharedos tools list %v", got, want)
	}
	if !slices.IsSorted(got) || len(got) == 0 {
		t.Fatalf("list not sorted or empty: %v", got)
	}
	if slices.Contains(got, "files.delete") {
		t.Fatal("files.delete is listed without a delete grant")
	}
	hash, _ := res.Meta[MetaCatalogHash].(string)
	if len(hash) != 64 || strings.Trim(hash, "0123456789abcdef") != "" {
		t.Fatalf("catalogHash %q", hash)
	}
	pub, dryHash, err := e.srv.publishedNow(context.Background(), sessionBackend(e.sess)(nil))
	must(t, err)
	if dryHash != hash || len(pub) != len(got) {
		t.Fatalf("dry-run published list %d tools hash %s, tools/list %d hash %s", len(pub), dryHash, len(got), hash)
	}
	for _, tool := range res.Tools {
		def := e.host.Definition(tool.Name)
		if tool.Meta[MetaNamespace] != def.Namespace || tool.Meta[MetaSource] != def.Source {
			t.Errorf("%s _meta %v", tool.Name, tool.Meta)
		}
		if tool.Annotations == nil || tool.Annotations.ReadOnlyHint != (def.ReadWrite == kernel.ClassRead) {
			t.Errorf("%s readOnlyHint %+v, readWrite %s", tool.Name, tool.Annotations, def.ReadWrite)
		}
		if (tool.OutputSchema != nil) != (def.OutputSchema != nil) {
			t.Errorf("%s outputSchema published %v, declared %v", tool.Name, tool.OutputSchema != nil, def.OutputSchema != nil)
		}
		raw, _ := json.Marshal(tool)
		if strings.Contains(string(raw), "requiredCapability") || strings.Contains(string(raw), "g-read") {
			t.Errorf("%s publishes authority: %s", tool.Name, raw)
		}
	}
	if r := e.list(); r.Meta[MetaCatalogHash] != hash {
		t.Fatal("the same list gave another catalogHash")
	}
}

// TestCapabilities: the server advertises tools with listChanged.
func TestCapabilities(t *testing.T) {
	e := newEnv(t, envOptions{})
	caps := e.cs.InitializeResult().Capabilities
	if caps.Tools == nil || !caps.Tools.ListChanged {
		t.Fatalf("capabilities.tools %+v, want listChanged true", caps.Tools)
	}
}

// TestAllowedCall: an allowed call succeeds with the output as text and, since files.read
// declares an outputSchema and its output is an object, as structuredContent.
func TestAllowedCall(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}})
	if r.IsError {
		t.Fatalf("files.read refused: %s", resultText(t, r))
	}
	var out map[string]any
	must(t, json.Unmarshal([]byte(resultText(t, r)), &out))
	if out["content"] != "buy milk\n" {
		t.Fatalf("output %v", out)
	}
	sc, _ := json.Marshal(r.StructuredContent)
	var structured map[string]any
	must(t, json.Unmarshal(sc, &structured))
	if structured["content"] != "buy milk\n" {
		t.Fatalf("structuredContent %s", sc)
	}
	if _, ok := r.Meta[MetaStatus]; ok {
		t.Fatalf("a success carries refusal _meta: %v", r.Meta)
	}
}

// TestDeniedCall: a denial is an isError result with status, code, gate and cause in _meta
// and the hint at the end of its text; a tool hidden for want of a grant is
// tool_unavailable with the hidden cause.
func TestDeniedCall(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.call("files.create", map[string]any{"path": []string{"notes", "x.md"}, "content": "x"})
	rt := refusalOf(t, r, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant))
	if r.Meta[MetaGate] != string(kernel.GateGrant) {
		t.Fatalf("gate %v, want grant", r.Meta[MetaGate])
	}
	text := resultText(t, r)
	if !strings.HasSuffix(text, `"hint":"`+hintOperatorGrant+`"}`) || rt.Hint == "" {
		t.Fatalf("the refusal text does not end with the agent's hint: %s", text)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "root", "notes", "x.md")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("a denied create wrote the file")
	}
	if strings.Contains(text, "g-drafts") || strings.Contains(text, "g-read") {
		t.Fatalf("a refusal names a grant: %s", text)
	}

	r = e.call("files.delete", map[string]any{"path": []string{"drafts", "a.md"}})
	refusalOf(t, r, kernel.StatusDenied, kernel.CodeToolUnavailable)
	if r.Meta[MetaCause] != string(kernel.ReasonNoMatchingGrant) || r.Meta[MetaGate] == nil {
		t.Fatalf("hidden tool _meta %v, want cause no_matching_grant and a gate", r.Meta)
	}

	// A failure (bad arguments) is status failed.
	r = e.call("files.read", map[string]any{"path": "not-an-array"})
	refusalOf(t, r, kernel.StatusFailed, kernel.CodeInvalidToolArguments)
}

// TestUnknownName: a name no tool has reaches the kernel: tool_unavailable
// (not_registered), audited with the raw name — never a JSON-RPC error.
func TestUnknownName(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, name := range []string{"nope.tool", "nope_tool", "bad\xffname", "files.read\u0000"} {
		r := e.call(name, nil)
		refusalOf(t, r, kernel.StatusDenied, kernel.CodeToolUnavailable)
		if r.Meta[MetaCause] != string(kernel.CauseNotRegistered) {
			t.Fatalf("%q: cause %v, want not_registered", name, r.Meta[MetaCause])
		}
	}
	// A name that is no identifier at all (over 256 units) is the kernel's invalid_request,
	// still an in-band denial and audited.
	before := len(e.audit())
	r := e.call(strings.Repeat("x", 5000), nil)
	refusalOf(t, r, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonInvalidRequest))
	if r.Meta[MetaGate] != string(kernel.GateRequest) {
		t.Fatalf("huge name gate %v", r.Meta[MetaGate])
	}
	if len(e.audit()) == before {
		t.Fatal("the huge name's refusal was not audited")
	}
	found := false
	for _, ev := range e.audit() {
		if ev.Type == kernel.EventToolInvoked && ev.Tool == "nope.tool" && ev.Reason == kernel.CodeToolUnavailable {
			found = true
		}
	}
	if !found {
		t.Fatal("the unknown name's refusal was not audited")
	}
}

// TestAliases: a portable name (.→_) of exactly one published tool calls that tool (the
// audit shows the canonical name); a portable name of an unpublished tool is passed
// through and refused.
func TestAliases(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.call("files_read", map[string]any{"path": []string{"notes", "todo.md"}})
	if r.IsError {
		t.Fatalf("files_read refused: %s", resultText(t, r))
	}
	callID, _ := e.lastID.Load().(string)
	evs, err := e.host.Store.ListAudit(context.Background(), sqlitestore.AuditFilter{OperationID: callID,
		Types: []string{string(kernel.EventToolInvoked)}})
	must(t, err)
	if len(evs) != 1 || evs[0].Tool != "files.read" {
		t.Fatalf("alias call audited as %+v, want one tool.invoked of files.read", evs)
	}
	// files.delete is registered but not published: its portable name is not an alias.
	r = e.call("files_delete", map[string]any{"path": []string{"drafts", "a.md"}})
	refusalOf(t, r, kernel.StatusDenied, kernel.CodeToolUnavailable)
	if r.Meta[MetaCause] != string(kernel.CauseNotRegistered) {
		t.Fatalf("files_delete cause %v, want not_registered (passed through raw)", r.Meta[MetaCause])
	}
	// A multi-dot name's portable form.
	r = e.call("files_snapshot_list", map[string]any{"path": []string{"notes", "todo.md"}})
	if rt := resultText(t, r); strings.Contains(rt, "not_registered") {
		t.Fatalf("files_snapshot_list was not mapped: %s", rt)
	}
}

// TestMapName: the alias rule — exact first, else exactly one portable match, else raw.
func TestMapName(t *testing.T) {
	t.Parallel()
	pub := []string{"a.b_c", "a_b.c", "files.read", "files.snapshot.list", "x_y", "x.y"}
	for _, c := range []struct{ in, want string }{
		{"files.read", "files.read"},
		{"files_read", "files.read"},
		{"files_snapshot_list", "files.snapshot.list"},
		{"a_b_c", "a_b_c"}, // two tools share the portable form: passed through raw
		{"x_y", "x_y"},     // exact beats the alias of x.y
		{"files_write", "files_write"},
		{"", ""},
	} {
		if got := mapName(c.in, pub); got != c.want {
			t.Errorf("mapName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestNonObjectArguments: arguments that are not a JSON object are −32602 (spec 30
// §3.3), never a call; absent or null arguments are {}.
func TestNonObjectArguments(t *testing.T) {
	e := newEnv(t, envOptions{})
	before := len(e.audit())
	for _, raw := range []string{`[1,2]`, `"x"`, `42`, `true`} {
		_, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.list", Arguments: json.RawMessage(raw)})
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("arguments %s: err %v, want JSON-RPC -32602", raw, err)
		}
	}
	if n := len(e.audit()); n != before {
		t.Fatalf("a rejected frame was audited (%d → %d events)", before, n)
	}
	_, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: ""})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("no name: err %v, want -32602", err)
	}
	r := e.call("files.list", json.RawMessage(`null`))
	if r.IsError {
		if rt := resultText(t, r); !strings.Contains(rt, "invalid_tool_arguments") {
			t.Fatalf("null arguments: %s", rt)
		}
	}
}

// TestGrantEditMidSession: an edited grant file changes the very next call and the
// published list, and list_changed arrives within 2 s.
func TestGrantEditMidSession(t *testing.T) {
	e := newEnv(t, envOptions{})
	first := e.list()
	must(t, os.WriteFile(filepath.Join(e.dir, "root", "drafts", "a.md"), []byte("a"), 0o644))
	r := e.call("files.delete", map[string]any{"path": []string{"drafts", "a.md"}})
	refusalOf(t, r, kernel.StatusDenied, kernel.CodeToolUnavailable)
	e.drainChanged()

	e.writeGrants(baseGrants + deleteGrant)
	r = e.call("files.delete", map[string]any{"path": []string{"drafts", "a.md"}})
	if r.IsError {
		t.Fatalf("files.delete after the grant edit: %s", resultText(t, r))
	}
	e.waitChanged(2 * time.Second)
	second := e.list()
	if !slices.Contains(names(second.Tools), "files.delete") || second.Meta[MetaCatalogHash] == first.Meta[MetaCatalogHash] {
		t.Fatalf("list after the edit %v (hash %v, was %v)", names(second.Tools), second.Meta[MetaCatalogHash], first.Meta[MetaCatalogHash])
	}

	// Revoke by editing again: the next call is refused, and the list shrinks.
	e.drainChanged()
	e.writeGrants(baseGrants)
	r = e.call("files.delete", map[string]any{"path": []string{"drafts", "b.md"}})
	refusalOf(t, r, kernel.StatusDenied, kernel.CodeToolUnavailable)
	e.waitChanged(2 * time.Second)

	// A broken grant file fails closed: every call denied authority_unavailable.
	e.writeGrants("version: 1\ngrants: [{id: 1}]\n")
	r = e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}})
	if !r.IsError {
		t.Fatal("a refused grant file still allowed a call")
	}
	e.writeGrants(baseGrants)
	r = e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}})
	if r.IsError {
		t.Fatalf("after fixing the grant file: %s", resultText(t, r))
	}
}

// TestNamespacesDisableOtherProcess: `namespaces disable` through another store handle
// (another process) changes the next list and emits list_changed within 2 s.
func TestNamespacesDisableOtherProcess(t *testing.T) {
	e := newEnv(t, envOptions{})
	before := e.list()
	if !slices.Contains(names(before.Tools), "files.read") {
		t.Fatalf("files.read not listed: %v", names(before.Tools))
	}
	e.drainChanged()
	other, err := sqlitestore.Open(context.Background(), e.state, sqlitestore.Options{DefaultNamespaces: []string{"files", "sharedos"}})
	must(t, err)
	defer other.Close()
	_, err = other.ApplyUpdate(context.Background(), e.host.Turn.Context(), kernel.ToolNamespaceUpdate{Disable: []string{"files"}})
	must(t, err)
	start := time.Now()
	e.waitChanged(2 * time.Second)
	t.Logf("list_changed after %s", time.Since(start))
	after := e.list()
	for _, n := range names(after.Tools) {
		if strings.HasPrefix(n, "files.") {
			t.Fatalf("files tool %s listed after disable", n)
		}
	}
	r := e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}})
	refusalOf(t, r, kernel.StatusDenied, kernel.CodeToolUnavailable)
	if r.Meta[MetaCause] != string(kernel.CauseNamespaceDisabled) {
		t.Fatalf("cause %v, want namespace_disabled", r.Meta[MetaCause])
	}
}

// TestNoSpuriousListChanged: nothing changed, nothing is notified.
func TestNoSpuriousListChanged(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.list()
	select {
	case <-e.changed:
		t.Fatal("list_changed without a change")
	case <-time.After(700 * time.Millisecond):
	}
}

// TestAuditMetadata: every audit event of the session's operations carries surface mcp,
// the session id and the client's name and version.
func TestAuditMetadata(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.list()
	e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}})
	e.call("files.create", map[string]any{"path": []string{"notes", "x.md"}, "content": "x"})
	e.call("nope.tool", nil)
	evs := e.audit()
	if len(evs) < 5 {
		t.Fatalf("only %d audit events", len(evs))
	}
	session := ""
	for _, ev := range evs {
		if ev.Metadata["surface"] != "mcp" {
			t.Fatalf("%s event without surface mcp: %v", ev.Type, ev.Metadata)
		}
		s, _ := ev.Metadata["session"].(string)
		if s == "" || (session != "" && s != session) {
			t.Fatalf("%s event session %q (others %q)", ev.Type, s, session)
		}
		session = s
		client, _ := ev.Metadata["client"].(map[string]any)
		if client["name"] != "test-client" || client["version"] != "1.2.3" {
			t.Fatalf("%s event client %v", ev.Type, ev.Metadata["client"])
		}
	}
	// A second session has its own id.
	cs2 := e.connect("other-client", "9")
	_, err := cs2.ListTools(context.Background(), nil)
	must(t, err)
	evs = e.audit()
	last := evs[len(evs)-1]
	if last.Metadata["session"] == session || last.Metadata["client"].(map[string]any)["name"] != "other-client" {
		t.Fatalf("second session's event %v", last.Metadata)
	}
}

// TestMalformedFrame: a line that is not JSON ends the session (accepted SDK behaviour,
// spec 50 §2) without writing anything but JSON-RPC to the output.
func TestMalformedFrame(t *testing.T) {
	e := newEnv(t, envOptions{})
	inR, inW, err := os.Pipe()
	must(t, err)
	outR, outW, err := os.Pipe()
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(context.Background(), &mcp.IOTransport{Reader: inR, Writer: outW}) }()
	_, err = inW.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\n"))
	must(t, err)
	buf := make([]byte, 64<<10)
	n, err := outR.Read(buf)
	must(t, err)
	var resp map[string]any
	if err := json.Unmarshal(buf[:n], &resp); err != nil || resp["result"] == nil {
		t.Fatalf("initialize answer %q: %v", buf[:n], err)
	}
	_, err = inW.Write([]byte("{this is not json\n"))
	must(t, err)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the session survived a malformed frame")
	}
	_ = inW.Close()
	_ = outW.Close()
	rest, _ := readAll(outR)
	for _, line := range strings.Split(strings.TrimSpace(string(rest)), "\n") {
		if line != "" && !json.Valid([]byte(line)) {
			t.Fatalf("non-JSON on the output: %q", line)
		}
	}
}

func readAll(f *os.File) ([]byte, error) {
	var out []byte
	buf := make([]byte, 4096)
	for {
		n, err := f.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			return out, nil
		}
	}
}

// fakeResolver resolves escalations when told to.
type fakeResolver struct {
	mu  sync.Mutex
	res map[string]Resolution
	err error
}

func (f *fakeResolver) Resolution(_ context.Context, id string) (Resolution, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return Resolution{}, false, f.err
	}
	r, ok := f.res[id]
	return r, ok, nil
}

// TestEscalationLatch: an offered sharedos.escalate is recorded (audit and store) and
// answered succeeded with the note; every later call is denied escalation_pending in
// band until the operator resolves it; the next call then runs and carries the
// resolution once.
func TestEscalationLatch(t *testing.T) {
	res := &fakeResolver{res: map[string]Resolution{}}
	e := newEnv(t, envOptions{grants: baseGrants + escalateGrant, resolver: res})
	if !slices.Contains(names(e.list().Tools), kernel.EscalationToolName) {
		t.Fatal("sharedos.escalate not offered")
	}
	r := e.call(kernel.EscalationToolName, map[string]any{"reason": "  need write access to notes  "})
	if r.IsError {
		t.Fatalf("escalate: %s", resultText(t, r))
	}
	escID, _ := e.lastID.Load().(string)
	var out map[string]any
	must(t, json.Unmarshal([]byte(resultText(t, r)), &out))
	if out["escalated"] != true || out["reason"] != "need write access to notes" || out["note"] != EscalationNote {
		t.Fatalf("escalate output %v", out)
	}
	recs, err := e.host.Store.ListEscalations(context.Background(), sqlitestore.EscalationFilter{})
	must(t, err)
	if len(recs) != 1 || recs[0].CallID != escID || recs[0].Escalation.Status != "pending" {
		t.Fatalf("escalation records %+v (call %s)", recs, escID)
	}
	requested := 0
	for _, ev := range e.audit() {
		if ev.Type == kernel.EventEscalationRequested {
			requested++
		}
	}
	if requested != 1 {
		t.Fatalf("%d escalation.requested events, want 1", requested)
	}

	for range 2 {
		r = e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}})
		refusalOf(t, r, kernel.StatusDenied, CodeEscalationPending)
	}
	// An outage of the resolver keeps the latch closed.
	res.mu.Lock()
	res.err = errors.New("store down")
	res.mu.Unlock()
	refusalOf(t, e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}}), kernel.StatusDenied, CodeEscalationPending)
	res.mu.Lock()
	res.err = nil
	res.res[escID] = Resolution{Status: "denied", Note: "not now"}
	res.mu.Unlock()

	r = e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}})
	if r.IsError {
		t.Fatalf("after resolution: %s", resultText(t, r))
	}
	esc, _ := r.Meta[MetaEscalation].(map[string]any)
	if esc["id"] != escID || esc["status"] != "denied" || esc["note"] != "not now" {
		t.Fatalf("_meta escalation %v", r.Meta)
	}
	if n := len(r.Content); n != 2 || r.Content[1].(*mcp.TextContent).Text != "the operator denied your request (escalation "+escID+"): not now" {
		t.Fatalf("content after the resolution: %d items, last %#v", n, r.Content[n-1])
	}
	r = e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}})
	if r.IsError || r.Meta[MetaEscalation] != nil || len(r.Content) != 1 {
		t.Fatalf("the resolution was reported twice or the call failed: %v", r.Meta)
	}
	if e.srv.afterCalls() != 3 {
		t.Fatalf("callsAfterEscalation %d, want 3", e.srv.afterCalls())
	}
	// The latch's three refusals are in the audit trail, recorded by the kernel: denied
	// tool.invoked, source envelope, with the session's metadata and the escalation.
	pending := 0
	for _, ev := range e.audit() {
		if ev.Reason == CodeEscalationPending {
			pending++
			if ev.Type != kernel.EventToolInvoked || ev.Outcome != kernel.OutcomeDenied || ev.Source != "envelope" ||
				ev.Tool != "files.read" || ev.Metadata["surface"] != "mcp" || ev.Metadata["escalation"] != escID ||
				kernel.ClassifyRefusal(ev) != kernel.GateEnvelope {
				t.Fatalf("latch refusal event %+v", ev)
			}
		}
	}
	if pending != 3 {
		t.Fatalf("%d escalation_pending events audited, want 3", pending)
	}
}

// TestEscalateNotOffered: without an escalation grant the name passes through and is
// refused tool_unavailable; nothing is latched.
func TestEscalateNotOffered(t *testing.T) {
	e := newEnv(t, envOptions{})
	refusalOf(t, e.call(kernel.EscalationToolName, map[string]any{"reason": "x"}), kernel.StatusDenied, kernel.CodeToolUnavailable)
	if r := e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}}); r.IsError {
		t.Fatalf("latched without an escalation: %s", resultText(t, r))
	}
}

// TestExpiryListChanged: a grant expiring mid-session hides its tool from the next call
// and sends list_changed, with no input file changed (the poll recomputes the list at the
// wall-clock instant).
func TestExpiryListChanged(t *testing.T) {
	expires := time.Now().Add(1500 * time.Millisecond).UTC().Format("2006-01-02T15:04:05.000Z")
	e := newEnv(t, envOptions{grants: baseGrants + `  - id: g-delete
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [delete]
        scope: descendants
    constraints: {expiresAt: "` + expires + `"}
`})
	if !slices.Contains(names(e.list().Tools), "files.delete") {
		t.Fatal("files.delete not listed before its grant expires")
	}
	e.drainChanged()
	e.waitChanged(3500 * time.Millisecond)
	if slices.Contains(names(e.list().Tools), "files.delete") {
		t.Fatal("files.delete still listed after its grant expired")
	}
	refusalOf(t, e.call("files.delete", map[string]any{"path": []string{"drafts", "a.md"}}), kernel.StatusDenied, kernel.CodeToolUnavailable)
}

// TestAuditUnavailableIsSurfaced: a call whose tool.invoked record cannot be written is
// marked in its _meta (without the cause, which names host paths) and logged with the
// cause for the operator; the effect it had is reported, not hidden.
func TestAuditUnavailableIsSurfaced(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, envOptions{logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if r := e.call("files.read", map[string]any{"path": []string{"notes", "todo.md"}}); r.IsError || r.Meta[MetaAuditUnavailable] != nil {
		t.Fatalf("a normal call is marked: %+v", r.Meta)
	}
	// wait for the server's own writer (its spool is copied in every 10 ms) as it does
	db, err := sql.Open("sqlite", e.state+"?_pragma=busy_timeout(30000)")
	must(t, err)
	// the first call's tool.invoked record is copied in from the spool first: the
	// trigger must refuse the second call's record, not hold up the first one's (a
	// spool that cannot be copied in refuses the next call instead of running it)
	for {
		var n int
		must(t, db.QueryRow(`SELECT count(*) FROM audit_events WHERE type = 'tool.invoked'`).Scan(&n))
		if n > 0 {
			break
		}
		if dl, ok := t.Deadline(); ok && time.Until(dl) < 5*time.Second {
			t.Fatal("the first call's record never reached the database")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, err = db.Exec(`CREATE TRIGGER full_disk BEFORE INSERT ON audit_events WHEN NEW.type = 'tool.invoked'
		BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`)
	must(t, err)
	must(t, db.Close())
	r := e.call("files.create", map[string]any{"path": []string{"drafts", "x.md"}, "content": "hi"})
	if r.IsError || r.Meta[MetaAuditUnavailable] != true {
		t.Fatalf("the unaudited effect is not marked: isError %v meta %+v", r.IsError, r.Meta)
	}
	if b, err := os.ReadFile(filepath.Join(e.dir, "root", "drafts", "x.md")); err != nil || string(b) != "hi" {
		t.Fatalf("the effect: %q %v", b, err)
	}
	if s := fmt.Sprint(r.Meta); strings.Contains(s, e.state) || strings.Contains(s, "disk is full") {
		t.Fatalf("the cause reached the agent: %s", s)
	}
	if l := logs.String(); !strings.Contains(l, "tool.invoked record could not be written") || !strings.Contains(l, "disk is full") {
		t.Fatalf("not logged with its cause:\n%s", l)
	}
}
