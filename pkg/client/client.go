// Package client is the typed Go client of the HTTP /v1 API of `sharedos serve`: Client
// implements api.Service (and api.Checks, api.Admin) over HTTP, so that a command — or any
// Go program — runs against a remote server exactly as against the embedded host.
//
// It is hand-written against api/openapi.yaml rather than generated: the operations
// return pkg/api's and pkg/kernel's own types (the same values the embedded backend
// returns, decoded by their strict decoders), which a generator would duplicate as
// parallel structs needing a conversion layer; the document is held to the server by
// pkg/httpapi's tests, and this client to the server by its own.
//
// A failure the server reports is an *api.Error whose Code is the envelope's code and
// whose Err is an *Error carrying the HTTP status, the code and the request id. The
// package imports neither the host, a plane nor a store: a program that only talks to a
// server links none of them (architecture_test.go holds it to that).
package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Client is a connection to one server under one bearer token.
type Client struct {
	base          string
	token         string
	hc            *http.Client
	clock         func() time.Time
	callID, trace string
}

var (
	_ api.Service   = (*Client)(nil)
	_ api.Checks    = (*Client)(nil)
	_ api.Admin     = (*Client)(nil)
	_ api.Messaging = (*Client)(nil)
)

// Options configure New.
type Options struct {
	// HTTPClient sends the requests (default: a client with a 60 s timeout).
	HTTPClient *http.Client
	// Clock is read for a call's requestedAt (default time.Now).
	Clock func() time.Time
	// CallID and TraceID name a call whose request names none ("" : a fresh one each).
	CallID, TraceID string
}

// New returns a client of the server at base (http(s)://host:port) with token.
func New(base, token string, o Options) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("invalid server URL %q: want http(s)://HOST:PORT", base)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 60 * time.Second}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &Client{base: strings.TrimSuffix(u.String(), "/"), token: token, hc: o.HTTPClient, clock: o.Clock,
		callID: o.CallID, trace: o.TraceID}, nil
}

// Error is a request the server refused or could not serve: the HTTP status, the
// envelope's code ("request_failed" when the answer had no envelope, "invalid_response"
// when a 2xx body could not be read) and message, and the request id.
type Error struct {
	Status    int
	Code      string
	Message   string
	RequestID string
	// Hint is the envelope's hint: how to fix it ("" when the server gave none).
	Hint string
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("server answered %d %s: %s", e.Status, e.Code, e.Message)
	if e.RequestID != "" {
		msg += " (request " + e.RequestID + ")"
	}
	return msg
}

// apiCode is the api.Error code of a server's envelope code.
func apiCode(e *Error) string {
	switch e.Code {
	case "invalid_request", "invalid_json", "replay_conflict", "replay_pending", "replay_interrupted":
		return api.CodeInvalidRequest
	case "not_found":
		return api.CodeNotFound
	case "state_unavailable", "tool_catalog_unavailable":
		return e.Code
	case "unauthorized", "permission_denied", "unavailable", "shutting_down", "request_failed":
		return api.CodeStateUnavailable
	}
	return api.CodeInternalError
}

// response is a 2xx answer.
type response struct {
	header http.Header
	body   []byte
}

// do sends one request and returns its 2xx answer, or the failure as an *api.Error.
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, hdr map[string]string) (*response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		e := &Error{Code: "request_failed", Message: err.Error()}
		return nil, &api.Error{Code: api.CodeStateUnavailable, Message: "cannot reach the server " + c.base + ": " + err.Error(), Err: e}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e := &Error{Status: resp.StatusCode, Code: "request_failed", Message: err.Error(), RequestID: resp.Header.Get("X-Request-Id")}
		return nil, &api.Error{Code: api.CodeStateUnavailable, Message: "read the server's answer: " + err.Error(), Err: e}
	}
	if resp.StatusCode/100 == 2 {
		return &response{header: resp.Header, body: b}, nil
	}
	e := &Error{Status: resp.StatusCode, Code: "request_failed", Message: strings.TrimSpace(string(b)), RequestID: resp.Header.Get("X-Request-Id")}
	var env struct {
		Error struct {
			Code, Message, RequestID, Hint string
		} `json:"error"`
	}
	if json.Unmarshal(b, &env) == nil && env.Error.Code != "" {
		e.Code, e.Message, e.Hint = env.Error.Code, env.Error.Message, env.Error.Hint
		if env.Error.RequestID != "" {
			e.RequestID = env.Error.RequestID
		}
	}
	msg := e.Message
	switch e.Code {
	case "unauthorized":
		msg = "the server refused the token: " + msg
	case "permission_denied":
		msg = "the server refused the request: " + msg
	}
	return nil, &api.Error{Code: apiCode(e), Message: msg, Hint: hint(e), Err: e}
}

// hint is the api.Error's hint: the server's, else ours for the refusals of the token.
func hint(e *Error) string {
	if e.Hint != "" {
		return e.Hint
	}
	switch e.Code {
	case "unauthorized":
		return "set the token in the environment variable --token-env names (default SHAREDOS_TOKEN)"
	case "permission_denied":
		return "this operation needs a token whose role is operator"
	}
	return ""
}

// decode reads a 2xx body into v.
func decode(r *response, v any) error {
	if err := json.Unmarshal(r.body, v); err != nil {
		e := &Error{Status: 200, Code: "invalid_response", Message: err.Error(), RequestID: r.header.Get("X-Request-Id")}
		return &api.Error{Code: api.CodeInternalError, Message: "the server's answer is not what was expected: " + err.Error(), Err: e}
	}
	return nil
}

func (c *Client) get(ctx context.Context, path string, q url.Values, v any) error {
	r, err := c.do(ctx, http.MethodGet, path, q, nil, nil)
	if err != nil {
		return err
	}
	return decode(r, v)
}

func (c *Client) send(ctx context.Context, method, path string, q url.Values, body, v any) error {
	r, err := c.do(ctx, method, path, q, body, nil)
	if err != nil {
		return err
	}
	return decode(r, v)
}

// Registry is GET /v1/tools/registry.
func (c *Client) Registry(ctx context.Context) (api.Registry, error) {
	var reg api.Registry
	return reg, c.get(ctx, "/v1/tools/registry", nil, &reg)
}

// Definition is GET /v1/tools/definition; an unknown name is nil.
func (c *Client) Definition(ctx context.Context, name string, list bool) (*kernel.ToolDefinition, error) {
	var d kernel.ToolDefinition
	err := c.get(ctx, "/v1/tools/definition", url.Values{"name": {name}, "list": {strconv.FormatBool(list)}}, &d)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

// ListTools is GET /v1/tools, with the context of GET /v1/context.
func (c *Client) ListTools(ctx context.Context) (api.ToolList, error) {
	var l api.ToolList
	if err := c.get(ctx, "/v1/tools", nil, &l.Tools); err != nil {
		return l, err
	}
	return l, c.get(ctx, "/v1/context", nil, &l.Context)
}

// ListAllTools is GET /v1/tools/status.
func (c *Client) ListAllTools(ctx context.Context) ([]api.ToolStatus, error) {
	var wire []struct {
		api.ToolStatus
		Definition kernel.ToolDefinition `json:"definition"`
	}
	if err := c.get(ctx, "/v1/tools/status", nil, &wire); err != nil {
		return nil, err
	}
	out := make([]api.ToolStatus, len(wire))
	for i, w := range wire {
		out[i] = w.ToolStatus
		out[i].Definition = w.Definition
	}
	return out, nil
}

// newID is a fresh call or trace id.
func newID(prefix string) string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// call is req as the wire's ToolCall: its own id and trace, or fresh ones.
func (c *Client) call(req api.InvokeRequest) kernel.ToolCall {
	call := kernel.ToolCall{ID: req.ID, Tool: req.Tool, Arguments: req.Arguments, TraceID: req.TraceID,
		RequestedAt: kernel.FormatTimestamp(c.clock().UnixMilli())}
	switch {
	case call.ID != "":
	case c.callID != "":
		call.ID = c.callID
	default:
		call.ID = newID("call-")
	}
	switch {
	case call.TraceID != "":
	case c.trace != "":
		call.TraceID = c.trace
	default:
		call.TraceID = newID("trace-")
	}
	if len(call.Arguments) == 0 {
		call.Arguments = json.RawMessage("{}")
	}
	return call
}

// Invoke is POST /v1/tools/invoke, and the tool's definition (GET /v1/tools/definition).
func (c *Client) Invoke(ctx context.Context, req api.InvokeRequest) (api.InvokeResult, error) {
	return c.InvokeIdempotent(ctx, req, "")
}

// InvokeIdempotent is Invoke with an Idempotency-Key ("" : none): the same key and
// request return the stored result without running again.
func (c *Client) InvokeIdempotent(ctx context.Context, req api.InvokeRequest, key string) (api.InvokeResult, error) {
	var hdr map[string]string
	if key != "" {
		hdr = map[string]string{"Idempotency-Key": key}
	}
	r, err := c.do(ctx, http.MethodPost, "/v1/tools/invoke", nil, c.call(req), hdr)
	if err != nil {
		return api.InvokeResult{}, err
	}
	var out api.InvokeResult
	if err := decode(r, &out.Result); err != nil {
		return out, err
	}
	// the output as the server wrote it (its keys in the tool's order), not re-sorted
	var raw struct {
		Output json.RawMessage `json:"output"`
	}
	if json.Unmarshal(r.body, &raw) == nil && len(raw.Output) > 0 {
		out.Result.Output = raw.Output
	}
	out.Result.Gate = kernel.Gate(r.header.Get("X-Sharedos-Gate"))
	out.Result.Cause = kernel.Cause(r.header.Get("X-Sharedos-Cause"))
	out.Definition, err = c.Definition(ctx, req.Tool, false)
	return out, err
}

// Explain is POST /v1/tools/explain.
func (c *Client) Explain(ctx context.Context, req api.InvokeRequest) (api.Explanation, error) {
	var ex api.Explanation
	return ex, c.send(ctx, http.MethodPost, "/v1/tools/explain", nil, c.call(req), &ex)
}

// Namespaces is GET /v1/tools/namespaces.
func (c *Client) Namespaces(ctx context.Context) (api.Namespaces, error) {
	var n api.Namespaces
	return n, c.get(ctx, "/v1/tools/namespaces", nil, &n)
}

// UpdateNamespaces is PUT /v1/tools/namespaces.
func (c *Client) UpdateNamespaces(ctx context.Context, u kernel.ToolNamespaceUpdate) (api.NamespacesUpdated, error) {
	var n api.NamespacesUpdated
	return n, c.send(ctx, http.MethodPut, "/v1/tools/namespaces", nil, u, &n)
}

// Escalate is POST /v1/tools/escalate: the server records the escalation only when the
// context's catalogue offers sharedos.escalate (the server's API offers nothing but
// IfOffered; the call's id, trace and instant are the client's, as Invoke's).
func (c *Client) Escalate(ctx context.Context, req api.EscalateRequest) (api.EscalateResult, error) {
	var out api.EscalateResult
	if !req.IfOffered {
		return out, &api.Error{Code: api.CodeInvalidRequest, Message: "the server's API records an escalation only when sharedos.escalate is offered",
			Hint: "call the tool sharedos.escalate instead"}
	}
	call := c.call(api.InvokeRequest{Tool: kernel.EscalationToolName, Arguments: req.Call.Arguments, ID: req.Call.ID, TraceID: req.Call.TraceID})
	return out, c.send(ctx, http.MethodPost, "/v1/tools/escalate", nil, call, &out)
}

// ListEscalations is GET /v1/admin/escalations (an operator token).
func (c *Client) ListEscalations(ctx context.Context, q api.EscalationQuery) ([]api.EscalationRecord, error) {
	v := url.Values{"all": {strconv.FormatBool(q.All)}}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.CallID != "" {
		v.Set("callId", q.CallID)
	}
	var out []api.EscalationRecord
	return out, c.get(ctx, "/v1/admin/escalations", v, &out)
}

// ResolveEscalation is POST /v1/admin/escalations/{id}/resolve (an operator token).
func (c *Client) ResolveEscalation(ctx context.Context, req api.ResolveRequest) (api.Resolved, error) {
	var out api.Resolved
	body := map[string]string{"status": req.Status}
	if req.Note != "" {
		body["note"] = req.Note
	}
	return out, c.send(ctx, http.MethodPost, "/v1/admin/escalations/"+strconv.FormatInt(req.ID, 10)+"/resolve", nil, body, &out)
}

// auditValues is q as the query of the audit routes.
func auditValues(q api.AuditQuery) url.Values {
	v := url.Values{}
	if len(q.Types) > 0 {
		v.Set("type", strings.Join(q.Types, ","))
	}
	if len(q.Outcomes) > 0 {
		v.Set("outcome", strings.Join(q.Outcomes, ","))
	}
	for k, s := range map[string]string{"tool": q.Tool, "operation": q.Operation, "traceId": q.TraceID, "world": q.World} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if !q.Owner.IsZero() {
		v.Set("owner", q.Owner.String())
	}
	if !q.Actor.IsZero() {
		v.Set("actor", q.Actor.String())
	}
	if q.SinceMillis > 0 {
		v.Set("since", strconv.FormatInt(q.SinceMillis, 10))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Oldest {
		v.Set("oldest", "true")
	}
	if q.AfterSeq != nil {
		v.Set("afterSeq", strconv.FormatInt(*q.AfterSeq, 10))
	}
	return v
}

// QueryAudit is GET /v1/admin/audit (an operator token).
func (c *Client) QueryAudit(ctx context.Context, q api.AuditQuery) ([]kernel.AuditEvent, error) {
	var out []kernel.AuditEvent
	return out, c.get(ctx, "/v1/admin/audit", auditValues(q), &out)
}

// ExportAudit is GET /v1/admin/audit/calls (an operator token).
func (c *Client) ExportAudit(ctx context.Context, q api.AuditQuery) ([]api.AuditCall, error) {
	var out []api.AuditCall
	return out, c.get(ctx, "/v1/admin/audit/calls", auditValues(q), &out)
}

// Authorize is POST /v1/authorize.
func (c *Client) Authorize(ctx context.Context, req kernel.CapabilityRequirement, _ string) (kernel.AuthorizationDecision, error) {
	var d kernel.AuthorizationDecision
	return d, c.send(ctx, http.MethodPost, "/v1/authorize", nil, req, &d)
}

// ExplainAuthorize is POST /v1/authorize?explain=true.
func (c *Client) ExplainAuthorize(ctx context.Context, req kernel.CapabilityRequirement) (api.Explanation, error) {
	var ex api.Explanation
	return ex, c.send(ctx, http.MethodPost, "/v1/authorize", url.Values{"explain": {"true"}}, req, &ex)
}

// Reach is GET /v1/reach.
func (c *Client) Reach(ctx context.Context) (kernel.ReachResult, error) {
	var r kernel.ReachResult
	return r, c.get(ctx, "/v1/reach", nil, &r)
}

// NamespacesOf is GET /v1/admin/namespaces (an operator token).
func (c *Client) NamespacesOf(ctx context.Context, world string, owner kernel.Address) (api.Namespaces, error) {
	var n api.Namespaces
	return n, c.get(ctx, "/v1/admin/namespaces", url.Values{"world": {world}, "owner": {owner.String()}}, &n)
}

// UpdateNamespacesOf is PUT /v1/admin/namespaces (an operator token).
func (c *Client) UpdateNamespacesOf(ctx context.Context, world string, owner kernel.Address, u kernel.ToolNamespaceUpdate) (api.NamespacesUpdated, error) {
	var n api.NamespacesUpdated
	return n, c.send(ctx, http.MethodPut, "/v1/admin/namespaces", url.Values{"world": {world}, "owner": {owner.String()}}, u, &n)
}

// SendMessage is POST /v1/messages: 202 when accepted, 200 with the refused receipt
// (denied, failed) otherwise — a refusal is a result, never an error.
func (c *Client) SendMessage(ctx context.Context, req api.SendMessageRequest) (api.MessageSent, error) {
	return c.SendMessageIdempotent(ctx, req, "")
}

// SendMessageIdempotent is SendMessage with an Idempotency-Key ("" : none): the same key
// and send return the stored response without sending or spending again.
func (c *Client) SendMessageIdempotent(ctx context.Context, req api.SendMessageRequest, key string) (api.MessageSent, error) {
	hdr := map[string]string{}
	if key != "" {
		hdr["Idempotency-Key"] = key
	}
	if c.trace != "" {
		hdr["X-Sharedos-Trace-Id"] = c.trace
	}
	body := struct {
		To      kernel.Address  `json:"to"`
		Payload json.RawMessage `json:"payload"`
	}{req.To, req.Payload}
	var out api.MessageSent
	r, err := c.do(ctx, http.MethodPost, "/v1/messages", nil, body, hdr)
	if err != nil {
		return out, err
	}
	return out, decode(r, &out)
}

// Inbox is GET /v1/admin/messages (an operator token): the token's actor's inbox.
func (c *Client) Inbox(ctx context.Context, q api.InboxQuery) ([]api.Message, error) {
	v := url.Values{}
	if q.Status != "" {
		v.Set("status", q.Status)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out []api.Message
	return out, c.get(ctx, "/v1/admin/messages", v, &out)
}

// ShowMessage is GET /v1/admin/messages/{id} (an operator token).
func (c *Client) ShowMessage(ctx context.Context, id string) (api.Message, error) {
	var out api.Message
	return out, c.get(ctx, "/v1/admin/messages/"+url.PathEscape(id), nil, &out)
}

// ReplyMessage is POST /v1/admin/messages/{id}/reply (an operator token): the receipt
// of the answer, delivered or refused.
func (c *Client) ReplyMessage(ctx context.Context, req api.ReplyMessageRequest) (api.MessageSent, error) {
	var out api.MessageSent
	body := struct {
		Payload json.RawMessage `json:"payload"`
	}{req.Payload}
	return out, c.send(ctx, http.MethodPost, "/v1/admin/messages/"+url.PathEscape(req.ID)+"/reply", nil, body, &out)
}

// WaitReply is POST /v1/messages/{id}/wait: it lasts as long as the server waits (up to
// the request's reply timeout), so the client's own request timeout does not apply —
// ctx bounds it.
func (c *Client) WaitReply(ctx context.Context, id string) (api.Message, error) {
	hc := *c.hc
	hc.Timeout = 0
	long := *c
	long.hc = &hc
	var out api.Message
	return out, long.send(ctx, http.MethodPost, "/v1/messages/"+url.PathEscape(id)+"/wait", nil, nil, &out)
}
