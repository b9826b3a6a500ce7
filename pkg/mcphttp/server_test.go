package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcpserver"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
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
`

const bobGrants = `version: 1
grants:
  - id: g-bob-drafts
    subject: agent:bob-bot
    issuer: human:bob
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [create]
        scope: descendants
`

// fixture is a tokens file with two tokens (alice, bob), each with its own grant file,
// served on an httptest server.
type fixture struct {
	t          testing.TB
	dir, root  string
	state      string
	tokensPath string
	tok        map[string]string
	srv        *Server
	ts         *httptest.Server
	clock      func() time.Time
}

type fixtureOptions struct {
	maxSessions int
	clock       func() time.Time
	extraTokens string // appended to the tokens file
	aliceGrants string
}

func newFixture(t testing.TB, o fixtureOptions) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), tok: map[string]string{}}
	f.root = filepath.Join(f.dir, "root")
	must(t, os.MkdirAll(filepath.Join(f.root, "notes"), 0o755))
	must(t, os.MkdirAll(filepath.Join(f.root, "drafts"), 0o755))
	must(t, os.WriteFile(filepath.Join(f.root, "notes", "todo.md"), []byte("buy milk\n"), 0o644))
	cfgDir := filepath.Join(f.dir, "etc")
	must(t, os.MkdirAll(filepath.Join(cfgDir, "grants"), 0o755))
	if o.aliceGrants == "" {
		o.aliceGrants = aliceGrants
	}
	must(t, os.WriteFile(filepath.Join(cfgDir, "grants", "alice.yaml"), []byte(o.aliceGrants), 0o600))
	must(t, os.WriteFile(filepath.Join(cfgDir, "grants", "bob.yaml"), []byte(bobGrants), 0o600))
	f.tokensPath = filepath.Join(cfgDir, "tokens.yaml")
	for _, id := range []string{"alice", "bob"} {
		tok, err := tokens.New()
		must(t, err)
		f.tok[id] = tok
		owner, _ := kernel.ParseAddress("human:" + id)
		actor, _ := kernel.ParseAddress("agent:" + id + "-bot")
		must(t, tokens.Append(f.tokensPath, tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok),
			Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "test"}, Grants: []string{"grants/" + id + ".yaml"}}))
	}
	if o.extraTokens != "" {
		data, err := os.ReadFile(f.tokensPath)
		must(t, err)
		must(t, os.WriteFile(f.tokensPath, append(data, o.extraTokens...), 0o600))
	}
	f.state = filepath.Join(f.dir, "state", "state.db")
	f.clock = o.clock
	if f.clock == nil {
		f.clock = time.Now
	}
	srv, err := New(context.Background(), Config{
		Base:   host.Settings{Root: f.root, State: f.state, DefaultNamespaces: []string{"files", "sharedos"}},
		Tokens: f.tokensPath, Clock: f.clock, MaxSessions: o.maxSessions, PollInterval: 200 * time.Millisecond,
		// the operator's hint names commands; it must reach the log only, never the agent
		OperatorHint: func(_ *kernel.ToolDefinition, res kernel.ToolResult) string {
			return "run 'sharedos explain " + res.Tool + "' --apply grants/x.yaml"
		},
	})
	must(t, err)
	f.srv = srv
	f.ts = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		f.ts.CloseClientConnections()
		f.ts.Close()
		srv.Close()
	})
	return f
}

// bearerTransport adds the Authorization header.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// connect opens a go-sdk client session with a token; changed receives list_changed.
func (f *fixture) connect(token string, changed chan<- struct{}) (*mcp.ClientSession, error) {
	opts := &mcp.ClientOptions{}
	if changed != nil {
		opts.ToolListChangedHandler = func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "go-test-client", Version: "9.9"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: f.ts.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token}}, MaxRetries: -1}, nil)
	if err == nil {
		f.t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

func (f *fixture) mustConnect(token string, changed chan<- struct{}) *mcp.ClientSession {
	f.t.Helper()
	cs, err := f.connect(token, changed)
	must(f.t, err)
	return cs
}

// raw sends one request to /mcp.
func (f *fixture) raw(method, token, session string, body []byte, hdr map[string]string) *http.Response {
	f.t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+"/mcp", bytes.NewReader(body))
	must(f.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	must(f.t, err)
	f.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func names(ts []*mcp.Tool) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

func call(t testing.TB, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	must(t, err)
	return r
}

func (f *fixture) audit() []kernel.AuditEvent {
	f.t.Helper()
	st, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(f.t, err)
	defer st.Close()
	evs, err := st.ListAudit(context.Background(), sqlitestore.AuditFilter{Oldest: true})
	must(f.t, err)
	return evs
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func body(t testing.TB, r *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(r.Body)
	must(t, err)
	return string(b)
}

// TestHealthAndPaths: /health answers without a token, GET only; another path is 404.
func TestHealthAndPaths(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	resp, err := http.Get(f.ts.URL + "/health")
	must(t, err)
	if b := body(t, resp); resp.StatusCode != 200 || b != `{"status":"ok","protocolVersion":"1"}`+"\n" || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("health %d %q", resp.StatusCode, b)
	}
	resp, err = http.Post(f.ts.URL+"/health", "application/json", nil)
	must(t, err)
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET" {
		t.Fatalf("POST /health %d", resp.StatusCode)
	}
	resp, err = http.Get(f.ts.URL + "/v1/tools")
	must(t, err)
	if resp.StatusCode != 404 {
		t.Fatalf("unknown path %d", resp.StatusCode)
	}
}

// TestUnauthorized: a missing, malformed, unknown or expired token is 401 with the spec's
// body and header, before any session work: nothing is audited, no session is created; an
// expired token's open sessions are closed.
func TestUnauthorized(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	expired := "expired-token-value"
	f := newFixture(t, fixtureOptions{clock: clock, extraTokens: "  - id: old\n    sha256: " + tokens.Hash(expired) +
		"\n    context: {actor: agent:old}\n    expiresAt: 2026-06-01T00:00:01Z\n"})
	// the token is still valid for a second: it works
	if resp := f.raw("POST", expired, "", []byte(initBody), nil); resp.StatusCode != 200 {
		t.Fatalf("valid token %d", resp.StatusCode)
	}
	var old *principal
	for _, p := range f.srv.principals.All() {
		if p.ID == "old" {
			old = p
		}
	}
	open := func() int {
		n := 0
		for range old.Surface.srv.MCP().Sessions() {
			n++
		}
		return n
	}
	if old == nil || open() != 1 {
		t.Fatal("no session of the token while valid")
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	before := len(f.audit())
	for name, hdr := range map[string]map[string]string{
		"none":          nil,
		"basic":         {"Authorization": "Basic " + f.tok["alice"]},
		"empty bearer":  {"Authorization": "Bearer "},
		"unknown":       {"Authorization": "Bearer sharedos_nope"},
		"the hash":      {"Authorization": "Bearer " + tokens.Hash(f.tok["alice"])},
		"expired":       {"Authorization": "Bearer " + expired},
		"token+garbage": {"Authorization": "Bearer " + f.tok["alice"] + "x"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := f.raw("POST", "", "", []byte(initBody), hdr)
			b := body(t, resp)
			if resp.StatusCode != 401 || b != `{"error":"unauthorized"}`+"\n" ||
				resp.Header.Get("Www-Authenticate") != `Bearer realm="sharedos"` || resp.Header.Get("Mcp-Session-Id") != "" {
				t.Fatalf("%d %q %v", resp.StatusCode, b, resp.Header)
			}
		})
	}
	// lower-case scheme is accepted (RFC 7235: case-insensitive)
	if resp := f.raw("POST", "", "", []byte(initBody), map[string]string{"Authorization": "bearer " + f.tok["alice"]}); resp.StatusCode != 200 {
		t.Fatalf("lower-case bearer %d", resp.StatusCode)
	}
	if after := len(f.audit()); after != before {
		t.Fatalf("refused requests wrote %d audit events", after-before)
	}
	// the session made while the token was valid is closed once it expired
	deadline := time.Now().Add(3 * time.Second)
	for (f.srv.Sessions("old") != 0 || open() != 0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n, m := f.srv.Sessions("old"), open(); n != 0 || m != 0 {
		t.Fatalf("the expired token still has %d sessions (%d open in the SDK)", n, m)
	}
}

// TestTwoTokensIsolated: two tokens see only their own tools, their calls run under their
// own context, and every audit event names its token (never the token itself).
func TestTwoTokensIsolated(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	alice := f.mustConnect(f.tok["alice"], nil)
	bob := f.mustConnect(f.tok["bob"], nil)
	la, err := alice.ListTools(context.Background(), nil)
	must(t, err)
	lb, err := bob.ListTools(context.Background(), nil)
	must(t, err)
	an, bn := names(la.Tools), names(lb.Tools)
	if !slices.Contains(an, "files.read") || slices.Contains(an, "files.create") {
		t.Fatalf("alice sees %v", an)
	}
	if !slices.Contains(bn, "files.create") || slices.Contains(bn, "files.read") {
		t.Fatalf("bob sees %v", bn)
	}
	if la.Meta[mcpserver.MetaCatalogHash] == lb.Meta[mcpserver.MetaCatalogHash] {
		t.Fatal("same catalogue hash for different tool sets")
	}
	// The tokens' hosts share one state database handle (host.Principals), which writes
	// the write-ahead records of every token through one spool (sqlitestore.EnableSpool):
	// two files in all. What stays per token is the host: context, grant files, kernel,
	// planes, gateway, session and MCP server.
	if files, _ := filepath.Glob(filepath.Join(sqlitestore.SpoolDir(f.state), "*.spool")); len(files) != 2 {
		t.Fatalf("spool files with two tokens served: %q, want the shared handle's two", files)
	}
	ps := f.srv.principals.All()
	if len(ps) != 2 || ps[0].Host.Store != ps[1].Host.Store || ps[0].Host.Store != f.srv.principals.Store() ||
		ps[0].Host == ps[1].Host || ps[0].Session == ps[1].Session || ps[0].Surface.srv == ps[1].Surface.srv {
		t.Fatalf("two tokens: %d principals; want their own hosts, sessions and servers over one store handle", len(ps))
	}
	if r := call(t, alice, "files.read", map[string]any{"path": []string{"notes", "todo.md"}}); r.IsError {
		t.Fatalf("alice read: %+v", r)
	}
	r := call(t, bob, "files.read", map[string]any{"path": []string{"notes", "todo.md"}})
	if !r.IsError || r.Meta[mcpserver.MetaCode] != string(kernel.CodeToolUnavailable) {
		t.Fatalf("bob read: %+v", r)
	}
	// Over HTTP too the agent reads what it can do, never the operator's commands
	// (security issue 20, item 7).
	if wire, _ := json.Marshal(r); strings.Contains(string(wire), "sharedos ") || strings.Contains(string(wire), "explain") ||
		!strings.Contains(string(wire), "an operator must grant it") {
		t.Fatalf("bob's refusal as the client reads it: %s", wire)
	}
	if r := call(t, bob, "files.create", map[string]any{"path": []string{"drafts", "b.md"}, "content": "x"}); r.IsError {
		t.Fatalf("bob create: %+v", r)
	}
	seen := map[string]int{}
	for _, ev := range f.audit() {
		tok, _ := ev.Metadata["token"].(string)
		if ev.Metadata["surface"] != "mcp" || tok == "" {
			t.Fatalf("event without surface or token: %+v", ev)
		}
		raw, _ := json.Marshal(ev)
		if strings.Contains(string(raw), f.tok["alice"]) || strings.Contains(string(raw), f.tok["bob"]) {
			t.Fatal("a token reached the audit trail")
		}
		if want := "agent:" + tok + "-bot"; ev.Actor.String() != want {
			t.Fatalf("event of token %s has actor %s", tok, ev.Actor)
		}
		client, _ := ev.Metadata["client"].(map[string]any)
		if ev.Metadata["session"] == "" || client["name"] != "go-test-client" {
			t.Fatalf("event without session or client: %+v", ev.Metadata)
		}
		seen[tok]++
	}
	if seen["alice"] == 0 || seen["bob"] == 0 {
		t.Fatalf("events per token %v", seen)
	}
}

// TestSessionBoundToToken: a session id used with another (valid) token is 403, and the
// session still works with its own.
func TestSessionBoundToToken(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	alice := f.mustConnect(f.tok["alice"], nil)
	list := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/list","params":{}}`)
	resp := f.raw("POST", f.tok["bob"], alice.ID(), list, map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
	if b := body(t, resp); resp.StatusCode != 403 || !strings.Contains(b, `"error":"forbidden"`) {
		t.Fatalf("cross-token %d %q", resp.StatusCode, b)
	}
	resp = f.raw("POST", f.tok["alice"], alice.ID(), list, map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
	if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, "files.read") {
		t.Fatalf("own token %d %q", resp.StatusCode, b)
	}
}

// TestRevokeTakesEffect: `tokens revoke` (tokens.Remove) from another process refuses the
// next request with 401 and ends the token's sessions; the other token is unaffected.
func TestRevokeTakesEffect(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	alice := f.mustConnect(f.tok["alice"], nil)
	bob := f.mustConnect(f.tok["bob"], nil)
	if r := call(t, alice, "files.read", map[string]any{"path": []string{"notes", "todo.md"}}); r.IsError {
		t.Fatal("before revoke")
	}
	must(t, tokens.Remove(f.tokensPath, "alice"))
	if _, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.read",
		Arguments: map[string]any{"path": []string{"notes", "todo.md"}}}); err == nil {
		t.Fatal("a revoked token's call ran")
	}
	if resp := f.raw("POST", f.tok["alice"], "", []byte(initBody), nil); resp.StatusCode != 401 {
		t.Fatalf("revoked token %d", resp.StatusCode)
	}
	if r := call(t, bob, "files.create", map[string]any{"path": []string{"drafts", "c.md"}, "content": "x"}); r.IsError {
		t.Fatalf("bob after alice's revoke: %+v", r)
	}
	deadline := time.Now().Add(2 * time.Second)
	for f.srv.Sessions("alice") != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := f.srv.Sessions("alice"); n != 0 {
		t.Fatalf("revoked token still has %d sessions", n)
	}
}

// TestBrokenTokensFile: a tokens file edited into an invalid one refuses every request
// (503, fail-closed) until it is fixed; it never falls back to the previous content.
func TestBrokenTokensFile(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	good, err := os.ReadFile(f.tokensPath)
	must(t, err)
	must(t, os.WriteFile(f.tokensPath, append(good, "  - bogus\n"...), 0o600))
	resp := f.raw("POST", f.tok["alice"], "", []byte(initBody), nil)
	if b := body(t, resp); resp.StatusCode != 503 || !strings.Contains(b, `"error":"unavailable"`) {
		t.Fatalf("broken file %d %q", resp.StatusCode, b)
	}
	must(t, os.WriteFile(f.tokensPath, good, 0o600))
	if resp := f.raw("POST", f.tok["alice"], "", []byte(initBody), nil); resp.StatusCode != 200 {
		t.Fatalf("fixed file %d", resp.StatusCode)
	}
}

// TestGrantEditMidSession: editing a token's grant file changes the next call and sends
// list_changed to that token's session (within 2 s).
func TestGrantEditMidSession(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	changed := make(chan struct{}, 4)
	alice := f.mustConnect(f.tok["alice"], changed)
	l, err := alice.ListTools(context.Background(), nil)
	must(t, err)
	if slices.Contains(names(l.Tools), "files.create") {
		t.Fatal("files.create before the edit")
	}
	r := call(t, alice, "files.create", map[string]any{"path": []string{"drafts", "a.md"}, "content": "x"})
	if !r.IsError {
		t.Fatal("create allowed before the edit")
	}
	grant := filepath.Join(f.dir, "etc", "grants", "alice.yaml")
	must(t, os.WriteFile(grant, []byte(aliceGrants+`  - id: g-alice-drafts
    subject: agent:alice-bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [create]
        scope: descendants
`), 0o600))
	select {
	case <-changed:
	case <-time.After(2500 * time.Millisecond):
		t.Fatal("no list_changed within 2 s of the grant edit")
	}
	if r := call(t, alice, "files.create", map[string]any{"path": []string{"drafts", "a.md"}, "content": "x"}); r.IsError {
		t.Fatalf("create after the edit: %+v", r)
	}
}

// TestMalformedFrame: a POST whose body is not JSON is a 400 for that request only; the
// session goes on.
func TestMalformedFrame(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	alice := f.mustConnect(f.tok["alice"], nil)
	for _, b := range []string{`{not json`, `[]`, "\xff\xfe", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":[1]}}`} {
		resp := f.raw("POST", f.tok["alice"], alice.ID(), []byte(b), map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
		text := body(t, resp)
		if resp.StatusCode == 200 && !strings.Contains(text, `"error"`) {
			t.Fatalf("malformed %q answered %d %q", b, resp.StatusCode, text)
		}
	}
	if r := call(t, alice, "files.read", map[string]any{"path": []string{"notes", "todo.md"}}); r.IsError {
		t.Fatalf("session broken by a malformed frame: %+v", r)
	}
}

// TestBodyCap: a body of 4 MiB + 1 is refused 413 (with or without a Content-Length);
// a message of exactly 4 MiB is answered.
func TestBodyCap(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	alice := f.mustConnect(f.tok["alice"], nil)
	big := bytes.Repeat([]byte(" "), DefaultMaxBody+1)
	resp := f.raw("POST", f.tok["alice"], alice.ID(), big, nil)
	if b := body(t, resp); resp.StatusCode != 413 || !strings.Contains(b, `"error":"payload_too_large"`) {
		t.Fatalf("4 MiB + 1: %d %q", resp.StatusCode, b)
	}
	// chunked: no Content-Length
	req, err := http.NewRequest("POST", f.ts.URL+"/mcp", io.MultiReader(bytes.NewReader(big)))
	must(t, err)
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+f.tok["alice"])
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 413 {
		t.Fatalf("chunked 4 MiB + 1: %d", resp.StatusCode)
	}
	// a message of exactly 4 MiB (padded with white space) passes the cap
	msg := []byte(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	msg = append(msg, bytes.Repeat([]byte(" "), DefaultMaxBody-len(msg))...)
	resp = f.raw("POST", f.tok["alice"], alice.ID(), msg, map[string]string{"Mcp-Protocol-Version": "2025-06-18"})
	if b := body(t, resp); resp.StatusCode != 200 || !strings.Contains(b, `"id":3`) {
		t.Fatalf("exactly 4 MiB: %d %.200q", resp.StatusCode, b)
	}
	if r := call(t, alice, "files.read", map[string]any{"path": []string{"notes", "todo.md"}}); r.IsError {
		t.Fatal("session broken by a refused body")
	}
}

// TestSessionCap: 64 sessions per token; the 65th is 429, another token is not limited by
// it, and closing a session (DELETE) frees its place.
func TestSessionCap(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	var sessions []*mcp.ClientSession
	for i := 0; i < DefaultMaxSessions; i++ {
		sessions = append(sessions, f.mustConnect(f.tok["alice"], nil))
	}
	resp := f.raw("POST", f.tok["alice"], "", []byte(initBody), nil)
	if b := body(t, resp); resp.StatusCode != 429 || !strings.Contains(b, `"error":"too_many_sessions"`) {
		t.Fatalf("65th session %d %q", resp.StatusCode, b)
	}
	if _, err := f.connect(f.tok["alice"], nil); err == nil {
		t.Fatal("a 65th client connected")
	}
	if _, err := f.connect(f.tok["bob"], nil); err != nil {
		t.Fatalf("bob limited by alice's sessions: %v", err)
	}
	// a request that creates no session (a notification) does not hold a place
	must(t, sessions[0].Close())
	deadline := time.Now().Add(2 * time.Second)
	for f.srv.Sessions("alice") >= DefaultMaxSessions && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := f.connect(f.tok["alice"], nil); err != nil {
		t.Fatalf("no place after a session closed: %v", err)
	}
}

// TestSessionPlaceReturnedBeforeAnswer: a POST that opens no session gives its place
// under the cap back before its answer can reach the client, not when the handler
// returns (a client sending its next request as soon as it reads the answer would
// otherwise find the place still taken and be refused 429). Deterministic: the handler
// looks at the count after it wrote the answer, before it returns.
func TestSessionPlaceReturnedBeforeAnswer(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	for _, write := range []struct {
		name  string
		write func(w http.ResponseWriter)
	}{
		{"WriteHeader", func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) }},
		{"Write", func(w http.ResponseWriter) { w.Write([]byte("{}")) }},
		{"Flush", func(w http.ResponseWriter) { w.(http.Flusher).Flush() }},
	} {
		t.Run(write.name, func(t *testing.T) {
			during := -1
			next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n := f.srv.Sessions("alice"); n != 1 {
					t.Errorf("while the request runs: %d places taken, want its own 1", n)
				}
				write.write(w)
				during = f.srv.Sessions("alice")
			})
			req := httptest.NewRequest("POST", "/mcp", strings.NewReader(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
			req.Header.Set("Authorization", "Bearer "+f.tok["alice"])
			req.Header.Set("Content-Type", "application/json")
			f.srv.serveMCP(httptest.NewRecorder(), req, next)
			if during != 0 {
				t.Fatalf("after the answer was written, before the handler returned: %d places taken, want 0", during)
			}
			if n := f.srv.Sessions("alice"); n != 0 {
				t.Fatalf("after the request: %d places taken", n)
			}
		})
	}
}

// TestOriginAndHost: a cross-site browser request and a rebinding Host are refused 403.
func TestOriginAndHost(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	resp := f.raw("POST", f.tok["alice"], "", []byte(initBody), map[string]string{"Sec-Fetch-Site": "cross-site"})
	if resp.StatusCode != 403 {
		t.Fatalf("cross-site %d", resp.StatusCode)
	}
	resp = f.raw("POST", f.tok["alice"], "", []byte(initBody), map[string]string{"Origin": "http://evil.example"})
	if resp.StatusCode != 403 {
		t.Fatalf("foreign origin %d", resp.StatusCode)
	}
	req, err := http.NewRequest("POST", f.ts.URL+"/mcp", strings.NewReader(initBody))
	must(t, err)
	req.Host = "evil.example"
	req.Header.Set("Authorization", "Bearer "+f.tok["alice"])
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err = http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Fatalf("rebinding host %d", resp.StatusCode)
	}
}

// TestEphemeralToken: without a tokens file, the one ephemeral token runs under the
// base context; any other token is 401.
func TestEphemeralToken(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	must(t, os.MkdirAll(filepath.Join(root, "notes"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "notes", "todo.md"), []byte("x"), 0o644))
	g := filepath.Join(dir, "alice.yaml")
	must(t, os.WriteFile(g, []byte(aliceGrants), 0o600))
	tok, err := tokens.New()
	must(t, err)
	srv, err := New(context.Background(), Config{Base: host.Settings{Root: root, State: filepath.Join(dir, "s.db"), Grants: []string{g},
		As: "agent:alice-bot", Owner: "human:alice", DefaultNamespaces: []string{"files"}}, EphemeralToken: tok})
	must(t, err)
	ts := httptest.NewServer(srv.Handler())
	defer func() { ts.CloseClientConnections(); ts.Close(); srv.Close() }()
	f := &fixture{t: t, ts: ts}
	cs := f.mustConnect(tok, nil)
	if r := call(t, cs, "files.read", map[string]any{"path": []string{"notes", "todo.md"}}); r.IsError {
		t.Fatalf("ephemeral read: %+v", r)
	}
	if resp := f.raw("POST", "sharedos_other", "", []byte(initBody), nil); resp.StatusCode != 401 {
		t.Fatalf("other token %d", resp.StatusCode)
	}
}

// TestTokenInsideRoot: a tokens file (or a token's grant file) inside the root is refused
// at start, as for grant files.
func TestTokenInsideRoot(t *testing.T) {
	dir := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(dir, "g"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "g", "a.yaml"), []byte(aliceGrants), 0o600))
	tp := filepath.Join(dir, "tokens.yaml")
	actor, _ := kernel.ParseAddress("agent:alice-bot")
	must(t, tokens.Append(tp, tokens.NewEntry{ID: "a", SHA256: tokens.Hash("t"), Context: tokens.Context{Actor: actor}, Grants: []string{"g/a.yaml"}}))
	_, err := New(context.Background(), Config{Base: host.Settings{Root: dir, State: filepath.Join(t.TempDir(), "s.db")}, Tokens: tp})
	if err == nil || !strings.Contains(err.Error(), "lies inside the root") {
		t.Fatalf("tokens file inside the root: %v", err)
	}
}

// TestDrain: after Drain, requests are refused 503 and the sessions are closed.
func TestDrain(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	alice := f.mustConnect(f.tok["alice"], nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	must(t, f.srv.Drain(ctx))
	if _, err := alice.ListTools(context.Background(), nil); err == nil {
		t.Fatal("a drained server answered")
	}
	if resp := f.raw("POST", f.tok["alice"], "", []byte(initBody), nil); resp.StatusCode != 503 {
		t.Fatalf("after drain %d", resp.StatusCode)
	}
}

// TestLoadMaxUses: 16 concurrent HTTP sessions × 1,000 calls under one grant of
// maxUses 5000: exactly 5,000 allowed, no errors, and exactly one tool.invoked audit row
// per call. Skipped under -short.
func TestLoadMaxUses(t *testing.T) {
	if testing.Short() {
		t.Skip("load test: skipped under -short")
	}
	const sessions, calls, maxUses = 16, 1000, 5000
	f := newFixture(t, fixtureOptions{aliceGrants: strings.Replace(aliceGrants, "        scope: descendants\n",
		fmt.Sprintf("        scope: descendants\n    constraints: {maxUses: %d}\n", maxUses), 1)})
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed, denied, errs := 0, 0, []error{}
	for i := 0; i < sessions; i++ {
		cs := f.mustConnect(f.tok["alice"], nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < calls; j++ {
				r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.read",
					Arguments: map[string]any{"path": []string{"notes", "todo.md"}}})
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case r.Meta[mcpserver.MetaAuditUnavailable] != nil:
					errs = append(errs, fmt.Errorf("call %d of a session: its tool.invoked record could not be written (see the log)", j))
				case !r.IsError:
					allowed++
				case r.Meta[mcpserver.MetaCode] == string(kernel.ReasonGrantExhausted),
					// once spent, the grant discovers nothing: the tool is unavailable
					r.Meta[mcpserver.MetaCode] == string(kernel.CodeToolUnavailable) && r.Meta[mcpserver.MetaCause] == string(kernel.ReasonGrantExhausted):
					denied++
				default:
					errs = append(errs, fmt.Errorf("unexpected refusal %v", r.Meta))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d errors, first: %v", len(errs), errs[0])
	}
	if allowed != maxUses || denied != sessions*calls-maxUses {
		t.Fatalf("allowed %d denied %d, want %d and %d", allowed, denied, maxUses, sessions*calls-maxUses)
	}
	st, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(t, err)
	defer st.Close()
	inv, err := st.ListAudit(context.Background(), sqlitestore.AuditFilter{Types: []string{string(kernel.EventToolInvoked)}, Tool: "files.read"})
	must(t, err)
	ok := 0
	for _, ev := range inv {
		if ev.Outcome == kernel.OutcomeSucceeded {
			ok++
		}
	}
	if len(inv) != sessions*calls || ok != maxUses {
		t.Fatalf("%d tool.invoked rows (%d succeeded), want %d (%d)", len(inv), ok, sessions*calls, maxUses)
	}
	checked, err := st.ListAudit(context.Background(), sqlitestore.AuditFilter{Types: []string{string(kernel.EventAuthorizationChecked)},
		Outcomes: []string{string(kernel.OutcomeAllowed)}})
	must(t, err)
	consumed := 0
	for _, ev := range checked {
		if ev.Consumed != nil && *ev.Consumed {
			consumed++
		}
	}
	if consumed != maxUses {
		t.Fatalf("%d consuming allowed decisions audited, want %d", consumed, maxUses)
	}
}

// TestDrainWaitsForInFlight: Drain returns only after the in-flight requests ended (or its
// deadline passed, which it reports).
func TestDrainWaitsForInFlight(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	f.srv.inflight.Add(1) // a call being served
	drained := make(chan error, 1)
	go func() { drained <- f.srv.Drain(context.Background()) }()
	select {
	case <-drained:
		t.Fatal("Drain returned while a call was in flight")
	case <-time.After(200 * time.Millisecond):
	}
	f.srv.inflight.Done()
	select {
	case err := <-drained:
		must(t, err)
	case <-time.After(2 * time.Second):
		t.Fatal("Drain did not return after the call ended")
	}
	f2 := newFixture(t, fixtureOptions{})
	f2.srv.inflight.Add(1)
	defer f2.srv.inflight.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := f2.srv.Drain(ctx); err == nil {
		t.Fatal("Drain past its deadline reported nothing")
	}
}

// TestTokenAddedWhileRunning: a token appended by `tokens create` while the server runs
// works on its first requests, concurrent ones included (one host is kept for it);
// a token whose grant file lies inside the root is refused 503 and the others go on.
func TestTokenAddedWhileRunning(t *testing.T) {
	f := newFixture(t, fixtureOptions{})
	tok, err := tokens.New()
	must(t, err)
	actor, _ := kernel.ParseAddress("agent:alice-bot")
	owner, _ := kernel.ParseAddress("human:alice")
	must(t, tokens.Append(f.tokensPath, tokens.NewEntry{ID: "carol", SHA256: tokens.Hash(tok),
		Context: tokens.Context{Actor: actor, Owner: &owner}, Grants: []string{"grants/alice.yaml"}}))
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", f.ts.URL+"/mcp", strings.NewReader(initBody))
			req.Header.Set("Authorization", "Bearer "+tok)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				codes[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c != 200 {
			t.Fatalf("first request %d of a new token: %d", i, c)
		}
	}
	n := 0
	for _, p := range f.srv.principals.All() {
		if p.ID == "carol" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d hosts for one token", n)
	}
	// a grant file inside the root: that token is 503, the others are served
	inside := filepath.Join(f.root, "g.yaml")
	must(t, os.WriteFile(inside, []byte(aliceGrants), 0o600))
	bad, err := tokens.New()
	must(t, err)
	must(t, tokens.Append(f.tokensPath, tokens.NewEntry{ID: "leaky", SHA256: tokens.Hash(bad),
		Context: tokens.Context{Actor: actor}, Grants: []string{inside}}))
	if resp := f.raw("POST", bad, "", []byte(initBody), nil); resp.StatusCode != 503 {
		t.Fatalf("token with a grant file inside the root: %d", resp.StatusCode)
	}
	if resp := f.raw("POST", f.tok["alice"], "", []byte(initBody), nil); resp.StatusCode != 200 {
		t.Fatalf("alice beside a broken token: %d", resp.StatusCode)
	}
}

// TestEscalationLatchThroughTheStore: over HTTP, with the session's real resolver
// (EscalationResolver on the state database): after sharedos.escalate every call of that
// session — of any tool — is refused escalation_pending while the record is pending;
// another session of the same token is not latched; once the store records a decision
// (ResolveEscalation, as `escalations resolve` does) the next call runs and carries it.
// Approved and denied alike lift the latch; neither grants anything.
func TestEscalationLatchThroughTheStore(t *testing.T) {
	f := newFixture(t, fixtureOptions{aliceGrants: aliceGrants + `  - id: g-alice-escalate
    subject: agent:alice-bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos, path: [escalation]}
        actions: [request]
        scope: exact
`})
	alice := f.mustConnect(f.tok["alice"], nil)
	other := f.mustConnect(f.tok["alice"], nil)
	read := map[string]any{"path": []string{"notes", "todo.md"}}
	codeOf := func(r *mcp.CallToolResult) string {
		t.Helper()
		if !r.IsError {
			return ""
		}
		var text struct{ Code string }
		must(t, json.Unmarshal([]byte(r.Content[0].(*mcp.TextContent).Text), &text))
		return text.Code
	}
	ctx := context.Background()
	for n, decision := range []string{sqlitestore.EscalationApproved, sqlitestore.EscalationDenied} {
		if r := call(t, alice, kernel.EscalationToolName, map[string]any{"reason": "may I write drafts?"}); r.IsError {
			t.Fatalf("escalate: %s", codeOf(r))
		}
		st, err := sqlitestore.Open(ctx, f.state, sqlitestore.Options{})
		must(t, err)
		recs, err := st.ListEscalations(ctx, sqlitestore.EscalationFilter{Status: sqlitestore.EscalationPending})
		must(t, err)
		if len(recs) != 1 || recs[0].Escalation.Status != sqlitestore.EscalationPending {
			t.Fatalf("pending escalations %+v", recs)
		}
		rec := recs[0]
		for i, c := range []struct {
			name string
			args map[string]any
		}{{"files.read", read}, {"files.list", map[string]any{"path": []string{"notes"}}},
			{"files.create", map[string]any{"path": []string{"drafts", "x.md"}, "content": "x"}}, {"files.read", read}} {
			if code := codeOf(call(t, alice, c.name, c.args)); code != "escalation_pending" {
				t.Fatalf("escalation %d, call %d (%s) while pending: %q, want escalation_pending", n+1, i+1, c.name, code)
			}
		}
		if r := call(t, other, "files.read", read); r.IsError {
			t.Fatalf("another session of the token is latched: %s", codeOf(r))
		}
		owner, _ := kernel.ParseAddress("human:alice")
		at := f.clock().UTC().Format("2006-01-02T15:04:05.000Z")
		ev := kernel.AuditEvent{Version: "1", ID: fmt.Sprintf("resolve-%d", n), Type: "escalation.resolved", Outcome: kernel.OutcomeSucceeded,
			At: at, TraceID: "resolve", NamespaceID: rec.World, Actor: owner, Authority: owner, Owner: owner, Purpose: "cli",
			OperationID: rec.CallID, Tool: kernel.EscalationToolName, Source: "cli"}
		_, err = st.ResolveEscalation(ctx, rec.ID, sqlitestore.EscalationResolution{Status: decision, ResolvedBy: owner, ResolvedAt: at, Note: "note " + decision}, ev)
		must(t, err)
		must(t, st.Close())

		r := call(t, alice, "files.read", read)
		got, _ := r.Meta[mcpserver.MetaEscalation].(map[string]any)
		if r.IsError || got["id"] != float64(rec.ID) || got["callId"] != rec.CallID || got["status"] != decision || got["note"] != "note "+decision {
			t.Fatalf("the first call after %s: %s %v", decision, codeOf(r), r.Meta)
		}
		if r := call(t, alice, "files.read", read); r.IsError || r.Meta[mcpserver.MetaEscalation] != nil {
			t.Fatalf("the second call after %s: %s %v", decision, codeOf(r), r.Meta)
		}
		if code := codeOf(call(t, alice, "files.create", map[string]any{"path": []string{"drafts", "x.md"}, "content": "x"})); code != "tool_unavailable" {
			t.Fatalf("files.create after %s: %q, want tool_unavailable (resolving grants nothing)", decision, code)
		}
	}
	if _, err := os.Stat(filepath.Join(f.root, "drafts", "x.md")); !os.IsNotExist(err) {
		t.Fatalf("drafts/x.md was written: %v", err)
	}
}
