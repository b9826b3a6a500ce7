// Package httpapi serves `sharedos serve` (spec 50 §5, spec 30 §2): the HTTP /v1 API over
// api.Service, one service per request and principal.
//
// The request pipeline, in order (spec 30 §2.3):
//
//  1. the request id: the incoming x-request-id (1–128 visible ASCII characters), else a
//     fresh time-ordered UUID (version 7); every response carries it (x-request-id, and
//     error.requestId);
//  2. /health: GET answers {"status":"ok","protocolVersion":"1"} with no credentials,
//     any other verb is 405;
//  3. the principal (Config.Authenticate: the bearer token of the tokens file): a refusal
//     is the authenticator's status and code (401 unauthorized, 503 unavailable) — so an
//     unauthenticated request to an unknown path gets 401, not 404;
//  4. the route: an unknown path is 404 not_found, a wrong verb 405 method_not_allowed
//     (with Allow, the message listing the verbs), an operator route for a token without
//     role operator 403 permission_denied;
//  5. POST/PUT bodies: over the cap (4 MiB) 413 payload_too_large; empty or not JSON 400
//     invalid_json; not the route's contract 400 invalid_request, with a fixed message
//     (content-type is not checked);
//  6. the operation, on api.Service with the request's context (a client that goes away
//     cancels it).
//
// Every response is application/json with cache-control: no-store. A kernel refusal is
// a 200 result (a denied ToolResult, allowed:false), never an HTTP error; the error
// envelope {"error":{"code","message","requestId"}} is only for requests that failed as
// requests. A failure of the operation maps by its api.Error code: invalid_request 400,
// not_found 404, state_unavailable and tool_catalog_unavailable 503, anything else 500
// internal_error with no internal detail (the detail goes to the log).
//
// The package translates HTTP to api.Service only: it never authorizes, filters or
// audits on its own.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	openapi "github.com/sharedos/sharedos/api"
	"github.com/sharedos/sharedos/internal/uuid"
	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// DefaultMaxBody caps a request body (4 MiB, spec 50 §5).
const DefaultMaxBody = 4 << 20

// ProtocolVersion is the wire protocol version /health reports.
const ProtocolVersion = "1"

// Backend is what a request's operations run on: api.Service, the /v1 checks and the
// mailbox (the message routes).
type Backend interface {
	api.Service
	api.Checks
	api.Admin
	api.Messaging
}

// Principal is the authenticated caller of one request.
type Principal interface {
	// ID is the token's id (logged and audited; never the token).
	ID() string
	// Operator reports whether the token's role is operator (the /v1/admin routes).
	Operator() bool
	// Service returns the backend of one request: its operations under the principal's
	// context, with trace as the context's trace id ("" : the principal's own) and meta
	// on every audit event.
	Service(meta map[string]any, trace string) Backend
	// Scope is the scope of the principal's idempotency keys (ContextScope of its
	// context).
	Scope() string
	// AccessContext is the principal's access context now (its instant and namespace
	// selection read now); it writes nothing.
	AccessContext(ctx context.Context) (kernel.AccessContext, error)
	// Idempotency is the store of the idempotency keys (nil: none is kept, and a request
	// with a key is refused 501).
	Idempotency() store.Idempotency
}

// Error is a request refused as a request: its HTTP status, the envelope's code and
// message, and headers to add (www-authenticate on a 401).
type Error struct {
	Status  int
	Code    string
	Message string
	// Hint is how to fix it ("" when none): the envelope's hint, our extension of spec
	// 30 §2.6, so a --server command prints the "hint:" line the embedded one prints.
	Hint   string
	Header http.Header
}

func (e *Error) Error() string { return e.Message }

// Config configures a Handler.
type Config struct {
	// Authenticate resolves a request's principal; a refusal is an *Error (any other
	// error is 500 internal_error).
	Authenticate func(r *http.Request) (Principal, error)
	// Enter, when set, counts an in-flight request that a drain waits for; ok false
	// refuses it 503 shutting_down.
	Enter func() (leave func(), ok bool)
	// MCP, when set, is mounted at /mcp (`serve --mcp`); it handles its own credentials.
	MCP http.Handler
	// MaxBody caps a request body (default DefaultMaxBody).
	MaxBody int64
	Logger  *slog.Logger
	// NewID returns a fresh request id (default: a time-ordered random UUID, version 7:
	// a request id is the operation id of its decision record, and the audit trail's
	// operation index then grows at its end instead of at a random page per request).
	NewID func() string
	// IdempotencyWindow is how long an Idempotency-Key's response is kept (default
	// DefaultIdempotencyWindow); ReplayWait how long the same request waits for a running
	// first one (default DefaultReplayWait; negative: not at all).
	IdempotencyWindow time.Duration
	ReplayWait        time.Duration
	// IdempotencyLease is the lease of a key's claim on a store that keeps leases
	// (store.LeasedIdempotency; default DefaultIdempotencyLease): renewed every third of
	// it while the request runs, and taken over by a retry of the request once it has
	// run out (its claimant died).
	IdempotencyLease time.Duration
	Clock            func() time.Time
	// Ready reports whether the state database is reachable (GET /readyz); nil: always.
	Ready func(ctx context.Context) error
	// Tracer, when set, traces each request as an OpenTelemetry server span, a child of
	// the request's W3C traceparent (see startTrace); nil: no spans (off by default).
	Tracer trace.Tracer
	// Metrics are served at GET /metrics and counted by every request (nil: none).
	Metrics *Metrics
	// AuditPage is how many events GET /v1/admin/audit/export reads from the store at a
	// time (0: store.DefaultAuditPage).
	AuditPage int
	// Revisions returns the state database's view of the revision of the shared state
	// (nil, or a nil func: the store has none): the x-sharedos-revision of every /v1
	// response, and what a request naming a revision waits for, up to RevisionWait
	// (default DefaultRevisionWait). See revision.go.
	Revisions    func() Revisions
	RevisionWait time.Duration
}

// Route is one method and path of the /v1 API.
type Route struct {
	Method, Path string
	// Operator routes need a token whose role is operator.
	Operator bool
	// Body: the route reads a JSON body; Query: it reads query parameters.
	Body, Query bool
	handle      func(h *handler, rq *request) (int, any, error)
}

// Routes is the route table: /health, /healthz, /readyz, /metrics and /v1/openapi.json
// (no credentials: the process, its readiness, its metrics and the contract), then the
// authenticated routes.
func Routes() []Route {
	out := make([]Route, 0, len(routes)+5)
	for _, p := range []string{"/health", "/healthz", "/readyz", "/metrics", "/v1/openapi.json"} {
		out = append(out, Route{Method: http.MethodGet, Path: p})
	}
	for _, r := range routes {
		out = append(out, Route{Method: r.Method, Path: r.Path, Operator: r.Operator, Body: r.Body, Query: r.Query})
	}
	return out
}

// Statuses are the HTTP statuses the route answers with (a wrong verb's 405 belongs to
// the path, not the route): 200; without credentials nothing else; else 400 (a body or
// query parameters, a malformed revision), 401, 500 and 503 (the tokens file unusable,
// the state unavailable, draining, a revision not reached); 413 for a body; 403 for an
// operator route; 404 for a route with an {id}; 409 and 501 for the idempotent invoke.
func (r Route) Statuses() []int {
	switch r.Path {
	case "/health", "/healthz", "/v1/openapi.json":
		return []int{200}
	case "/readyz":
		return []int{200, 503}
	case "/metrics":
		return []int{200, 404}
	}
	out := []int{200, 400} // 400: a bad body or query, or a malformed revision (any route)
	out = append(out, 401)
	if r.Operator {
		out = append(out, 403)
	}
	if strings.Contains(r.Path, "{") || r.Path == "/v1/tools/definition" {
		out = append(out, 404)
	}
	if r.Path == "/v1/tools/invoke" {
		out = append(out, 409)
	}
	if r.Body {
		out = append(out, 413)
	}
	out = append(out, 500)
	if r.Path == "/v1/tools/invoke" {
		out = append(out, 501)
	}
	out = append(out, 503)
	out = messageStatuses(r.Path, out)
	sort.Ints(out)
	return out
}

// routes are the authenticated routes: the agent's, then the operator's.
var routes = append(append(agentRoutes, adminRoutes...), messageRoutes...)

// agentRoutes are the routes of spec 30 §2.2 (and the explanation).
var agentRoutes = []Route{
	{Method: http.MethodGet, Path: "/v1/tools", handle: (*handler).listTools},
	{Method: http.MethodGet, Path: "/v1/tools/registry", handle: (*handler).registry},
	{Method: http.MethodGet, Path: "/v1/tools/status", handle: (*handler).toolStatus},
	{Method: http.MethodGet, Path: "/v1/tools/definition", Query: true, handle: (*handler).definition},
	{Method: http.MethodGet, Path: "/v1/context", handle: (*handler).accessContext},
	{Method: http.MethodGet, Path: "/v1/tools/namespaces", handle: (*handler).namespaces},
	{Method: http.MethodPut, Path: "/v1/tools/namespaces", Body: true, handle: (*handler).updateNamespaces},
	{Method: http.MethodPost, Path: "/v1/tools/invoke", Body: true, handle: (*handler).invoke},
	{Method: http.MethodPost, Path: "/v1/tools/explain", Body: true, handle: (*handler).explain},
	{Method: http.MethodPost, Path: "/v1/tools/escalate", Body: true, handle: (*handler).escalate},
	{Method: http.MethodPost, Path: "/v1/authorize", Body: true, Query: true, handle: (*handler).authorize},
	{Method: http.MethodGet, Path: "/v1/reach", handle: (*handler).reach},
}

type handler struct {
	cfg     Config
	log     *slog.Logger
	waiting waiters
}

// New returns the /v1 handler.
func New(cfg Config) http.Handler {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.IdempotencyWindow <= 0 {
		cfg.IdempotencyWindow = DefaultIdempotencyWindow
	}
	if cfg.ReplayWait == 0 {
		cfg.ReplayWait = DefaultReplayWait
	}
	if cfg.IdempotencyLease <= 0 {
		cfg.IdempotencyLease = DefaultIdempotencyLease
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.RevisionWait <= 0 {
		cfg.RevisionWait = DefaultRevisionWait
	}
	if cfg.NewID == nil {
		cfg.NewID = uuid.NewV7
	}
	return &handler{cfg: cfg, log: cfg.Logger}
}

// request is one request on its way through the pipeline.
type request struct {
	r    *http.Request
	w    http.ResponseWriter
	id   string
	p    Principal
	body []byte
	// params are the path's {name} segments.
	params map[string]string
	// decision is what the request decided; storeFailed that the store failed it.
	decision    decision
	storeFailed bool
	// trace is the kernel's trace id when the request names none (startTrace).
	trace string
	// claim is the request's idempotency claim while it runs (a leased store's): the
	// spends of its call are fenced by it (kernel.WithSpendClaim).
	claim *kernel.SpendClaim
	// fences: the request passes claim to every spend it makes (a tool call), so its
	// idempotency claim may carry a lease (idempotent).
	fences bool
}

// match matches a path against a route's pattern, whose {name} segments match any one
// non-empty segment.
func match(pattern, path string) (map[string]string, bool) {
	if !strings.Contains(pattern, "{") {
		return nil, pattern == path
	}
	// segment by segment, without splitting: every request is matched against every
	// pattern, and the map is made only for the one that matches
	var params map[string]string
	for {
		p, prest, pmore := strings.Cut(pattern, "/")
		x, xrest, xmore := strings.Cut(path, "/")
		switch {
		case strings.HasPrefix(p, "{") && strings.HasSuffix(p, "}"):
			if x == "" {
				return nil, false
			}
			if params == nil {
				params = map[string]string{}
			}
			params[p[1:len(p)-1]] = x
		case p != x:
			return nil, false
		}
		if pmore != xmore {
			return nil, false
		}
		if !pmore {
			return params, true
		}
		pattern, path = prest, xrest
	}
}

// Trace headers: the trace id of a request (spec 50 §5) and the purpose hint.
const (
	HeaderRequestID = "X-Request-Id"
	HeaderTraceID   = "X-Sharedos-Trace-Id"
	// HeaderGate and HeaderCause carry a refused call's gate and hidden cause (what the
	// CLI shows beside a refusal); the ToolResult body is the contract's, without them.
	HeaderGate  = "X-Sharedos-Gate"
	HeaderCause = "X-Sharedos-Cause"
)

// requestID is the request's id: a valid incoming one, else a fresh one.
func (h *handler) requestID(r *http.Request) string {
	id := r.Header.Get(HeaderRequestID)
	if id == "" || len(id) > 128 {
		return h.cfg.NewID()
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return h.cfg.NewID()
		}
	}
	return id
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.MCP != nil && r.URL.Path == "/mcp" {
		h.cfg.MCP.ServeHTTP(w, r)
		return
	}
	rq := &request{r: r, id: h.requestID(r)}
	ctx, span, traceID := h.startTrace(r)
	if ctx != r.Context() {
		rq.r = r.WithContext(ctx)
	}
	rq.trace = traceID
	w.Header()[HeaderRequestID] = []string{rq.id} // canonical already: no Header.Set
	rec := &recorder{ResponseWriter: w}
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		if revs := h.revisions(); revs != nil {
			rec.revision = revs.Revision
		}
	}
	w = rec
	label := "unknown" // the route's pattern once known: a bounded metrics label
	defer func(start time.Time) {
		h.observe(rq, rec, label, start)
		endTrace(span, rq, label, rec.status)
	}(time.Now())
	switch r.URL.Path {
	case "/health", "/healthz", "/readyz", "/metrics", "/v1/openapi.json":
		label = r.URL.Path
		if r.Method != http.MethodGet {
			h.methodNotAllowed(w, rq, []string{http.MethodGet})
			return
		}
	}
	switch r.URL.Path {
	case "/healthz":
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		return
	case "/readyz":
		h.ready(w, rq)
		return
	case "/metrics":
		if h.cfg.Metrics == nil {
			h.fail(w, rq, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "No such endpoint."})
			return
		}
		h.cfg.Metrics.Handler().ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/health" {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "protocolVersion": ProtocolVersion})
		return
	}
	if r.URL.Path == "/v1/openapi.json" {
		doc, err := Document()
		if err != nil {
			h.fail(w, rq, err)
			return
		}
		writeRaw(w, http.StatusOK, doc)
		return
	}
	if h.cfg.Enter != nil {
		leave, ok := h.cfg.Enter()
		if !ok {
			w.Header().Set("Connection", "close")
			h.fail(w, rq, &Error{Status: http.StatusServiceUnavailable, Code: "shutting_down", Message: "The server is shutting down."})
			return
		}
		defer leave()
	}
	// before the principal: a token revoked at or before the revision is refused
	if err := h.awaitRevision(rq); err != nil {
		h.fail(w, rq, err)
		return
	}
	p, err := h.cfg.Authenticate(r)
	if err != nil {
		h.fail(w, rq, err)
		return
	}
	rq.p = p
	var verbs []string
	var route *Route
	for i := range routes {
		if params, ok := match(routes[i].Path, r.URL.Path); ok {
			verbs = append(verbs, routes[i].Method)
			if routes[i].Method == r.Method {
				route, rq.params = &routes[i], params
			}
		}
	}
	switch {
	case len(verbs) == 0:
		h.fail(w, rq, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "No such endpoint."})
		return
	case route == nil:
		h.methodNotAllowed(w, rq, verbs)
		return
	case route.Operator && !p.Operator():
		h.fail(w, rq, &Error{Status: http.StatusForbidden, Code: "permission_denied", Message: "This endpoint needs a token whose role is operator."})
		return
	}
	label = route.Path
	if route.Body {
		if err := h.readBody(w, rq); err != nil {
			h.fail(w, rq, err)
			return
		}
	}
	rq.w = w
	status, body, err := route.handle(h, rq)
	if err != nil {
		h.fail(w, rq, err)
		return
	}
	if _, ok := body.(streamed); ok {
		return
	}
	if raw, ok := body.(rawJSON); ok {
		writeRaw(w, status, raw)
		return
	}
	writeJSON(w, status, body)
}

func (h *handler) methodNotAllowed(w http.ResponseWriter, rq *request, verbs []string) {
	w.Header().Set("Allow", strings.Join(verbs, ", "))
	h.fail(w, rq, &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
		Message: "Use " + strings.Join(verbs, " or ") + " for this endpoint."})
}

// readBody reads the body under the cap and checks it is one JSON value.
func (h *handler) readBody(w http.ResponseWriter, rq *request) error {
	r := rq.r
	if r.ContentLength > h.cfg.MaxBody {
		return h.tooLarge(w)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, h.cfg.MaxBody+1))
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "The request body could not be read."}
	}
	if int64(len(body)) > h.cfg.MaxBody {
		return h.tooLarge(w)
	}
	if len(bytes.TrimSpace(body)) == 0 || !json.Valid(body) {
		return errInvalidJSON
	}
	rq.body = body
	return nil
}

func (h *handler) tooLarge(w http.ResponseWriter) error {
	w.Header().Set("Connection", "close")
	return &Error{Status: http.StatusRequestEntityTooLarge, Code: "payload_too_large",
		Message: fmt.Sprintf("The request body is larger than %d bytes.", h.cfg.MaxBody)}
}

var (
	errInvalidJSON    = &Error{Status: http.StatusBadRequest, Code: "invalid_json", Message: "Request body is not valid JSON."}
	errInvalidRequest = &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: "Request body does not match the v1 contract."}
)

// envelope is the error envelope of spec 30 §2.6.
type envelope struct {
	Error envelopeBody `json:"error"`
}

type envelopeBody struct {
	Code      string `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"requestId,omitempty"`
	Hint      string `json:"hint,omitempty"`
}

// fail writes err as the error envelope.
func (h *handler) fail(w http.ResponseWriter, rq *request, err error) {
	e := h.httpError(rq, err)
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	writeJSON(w, e.Status, envelope{envelopeBody{Code: e.Code, Message: e.Message, RequestID: rq.id, Hint: e.Hint}})
}

// httpError maps an error to its status and envelope.
func (h *handler) httpError(rq *request, err error) *Error {
	var he *Error
	if errors.As(err, &he) {
		return he
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case api.CodeInvalidRequest:
			return &Error{Status: http.StatusBadRequest, Code: ae.Code, Message: ae.Message, Hint: ae.Hint}
		case api.CodeNotFound:
			return &Error{Status: http.StatusNotFound, Code: ae.Code, Message: ae.Message, Hint: ae.Hint}
		case api.CodeToolCatalogUnavailable:
			h.log.Warn("tool catalogue unavailable", "requestId", rq.id, "err", err)
			return &Error{Status: http.StatusServiceUnavailable, Code: ae.Code, Message: "The tool catalogue could not be resolved."}
		case api.CodeStateUnavailable:
			rq.storeFailed = true
			h.log.Error("state unavailable", "requestId", rq.id, "err", err)
			return &Error{Status: http.StatusServiceUnavailable, Code: ae.Code, Message: "The server's state is unavailable."}
		}
	}
	if errors.Is(err, context.Canceled) && rq.r.Context().Err() != nil {
		// the client went away; nobody reads this answer
		return &Error{Status: 499, Code: "request_cancelled", Message: "The request was cancelled."}
	}
	h.log.Error("request failed", "requestId", rq.id, "path", rq.r.URL.Path, "err", err)
	return &Error{Status: http.StatusInternalServerError, Code: "internal_error", Message: "Internal server error."}
}

// writeJSON writes body as the response, application/json, not cached.
func writeJSON(w http.ResponseWriter, status int, body any) {
	b, err := json.Marshal(body)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal_error","message":"Internal server error."}}`)
	}
	writeRaw(w, status, append(b, '\n'))
}

// The values of the headers every response carries, set by assignment (their keys are
// canonical already): Header.Set canonicalizes the key and allocates the value's slice at
// every response. Each slice is full (len = cap), so an Add elsewhere copies it instead of
// writing into the shared array.
var (
	headerJSON    = []string{"application/json"}[:1:1]
	headerNoStore = []string{"no-store"}[:1:1]
)

func writeRaw(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// appendDecision appends d's response body — what writeJSON writes for it, byte for byte —
// without reflection, for the common decision: no requiredAuthority, no metadata and no
// string that encoding/json escapes. It reports false for any other decision, which
// writeJSON then encodes (TestAppendDecisionAgreesWithMarshal).
func appendDecision(b []byte, d *kernel.AuthorizationDecision) ([]byte, bool) {
	if d.RequiredAuthority != nil || len(d.Metadata) != 0 || !plainJSON(string(d.ReasonCode)) || !plainJSON(d.MatchedGrantID) {
		return b, false
	}
	if d.Allowed {
		b = append(b, `{"allowed":true,"reasonCode":"`...)
	} else {
		b = append(b, `{"allowed":false,"reasonCode":"`...)
	}
	b = append(b, d.ReasonCode...)
	b = append(b, '"')
	if d.MatchedGrantID != "" {
		b = append(b, `,"matchedGrantId":"`...)
		b = append(b, d.MatchedGrantID...)
		b = append(b, '"')
	}
	return append(b, "}\n"...), true
}

// plainJSON reports whether encoding/json writes s as is between its quotes: printable
// ASCII other than the quote, the backslash and the characters it escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// service is the request's backend under trace.
func (rq *request) service(trace string) Backend {
	if t := rq.r.Header.Get(HeaderTraceID); t != "" {
		trace = t
	}
	if trace == "" {
		trace = rq.trace // the traceparent's, or the request's span's (startTrace)
	}
	meta := map[string]any{"surface": "http", "token": rq.p.ID(), "requestId": rq.id}
	return rq.p.Service(meta, trace)
}

func (h *handler) listTools(rq *request) (int, any, error) {
	l, err := rq.service("").ListTools(rq.r.Context())
	if err != nil {
		return 0, nil, err
	}
	if l.Tools == nil {
		l.Tools = []kernel.ToolDefinition{}
	}
	return http.StatusOK, l.Tools, nil
}

func (h *handler) namespaces(rq *request) (int, any, error) {
	n, err := rq.service("").Namespaces(rq.r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, n, nil
}

func (h *handler) updateNamespaces(rq *request) (int, any, error) {
	u, err := kernel.ParseToolNamespaceUpdate(rq.body)
	if err != nil {
		return 0, nil, errInvalidRequest
	}
	n, err := rq.service("").UpdateNamespaces(rq.r.Context(), u)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, n, nil
}

// decodeCall decodes a strict ToolCall body.
func decodeCall(body []byte) (kernel.ToolCall, error) {
	var c kernel.ToolCall
	if kernel.CheckDuplicateKeys(body) != nil || json.Unmarshal(body, &c) != nil {
		return c, errInvalidRequest
	}
	return c, nil
}

func (h *handler) invoke(rq *request) (int, any, error) {
	c, err := decodeCall(rq.body)
	if err != nil {
		return 0, nil, err
	}
	svc := rq.service(c.TraceID)
	ctx := rq.r.Context()
	_, keyed := rq.r.Header[HeaderIdempotencyKey]
	if keyed {
		// A call with an Idempotency-Key runs to its end even when its client leaves
		// (or this server stops, letting it finish): its answer is kept for the
		// client's retry, so it must be the call's own, not an interruption's — a use
		// spent and recorded is answered succeeded, never failed.
		ctx = context.WithoutCancel(ctx)
	}
	run := func() (any, error) {
		ctx := ctx
		if rq.claim != nil {
			ctx = kernel.WithSpendClaim(ctx, *rq.claim)
		}
		res, err := svc.Invoke(ctx, api.InvokeRequest{Tool: c.Tool, Arguments: c.Arguments, ID: c.ID, TraceID: c.TraceID})
		if err != nil {
			return nil, err
		}
		rq.decision = resultDecision(res.Result)
		// the refusing gate and cause are the host's, not the result contract's: headers
		if res.Result.Gate != "" {
			rq.w.Header().Set(HeaderGate, string(res.Result.Gate))
		}
		if res.Result.Cause != "" {
			rq.w.Header().Set(HeaderCause, string(res.Result.Cause))
		}
		return res.Result, nil
	}
	if key := rq.r.Header[HeaderIdempotencyKey]; keyed {
		trace := rq.r.Header.Get(HeaderTraceID)
		if trace == "" {
			trace = c.TraceID
		}
		rq.fences = true
		return h.idempotent(rq.w, rq, strings.Join(key, ","), Fingerprint(c, trace), run)
	}
	res, err := run()
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

// escalate is the turn's driver's sharedos.escalate (the CLI's `tools call` over
// --server): recorded when the context's catalogue offers it, not run
// (api.EscalateRequest.IfOffered); notOffered when it is not (the caller then invokes
// the call). It takes no Idempotency-Key: a second request is refused by the escalation
// grant's uses, never recorded twice unchecked.
func (h *handler) escalate(rq *request) (int, any, error) {
	c, err := decodeCall(rq.body)
	if err != nil {
		return 0, nil, err
	}
	res, err := rq.service(c.TraceID).Escalate(rq.r.Context(), api.EscalateRequest{Call: c, IfOffered: true})
	if err != nil {
		return 0, nil, err
	}
	if res.Denied != nil {
		rq.decision = resultDecision(*res.Denied)
	}
	return http.StatusOK, res, nil
}

func (h *handler) explain(rq *request) (int, any, error) {
	c, err := decodeCall(rq.body)
	if err != nil {
		return 0, nil, err
	}
	ex, err := rq.service(c.TraceID).Explain(rq.r.Context(), api.InvokeRequest{Tool: c.Tool, Arguments: c.Arguments, ID: c.ID, TraceID: c.TraceID})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, ex, nil
}

func (h *handler) authorize(rq *request) (int, any, error) {
	req, err := kernel.DecodeRequirement(rq.body) // strict: the same rules as json.Unmarshal, one scan for the common form
	if err != nil {
		return 0, nil, errInvalidRequest
	}
	if explain, err := boolQuery(rq.r, "explain"); err != nil {
		return 0, nil, err
	} else if explain {
		ex, err := rq.service("").ExplainAuthorize(rq.r.Context(), req)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, ex, nil
	}
	d, err := rq.service("").Authorize(rq.r.Context(), req, rq.id)
	if err != nil {
		return 0, nil, err
	}
	rq.decision = decision{outcome: "denied", code: string(d.ReasonCode)}
	if d.Allowed {
		rq.decision.outcome = "allowed"
	}
	if b, ok := appendDecision(make([]byte, 0, 96), &d); ok {
		return http.StatusOK, rawJSON(b), nil
	}
	return http.StatusOK, d, nil
}

func (h *handler) reach(rq *request) (int, any, error) {
	res, err := rq.service("").Reach(rq.r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

// boolQuery is the query parameter name as a boolean: absent or "false" false, "true"
// true, anything else 400 invalid_request.
func boolQuery(r *http.Request, name string) (bool, error) {
	switch r.URL.Query().Get(name) {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: "Query parameter " + name + " must be true or false."}
}

// Document is the published contract (api/openapi.yaml) as JSON, converted once.
var Document = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openapi.YAML, &doc); err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("api/openapi.yaml: %w", err)
	}
	return append(b, '\n'), nil
})

func (h *handler) registry(rq *request) (int, any, error) {
	reg, err := rq.service("").Registry(rq.r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, reg, nil
}

// ToolStatus is api.ToolStatus on the wire: with its definition.
type ToolStatus struct {
	api.ToolStatus
	Definition kernel.ToolDefinition `json:"definition"`
}

func (h *handler) toolStatus(rq *request) (int, any, error) {
	gs, err := rq.service("").ListAllTools(rq.r.Context())
	if err != nil {
		return 0, nil, err
	}
	out := make([]ToolStatus, len(gs))
	for i, g := range gs {
		out[i] = ToolStatus{ToolStatus: g, Definition: g.Definition}
	}
	return http.StatusOK, out, nil
}

func (h *handler) definition(rq *request) (int, any, error) {
	name := rq.r.URL.Query().Get("name")
	if name == "" {
		return 0, nil, &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: "Query parameter name is required."}
	}
	list, err := boolQuery(rq.r, "list")
	if err != nil {
		return 0, nil, err
	}
	d, err := rq.service("").Definition(rq.r.Context(), name, list)
	if err != nil {
		return 0, nil, err
	}
	if d == nil {
		return 0, nil, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "No tool of this name is known."}
	}
	return http.StatusOK, d, nil
}

// accessContext answers the principal's access context now (nothing is audited).
func (h *handler) accessContext(rq *request) (int, any, error) {
	actx, err := rq.p.AccessContext(rq.r.Context())
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, actx, nil
}
