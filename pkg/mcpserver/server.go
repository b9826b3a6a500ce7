// Package mcpserver is the MCP surface of a sharedos host (spec 50 §2, spec 30 §3): it
// serves the kernel's catalogue and calls over the Model Context Protocol with
// github.com/modelcontextprotocol/go-sdk, owning tools/list and tools/call through
// receiving middleware, and keeps the escalation latch of each session.
//
// The package translates only. Every tools/list and tools/call is one kernel operation in
// a turn of its own, begun through the Backend at that operation's instant; the server
// never authorizes, filters or audits on its own — a name it cannot map is passed to the
// kernel as sent, so that the kernel refuses it tool_unavailable and audits the attempt.
// The only answers it gives without a call reaching the kernel's pipeline are the JSON-RPC
// errors of malformed params (spec 30 §3.3, not audited: no call was made) and the
// escalation latch's escalation_pending (spec 30 §3.7): the latch is the session's envelope
// and only removes authority, and its refusals are recorded by the kernel
// (kernel.Turn.RefuseInEnvelope: tool.invoked, source envelope).
package mcpserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos/internal/uuid"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// The _meta keys the server sets (spec 30 §3.5–3.6, spec 50 §2).
const (
	MetaCatalogHash = "sharedos/catalogHash"
	MetaExecutionID = "sharedos/executionId"
	MetaNamespace   = "sharedos/namespace"
	MetaSource      = "sharedos/source"
	MetaStatus      = "sharedos/status"
	MetaCode        = "sharedos/code"
	// MetaAuditUnavailable (true) marks a result whose tool.invoked audit record could
	// not be written; the server logs the cause.
	MetaAuditUnavailable = "sharedos/auditUnavailable"
	MetaGate             = "sharedos/gate"
	MetaCause            = "sharedos/cause"
	MetaEscalation       = "sharedos/escalation"
)

// MaxPublishedTools is the model-facing bound of a listing (spec 40 §7): over it the
// sorted list is cut and a warning is logged.
const MaxPublishedTools = 512

// CodeEscalationPending is the code of a call refused by the escalation latch.
const CodeEscalationPending kernel.ErrorCode = "escalation_pending"

// EscalationNote is the note of an escalate call's output (spec 30 §3.7).
const EscalationNote = "This turn is over: make no further tool calls. The request will be recorded for a human reviewer when the turn ends."

// Service is what the server asks of the host for one operation: the operations every
// surface consumes (api.Service) and the envelope's refusal (api.Envelope) — the
// embedded backend's *host.Service, and nothing below it.
type Service interface {
	api.Service
	api.Envelope
}

// Backend is the host side of a server: it returns the service of one operation (the
// embedded backend: host.Session.Service), whose operations run in one kernel turn begun
// at its first operation, now, against current authority and selection; meta is the
// audit metadata of every event of the turn.
type Backend func(meta map[string]any) Service

// Resolution is an operator's answer to an escalation.
type Resolution struct {
	// ID is the escalation's number, the one `escalations list` shows and `escalations
	// resolve` takes (0 when unknown). The agent is told this id, never the call's.
	ID     int64
	Status string // "approved" or "denied"
	Note   string
}

// EscalationResolver reports how an operator resolved a recorded escalation (the
// `escalations resolve` command records it). Resolution returns ok=false while the
// escalation is pending (r.ID is then still set when the escalation is recorded); an
// error is an outage, and the latch stays closed (fail-closed).
// id is the escalate call's id, the EscalationRecord's CallID.
type EscalationResolver interface {
	Resolution(ctx context.Context, id string) (r Resolution, ok bool, err error)
}

// Options configure a Server.
type Options struct {
	Backend Backend
	// Name and Version are the serverInfo (default "sharedos", "dev").
	Name, Version string
	// Logger receives the server's log lines (default: discarded).
	Logger *slog.Logger
	// OperatorHint is the operator's one sentence on a refused or failed call (the CLI's
	// hint, which may name operator commands). It goes to the server's log only, never to
	// the agent: a refusal's text ends with AgentHint. Nil: none is logged.
	OperatorHint func(def *kernel.ToolDefinition, res kernel.ToolResult) string
	// Escalations resolves latched escalations; nil: a latch holds for the session.
	Escalations EscalationResolver
	// PollInterval is how often the inputs are polled for list_changed while a session
	// is open (default and minimum 1 s; tests may set less).
	PollInterval time.Duration
	// NewID mints session and call ids (default: time-ordered random UUIDs, version 7, so
	// that the audit trail's operation index grows at its end).
	NewID func() string
	// Metadata is added to the audit metadata of every event of every session (the HTTP
	// surface puts the token id there); the server's own keys (surface, session, client)
	// win.
	Metadata map[string]any
}

// Server is one MCP server over one Backend; every session it serves runs under the
// backend's context.
type Server struct {
	opts Options
	mcp  *mcp.Server
	log  *slog.Logger

	mu       sync.Mutex
	sessions map[*mcp.ServerSession]*session
	tracked  map[*mcp.ServerSession]bool
	open     int
	lastHash string
	stopPoll context.CancelFunc

	// the last published encoding and its catalogue hash: the same encoding (the
	// common case: the list did not change) is not canonicalized again
	pubMu   sync.Mutex
	pubRaw  []byte
	pubHash string
}

// session is the state of one MCP session.
type session struct {
	id         string
	clientName string
	clientVer  string
	meta       map[string]any

	mu sync.Mutex
	// latchNum is the latched escalation's number (Resolution.ID), 0 when unknown.
	latchNum int64
	// latch is the id of the escalation this session asked for, "" when none is pending.
	latch      string
	afterCalls int
	// resolved is the resolution to report once, on the next call's result.
	resolved map[string]any
}

func (st *session) calledAfter() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.afterCalls
}

// New builds a server. It advertises tools with listChanged.
func New(opts Options) *Server {
	if opts.Name == "" {
		opts.Name = "sharedos"
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.NewID == nil {
		opts.NewID = uuid.NewV7
	}
	s := &Server{opts: opts, log: opts.Logger, sessions: map[*mcp.ServerSession]*session{}, tracked: map[*mcp.ServerSession]bool{}}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: opts.Version}, &mcp.ServerOptions{
		Logger:       opts.Logger,
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
		// A session the SDK connected itself (streamable HTTP) is tracked once initialized.
		InitializedHandler: func(_ context.Context, r *mcp.InitializedRequest) { s.track(r.Session) },
	})
	s.mcp.AddReceivingMiddleware(s.middleware)
	return s
}

// MCP returns the underlying SDK server.
func (s *Server) MCP() *mcp.Server { return s.mcp }

// Run serves one session on t until the client disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	ss, err := s.Connect(ctx, t)
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = ss.Close()
		<-done
		return nil
	}
}

// Connect serves a session on t and returns it; the inputs are polled for list_changed
// while at least one session is open.
func (s *Server) Connect(ctx context.Context, t mcp.Transport) (*mcp.ServerSession, error) {
	ss, err := s.mcp.Connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	s.track(ss)
	return ss, nil
}

// track counts ss as open (once) until it ends; the inputs are polled while any is.
func (s *Server) track(ss *mcp.ServerSession) {
	if ss == nil {
		return
	}
	s.mu.Lock()
	if s.tracked[ss] {
		s.mu.Unlock()
		return
	}
	s.tracked[ss] = true
	s.open++
	if s.open == 1 {
		pctx, cancel := context.WithCancel(context.Background())
		s.stopPoll = cancel
		go s.poll(pctx)
	}
	s.mu.Unlock()
	go func() {
		_ = ss.Wait()
		s.mu.Lock()
		delete(s.sessions, ss)
		delete(s.tracked, ss)
		s.open--
		if s.open == 0 && s.stopPoll != nil {
			s.stopPoll()
			s.stopPoll = nil
		}
		s.mu.Unlock()
	}()
}

// OpenSessions is the number of sessions being served.
func (s *Server) OpenSessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open
}

// CloseSessions ends every session of the server (their clients see the session gone).
func (s *Server) CloseSessions() {
	for ss := range s.mcp.Sessions() {
		_ = ss.Close()
	}
}

// state returns the session state of ss, creating it on first use.
func (s *Server) state(ss *mcp.ServerSession) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st, ok := s.sessions[ss]; ok {
		return st
	}
	st := &session{id: ss.ID()}
	if st.id == "" {
		st.id = s.opts.NewID()
	}
	if ip := ss.InitializeParams(); ip != nil && ip.ClientInfo != nil {
		st.clientName, st.clientVer = ip.ClientInfo.Name, ip.ClientInfo.Version
	}
	st.meta = make(map[string]any, len(s.opts.Metadata)+3)
	for k, v := range s.opts.Metadata {
		st.meta[k] = v
	}
	st.meta["surface"], st.meta["session"] = "mcp", st.id
	st.meta["client"] = map[string]any{"name": st.clientName, "version": st.clientVer}
	s.sessions[ss] = st
	return st
}

func (s *Server) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			return s.listTools(ctx, s.state(req.GetSession().(*mcp.ServerSession)))
		case "tools/call":
			r, _ := req.(*mcp.CallToolRequest)
			if r == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call: missing params"}
			}
			return s.callTool(ctx, s.state(r.Session), r.Params)
		}
		return next(ctx, method, req)
	}
}

// ---- tools/list ----------------------------------------------------------------------

// publishedTool is the hashed form of a published tool (spec 30 §3.5).
type publishedTool struct {
	Name         string                    `json:"name"`
	Description  string                    `json:"description"`
	InputSchema  map[string]any            `json:"inputSchema"`
	OutputSchema map[string]any            `json:"outputSchema,omitempty"`
	Annotations  kernel.PublishedHints     `json:"annotations"`
	Metadata     kernel.PublishedToolLabel `json:"metadata"`
}

// publish projects a kernel catalogue onto the published list: sorted by name in
// code-unit order, cut at MaxPublishedTools, with its catalogue hash.
func (s *Server) publish(defs []kernel.ToolDefinition) ([]publishedTool, string, error) {
	sort.SliceStable(defs, func(i, j int) bool { return defs[i].Name < defs[j].Name })
	if len(defs) > MaxPublishedTools {
		s.log.Warn("published tool list cut to the model-facing bound", "tools", len(defs), "bound", MaxPublishedTools)
		defs = defs[:MaxPublishedTools]
	}
	out := make([]publishedTool, len(defs))
	for i := range defs {
		d := &defs[i]
		p := d.Publish()
		hints := kernel.PublishedHints{ReadOnlyHint: kernel.BoolPtr(d.ReadWrite == kernel.ClassRead)}
		if p.Annotations != nil {
			if p.Annotations.ReadOnlyHint != nil {
				hints.ReadOnlyHint = p.Annotations.ReadOnlyHint
			}
			hints.DestructiveHint, hints.IdempotentHint = p.Annotations.DestructiveHint, p.Annotations.IdempotentHint
		}
		out[i] = publishedTool{Name: p.Name, Description: p.Description, InputSchema: p.InputSchema,
			OutputSchema: p.OutputSchema, Annotations: hints,
			Metadata: kernel.PublishedToolLabel{Namespace: d.Namespace, Source: d.Source}}
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return nil, "", fmt.Errorf("encode published tools: %w", err)
	}
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if s.pubRaw != nil && bytes.Equal(raw, s.pubRaw) {
		return out, s.pubHash, nil
	}
	canon, err := kernel.CanonicalJSON(raw)
	if err != nil {
		return nil, "", fmt.Errorf("canonicalize published tools: %w", err)
	}
	sum := sha256.Sum256(canon)
	s.pubRaw, s.pubHash = raw, hex.EncodeToString(sum[:])
	return out, s.pubHash, nil
}

// wireTool is the MCP Tool of a published tool.
func wireTool(p *publishedTool) *mcp.Tool {
	t := &mcp.Tool{Name: p.Name, Description: p.Description, InputSchema: p.InputSchema,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: *p.Annotations.ReadOnlyHint, DestructiveHint: p.Annotations.DestructiveHint},
		Meta:        mcp.Meta{MetaNamespace: p.Metadata.Namespace, MetaSource: p.Metadata.Source}}
	if p.OutputSchema != nil {
		t.OutputSchema = p.OutputSchema
	}
	if p.Annotations.IdempotentHint != nil {
		t.Annotations.IdempotentHint = *p.Annotations.IdempotentHint
	}
	return t
}

func (s *Server) listTools(ctx context.Context, st *session) (mcp.Result, error) {
	list, err := s.opts.Backend(st.meta).ListTools(ctx)
	var ae *api.Error
	switch {
	case errors.As(err, &ae):
		s.log.Error("tools/list", "err", err)
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the tool catalogue is unavailable: " + err.Error()}
	case err != nil:
		return nil, s.beginFailed("tools/list", err)
	}
	pub, hash, err := s.publish(list.Tools)
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	s.mu.Lock()
	s.lastHash = hash
	s.mu.Unlock()
	tools := make([]*mcp.Tool, len(pub))
	for i := range pub {
		tools[i] = wireTool(&pub[i])
	}
	return &mcp.ListToolsResult{Tools: tools, Meta: mcp.Meta{MetaCatalogHash: hash, MetaExecutionID: st.id}}, nil
}

// beginFailed is the JSON-RPC error of an operation whose kernel turn could not begin
// (the service's error that is not an *api.Error: the backend's open error).
func (s *Server) beginFailed(op string, err error) error {
	s.log.Error(op+": begin turn", "err", err)
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the kernel turn could not begin: " + err.Error()}
}

// publishedNow is the published list of an operation's service, computed as a dry run
// (nothing audited): the tools ListAllTools reports usable are exactly those ListTools
// returns.
func (s *Server) publishedNow(ctx context.Context, svc Service) ([]publishedTool, string, error) {
	gs, err := svc.ListAllTools(ctx)
	if err != nil {
		return nil, "", err
	}
	defs := make([]kernel.ToolDefinition, 0, len(gs))
	for _, g := range gs {
		if g.Usable {
			defs = append(defs, g.Definition)
		}
	}
	return s.publish(defs)
}

// ---- list_changed --------------------------------------------------------------------

// poll recomputes the published list at every interval while a session is open and
// notifies the sessions when its hash changed. It begins a turn but only dry-runs it, so
// polling writes nothing to the audit trail.
func (s *Server) poll(ctx context.Context) {
	tick := time.NewTicker(s.opts.PollInterval)
	defer tick.Stop()
	meta := map[string]any{"surface": "mcp"}
	for k, v := range s.opts.Metadata {
		meta[k] = v
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_, hash, err := s.publishedNow(ctx, s.opts.Backend(meta))
		if err != nil {
			s.log.Warn("list_changed poll", "err", err)
			continue
		}
		s.mu.Lock()
		changed := s.lastHash != "" && hash != s.lastHash
		if s.lastHash == "" || changed {
			s.lastHash = hash
		}
		s.mu.Unlock()
		if changed {
			s.log.Info("published tool list changed; notifying", "catalogHash", hash)
			s.notifyListChanged()
		}
	}
}

// listChangedSentinel is an SDK-registered tool that is never published nor callable (the
// middleware owns tools/list and tools/call): (re-)adding it is the SDK's one public way
// to send notifications/tools/list_changed to every session of the server.
const listChangedSentinel = "sharedos.internal.list_changed"

func (s *Server) notifyListChanged() {
	s.mcp.AddTool(&mcp.Tool{Name: listChangedSentinel, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("never called: tools/call is owned by the middleware")
		})
}

// ---- tools/call ----------------------------------------------------------------------

// portable is a name's portable form (spec 30 §3.6: "." → "_").
func portable(name string) string { return strings.ReplaceAll(name, ".", "_") }

// mapName is the name mapping of spec 30 §3.6: an exact published name is used as-is;
// otherwise the one published tool whose portable form is name; otherwise (no match, or
// several) the raw name, for the kernel to refuse.
func mapName(name string, published []string) string {
	match, n := "", 0
	for _, p := range published {
		if p == name {
			return name
		}
		if portable(p) == name {
			match, n = p, n+1
		}
	}
	if n == 1 {
		return match
	}
	return name
}

func (s *Server) callTool(ctx context.Context, st *session, params *mcp.CallToolParamsRaw) (result mcp.Result, err error) {
	// 1. Validate params (spec 30 §3.3: −32602 for no name or non-object arguments).
	if params == nil || params.Name == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call: params.name is required"}
	}
	args, ok := objectArguments(params.Arguments)
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call: params.arguments must be a JSON object"}
	}

	// The latch: a pending escalation refuses every later call in band.
	extraMeta, latched, err := s.checkLatch(ctx, st)
	defer func() { addResolutionLine(result, extraMeta) }()
	if err != nil {
		s.log.Warn("escalation resolution unavailable; the latch stays closed", "err", err)
	}
	svc := s.opts.Backend(st.meta)

	if latched != "" {
		// The latch is the session's envelope (spec 30 §3.7): it only removes authority.
		// The kernel records the refusal (tool.invoked, source envelope) — the surface
		// decides nothing about grants and audits nothing itself.
		after := st.calledAfter()
		s.log.Info("call refused: escalation pending", "session", st.id, "escalation", latched, "tool", params.Name,
			"callsAfterEscalation", after)
		name, id := st.escalationName()
		res, err := svc.RefuseInEnvelope(ctx, api.EnvelopeRefusal{Call: api.InvokeRequest{ID: s.opts.NewID(), Tool: params.Name, Arguments: args},
			Code: CodeEscalationPending, Message: "this session asked a human reviewer (escalation " + name + "); no tool call runs until an operator resolves it",
			Metadata: map[string]any{"escalation": id, "callsAfterEscalation": after}})
		if err != nil {
			return nil, s.beginFailed("tools/call", err)
		}
		return refusal(res, AgentHint(res, false), extraMeta), nil
	}

	// 2. Name mapping: exact, else exactly one published tool's portable form, else raw.
	name := params.Name
	if def, err := svc.Definition(ctx, name, false); !strings.Contains(name, ".") && err == nil && def == nil {
		// A name with a dot is no tool's portable form; an exact registered name is used
		// as sent. Otherwise the published list of this instant (a dry run) decides.
		if pub, _, err := s.publishedNow(ctx, svc); err == nil {
			published := make([]string, len(pub))
			for i := range pub {
				published[i] = pub[i].Name
			}
			if mapped := mapName(name, published); mapped != name {
				s.log.Debug("tools/call alias", "alias", name, "tool", mapped)
				name = mapped
			}
		}
	}

	// 3. A fresh call id; the alias never goes on the call.
	call := api.InvokeRequest{ID: s.opts.NewID(), Tool: name, Arguments: args}

	// The escalation latch: an offered sharedos.escalate is recorded, not executed.
	if name == kernel.EscalationToolName {
		esc, err := svc.Escalate(ctx, api.EscalateRequest{Call: kernel.ToolCall{ID: call.ID, Tool: name, Arguments: args}, IfOffered: true})
		if err != nil || !esc.NotOffered {
			return s.escalate(ctx, st, call, esc, err, extraMeta)
		}
	}

	out, err := svc.Invoke(ctx, call)
	if err != nil {
		return nil, s.beginFailed("tools/call", err)
	}
	res := out.Result
	if why, ok := res.Metadata[kernel.AuditUnavailableKey]; ok {
		// The call ran (or was refused) but its tool.invoked record could not be written:
		// the operator hears it in the log, the agent sees only that it happened (the
		// cause names host paths).
		s.log.Error("tools/call: the tool.invoked record could not be written", "session", st.id, "tool", name,
			"call", call.ID, "err", why)
		m := make(map[string]any, len(extraMeta)+1)
		for k, v := range extraMeta {
			m[k] = v
		}
		m[MetaAuditUnavailable] = true
		extraMeta = m
	}
	def := out.Definition
	if res.Status == kernel.StatusSucceeded {
		return success(def, res.Output, extraMeta), nil
	}
	if s.opts.OperatorHint != nil && res.Error != nil {
		s.log.Info("call refused", "session", st.id, "tool", name, "call", call.ID, "status", string(res.Status),
			"code", string(res.Error.Code), "hint", s.opts.OperatorHint(def, res))
	}
	return refusal(res, AgentHint(res, s.escalationOffered(ctx, svc)), extraMeta), nil
}

// escalationOffered reports whether the session's catalogue of this instant offers
// sharedos.escalate (a dry run: nothing is audited); an error counts as not offered.
func (s *Server) escalationOffered(ctx context.Context, svc Service) bool {
	gs, err := svc.ListAllTools(ctx)
	if err != nil {
		return false
	}
	for _, g := range gs {
		if g.Tool == kernel.EscalationToolName {
			return g.Usable
		}
	}
	return false
}

// objectArguments returns the call's arguments as a JSON object ({} when absent or
// null), or ok=false when they are another JSON value.
func objectArguments(raw json.RawMessage) (json.RawMessage, bool) {
	t := bytes.Trim(raw, " \t\r\n") // JSON white space only
	switch {
	case len(t) == 0 || string(t) == "null":
		return json.RawMessage("{}"), true
	case t[0] == '{' && json.Valid(raw):
		return raw, true
	}
	return nil, false
}

// checkLatch reports the pending escalation that refuses this call ("" when none), and
// the resolution to report once when the operator resolved it.
func (s *Server) checkLatch(ctx context.Context, st *session) (map[string]any, string, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	extra := st.resolved
	st.resolved = nil
	if st.latch == "" {
		return extra, "", nil
	}
	if s.opts.Escalations != nil {
		r, ok, err := s.opts.Escalations.Resolution(ctx, st.latch)
		if err != nil {
			st.afterCalls++
			return extra, st.latch, err
		}
		if r.ID != 0 {
			st.latchNum = r.ID
		}
		if ok {
			e := map[string]any{"id": st.latchNum, "callId": st.latch, "status": r.Status}
			if st.latchNum == 0 {
				e["id"] = st.latch
			}
			if r.Note != "" {
				e["note"] = r.Note
			}
			st.latch, st.latchNum = "", 0
			return map[string]any{MetaEscalation: e}, "", nil
		}
	}
	st.afterCalls++
	return extra, st.latch, nil
}

// escalate answers an offered escalation (Service.Escalate with IfOffered): recorded,
// the session latches; refused, the call is denied; the catalogue unavailable, a
// JSON-RPC error; the record unwritten, a failed call.
func (s *Server) escalate(ctx context.Context, st *session, call api.InvokeRequest, res api.EscalateResult, err error, extra map[string]any) (mcp.Result, error) {
	var ae *api.Error
	switch {
	case errors.As(err, &ae) && ae.Code == api.CodeToolCatalogUnavailable:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the tool catalogue is unavailable: " + err.Error()}
	case err != nil && ae == nil:
		return nil, s.beginFailed("tools/call", err)
	case res.Denied != nil:
		// the escalation's own authorization refused it (its grant's uses are spent)
		return refusal(*res.Denied, hintNoEscalation, extra), nil
	}
	if err != nil {
		s.log.Error("record escalation", "err", err)
		return refusal(kernel.ToolResult{Status: kernel.StatusFailed, Tool: call.Tool, Gate: kernel.GateInfrastructure,
			Error: &kernel.ProtocolError{Code: kernel.CodeAuditUnavailable, Retryable: kernel.BoolPtr(true),
				Message: "the escalation could not be recorded"}},
			hintAuditUnwritten, extra), nil
	}
	var num int64
	if s.opts.Escalations != nil {
		// The escalation's number, as `escalations list` shows it: what the agent is told.
		if r, _, err := s.opts.Escalations.Resolution(ctx, call.ID); err == nil {
			num = r.ID
		}
	}
	esc := res.Escalation
	st.mu.Lock()
	st.latch, st.latchNum = call.ID, num
	st.mu.Unlock()
	s.log.Info("escalation recorded; the session is latched", "escalation", num, "call", call.ID, "reviewer", esc.Reviewer.String())
	out := map[string]any{"escalated": true, "reason": esc.Reason, "note": EscalationNote}
	if num != 0 {
		out["escalation"] = num
	}
	return success(nil, out, extra), nil
}

// success is the result of a succeeded call: the output as text (itself when a string,
// else its JSON), and structuredContent when the tool declares an outputSchema and the
// output is a JSON object.
func success(def *kernel.ToolDefinition, output any, extra map[string]any) *mcp.CallToolResult {
	var text string
	var raw json.RawMessage
	if str, ok := output.(string); ok {
		text = str
	} else {
		b, err := json.Marshal(output)
		if err != nil {
			b = []byte("null")
		}
		raw, text = b, string(b)
	}
	r := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
	if def != nil && def.OutputSchema != nil && len(raw) > 0 && raw[0] == '{' {
		// The value, not raw: the SDK encodes it once more either way, and a
		// json.RawMessage (a Marshaler) is re-scanned byte by byte where a struct's
		// strings are copied (the same bytes: both are json.Marshal's).
		r.StructuredContent = output
	}
	if len(extra) > 0 {
		r.Meta = mcp.Meta(extra)
	}
	return r
}

// refusalText is the text of a denied or failed call (spec 30 §3.6, details dropped) with
// the agent's one-sentence hint last (AgentHint; never the CLI's, which names operator
// commands).
type refusalText struct {
	Status    kernel.ToolStatus `json:"status"`
	Code      kernel.ErrorCode  `json:"code"`
	Message   string            `json:"message"`
	Retryable *bool             `json:"retryable,omitempty"`
	Hint      string            `json:"hint,omitempty"`
}

// refusal is the isError result of a denied or failed call.
func refusal(res kernel.ToolResult, hint string, extra map[string]any) *mcp.CallToolResult {
	t := refusalText{Status: res.Status, Hint: hint}
	if res.Error != nil {
		t.Code, t.Message, t.Retryable = res.Error.Code, res.Error.Message, res.Error.Retryable
	}
	b, _ := json.Marshal(t)
	meta := mcp.Meta{MetaStatus: string(res.Status), MetaCode: string(t.Code)}
	if res.Gate != "" {
		meta[MetaGate] = string(res.Gate)
	}
	if res.Cause != "" {
		meta[MetaCause] = string(res.Cause)
	}
	for k, v := range extra {
		meta[k] = v
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, IsError: true, Meta: meta}
}
