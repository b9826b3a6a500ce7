package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/fakemcp"
	"github.com/sharedos/sharedos/pkg/gateway"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

// fakeEnv re-executes this test binary as a fake upstream MCP server.
const fakeEnv = "GATEWAY_TEST_FAKE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeEnv) == "1" {
		os.Exit(fakemcp.Main())
	}
	os.Exit(m.Run())
}

const secret = "tok-9f8e7d6c5b4a"

// fakeServer is the YAML of a server that runs this binary as a fake upstream in mode.
func fakeServer(t testing.TB, id, mode, extra string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(fakeEnv, "1")
	t.Setenv("FAKE_MODE_"+strings.ToUpper(strings.ReplaceAll(id, "-", "_")), mode)
	return fmt.Sprintf(`  - id: %s
    command: [%q]
    env:
      %s: {fromEnv: %s}
      FAKEMCP_MODE: {fromEnv: FAKE_MODE_%s}
      FAKEMCP_LOG: {fromEnv: FAKE_LOG}
      TOKEN: {fromEnv: FAKE_TOKEN}
%s`, id, exe, fakeEnv, fakeEnv, strings.ToUpper(strings.ReplaceAll(id, "-", "_")), extra)
}

const githubTools = `    tools:
      get_file_contents:
        action: read
        resource:
          path: [{arg: /owner}, {arg: /repo}, contents, {arg: /path, split: "/"}]
      create_issue:
        action: "issue:create"
        resource: {path: [{arg: /owner}, {arg: /repo}, issues]}
      search_code:
        action: search
        resource: {path: []}
`

const grantFile = `version: 1
context: {world: default, actor: "agent:helper", owner: "human:alice", authority: "human:alice"}
grants:
  - id: g-app
    subject: agent:helper
    issuer: human:alice
    issuedAt: 2026-01-01T00:00:00Z
    capabilities:
      - resource: {namespace: github, path: [acme, app], owner: human:alice}
        actions: [read, "issue:create", call]
        scope: descendants
      - resource: {namespace: github, path: [], owner: human:alice}
        actions: [search, call]
        scope: descendants
      - resource: {namespace: files, path: [], owner: human:alice}
        actions: [read]
        scope: descendants
`

type env struct {
	t      testing.TB
	dir    string
	log    string
	state  string
	cfg    *gateway.Config
	logger *slog.Logger
}

func newEnv(t testing.TB, servers string) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, log: filepath.Join(dir, "upstream.log"), state: filepath.Join(dir, "state", "state.db")}
	t.Setenv("FAKE_LOG", e.log)
	t.Setenv("FAKE_TOKEN", secret)
	t.Setenv("UNRELATED_SECRET", "caller-only-"+secret)
	cfg, err := gateway.ParseBytes(filepath.Join(dir, "config.yaml"), []byte("mcpServers:\n"+servers), gateway.ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.cfg = cfg
	for _, d := range []string{"root", "state"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "grants.yaml"), []byte(grantFile), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) open(needs host.Needs) *host.Host {
	e.t.Helper()
	s := &host.Settings{Root: filepath.Join(e.dir, "root"), State: e.state, Grants: []string{filepath.Join(e.dir, "grants.yaml")},
		DefaultNamespaces: []string{"github", "files", "notes"}, MCPServers: e.cfg, ConfigFile: filepath.Join(e.dir, "config.yaml"),
		GatewayLogger: e.logger}
	needs.Planes, needs.Actor = true, true
	p, err := host.Prepare(s, time.Now, needs)
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := p.Open(context.Background())
	if err != nil {
		p.Close()
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = h.Close() })
	return h
}

func (e *env) calls() []string {
	b, err := os.ReadFile(e.log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

var callN atomic.Int64

func invoke(h *host.Host, tool, args string) kernel.ToolResult {
	actx := h.Turn.Context()
	call := kernel.ToolCall{ID: fmt.Sprintf("call-%d", callN.Add(1)), Tool: tool, Arguments: json.RawMessage(args),
		TraceID: actx.TraceID, RequestedAt: actx.Now}
	return h.Turn.InvokeTool(context.Background(), call)
}

func code(r kernel.ToolResult) string {
	if r.Error == nil {
		return string(r.Status)
	}
	return string(r.Status) + " " + string(r.Error.Code)
}

// Per-resource gating: the grant on github:[acme, app] makes get_file_contents usable on
// acme/app and nothing else; a refused or malformed call never reaches the upstream, and
// an allowed one reaches it with its arguments unchanged.
func TestPerResourceGating(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "normal", githubTools))
	h := e.open(host.Needs{})
	tools, err := h.Turn.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range tools {
		if d.Source == gateway.Source {
			names = append(names, d.Name)
		}
	}
	if strings.Join(names, ",") != "github.create_issue,github.get_file_contents,github.search_code" {
		t.Errorf("published = %v", names)
	}
	cases := []struct{ tool, args, want string }{
		{"github.get_file_contents", `{"owner":"acme","repo":"app","path":"src/main.go"}`, "succeeded"},
		{"github.get_file_contents", `{"owner":"acme","repo":"other","path":"src/main.go"}`, "denied no_matching_grant"},
		{"github.get_file_contents", `{"owner":"acme","repo":"..","path":"x"}`, "failed invalid_tool_arguments"},
		{"github.get_file_contents", `{"owner":"acme","repo":"app","path":"a//b"}`, "failed invalid_tool_arguments"},
		{"github.get_file_contents", `{"owner":"acme","repo":"app"}`, "failed invalid_tool_arguments"},
		{"github.get_file_contents", `{"owner":"acme","repo":"app","path":7}`, "failed invalid_tool_arguments"},
		{"github.get_file_contents", `{"owner":"acme","repo":"app","path":"x","ref":["main"]}`, "failed invalid_tool_arguments"},
		{"github.create_issue", `{"owner":"acme","repo":"app","title":"hi"}`, "succeeded"},
		{"github.create_issue", `{"owner":"evil","repo":"app","title":"hi"}`, "denied no_matching_grant"},
		{"github.search_code", `{"query":"x"}`, "succeeded"},
	}
	for _, c := range cases {
		if got := code(invoke(h, c.tool, c.args)); got != c.want {
			t.Errorf("%s %s = %s, want %s", c.tool, c.args, got, c.want)
		}
	}
	calls := e.calls()
	want := []string{`get_file_contents {"owner":"acme","path":"src/main.go","repo":"app"}`,
		`create_issue {"owner":"acme","repo":"app","title":"hi"}`, `search_code {"query":"x"}`}
	if strings.Join(calls, "\n") != strings.Join(want, "\n") {
		t.Errorf("upstream saw:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
	}
	r := invoke(h, "github.create_issue", `{"owner":"acme","repo":"app","title":"t2"}`)
	if out, ok := r.Output.(map[string]any); !ok || out["title"] != "t2" {
		t.Errorf("structured output = %#v", r.Output)
	}
	if d := h.Definition("github.create_issue"); d == nil || d.OutputSchema == nil || d.ReadWrite != kernel.ClassWrite {
		t.Errorf("definition = %+v", d)
	}
	if d := h.Definition("github.get_file_contents"); d == nil || d.ReadWrite != kernel.ClassRead ||
		d.Metadata["server"] != "github" || d.Metadata["upstream"].(map[string]any)["vendor/x"] != "kept" {
		t.Errorf("definition = %+v", d)
	}
}

// unavailableCause is the cause `tools list --all` shows for the tool namespace ns of
// h's turn (its row "ns.*", cause tool_catalog_unavailable), "" when ns is available.
func unavailableCause(t *testing.T, h *host.Host, ns string) string {
	t.Helper()
	all, err := h.Turn.AllTools(context.Background())
	if err != nil {
		t.Fatalf("AllTools = %v", err)
	}
	for _, s := range all {
		if s.Definition.Name == ns+".*" && s.Cause == kernel.Cause(kernel.CodeToolCatalogUnavailable) && !s.Usable {
			return s.Definition.Description
		}
	}
	return ""
}

// An upstream that crashes at start makes its own namespace unavailable, naming the
// server; the rest of the catalogue (the planes) is served. The cause (its stderr, the
// credential redacted) is in the audit trail, the listing's and the call's.
func TestCrashConfinedToItsNamespace(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "crash", githubTools))
	h := e.open(host.Needs{})
	defs, err := h.Turn.ListTools(context.Background())
	if err != nil || len(defs) == 0 {
		t.Fatalf("ListTools = %d tools, %v", len(defs), err)
	}
	for _, d := range defs {
		if d.Namespace == "github" {
			t.Errorf("listed %s of the crashed server", d.Name)
		}
	}
	cause := unavailableCause(t, h, "github")
	if !strings.Contains(cause, `provider "github"`) || !strings.Contains(cause, "missing configuration") || strings.Contains(cause, secret) {
		t.Errorf("cause = %q", cause)
	}
	r := invoke(h, "github.search_code", `{"query":"q"}`)
	if code(r) != "failed tool_catalog_unavailable" || !strings.Contains(r.Error.Message, "github") || strings.Contains(r.Error.Message, "missing configuration") {
		t.Errorf("github.search_code = %s %v", code(r), r.Error)
	}
	if r := invoke(h, "files.read", `{"path":["x"]}`); r.Error != nil && r.Error.Code == kernel.CodeToolCatalogUnavailable {
		t.Errorf("files.read = %s %v, want it decided as usual", code(r), r.Error)
	}
	evs, err := h.Store.ListAudit(context.Background(), sqlitestore.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, ev := range evs {
		if c, _ := ev.Metadata["catalogError"].(string); strings.Contains(c, "missing configuration") {
			found++
		}
		if un, _ := ev.Metadata["unavailableNamespaces"].(map[string]any); un != nil {
			if c, _ := un["github"].(string); strings.Contains(c, "missing configuration") {
				found++
			}
		}
		b, _ := json.Marshal(ev)
		if strings.Contains(string(b), secret) {
			t.Errorf("the credential is in the audit trail: %s", b)
		}
	}
	if found < 2 {
		t.Errorf("the cause is in %d audit events, want the listing's and the call's", found)
	}
}

// A server that never answers is given up after connectTimeout, and named with it.
func TestHangTimesOut(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "hang", "    connectTimeout: 300ms\n"+githubTools))
	h := e.open(host.Needs{})
	start := time.Now()
	if _, err := h.Turn.ListTools(context.Background()); err != nil {
		t.Fatalf("ListTools = %v", err)
	}
	if c := unavailableCause(t, h, "github"); !strings.Contains(c, "no answer within 300ms") {
		t.Errorf("cause = %q", c)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

// callTimeout cancels the call (retryable); an upstream isError is upstream_tool_error
// with its text capped. The timeout is what is tested: slow never answers, and every
// other call runs under a timeout of an hour.
func TestCallOutcomes(t *testing.T) {
	short := newEnv(t, fakeServer(t, "github", "normal", "    callTimeout: 300ms\n    unmapped: gate\n"))
	hs := short.open(host.Needs{})
	r := invoke(hs, "github.slow", `{}`)
	if code(r) != "failed tool_execution_failed" || r.Error.Retryable == nil || !*r.Error.Retryable || !strings.Contains(r.Error.Message, "callTimeout") {
		t.Errorf("slow = %s %+v", code(r), r.Error)
	}
	waitFor(t, func() bool { return slices.Contains(short.calls(), "slow-cancelled") }, "the upstream never saw the cancellation")
	// the other outcomes under a callTimeout that cannot fire first, however slow the machine
	e := newEnv(t, fakeServer(t, "github", "normal", "    callTimeout: 1h\n    unmapped: gate\n"))
	h := e.open(host.Needs{})
	r = invoke(h, "github.fail", `{}`)
	if code(r) != string(kernel.StatusFailed)+" "+string(gateway.CodeUpstreamToolError) || !strings.Contains(r.Error.Message, "upstream says no") {
		t.Fatalf("fail = %s %+v", code(r), r.Error)
	}
	if txt, _ := r.Error.Details["upstreamText"].(string); len(txt) != gateway.MaxErrorTextBytes {
		t.Errorf("upstream text is %d bytes, want the cap %d", len(txt), gateway.MaxErrorTextBytes)
	}
	// unmapped: gate publishes at {github, [tool]} / call; a name that is not a segment is skipped
	if r := invoke(h, "github.echo_args", `{"a":[1,2.50,{"b":null}]}`); code(r) != "succeeded" || r.Output != `{"a":[1,2.50,{"b":null}]}` {
		t.Errorf("echo_args = %s %v", code(r), r.Output)
	}
	if d := h.Definition("github.bad name!"); d != nil {
		t.Errorf("a tool whose name is not canonical was published: %+v", d)
	}
}

// giantHandler answers a call of the tool giant itself, streaming a result as
// a JSON body with little memory (this process is the one measured): 24 MiB, like the
// stdio fake's. It passes every
// other request to next.
func giantHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if r.Method != http.MethodPost || json.Unmarshal(body, &req) != nil || req.Method != "tools/call" || req.Params.Name != "giant" {
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
		chunk := bytes.Repeat([]byte("y"), 64<<10)
		for range 384 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		fmt.Fprint(w, `"}]}}`)
	})
}

// waitFor polls cond until it holds, failing after the test's own deadline (never a
// wall-clock bound of its own: a loaded machine is slow, not wrong).
func waitFor(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	for !cond() {
		if dl, ok := t.Deadline(); ok && time.Until(dl) < 5*time.Second {
			t.Fatal(msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A result over 4 MiB is refused invalid_tool_result while it is read: the callTimeout
// is an hour, so the cap (not the clock) ends it, and a 24 MiB answer costs less than
// 24 MiB of memory. The connection is dropped; the next call opens another.
func TestResultCapWhileReading(t *testing.T) {
	srv := httptest.NewServer(giantHandler(fakemcp.Handler("")))
	t.Cleanup(srv.Close)
	for _, transport := range []string{"stdio", "http"} {
		t.Run(transport, func(t *testing.T) {
			server := fakeServer(t, "github", "normal", "    callTimeout: 1h\n    unmapped: gate\n")
			if transport == "http" {
				server = fmt.Sprintf("  - id: github\n    url: %s\n    callTimeout: 1h\n    unmapped: gate\n", srv.URL)
			}
			e := newEnv(t, server)
			h := e.open(host.Needs{})
			if r := invoke(h, "github.huge", `{}`); code(r) != "failed invalid_tool_result" {
				t.Errorf("huge = %s %+v", code(r), r.Error)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			r := invoke(h, "github.giant", `{}`)
			runtime.ReadMemStats(&after)
			if code(r) != "failed invalid_tool_result" || !strings.Contains(r.Error.Message, "larger than 4 MiB") {
				t.Errorf("giant = %s %+v", code(r), r.Error)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 24<<20 {
				t.Errorf("a 24 MiB answer allocated %d MiB: it was read whole", alloc>>20)
			}
			if r := invoke(h, "github.echo_args", `{"a":1}`); code(r) != "succeeded" {
				t.Errorf("the call after the oversize one = %s %+v", code(r), r.Error)
			}
		})
	}
}

// A stdio upstream sees its configured environment, PATH and HOME, and nothing else of
// the caller's.
func TestStdioEnvironment(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "normal", "    unmapped: gate\n"))
	h := e.open(host.Needs{})
	r := invoke(h, "github.echo_env", `{}`)
	if r.Status != kernel.StatusSucceeded {
		t.Fatalf("echo_env = %s", code(r))
	}
	var names []string
	for _, l := range strings.Split(r.Output.(string), "\n") {
		k, _, _ := strings.Cut(l, "=")
		names = append(names, k)
	}
	want := "FAKEMCP_LOG,FAKEMCP_MODE,FAKEMCP_PID,GATEWAY_TEST_FAKE,HOME,PATH,TOKEN"
	if strings.Join(names, ",") != want {
		t.Errorf("upstream environment = %v, want %s", names, want)
	}
	// the value is there (only a credential's value is redacted), and comes back redacted
	if !strings.Contains(r.Output.(string), "\nTOKEN="+gateway.Redacted) || strings.Contains(r.Output.(string), secret) || strings.Contains(r.Output.(string), "caller-only") {
		t.Errorf("environment = %s", r.Output)
	}
}

// The tool list is cached in the state database by config digest: a later command lists
// without connecting until catalogTTL passes.
func TestCatalogCache(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "normal", "    catalogTTL: 1h\n"+githubTools))
	h := e.open(host.Needs{})
	if _, err := h.Turn.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = h.Close()
	// the server now crashes at start: the cached list still serves listings
	t.Setenv("FAKE_MODE_GITHUB", "crash")
	h2 := e.open(host.Needs{})
	tools, err := h2.Turn.ListTools(context.Background())
	if err != nil || len(tools) == 0 {
		t.Fatalf("cached ListTools = %d, %v", len(tools), err)
	}
	// a call connects, and fails as a call
	if r := invoke(h2, "github.search_code", `{"query":"q"}`); code(r) != "failed tool_execution_failed" || !*r.Error.Retryable {
		t.Errorf("call = %s", code(r))
	}
	// the held surface reads the live list, never the cache
	h3 := e.open(host.Needs{HoldConnections: true})
	if _, err := h3.Turn.ListTools(context.Background()); err != nil || unavailableCause(t, h3, "github") == "" {
		t.Errorf("held ListTools = %v, want github unavailable", err)
	}
	// nothing secret is in the database
	_ = h3.Close()
	_ = h2.Close()
	b, err := os.ReadFile(e.state)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), secret) {
		t.Error("the credential is in the state database")
	}
}

func TestCatalogCacheTTL(t *testing.T) {
	st, err := sqlitestore.Open(context.Background(), filepath.Join(t.TempDir(), "s.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.UnixMilli(1_800_000_000_000)
	srv := &gateway.Server{ID: "x", Namespace: "x", Command: []string{"/nonexistent/server"}, CatalogTTL: time.Minute,
		ConnectTimeout: time.Second, Unmapped: gateway.UnmappedGate, Tools: map[string]*gateway.ToolMap{}}
	list := `[{"name":"ping","description":"p","inputSchema":{"type":"object"}}]`
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	if err := st.PutGatewayCatalog(context.Background(), srv.Digest()+"|"+alice.String(), []byte(list), now); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		after time.Duration
		ok    bool
	}{{0, true}, {59 * time.Second, true}, {time.Minute, false}} {
		clock := func() time.Time { return now.Add(c.after) }
		g := gateway.New(&gateway.Config{Servers: []*gateway.Server{srv}}, gateway.Options{Cache: st, Clock: clock})
		hs, err := g.Providers()[0].ListTools(context.Background(), kernel.AccessContext{Owner: alice})
		if c.ok != (err == nil) || (c.ok && (len(hs) != 1 || hs[0].Definition.Name != "x.ping")) {
			t.Errorf("after %s: %d tools, %v", c.after, len(hs), err)
		}
		// another owner has no cache entry of its own
		if _, err := g.Providers()[0].ListTools(context.Background(), kernel.AccessContext{Owner: kernel.Address{Kind: kernel.KindHuman, ID: "bob"}}); err == nil {
			t.Error("bob was served alice's cached list")
		}
		_ = g.Close()
	}
}

// Held connections: one per (owner, server); a list_changed from the upstream refreshes
// the list and bumps the version a surface polls.
func TestHeldListChangedAndOwners(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "normal", "    unmapped: gate\n"))
	var changes atomic.Int64
	g := gateway.New(e.cfg, gateway.Options{Hold: true, OnChange: func() { changes.Add(1) }})
	defer g.Close()
	p := g.Providers()[0]
	alice := kernel.AccessContext{Owner: kernel.Address{Kind: kernel.KindHuman, ID: "alice"}, Now: "2026-01-01T00:00:00Z"}
	bob := kernel.AccessContext{Owner: kernel.Address{Kind: kernel.KindHuman, ID: "bob"}, Now: "2026-01-01T00:00:00Z"}
	find := func(actx kernel.AccessContext, name string) *kernel.ToolHandler {
		hs, err := p.ListTools(context.Background(), actx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range hs {
			if hs[i].Definition.Name == name {
				return &hs[i]
			}
		}
		return nil
	}
	pid := func(actx kernel.AccessContext) string {
		h := find(actx, "github.echo_env")
		parsed, err := h.ParseArguments(json.RawMessage(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		r, err := h.Invoke(context.Background(), actx, kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c", Tool: "github.echo_env"}, Parsed: parsed})
		if err != nil || r.Status != kernel.StatusSucceeded {
			t.Fatalf("echo_env: %v %+v", err, r)
		}
		for _, l := range strings.Split(r.Output.(string), "\n") {
			if strings.HasPrefix(l, "FAKEMCP_PID=") {
				return l
			}
		}
		return ""
	}
	pa, pb := pid(alice), pid(bob)
	if pa == "" || pa == pb || pid(alice) != pa {
		t.Errorf("connections: alice %s, bob %s (want one each, kept)", pa, pb)
	}
	// an owner's handler refuses another owner's context
	h := find(alice, "github.echo_env")
	parsed, _ := h.ParseArguments(json.RawMessage(`{}`))
	if _, err := h.Invoke(context.Background(), bob, kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c", Tool: "github.echo_env"}, Parsed: parsed}); err == nil {
		t.Error("alice's handler ran for bob")
	}
	if find(alice, "github.late_tool") != nil {
		t.Fatal("late_tool listed before it exists")
	}
	v := g.Version()
	add := find(alice, "github.add_tool")
	parsed, _ = add.ParseArguments(json.RawMessage(`{}`))
	if r, err := add.Invoke(context.Background(), alice, kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c", Tool: "github.add_tool"}, Parsed: parsed}); err != nil || r.Status != kernel.StatusSucceeded {
		t.Fatalf("add_tool: %v %+v", err, r)
	}
	deadline := time.Now().Add(10 * time.Second)
	for find(alice, "github.late_tool") == nil {
		if time.Now().After(deadline) {
			t.Fatal("late_tool never appeared after list_changed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g.Version() == v || changes.Load() == 0 {
		t.Errorf("version %d → %d, %d changes", v, g.Version(), changes.Load())
	}
	// bob's connection is his own: his list did not change
	if find(bob, "github.late_tool") != nil {
		t.Error("alice's upstream change reached bob's connection")
	}
}

// The owners filter: a server listed for alice publishes nothing for bob.
func TestOwnersFilter(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "crash", "    owners: [human:bob]\n"))
	h := e.open(host.Needs{})
	if _, err := h.Turn.ListTools(context.Background()); err != nil {
		t.Errorf("a server for bob only was asked for alice: %v", err)
	}
	if len(h.GatewayNamespaces()) != 0 || h.MayProvide("github.x") {
		t.Error("bob's server counted for alice")
	}
}

// A streamable-HTTP upstream gets its headers (the credential by reference).
func TestHTTPUpstream(t *testing.T) {
	srv := httptest.NewServer(fakemcp.Handler(secret))
	t.Cleanup(srv.Close) // after the hosts' cleanups: their sessions hold a stream open
	t.Setenv("HTTP_TOKEN", secret)
	t.Setenv("WRONG_TOKEN", "nope")
	servers := fmt.Sprintf(`  - id: github
    url: %s
    headers: {Authorization: {fromEnv: HTTP_TOKEN, prefix: "Bearer "}}
    tools:
      search_code: {action: search, resource: {path: []}}
`, srv.URL)
	e := newEnv(t, servers)
	h := e.open(host.Needs{})
	if r := invoke(h, "github.search_code", `{"query":"q"}`); code(r) != "succeeded" || r.Output != "results for q" {
		t.Errorf("github.search_code = %s %v", code(r), r.Output)
	}
	bad := newEnv(t, strings.ReplaceAll(servers, "HTTP_TOKEN", "WRONG_TOKEN"))
	hb := bad.open(host.Needs{})
	_, err := hb.Turn.ListTools(context.Background())
	if c := unavailableCause(t, hb, "github"); err != nil || c == "" || strings.Contains(c, "nope") {
		t.Errorf("wrong token: %v, %q", err, c)
	}
	missing := newEnv(t, strings.ReplaceAll(servers, "HTTP_TOKEN", "UNSET_TOKEN_VAR"))
	hm := missing.open(host.Needs{})
	_, err = hm.Turn.ListTools(context.Background())
	if c := unavailableCause(t, hm, "github"); err != nil || !strings.Contains(c, "UNSET_TOKEN_VAR is not set") {
		t.Errorf("missing credential: %v, %q", err, c)
	}
}

// A held connection that drops is reopened with backoff: the list is lost (a change),
// then regained (another change), on a new upstream process.
func TestHeldReconnect(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "normal", "    unmapped: gate\n"))
	var changes atomic.Int64
	g := gateway.New(e.cfg, gateway.Options{Hold: true, OnChange: func() { changes.Add(1) }})
	defer g.Close()
	p := g.Providers()[0]
	alice := kernel.AccessContext{Owner: kernel.Address{Kind: kernel.KindHuman, ID: "alice"}, Now: "2026-01-01T00:00:00Z"}
	run := func(name string) kernel.ToolResult {
		hs, err := p.ListTools(context.Background(), alice)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if h.Definition.Name == name {
				parsed, err := h.ParseArguments(json.RawMessage(`{}`))
				if err != nil {
					t.Fatal(err)
				}
				r, err := h.Invoke(context.Background(), alice, kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c", Tool: name}, Parsed: parsed})
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
		}
		t.Fatalf("%s not listed", name)
		return kernel.ToolResult{}
	}
	pidOf := func() string {
		r := run("github.echo_env")
		for _, l := range strings.Split(fmt.Sprint(r.Output), "\n") {
			if strings.HasPrefix(l, "FAKEMCP_PID=") {
				return l
			}
		}
		t.Fatalf("no pid in %v", r.Output)
		return ""
	}
	first := pidOf()
	if r := run("github.exit"); r.Status != kernel.StatusSucceeded {
		t.Fatalf("exit: %+v", r)
	}
	deadline := time.Now().Add(15 * time.Second)
	for changes.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d changes: the connection was not reopened", changes.Load())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if second := pidOf(); second == first {
		t.Errorf("the same upstream process after a reconnect: %s", second)
	}
}

// A held connection that cannot be opened is retried in the background with backoff:
// meanwhile operations fail at once with the cause; once the server is back, the list
// returns and a change is signalled.
func TestHeldBackoff(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "crash", "    unmapped: gate\n"))
	var changes atomic.Int64
	g := gateway.New(e.cfg, gateway.Options{Hold: true, OnChange: func() { changes.Add(1) }})
	defer g.Close()
	p := g.Providers()[0]
	alice := kernel.AccessContext{Owner: kernel.Address{Kind: kernel.KindHuman, ID: "alice"}}
	if _, err := p.ListTools(context.Background(), alice); err == nil || !strings.Contains(err.Error(), "missing configuration") {
		t.Fatalf("first list: %v", err)
	}
	start := time.Now()
	_, err := p.ListTools(context.Background(), alice)
	if err == nil || !strings.Contains(err.Error(), "reconnecting with backoff") || !strings.Contains(err.Error(), "missing configuration") {
		t.Fatalf("second list: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("the second list waited %s instead of failing at once", time.Since(start))
	}
	t.Setenv("FAKE_MODE_GITHUB", "normal")
	deadline := time.Now().Add(15 * time.Second)
	for changes.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("never reconnected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if hs, err := p.ListTools(context.Background(), alice); err != nil || len(hs) == 0 {
		t.Fatalf("after reconnect: %d, %v", len(hs), err)
	}
}

// NoConnect (shell completion) never starts a server: a cached list of any age is used,
// and a server without one offers nothing (no error).
func TestNoConnect(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "normal", "    catalogTTL: 1ms\n"+githubTools))
	h := e.open(host.Needs{Unaudited: true})
	tools, err := h.Turn.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range tools {
		if d.Source == gateway.Source {
			t.Errorf("listed without a cache: %s", d.Name)
		}
	}
	if calls := e.calls(); len(calls) != 0 {
		t.Errorf("upstream called: %v", calls)
	}
	_ = h.Close()
	// a list cached long ago (the clock is injected: no waiting for the TTL to pass) is
	// still what a command that never connects uses, the server being down
	cache := &memCache{}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := gateway.New(e.cfg, gateway.Options{Cache: cache, Clock: func() time.Time { return now }})
	actx := kernel.AccessContext{Owner: kernel.Address{Kind: "human", ID: "alice"}}
	if hs, err := g.Providers()[0].ListTools(context.Background(), actx); err != nil || len(hs) == 0 {
		t.Fatalf("connecting list: %d, %v", len(hs), err)
	}
	_ = g.Close()
	t.Setenv("FAKE_MODE_GITHUB", "crash")
	stale := gateway.New(e.cfg, gateway.Options{Cache: cache, NoConnect: true, Clock: func() time.Time { return now.Add(24 * time.Hour) }})
	defer stale.Close()
	hs, err := stale.Providers()[0].ListTools(context.Background(), actx)
	if err != nil || len(hs) != 3 {
		t.Errorf("a stale cached list was not used by a command that never connects: %d, %v", len(hs), err)
	}
	// the same stale list is not used by a command that connects: it asks the (crashing) server
	fresh := gateway.New(e.cfg, gateway.Options{Cache: cache, Clock: func() time.Time { return now.Add(24 * time.Hour) }})
	defer fresh.Close()
	if _, err := fresh.Providers()[0].ListTools(context.Background(), actx); err == nil {
		t.Error("a list past its catalogTTL was used by a command that connects")
	}
}

// memCache is a CatalogCache in memory.
type memCache struct {
	mu   sync.Mutex
	data map[string][]byte
	at   map[string]time.Time
}

func (m *memCache) GetGatewayCatalog(_ context.Context, key string) ([]byte, time.Time, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.data[key]
	return d, m.at[key], ok, nil
}

func (m *memCache) PutGatewayCatalog(_ context.Context, key string, data []byte, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		m.data, m.at = map[string][]byte{}, map[string]time.Time{}
	}
	m.data[key], m.at[key] = data, at
	return nil
}

// The resource authorized is the resource the upstream reads: against an upstream that
// decodes into a Go struct (keys matched case-insensitively, numbers into int64), a
// second key that differs only by case, or a number a float64 would round, is refused
// before anything reaches it; what is forwarded is the value the template read.
func TestAuthorizedIsWhatUpstreamReads(t *testing.T) {
	e := newEnv(t, fakeServer(t, "github", "normal", `    tools:
      struct_repo:
        action: read
        resource: {path: [{arg: /owner}, {arg: /repo}]}
      struct_row:
        action: read
        resource: {path: [rows, {arg: /id}]}
`))
	grants := strings.Replace(grantFile, `      - resource: {namespace: files, path: [], owner: human:alice}`, `      - resource: {namespace: github, path: [rows, "9007199254740992"], owner: human:alice}
        actions: [read]
        scope: exact
      - resource: {namespace: files, path: [], owner: human:alice}`, 1)
	if err := os.WriteFile(filepath.Join(e.dir, "grants.yaml"), []byte(grants), 0o600); err != nil {
		t.Fatal(err)
	}
	h := e.open(host.Needs{})
	cases := []struct{ tool, args, want, output string }{
		{"github.struct_repo", `{"owner":"acme","repo":"app"}`, "succeeded", "served acme/app"},
		{"github.struct_repo", `{"owner":"acme","repo":"app","Repo":"secret"}`, "failed invalid_tool_arguments", ""},
		{"github.struct_repo", `{"owner":"acme","Repo":"secret","repo":"app"}`, "failed invalid_tool_arguments", ""},
		{"github.struct_repo", `{"OWNER":"evil","owner":"acme","repo":"app"}`, "failed invalid_tool_arguments", ""},
		{"github.struct_repo", `{"owner":"acme","repo":"secret"}`, "denied no_matching_grant", ""},
		{"github.struct_row", `{"id":9007199254740993}`, "failed invalid_tool_arguments", ""},
		{"github.struct_row", `{"id":9007199254740992.0}`, "failed invalid_tool_arguments", ""},
		{"github.struct_row", `{"id":9.007199254740993e15}`, "failed invalid_tool_arguments", ""},
		{"github.struct_row", `{"id":9007199254740991}`, "denied no_matching_grant", ""},
	}
	for _, c := range cases {
		r := invoke(h, c.tool, c.args)
		if got := code(r); got != c.want {
			t.Errorf("%s %s = %s, want %s", c.tool, c.args, got, c.want)
		} else if c.output != "" && r.Output != c.output {
			t.Errorf("%s %s: the upstream served %v, want %s", c.tool, c.args, r.Output, c.output)
		}
	}
	if calls := e.calls(); strings.Join(calls, "\n") != `struct_repo {"owner":"acme","repo":"app"}` {
		t.Errorf("upstream saw:\n%s", strings.Join(calls, "\n"))
	}
}

// Every credential an upstream echoes — bare, without its configured prefix, base64
// or URL-encoded, in its error text, its stderr, its structured content (keys too), its
// text — is redacted before it reaches the agent's result, the audit trail or the log.
func TestCredentialsRedacted(t *testing.T) {
	const auth = "auth-5e4d3c2b1a09"
	t.Setenv("FAKE_AUTH", auth)
	e := newEnv(t, strings.Replace(fakeServer(t, "github", "normal", "    unmapped: gate\n"),
		"      TOKEN: {fromEnv: FAKE_TOKEN}\n", "      TOKEN: {fromEnv: FAKE_TOKEN}\n      AUTH: {fromEnv: FAKE_AUTH, prefix: \"token=\"}\n", 1))
	var logged strings.Builder
	e.logger = slog.New(slog.NewTextHandler(&logged, nil))
	h := e.open(host.Needs{})
	forms := []string{secret, auth, base64.StdEncoding.EncodeToString([]byte(secret)), url.QueryEscape(secret),
		base64.RawURLEncoding.EncodeToString([]byte(auth))}
	leaks := func(where, s string) {
		t.Helper()
		for _, f := range forms {
			if strings.Contains(s, f) {
				t.Errorf("%s holds the credential form %q: %s", where, f, s)
			}
		}
	}
	r := invoke(h, "github.fail_echo", `{}`)
	b, _ := json.Marshal(r)
	if code(r) != "failed upstream_tool_error" || strings.Count(r.Error.Message, gateway.Redacted) != 5 {
		t.Errorf("fail_echo = %s", b)
	}
	leaks("the failed result", string(b))
	r = invoke(h, "github.echo_secret", `{}`)
	b, _ = json.Marshal(r)
	if code(r) != "succeeded" || !strings.Contains(string(b), gateway.Redacted) {
		t.Errorf("echo_secret = %s", b)
	}
	leaks("the result", string(b))
	evs, err := h.Store.ListAudit(context.Background(), sqlitestore.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		b, _ := json.Marshal(ev)
		leaks("the audit trail", string(b))
	}
	leaks("the log", logged.String())
}
