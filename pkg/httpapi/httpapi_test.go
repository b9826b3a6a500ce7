package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcphttp"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
	"github.com/sharedos/sharedos/pkg/tokens"
)

const aliceGrants = `version: 1
grants:
  - id: g-alice-read
    subject: agent:alice-bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list, stat, read]
        scope: descendants
  - id: g-alice-drafts
    subject: agent:alice-bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [create]
        scope: descendants
    constraints: {maxUses: 2}
`

// fixture is a tokens file with an agent token (alice) and an operator token (op), served
// by the /v1 handler on an httptest server.
type fixture struct {
	t          testing.TB
	dir, root  string
	state      string
	tokensPath string
	tok        map[string]string
	srv        *mcphttp.Server
	url        string
	validate   func(t testing.TB, method, path string, status int, header http.Header, body []byte)
}

func newFixture(t testing.TB) *fixture { return newFixtureWith(t, nil) }

// newFixtureWith is newFixture with the handler's configuration adjusted by cfg.
func newFixtureWith(t testing.TB, cfg func(*httpapi.Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), tok: map[string]string{}, validate: validateResponse}
	f.root = filepath.Join(f.dir, "root")
	must(t, os.MkdirAll(filepath.Join(f.root, "notes"), 0o755))
	must(t, os.MkdirAll(filepath.Join(f.root, "drafts"), 0o755))
	must(t, os.WriteFile(filepath.Join(f.root, "notes", "todo.md"), []byte("buy milk\n"), 0o644))
	cfgDir := filepath.Join(f.dir, "etc")
	must(t, os.MkdirAll(filepath.Join(cfgDir, "grants"), 0o755))
	must(t, os.WriteFile(filepath.Join(cfgDir, "grants", "alice.yaml"), []byte(aliceGrants), 0o600))
	f.tokensPath = filepath.Join(cfgDir, "tokens.yaml")
	for _, id := range []string{"alice", "op"} {
		tok, err := tokens.New()
		must(t, err)
		f.tok[id] = tok
		owner, _ := kernel.ParseAddress("human:alice")
		actor, _ := kernel.ParseAddress("agent:alice-bot")
		e := tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok),
			Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "test"}, Grants: []string{"grants/alice.yaml"}}
		if id == "op" {
			e.Role = tokens.RoleOperator
		}
		must(t, tokens.Append(f.tokensPath, e))
	}
	f.state = filepath.Join(f.dir, "state", "state.db")
	srv, err := servetest.Start(context.Background(), host.Settings{Root: f.root, State: f.state, DefaultNamespaces: []string{"files", "sharedos"}},
		f.tokensPath, nil, func(hc *httpapi.Config) {
			hc.Logger = testLogger(t)
			if cfg != nil {
				cfg(hc)
			}
		})
	must(t, err)
	f.srv, f.url = srv.Tokens, srv.URL
	t.Cleanup(srv.Close)
	return f
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// response is one answer.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q: %v", r.body, err)
	}
	return m
}

// errCode is the envelope's code (and checks the envelope's shape).
func (r response) errCode(t testing.TB) string {
	t.Helper()
	m := r.json(t)
	e, ok := m["error"].(map[string]any)
	if !ok || len(m) != 1 {
		t.Fatalf("not an error envelope: %s", r.body)
	}
	if e["requestId"] != r.header.Get("X-Request-Id") || e["message"] == "" {
		t.Fatalf("envelope %s: requestId must be the x-request-id %q and message set", r.body, r.header.Get("X-Request-Id"))
	}
	return e["code"].(string)
}

// do sends one request with token (of f.tok, "" none) and checks the headers every
// response carries.
func (f *fixture) do(method, path, token string, body string, hdr ...string) response {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.url+path, rd)
	must(f.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+f.tok[token])
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	must(f.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(f.t, err)
	r := response{status: resp.StatusCode, header: resp.Header, body: b}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" && !(ct == "application/x-ndjson" && r.status == 200) {
		f.t.Errorf("%s %s: content-type %q", method, path, ct)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		f.t.Errorf("%s %s: cache-control %q", method, path, cc)
	}
	if resp.Header.Get("X-Request-Id") == "" {
		f.t.Errorf("%s %s: no x-request-id", method, path)
	}
	if f.validate != nil {
		f.validate(f.t, method, path, r.status, r.header, r.body)
	}
	return r
}

// doRaw is do without a body.
func (f *fixture) doRaw(method, path, token string) response {
	f.t.Helper()
	return f.do(method, path, token, "")
}

func call(id, tool string, args string) string {
	return `{"id":"` + id + `","tool":"` + tool + `","arguments":` + args + `,"traceId":"trace-1","requestedAt":"2026-01-01T00:00:00Z"}`
}

func TestHealth(t *testing.T) {
	f := newFixture(t)
	r := f.do("GET", "/health", "", "")
	if r.status != 200 || string(r.body) != `{"protocolVersion":"1","status":"ok"}`+"\n" {
		t.Fatalf("GET /health: %d %s", r.status, r.body)
	}
	r = f.do("POST", "/health", "", "{}")
	if r.status != 405 || r.errCode(t) != "method_not_allowed" || r.header.Get("Allow") != "GET" {
		t.Fatalf("POST /health: %d %s allow %q", r.status, r.body, r.header.Get("Allow"))
	}
}

func TestRequestID(t *testing.T) {
	f := newFixture(t)
	r := f.do("GET", "/v1/tools", "alice", "", "X-Request-Id", "req-42")
	if got := r.header.Get("X-Request-Id"); got != "req-42" {
		t.Fatalf("x-request-id %q, want the incoming req-42", got)
	}
	a := f.do("GET", "/v1/tools", "alice", "").header.Get("X-Request-Id")
	b := f.do("GET", "/v1/tools", "alice", "").header.Get("X-Request-Id")
	if a == "" || a == b {
		t.Fatalf("generated ids %q %q: want fresh ones", a, b)
	}
	// a generated id is a time-ordered UUID (version 7): it is the operation id of the
	// request's decision record, and the trail's operation index grows at its end
	before := time.Now().UnixMilli()
	c := f.do("GET", "/v1/tools", "alice", "").header.Get("X-Request-Id")
	after := time.Now().UnixMilli()
	var ms int64
	if len(c) != 36 || c[14] != '7' || strings.Count(c, "-") != 4 {
		t.Fatalf("generated id %q: want a version 7 UUID", c)
	}
	if _, err := fmt.Sscanf(strings.ReplaceAll(c[:13], "-", ""), "%x", &ms); err != nil || ms < before || ms > after {
		t.Fatalf("generated id %q: its time %d ms is not the request's (%d–%d)", c, ms, before, after)
	}
	// an id that is not a header-safe token is replaced
	if got := f.do("GET", "/v1/tools", "alice", "", "X-Request-Id", strings.Repeat("x", 129)).header.Get("X-Request-Id"); len(got) > 128 {
		t.Fatalf("overlong x-request-id echoed")
	}
}

func TestAuthentication(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ method, path, token string }{
		{"GET", "/v1/tools", ""},
		{"GET", "/v1/nowhere", ""}, // the host's auth error, not 404
		{"POST", "/v1/tools/invoke", ""},
	} {
		r := f.do(tc.method, tc.path, tc.token, "")
		if r.status != 401 || r.errCode(t) != "unauthorized" || r.header.Get("Www-Authenticate") != `Bearer realm="sharedos"` {
			t.Errorf("%s %s without token: %d %s", tc.method, tc.path, r.status, r.body)
		}
	}
	f.tok["mallory"] = "sharedos_not-a-real-token"
	if r := f.do("GET", "/v1/tools", "mallory", ""); r.status != 401 {
		t.Errorf("unknown token: %d", r.status)
	}
}

func TestRoutingErrors(t *testing.T) {
	f := newFixture(t)
	r := f.do("GET", "/v1/nowhere", "alice", "")
	if r.status != 404 || r.errCode(t) != "not_found" {
		t.Errorf("unknown path: %d %s", r.status, r.body)
	}
	r = f.do("POST", "/v1/tools/namespaces", "alice", "{}")
	if r.status != 405 || r.errCode(t) != "method_not_allowed" || r.header.Get("Allow") != "GET, PUT" ||
		!strings.Contains(string(r.body), "Use GET or PUT for this endpoint.") {
		t.Errorf("wrong verb: %d %s allow %q", r.status, r.body, r.header.Get("Allow"))
	}
	r = f.do("DELETE", "/v1/tools/invoke", "alice", "")
	if r.status != 405 || !strings.Contains(string(r.body), "Use POST for this endpoint.") {
		t.Errorf("wrong verb: %d %s", r.status, r.body)
	}
}

func TestBodyErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name, body, code string
		status           int
	}{
		{"empty", "", "invalid_json", 400},
		{"not json", "{", "invalid_json", 400},
		{"schema", `{"tool":"files.read"}`, "invalid_request", 400},
		{"unknown field", strings.Replace(call("c1", "files.read", `{}`), `"id"`, `"context":{},"id"`, 1), "invalid_request", 400},
		{"duplicate key", strings.Replace(call("c1", "files.read", `{}`), `"id":"c1"`, `"id":"c1","id":"c2"`, 1), "invalid_request", 400},
		{"arguments not an object", call("c1", "files.read", `[]`), "invalid_request", 400},
		{"too large", `{"x":"` + strings.Repeat("a", httpapi.DefaultMaxBody) + `"}`, "payload_too_large", 413},
	} {
		r := f.do("POST", "/v1/tools/invoke", "alice", tc.body)
		if r.status != tc.status || r.errCode(t) != tc.code {
			t.Errorf("%s: %d %s, want %d %s", tc.name, r.status, r.body, tc.status, tc.code)
		}
	}
	r := f.do("POST", "/v1/tools/invoke", "alice", "{")
	if !strings.Contains(string(r.body), "Request body is not valid JSON.") {
		t.Errorf("invalid_json message: %s", r.body)
	}
	r = f.do("POST", "/v1/tools/invoke", "alice", `{"tool":1}`)
	if !strings.Contains(string(r.body), "Request body does not match the v1 contract.") {
		t.Errorf("invalid_request message: %s", r.body)
	}
}

func TestListTools(t *testing.T) {
	f := newFixture(t)
	r := f.do("GET", "/v1/tools", "alice", "")
	var defs []kernel.ToolDefinition
	must(t, json.Unmarshal(r.body, &defs))
	names := map[string]bool{}
	for _, d := range defs {
		names[d.Name] = true
	}
	if r.status != 200 || !names["files.read"] || !names["files.create"] || names["files.delete"] {
		t.Fatalf("GET /v1/tools: %d %v", r.status, names)
	}
}

func TestInvoke(t *testing.T) {
	f := newFixture(t)
	r := f.do("POST", "/v1/tools/invoke", "alice", call("call-1", "files.read", `{"path":["notes","todo.md"]}`))
	m := r.json(t)
	if r.status != 200 || m["status"] != "succeeded" || m["callId"] != "call-1" || !strings.Contains(string(r.body), "buy milk") {
		t.Fatalf("allowed call: %d %s", r.status, r.body)
	}
	// a refusal is a 200 result, and changes nothing
	r = f.do("POST", "/v1/tools/invoke", "alice", call("call-2", "files.delete", `{"path":["notes","todo.md"]}`))
	m = r.json(t)
	if r.status != 200 || m["status"] != "denied" {
		t.Fatalf("denied call: %d %s", r.status, r.body)
	}
	if b, err := os.ReadFile(filepath.Join(f.root, "notes", "todo.md")); err != nil || string(b) != "buy milk\n" {
		t.Fatalf("the denied delete changed the file: %q %v", b, err)
	}
	// an unpublished tool name reaches the kernel, which refuses it
	r = f.do("POST", "/v1/tools/invoke", "alice", call("call-3", "nope.nothing", `{}`))
	if m := r.json(t); r.status != 200 || m["status"] != "denied" || m["error"].(map[string]any)["code"] != "tool_unavailable" {
		t.Fatalf("unknown tool: %d %s", r.status, r.body)
	}
}

func TestInvokeTrace(t *testing.T) {
	f := newFixture(t)
	// the header sets the context's trace; a body naming another is refused by the kernel
	r := f.do("POST", "/v1/tools/invoke", "alice", call("call-1", "files.read", `{"path":["notes","todo.md"]}`),
		"X-Sharedos-Trace-Id", "trace-other")
	if m := r.json(t); r.status != 200 || m["status"] != "denied" || m["error"].(map[string]any)["code"] != "trace_mismatch" {
		t.Fatalf("trace mismatch: %d %s", r.status, r.body)
	}
	r = f.do("POST", "/v1/tools/invoke", "alice", call("call-2", "files.read", `{"path":["notes","todo.md"]}`),
		"X-Sharedos-Trace-Id", "trace-1")
	if m := r.json(t); m["status"] != "succeeded" {
		t.Fatalf("same trace: %s", r.body)
	}
	// the call's records carry the trace, the call id and the token
	r = f.do("GET", "/v1/admin/audit?traceId=trace-1&type=tool.invoked", "op", "")
	if r.status == 200 && !strings.Contains(string(r.body), `"operationId":"call-2"`) {
		t.Fatalf("audit of the call: %s", r.body)
	}
}

func TestNamespaces(t *testing.T) {
	f := newFixture(t)
	r := f.do("GET", "/v1/tools/namespaces", "alice", "")
	m := r.json(t)
	if r.status != 200 || m["summary"] == nil || !strings.Contains(string(r.body), `"namespace":"files"`) {
		t.Fatalf("GET namespaces: %d %s", r.status, r.body)
	}
	for _, bad := range []string{`{}`, `{"enable":["files"],"disable":["files"]}`, `{"enable":"files"}`, `{"bogus":[]}`} {
		if r := f.do("PUT", "/v1/tools/namespaces", "alice", bad); r.status != 400 || r.errCode(t) != "invalid_request" {
			t.Errorf("PUT %s: %d %s", bad, r.status, r.body)
		}
	}
	// the refused patches stored nothing: files is still enabled
	if r := f.do("GET", "/v1/tools/namespaces", "alice", ""); !strings.Contains(string(r.body), `"effectiveSelection":["files","sharedos"]`) {
		t.Fatalf("after refused patches: %s", r.body)
	}
	r = f.do("PUT", "/v1/tools/namespaces", "alice", `{"disable":["files"]}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"effectiveSelection":["sharedos"]`) {
		t.Fatalf("PUT disable: %d %s", r.status, r.body)
	}
	r = f.do("POST", "/v1/tools/invoke", "alice", call("call-1", "files.read", `{"path":["notes","todo.md"]}`))
	if m := r.json(t); m["status"] != "denied" {
		t.Fatalf("a call in a disabled namespace: %s", r.body)
	}
}

func TestAuthorize(t *testing.T) {
	f := newFixture(t)
	req := `{"resource":{"namespace":"files","path":["drafts","a.md"]},"action":"create"}`
	for i := 0; i < 3; i++ { // maxUses 2: a dry run spends nothing, so every check allows
		r := f.do("POST", "/v1/authorize", "alice", req)
		m := r.json(t)
		if r.status != 200 || m["allowed"] != true || m["matchedGrantId"] != "g-alice-drafts" {
			t.Fatalf("authorize #%d: %d %s", i, r.status, r.body)
		}
	}
	// the grant's two uses are all still there
	for i := 0; i < 2; i++ {
		r := f.do("POST", "/v1/tools/invoke", "alice", call("c"+string(rune('a'+i)), "files.create", `{"path":["drafts","f`+string(rune('a'+i))+`.md"],"content":"x"}`))
		if m := r.json(t); m["status"] != "succeeded" {
			t.Fatalf("create #%d after the dry runs: %s", i, r.body)
		}
	}
	r := f.do("POST", "/v1/authorize", "alice", `{"resource":{"namespace":"files","path":["etc"]},"action":"delete"}`)
	m := r.json(t)
	if r.status != 200 || m["allowed"] != false || m["reasonCode"] != "no_matching_grant" || m["requiredAuthority"] == nil {
		t.Fatalf("denied authorize: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/v1/authorize", "alice", `{"resource":{"namespace":"files"},"action":"read"}`); r.status != 400 || r.errCode(t) != "invalid_request" {
		t.Fatalf("invalid requirement: %d %s", r.status, r.body)
	}
}

func TestReach(t *testing.T) {
	f := newFixture(t)
	r := f.do("GET", "/v1/reach", "alice", "")
	want := `{"status":"computed","reach":[{"namespace":"files","path":[],"actions":["list","read","stat"],"scope":"descendants"},` +
		`{"namespace":"files","path":["drafts"],"actions":["create"],"scope":"descendants"}]}` + "\n"
	if r.status != 200 || string(r.body) != want {
		t.Fatalf("GET /v1/reach: %d %s\nwant %s", r.status, r.body, want)
	}
}

func TestRevocation(t *testing.T) {
	f := newFixture(t)
	if r := f.do("GET", "/v1/tools", "alice", ""); r.status != 200 {
		t.Fatalf("before revocation: %d", r.status)
	}
	must(t, tokens.Remove(f.tokensPath, "alice"))
	if r := f.do("GET", "/v1/tools", "alice", ""); r.status != 401 || r.errCode(t) != "unauthorized" {
		t.Fatalf("after revocation: %d %s", r.status, r.body)
	}
}

func TestDrain(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must(t, f.srv.Drain(ctx))
	if r := f.do("GET", "/v1/tools", "alice", ""); r.status != 503 || r.errCode(t) != "shutting_down" {
		t.Fatalf("while draining: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/health", "", ""); r.status != 200 {
		t.Fatalf("health while draining: %d", r.status)
	}
}

func TestMCPMounted(t *testing.T) {
	f := newFixture(t)
	req, _ := http.NewRequest("POST", f.url+"/mcp", bytes.NewReader([]byte(`{}`)))
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	// /mcp is the MCP surface's: its own 401 (no envelope), not the /v1 404
	if resp.StatusCode != 401 {
		t.Fatalf("POST /mcp without token: %d", resp.StatusCode)
	}
}

// auditCount is the number of audit events of the fixture's state database.
func (f *fixture) auditCount(t testing.TB) int {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(t, err)
	defer st.Close()
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{})
	must(t, err)
	return len(evs)
}

func TestExplain(t *testing.T) {
	f := newFixture(t)
	f.do("GET", "/v1/tools", "alice", "") // the authority's record, written once
	before := f.auditCount(t)
	create := call("call-1", "files.create", `{"path":["drafts","a.md"],"content":"x"}`)
	for i := 0; i < 3; i++ { // maxUses 2: an explanation spends nothing
		r := f.do("POST", "/v1/tools/explain", "alice", create)
		var ex api.Explanation
		must(t, json.Unmarshal(r.body, &ex))
		if r.status != 200 || !ex.Allowed || ex.MatchedGrant == nil || ex.MatchedGrant.ID != "g-alice-drafts" {
			t.Fatalf("explain allowed create #%d: %d %s", i, r.status, r.body)
		}
	}
	r := f.do("POST", "/v1/tools/explain", "alice", call("call-2", "files.delete", `{"path":["notes","todo.md"]}`))
	var ex api.Explanation
	must(t, json.Unmarshal(r.body, &ex))
	if r.status != 200 || ex.Allowed || ex.Refusal == nil || ex.Refusal.Code != "tool_unavailable" || len(ex.Fixes) == 0 || len(ex.Candidates) == 0 {
		t.Fatalf("explain denied delete: %d %s", r.status, r.body)
	}
	// authorize?explain=true: the same explanation of a bare requirement
	r = f.do("POST", "/v1/authorize?explain=true", "alice", `{"resource":{"namespace":"files","path":["notes","todo.md"]},"action":"delete"}`)
	ex = api.Explanation{}
	must(t, json.Unmarshal(r.body, &ex))
	if r.status != 200 || ex.Allowed || ex.Refusal == nil || ex.Refusal.Code != "no_matching_grant" || ex.Refusal.Gate != "grant" ||
		len(ex.Fixes) != 1 || ex.Fixes[0].Kind != api.FixAddGrant || !strings.Contains(ex.Fixes[0].YAML, "delete") {
		t.Fatalf("authorize?explain=true: %d %s", r.status, r.body)
	}
	r = f.do("POST", "/v1/authorize?explain=true", "alice", `{"resource":{"namespace":"files","path":["drafts","x.md"]},"action":"create"}`)
	if m := r.json(t); m["allowed"] != true || m["matchedGrant"] == nil {
		t.Fatalf("authorize?explain=true allowed: %s", r.body)
	}
	if r := f.do("POST", "/v1/authorize?explain=maybe", "alice", `{"resource":{"namespace":"files","path":[]},"action":"read"}`); r.status != 400 {
		t.Fatalf("explain=maybe: %d", r.status)
	}
	if after := f.auditCount(t); after != before {
		t.Fatalf("explanations wrote %d audit events", after-before)
	}
	// both uses are still there
	for i, name := range []string{"a.md", "b.md"} {
		r := f.do("POST", "/v1/tools/invoke", "alice", call("c"+name, "files.create", `{"path":["drafts","`+name+`"],"content":"x"}`))
		if m := r.json(t); m["status"] != "succeeded" {
			t.Fatalf("create #%d after the explanations: %s", i, r.body)
		}
	}
}

// testLogger logs to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, nil))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// auditOf is the fixture's audit events of type typ written for token.
func (f *fixture) auditOf(t testing.TB, typ kernel.AuditEventType, token string) []kernel.AuditEvent {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(t, err)
	defer st.Close()
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{Types: []string{string(typ)}, Oldest: true})
	must(t, err)
	var out []kernel.AuditEvent
	for _, ev := range evs {
		if ev.Metadata["token"] == token {
			out = append(out, ev)
		}
	}
	return out
}

// A token's context is a long-lived session (spec 50 §1): its requests record
// authority.resolved once per authority, not once per request, and again when the
// authority changes; every authorize still records its decision with its own request id.
func TestAuthorityResolvedOncePerSession(t *testing.T) {
	f := newFixture(t)
	req := `{"resource":{"namespace":"files","path":["notes","todo.md"]},"action":"read"}`
	const n = 5
	ids := map[string]bool{}
	for i := 0; i < n; i++ {
		r := f.do("POST", "/v1/authorize", "alice", req, "X-Sharedos-Trace-Id", fmt.Sprintf("trace-%d", i))
		if m := r.json(t); r.status != 200 || m["allowed"] != true {
			t.Fatalf("authorize #%d: %d %s", i, r.status, r.body)
		}
		ids[r.header.Get("X-Request-Id")] = true
	}
	res := f.auditOf(t, kernel.EventAuthorityResolved, "alice")
	if len(res) != 1 {
		t.Fatalf("%d authorize requests wrote %d authority.resolved records, want 1", n, len(res))
	}
	hash := res[0].AuthorityHash
	decisions := f.auditOf(t, kernel.EventAuthorizationChecked, "alice")
	if len(decisions) != n {
		t.Fatalf("%d authorize requests wrote %d decision records, want %d", n, len(decisions), n)
	}
	traces := map[string]bool{}
	for _, d := range decisions {
		rid, _ := d.Metadata["requestId"].(string)
		if !ids[rid] || d.AuthorityHash != hash {
			t.Errorf("decision record: requestId %q (want one of the responses'), authorityHash %q (want %q)", rid, d.AuthorityHash, hash)
		}
		delete(ids, rid)
		traces[d.TraceID] = true
	}
	if len(traces) != n {
		t.Errorf("the decision records carry %d distinct traces, want %d (their requests')", len(traces), n)
	}

	// the grant file edited: a new authority, recorded once more
	grants := filepath.Join(f.dir, "etc", "grants", "alice.yaml")
	must(t, os.WriteFile(grants, []byte(aliceGrants+`  - id: g-alice-notes
    subject: agent:alice-bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [notes]}
        actions: [create]
        scope: descendants
`), 0o600))
	for i := 0; i < 2; i++ {
		if r := f.do("POST", "/v1/authorize", "alice", req); r.status != 200 {
			t.Fatalf("authorize after the edit: %d %s", r.status, r.body)
		}
	}
	res = f.auditOf(t, kernel.EventAuthorityResolved, "alice")
	if len(res) != 2 || res[1].AuthorityHash == hash {
		t.Fatalf("after the grant file was edited: %d authority.resolved records (want 2, the second of a new hash): %+v", len(res), res)
	}
}
