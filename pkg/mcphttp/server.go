// Package mcphttp serves `sharedos mcp --listen` (spec 50 §3): the MCP server of
// pkg/mcpserver over streamable HTTP (the go-sdk handler, path /mcp), for clients that
// connect by URL and for several agents at once.
//
// Identity: every request carries `Authorization: Bearer TOKEN`; the token maps to a
// context through the tokens file (pkg/tokens), or, without one, to the one ephemeral token
// bound to the CLI's context. Each token gets its own host (pkg/host: its context, its
// grant files, its namespace selection) and its own MCP server, so tokens never see each
// other's tools, settings or audit records; the hosts come from host.Principals, the
// principal cache `serve` shares, and use one state database handle between them. The rules, in the order they are checked:
//
//   - a path other than /mcp and /health: 404; /health answers {"status":"ok",
//     "protocolVersion":"1"} without a token (GET only);
//   - a cross-origin browser request (Sec-Fetch-Site / Origin against Host): 403, and the
//     SDK's DNS-rebinding protection (a loopback listener refuses a non-loopback Host): 403;
//   - a missing, unknown or expired token: 401 {"error":"unauthorized"} with
//     `www-authenticate: Bearer realm="sharedos"`, before any session work; a tokens file
//     that cannot be read or parsed: 503 (fail-closed, never the previous content);
//   - a body over the cap (4 MiB): 413;
//   - a session id created under another token: 403;
//   - a new session over the per-token cap (64): 429.
//
// The package translates HTTP to MCP only: it never authorizes, filters or audits on its
// own (the kernel does, per token; the token id goes into every audit event's metadata).
package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcpserver"
	"github.com/sharedos/sharedos/pkg/store"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// Defaults of the limits.
const (
	DefaultMaxSessions        = 64
	DefaultMaxBody            = 4 << 20
	DefaultSessionIdleTimeout = time.Hour
	// EphemeralID is the token id of the ephemeral token.
	EphemeralID = "ephemeral"
)

// Config configures a Server.
type Config struct {
	// Base is the CLI's resolved settings: root, state, ceiling, namespaces, --now. With a
	// tokens file, each token's context and grant files replace Base's (As, Owner,
	// Authority, World, Purpose, Grants); without one, Base is the ephemeral token's.
	Base host.Settings
	// Tokens is the tokens file; "" serves the one ephemeral token EphemeralToken;
	// host.StoreTokens ("store:") the tokens of the PostgreSQL state database.
	Tokens         string
	EphemeralToken string
	Clock          func() time.Time
	Logger         *slog.Logger
	Version        string
	// OperatorHint is the operator's hint on a refused call, for the log only
	// (mcpserver.Options.OperatorHint); the agent reads mcpserver.AgentHint.
	OperatorHint func(*kernel.ToolDefinition, kernel.ToolResult) string
	// MaxSessions per token (default 64), MaxBody per request (default 4 MiB),
	// SessionIdleTimeout closes a session with no request for that long (default 1 h).
	MaxSessions        int
	MaxBody            int64
	SessionIdleTimeout time.Duration
	// PollInterval of list_changed (tests; default 1 s).
	PollInterval time.Duration
}

// Server is the HTTP surface: Handler serves it, Drain and Close end it.
type Server struct {
	cfg     Config
	log     *slog.Logger
	watcher interface{ Current() (*tokens.File, error) } // the tokens file's, or the store's
	tstore  *host.TokenStore                             // --tokens store: (closed by Close)
	eph     *tokens.File
	sdk     *mcp.StreamableHTTPHandler
	handler http.Handler

	principals *host.Principals[*surface] // by host.PrincipalKey, over one state database handle

	mu         sync.Mutex
	bindings   map[string]*principal // session id → the principal that created it
	lastFile   *tokens.File
	nextExpiry time.Time // the earliest expiry of an entry not yet expired at the last sweep
	stopSweep  chan struct{}
	closeOnce  sync.Once
	draining   bool
	inflight   sync.WaitGroup
}

// principal is one token's host and session (host.Principals) and its MCP server.
type principal = host.Principal[*surface]

// surface is the HTTP surface's part of a principal: its MCP server and sessions.
type surface struct {
	srv *mcpserver.Server

	mu       sync.Mutex
	sessions int // live and being created
	busy     sync.WaitGroup
}

type principalKey struct{}

// New builds the server and, with a tokens file, opens the host of every token that has
// not expired, so that a bad tokens file or token (a grant file inside the root, an
// invalid context) is refused at start.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.SessionIdleTimeout <= 0 {
		cfg.SessionIdleTimeout = DefaultSessionIdleTimeout
	}
	s := &Server{cfg: cfg, log: cfg.Logger, bindings: map[string]*principal{}}
	pcfg := host.PrincipalsConfig[*surface]{Base: cfg.Base, Tokens: cfg.Tokens, Clock: cfg.Clock,
		Needs: host.Needs{Planes: true, Actor: true, HoldConnections: true, Workload: host.WorkloadServer}, Attach: s.attach}
	if host.IsStoreTokens(cfg.Tokens) {
		// the tokens are read through the one state database handle the principals use
		ts, err := host.OpenTokenStore(ctx, &cfg.Base)
		if err != nil {
			return nil, &TokenError{Err: err}
		}
		s.tstore, s.watcher, pcfg.State = ts, ts, ts.State()
	}
	s.principals = host.NewPrincipals(pcfg)
	switch {
	case s.tstore != nil:
	case cfg.Tokens == "":
		if cfg.EphemeralToken == "" {
			return nil, errors.New("no tokens file and no ephemeral token")
		}
		s.eph = &tokens.File{Entries: []tokens.Entry{{ID: EphemeralID, SHA256: tokens.Hash(cfg.EphemeralToken)}}}
	default:
		// the tokens file is authority: outside the root, even while it holds no token
		st := cfg.Base
		st.Tokens = cfg.Tokens
		if err := host.CheckTrustBoundary(&st); err != nil {
			return nil, &TokenError{Err: err}
		}
		s.watcher = tokens.NewWatcher(cfg.Tokens)
	}
	f, err := s.current()
	if err != nil {
		s.Close()
		return nil, err
	}
	for i := range f.Entries {
		if f.Entries[i].Expired(cfg.Clock()) {
			s.log.Warn("token has expired; it is refused", "token", f.Entries[i].ID)
			continue
		}
		if _, err := s.principal(ctx, &f.Entries[i]); err != nil {
			s.Close()
			return nil, err
		}
	}
	s.sweep(f)
	s.stopSweep = make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-s.stopSweep:
				return
			case <-tick.C:
				if f, err := s.current(); err == nil {
					s.sweep(f)
				}
			}
		}
	}()
	s.sdk = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if p, ok := r.Context().Value(principalKey{}).(*principal); ok {
			return p.Surface.srv.MCP()
		}
		return nil
	}, &mcp.StreamableHTTPOptions{Logger: cfg.Logger, SessionTimeout: cfg.SessionIdleTimeout, MaxRequestBodyBytes: cfg.MaxBody})
	// The SDK's own session-hijacking check, under ours: a session remembers the
	// principal key that created it.
	bound := auth.RequireBearerToken(func(ctx context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		p, _ := r.Context().Value(principalKey{}).(*principal)
		if p == nil {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: p.Key, Expiration: time.Now().Add(24 * time.Hour)}, nil
	}, nil)(s.sdk)
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden", "message": "cross-origin requests are refused"})
	}))
	mcpHandler := cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serveMCP(w, r, bound) }))
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET")
				writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method_not_allowed"})
				return
			}
			writeJSON(w, http.StatusOK, struct {
				Status          string `json:"status"`
				ProtocolVersion string `json:"protocolVersion"`
			}{"ok", "1"})
		case "/mcp":
			mcpHandler.ServeHTTP(w, r)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	return s, nil
}

// Handler is the server's HTTP handler (/mcp and /health).
func (s *Server) Handler() http.Handler { return s.handler }

// current is the current tokens file (the ephemeral one without a file).
func (s *Server) current() (*tokens.File, error) {
	if s.eph != nil {
		return s.eph, nil
	}
	return s.watcher.Current()
}

// principal returns the principal of an entry, opening its host on first use
// (host.Principals: one build per entry at a time, over the one state database handle).
func (s *Server) principal(ctx context.Context, e *tokens.Entry) (*principal, error) {
	p, err := s.principals.Get(ctx, e)
	if err != nil && ctx.Err() == nil {
		return nil, &TokenError{ID: e.ID, Err: err}
	}
	return p, err
}

// attach builds the MCP server of a principal whose host and session were just opened.
func (s *Server) attach(_ context.Context, p *principal) (*surface, error) {
	if err := p.Host.GrantErr; err != nil {
		s.log.Warn("grant files of token refused; authority is unavailable (every call denied)", "token", p.ID, "err", err)
	}
	log := s.log.With("token", p.ID)
	p.Session.OnReload = func(err error) {
		if err != nil {
			log.Warn("grant files changed and were refused; authority is unavailable (every call denied)", "err", err)
			return
		}
		log.Info("grant files changed; reloaded")
	}
	sf := &surface{}
	backend := Backend(p.Session)
	sf.srv = mcpserver.New(mcpserver.Options{Backend: backend, Version: s.cfg.Version, Logger: log, OperatorHint: s.cfg.OperatorHint,
		Escalations: mcpserver.ServiceResolver(backend), PollInterval: s.cfg.PollInterval,
		Metadata: map[string]any{"token": p.ID}})
	actx := p.Host.Turn.Context()
	log.Info("token ready", "actor", actx.Actor.String(), "owner", actx.Owner.String(), "world", actx.World,
		"namespaces", strings.Join(actx.EnabledToolNamespaces, ","))
	return sf, nil
}

// TokenError is a token whose host could not be opened (ID "": the tokens file itself is
// refused by the host's trust boundary).
type TokenError struct {
	ID  string
	Err error
}

func (e *TokenError) Error() string {
	if e.ID == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("token %q: %v", e.ID, e.Err)
}

// Unwrap returns the host's error.
func (e *TokenError) Unwrap() error { return e.Err }

// sweep retires the principals whose entry is gone from f (revoked, or changed) or has
// expired: their sessions are closed, and their host once their in-flight requests
// ended. It runs on every request and every second (so that an idle session of a revoked
// or expired token is closed too), and does work only when the file changed or an expiry
// passed.
func (s *Server) sweep(f *tokens.File) {
	now := s.cfg.Clock()
	s.mu.Lock()
	if f == s.lastFile && (s.nextExpiry.IsZero() || now.Before(s.nextExpiry)) {
		s.mu.Unlock()
		return
	}
	s.lastFile = f
	keep := map[string]bool{}
	s.nextExpiry = time.Time{}
	for i := range f.Entries {
		e := &f.Entries[i]
		if e.Expired(now) {
			continue
		}
		keep[host.PrincipalKey(e)] = true
		if !e.ExpiresAt.IsZero() && (s.nextExpiry.IsZero() || e.ExpiresAt.Before(s.nextExpiry)) {
			s.nextExpiry = e.ExpiresAt
		}
	}
	s.mu.Unlock()
	for _, p := range s.principals.Retain(func(key string) bool { return keep[key] }) {
		s.log.Info("token revoked, changed or expired; its sessions are closed", "token", p.ID)
		go s.retire(p)
	}
}

func (s *Server) retire(p *principal) {
	p.Surface.srv.CloseSessions()
	p.Surface.busy.Wait()
	_ = p.Close()
}

// problem writes a JSON error body.
func writeJSON(w http.ResponseWriter, status int, body any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	b, _ := json.Marshal(body)
	_, _ = w.Write(append(b, '\n'))
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sharedos"`)
	writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
}

// bearer is the request's bearer token ("" when there is none).
func bearer(r *http.Request) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// AuthError is a request the server refuses before any work: Status 401 (Code
// "unauthorized": no, an unknown or an expired bearer token; the response carries
// `www-authenticate: Bearer realm="sharedos"`) or 503 (Code "unavailable": the tokens
// file is unusable, or the token's context cannot be served). Message is safe to show
// the client; Reason is for the log only.
type AuthError struct {
	Status  int
	Code    string
	Message string
	Reason  string
}

func (e *AuthError) Error() string { return e.Message }

// Principal is one token's opened host and session (with the MCP surface of it).
type Principal = principal

// Authenticate resolves the request's principal from its bearer token, retiring the
// principals of revoked, changed or expired tokens first; a refusal is an *AuthError.
func (s *Server) Authenticate(r *http.Request) (*Principal, error) {
	tok := bearer(r)
	f, err := s.current()
	if err != nil {
		s.log.Error("tokens file unusable; every request is refused until it is fixed", "err", err)
		return nil, &AuthError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the server's tokens file is unusable"}
	}
	s.sweep(f)
	var e *tokens.Entry
	if tok != "" {
		e = f.Lookup(tok)
	}
	if e == nil || e.Expired(s.cfg.Clock()) {
		reason := "unknown token"
		switch {
		case tok == "":
			reason = "no bearer token"
		case e != nil:
			reason = "expired token " + e.ID
		}
		s.log.Info("request refused: unauthorized", "remote", r.RemoteAddr, "reason", reason)
		return nil, &AuthError{Status: http.StatusUnauthorized, Code: "unauthorized", Message: "a valid bearer token is required", Reason: reason}
	}
	p, err := s.principal(r.Context(), e)
	if err != nil {
		s.log.Error("token unusable", "err", err)
		return nil, &AuthError{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "this token's context cannot be served; see the server's log"}
	}
	return p, nil
}

// authenticate resolves the request's principal, or writes the refusal.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) *principal {
	p, err := s.Authenticate(r)
	var ae *AuthError
	switch {
	case err == nil:
		return p
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		unauthorized(w)
	default:
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "unavailable", "message": err.Error()})
	}
	return nil
}

// Enter counts one in-flight request that Drain waits for; ok is false (and nothing is
// counted) once the server drains. leave must be called when the request ends.
func (s *Server) Enter() (leave func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return nil, false
	}
	s.inflight.Add(1)
	return s.inflight.Done, true
}

func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, next http.Handler) {
	p := s.authenticate(w, r)
	if p == nil {
		return
	}
	s.mu.Lock()
	if s.draining {
		s.mu.Unlock()
		w.Header().Set("Connection", "close")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "shutting_down"})
		return
	}
	long := r.Method == http.MethodGet // a standalone SSE stream: not an in-flight call
	if !long {
		s.inflight.Add(1)
		defer s.inflight.Done()
	}
	p.Surface.busy.Add(1)
	s.mu.Unlock()
	defer p.Surface.busy.Done()

	if r.Body != nil && r.Method != http.MethodGet {
		if r.ContentLength > s.cfg.MaxBody {
			tooLarge(w, s.cfg.MaxBody)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_request", "message": "the request body could not be read"})
			return
		}
		if int64(len(body)) > s.cfg.MaxBody {
			tooLarge(w, s.cfg.MaxBody)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}

	sid := r.Header.Get("Mcp-Session-Id")
	if sid != "" {
		s.mu.Lock()
		owner := s.bindings[sid]
		s.mu.Unlock()
		if owner != nil && owner != p {
			s.log.Warn("request refused: session of another token", "token", p.ID, "remote", r.RemoteAddr)
			writeJSON(w, http.StatusForbidden, map[string]string{"error": "forbidden", "message": "this session belongs to another token"})
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
		return
	}
	if r.Method != http.MethodPost {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
		return
	}
	// A POST without a session id may create a session: reserve a place under the cap.
	sf := p.Surface
	sf.mu.Lock()
	if sf.sessions >= s.cfg.MaxSessions {
		sf.mu.Unlock()
		s.log.Warn("request refused: too many sessions", "token", p.ID, "max", s.cfg.MaxSessions)
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "too_many_sessions",
			"message": fmt.Sprintf("this token has %d open sessions, the most allowed; close one (DELETE /mcp) or wait for one to time out", s.cfg.MaxSessions)})
		return
	}
	sf.sessions++
	sf.mu.Unlock()
	// The place is given back before the client can see an answer that opened no
	// session (a discovery probe, an error): otherwise its next request, sent as soon as
	// it reads that answer, could find the place still taken and be refused 429.
	var once sync.Once
	unreserve := func() {
		once.Do(func() {
			sf.mu.Lock()
			sf.sessions--
			sf.mu.Unlock()
		})
	}
	rec := &recorder{ResponseWriter: w, onHeader: func(h http.Header) {
		if id := h.Get("Mcp-Session-Id"); id != "" {
			s.mu.Lock()
			s.bindings[id] = p
			s.mu.Unlock()
		} else {
			unreserve()
		}
	}}
	next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	id := rec.Header().Get("Mcp-Session-Id")
	var live *mcp.ServerSession
	if id != "" {
		for ss := range sf.srv.MCP().Sessions() {
			if ss.ID() == id {
				live = ss
			}
		}
	}
	release := func() {
		unreserve()
		if id != "" {
			s.mu.Lock()
			delete(s.bindings, id)
			s.mu.Unlock()
		}
	}
	if live == nil {
		release()
		return
	}
	go func() {
		_ = live.Wait()
		release()
	}()
}

func tooLarge(w http.ResponseWriter, max int64) {
	w.Header().Set("Connection", "close")
	writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"error": "payload_too_large",
		"message": fmt.Sprintf("the request body is larger than %d bytes", max)})
}

// recorder calls onHeader once, just before the response header is written (so that a
// session id is bound before its client can know it).
type recorder struct {
	http.ResponseWriter
	onHeader func(http.Header)
	done     bool
}

func (r *recorder) header() {
	if !r.done {
		r.done = true
		r.onHeader(r.ResponseWriter.Header())
	}
}

func (r *recorder) WriteHeader(code int) { r.header(); r.ResponseWriter.WriteHeader(code) }

func (r *recorder) Write(b []byte) (int, error) { r.header(); return r.ResponseWriter.Write(b) }

func (r *recorder) Flush() {
	r.header()
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// Sessions is the number of open sessions (and sessions being created) of a token id.
func (s *Server) Sessions(id string) int {
	n := 0
	for _, p := range s.principals.All() {
		if p.ID == id {
			p.Surface.mu.Lock()
			n += p.Surface.sessions
			p.Surface.mu.Unlock()
		}
	}
	return n
}

// Drain refuses new requests (503), waits until the in-flight ones finished or ctx ends,
// then closes every session (ending their event streams). Close releases the hosts.
func (s *Server) Drain(ctx context.Context) error {
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("in-flight requests did not finish: %w", ctx.Err())
	}
	for _, p := range s.principals.All() {
		p.Surface.srv.CloseSessions()
	}
	return err
}

// Close closes every session and releases every token's host, and the state database
// once the last host is released.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.stopSweep != nil {
			close(s.stopSweep)
		}
	})
	_ = s.principals.Close(func(p *principal) {
		p.Surface.srv.CloseSessions()
		_ = p.Close()
	})
	if s.tstore != nil {
		_ = s.tstore.Close()
	}
}

// Backend is the MCP server's backend over a host session: each operation's service is
// the session's embedded backend (host.Session.Service), in a turn of its own.
func Backend(sess *host.Session) mcpserver.Backend {
	return func(meta map[string]any) mcpserver.Service { return sess.Service(meta, "", "mcp") }
}

// Timeouts of HTTPServer. There is no read or write timeout on a whole request: a
// session's event stream (GET /mcp) stays open for as long as the session.
const (
	ReadHeaderTimeout = 10 * time.Second
	IdleTimeout       = 2 * time.Minute
	MaxHeaderBytes    = 64 << 10
)

// HTTPServer is an http.Server for the handler with the header and idle timeouts.
func (s *Server) HTTPServer() *http.Server { return HTTPServer(s.handler, s.log) }

// HTTPServer is an http.Server for h with the header and idle timeouts of every
// long-lived sharedos HTTP surface (`mcp --listen`, `serve`), logging to log.
func HTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: ReadHeaderTimeout, IdleTimeout: IdleTimeout,
		MaxHeaderBytes: MaxHeaderBytes, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// State is the shared state database handle of the principals (nil before the first
// principal opened it, and after Close).
func (s *Server) State() store.State {
	if s.tstore != nil {
		return s.tstore.State()
	}
	return s.principals.Store()
}

// Ready reports whether the server can serve: the shared state database is open,
// reachable and at the latest schema (the store's Ready, when it has one; else a read of
// the default selection). It writes nothing.
func (s *Server) Ready(ctx context.Context) error {
	st := s.State()
	if st == nil {
		return errors.New("no state database is open")
	}
	if r, ok := any(st).(interface{ Ready(context.Context) error }); ok {
		return r.Ready(ctx)
	}
	_, _, err := st.Selection(ctx, "default", kernel.Address{Kind: kernel.KindHuman, ID: "readyz"})
	return err
}
