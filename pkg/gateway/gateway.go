package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/internal/procenv"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Error codes of gateway tool results.
const (
	CodeUpstreamToolError kernel.ErrorCode = "upstream_tool_error"
)

// CatalogCache keeps upstream tool lists between runs (the state database). Key is a
// server's config digest and the owner; data is the upstream's tool list as JSON. An
// error is treated as a miss (the server is asked), never as a catalogue.
type CatalogCache interface {
	GetGatewayCatalog(ctx context.Context, key string) (data []byte, storedAt time.Time, ok bool, err error)
	PutGatewayCatalog(ctx context.Context, key string, data []byte, at time.Time) error
}

// Options configure a Gateway.
type Options struct {
	// Cache is where CLI commands find an upstream's tool list without connecting (nil:
	// always connect).
	Cache CatalogCache
	// Hold: a long-lived surface (mcp, serve). Connections stay open per (owner, server),
	// are reopened with backoff when they drop, and their tool lists are refreshed when
	// the upstream says they changed; the cache is not read (the live list is), only
	// written.
	Hold bool
	// Getenv reads the environment the servers are started with: credentials fromEnv,
	// and PATH and HOME for stdio servers (nil: the process's, internal/procenv).
	Getenv func(string) string
	// Clock is the cache's clock (default time.Now).
	Clock func() time.Time
	// Logger receives connection events (never a credential; default: discarded).
	Logger *slog.Logger
	// OnChange is called after a held tool list changed (refreshed, lost, regained).
	OnChange func()
	// NoConnect: never start or reach a server (shell completion, on every TAB): a
	// cached list of any age is used, and a server without one offers no tools.
	NoConnect bool
}

// Gateway is the configured MCP servers of one host: a ContextToolProvider per server,
// and the connections they opened. It is safe for concurrent use.
type Gateway struct {
	cfg  *Config
	opts Options

	mu      sync.Mutex
	conns   map[connKey]*conn
	closed  bool
	version atomic.Uint64
}

type connKey struct {
	owner  kernel.Address
	server string
}

// New builds the gateway of cfg (nil: no servers).
func New(cfg *Config, opts Options) *Gateway {
	if cfg == nil {
		cfg = &Config{}
	}
	if opts.Getenv == nil {
		opts.Getenv = procenv.Getenv
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Gateway{cfg: cfg, opts: opts, conns: map[connKey]*conn{}}
}

// Config returns the gateway's configuration.
func (g *Gateway) Config() *Config { return g.cfg }

// Version counts the changes of held tool lists; a surface that publishes a list polls
// it (with its other inputs) to send list_changed.
func (g *Gateway) Version() uint64 { return g.version.Load() }

func (g *Gateway) changed() {
	g.version.Add(1)
	if g.opts.OnChange != nil {
		g.opts.OnChange()
	}
}

// Providers returns one kernel.ContextToolProvider per configured server; a provider's
// id is its server's id.
func (g *Gateway) Providers() []kernel.ContextToolProvider {
	out := make([]kernel.ContextToolProvider, len(g.cfg.Servers))
	for i, s := range g.cfg.Servers {
		out[i] = &provider{g: g, s: s}
	}
	return out
}

// Close closes every connection the gateway opened (stdio servers are ended).
func (g *Gateway) Close() error {
	g.mu.Lock()
	g.closed = true
	conns := make([]*conn, 0, len(g.conns))
	for _, c := range g.conns {
		conns = append(conns, c)
	}
	g.conns = map[connKey]*conn{}
	g.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
	return nil
}

func (g *Gateway) conn(s *Server, owner kernel.Address) *conn {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := connKey{owner, s.ID}
	c := g.conns[k]
	if c == nil {
		c = &conn{g: g, s: s, owner: owner, closed: g.closed}
		g.conns[k] = c
	}
	return c
}

// Definition returns the definition of a published gateway tool for owner, from the
// tool lists this process has read (nil when none has it).
func (g *Gateway) Definition(owner kernel.Address, name string) *kernel.ToolDefinition {
	for _, s := range g.cfg.Servers {
		if !strings.HasPrefix(name, s.Namespace+".") || !s.ServesOwner(owner) {
			continue
		}
		c := g.conn(s, owner)
		c.mu.Lock()
		cat := c.cat
		c.mu.Unlock()
		if cat != nil {
			if e := cat.byName[name]; e != nil {
				d := e.def
				return &d
			}
		}
	}
	return nil
}

// Lookup returns the definition of the gateway tool name for owner, reading its server's
// tool list (the cache while fresh, else the server) when this process has not; nil when
// no server serving owner publishes it or the list cannot be read (the kernel then
// reports why, on the call).
func (g *Gateway) Lookup(ctx context.Context, owner kernel.Address, name string) *kernel.ToolDefinition {
	for _, s := range g.cfg.Servers {
		if !strings.HasPrefix(name, s.Namespace+".") || !s.ServesOwner(owner) {
			continue
		}
		cat, err := g.conn(s, owner).catalog(ctx, false)
		if err != nil {
			return nil
		}
		if e := cat.byName[name]; e != nil {
			d := e.def
			return &d
		}
	}
	return nil
}

// Listing is what a server offers, as `gateway tools` shows it.
type Listing struct {
	Server   string   `json:"server"`
	Entries  []*Entry `json:"tools"`
	Warnings []string `json:"warnings,omitempty"`
}

// List connects to a server for owner (or reads the cache, unless fresh) and returns its
// listing.
func (g *Gateway) List(ctx context.Context, id string, owner kernel.Address, fresh bool) (*Listing, error) {
	for _, s := range g.cfg.Servers {
		if s.ID == id {
			c := g.conn(s, owner)
			cat, err := c.catalog(ctx, fresh)
			if err != nil {
				return nil, err
			}
			cat = cat.compiled(s)
			return &Listing{Server: id, Entries: cat.entries, Warnings: cat.warnings}, nil
		}
	}
	return nil, fmt.Errorf("no MCP server %q is configured", id)
}

// provider is the ContextToolProvider of one server.
type provider struct {
	g *Gateway
	s *Server
}

func (p *provider) ID() string { return p.s.ID }

// ListTools returns the server's published tools for the context's owner: none when the
// owner is not among the server's owners. When the upstream cannot be started, reached
// or listed (within connectTimeout) the error is a *kernel.ProviderUnavailableError
// naming the server's tool namespace: only that namespace is unavailable, the rest of
// the catalogue is served (docs/gateway.md, issue 25 item 12). Any other error (the
// gateway is closed) fails the whole catalogue.
func (p *provider) ListTools(ctx context.Context, actx kernel.AccessContext) ([]kernel.ToolHandler, error) {
	if !p.s.ServesOwner(actx.Owner) {
		return nil, nil
	}
	c := p.g.conn(p.s, actx.Owner)
	cat, err := c.catalog(ctx, false)
	if err != nil {
		var ue *unavailableError
		if errors.As(err, &ue) {
			return nil, &kernel.ProviderUnavailableError{Namespaces: []string{p.s.Namespace}, Cause: ue.err}
		}
		return nil, err
	}
	out := make([]kernel.ToolHandler, 0, len(cat.byName))
	for _, e := range cat.entries {
		if e.Status != StatusMapped && e.Status != StatusGated {
			continue
		}
		out = append(out, p.handler(c, e))
	}
	return out, nil
}

func (p *provider) handler(c *conn, e *Entry) kernel.ToolHandler {
	m := e.mapping
	return kernel.ToolHandler{
		Definition:     e.def,
		ParseArguments: e.parse,
		ResolveRequirement: func(actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
			pc, ok := call.Parsed.(*parsedCall)
			if !ok {
				return kernel.CapabilityRequirement{}, errors.New("unparsed call")
			}
			owner := actx.Owner
			return kernel.CapabilityRequirement{Action: m.Action,
				Resource: kernel.ResourceRef{Namespace: m.Namespace, Path: pc.path, Owner: &owner}}, nil
		},
		Invoke: func(ctx context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
			pc, ok := call.Parsed.(*parsedCall)
			if !ok {
				return kernel.ToolResult{}, errors.New("unparsed call")
			}
			if actx.Owner != c.owner {
				// never: the kernel hands a handler only to the context it was listed for
				return kernel.ToolResult{}, errors.New("a gateway tool was invoked for another owner")
			}
			return c.call(ctx, call, actx.Now, e.Upstream, pc.raw), nil
		},
	}
}

// conn is the connection of one (owner, server): its upstream (when open) and its last
// tool list.
type conn struct {
	g     *Gateway
	s     *Server
	owner kernel.Address

	mu      sync.Mutex
	up      *upstream
	cat     *catalog
	closed  bool
	retry   bool  // a reconnect loop is running (held connections only)
	lastErr error // why the last connection attempt failed

	// failedAt is when a listing of a CLI process (not held) last failed to start, reach
	// or list the upstream, and failErr why: until connectTimeout has passed since, a
	// listing fails at once with failErr instead of waiting again.
	failedAt time.Time
	failErr  error
}

// unavailableError is an upstream that could not be started, reached or listed: the
// failure a provider confines to its server's namespace.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

func (c *conn) cacheKey() string { return c.s.Digest() + "|" + c.owner.String() }

// catalog returns the server's tool list for the owner: the held list; else (a CLI
// command) the one read in this process, else a fresh cache entry, else the upstream's,
// connecting. fresh skips the cache.
func (c *conn) catalog(ctx context.Context, fresh bool) (*catalog, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("MCP server %s: the gateway is closed", c.s.ID)
	}
	if c.cat != nil && (!c.g.opts.Hold || c.up != nil) && !fresh {
		return c.cat, nil
	}
	if !c.g.opts.Hold && !fresh && c.g.opts.Cache != nil {
		data, at, ok, err := c.g.opts.Cache.GetGatewayCatalog(ctx, c.cacheKey())
		if err == nil && ok && (c.g.opts.NoConnect || c.g.opts.Clock().Sub(at) < c.s.CatalogTTL) {
			var tools []*mcp.Tool
			if json.Unmarshal(data, &tools) == nil {
				c.cat = buildCatalog(c.s, tools, false)
				return c.cat, nil
			}
		}
	}
	if c.g.opts.NoConnect {
		return &catalog{byName: map[string]*Entry{}}, nil
	}
	hold := c.g.opts.Hold
	if !hold && !fresh && c.failErr != nil && c.g.opts.Clock().Sub(c.failedAt) < c.s.ConnectTimeout {
		// one wait per connectTimeout, not one per listing
		return nil, &unavailableError{fmt.Errorf("%w (not tried again before its connectTimeout of %s has passed)", c.failErr, c.s.ConnectTimeout)}
	}
	err := c.ensureLocked(ctx)
	if err == nil {
		if err = c.relistLocked(ctx); err != nil {
			c.dropLocked()
			c.failedLocked(err)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			// the caller gave up: not the server's failure
			return nil, err
		}
		if !hold {
			c.failedAt, c.failErr = c.g.opts.Clock(), err
		}
		return nil, &unavailableError{err}
	}
	c.failedAt, c.failErr = time.Time{}, nil
	return c.cat, nil
}

// ensureLocked opens the upstream when it is not open. A held connection that failed is
// retried by its reconnect loop, with backoff: until that succeeds, operations fail at
// once with the last cause instead of each trying again.
func (c *conn) ensureLocked(ctx context.Context) error {
	if c.up != nil {
		return nil
	}
	if c.g.opts.Hold && c.retry {
		return fmt.Errorf("MCP server %s is unavailable, reconnecting with backoff: %w", c.s.ID, c.lastErr)
	}
	err := c.connectLocked(ctx)
	if err != nil {
		c.failedLocked(err)
	}
	return err
}

// failedLocked records a failed attempt; a held connection starts its reconnect loop.
func (c *conn) failedLocked(err error) {
	c.lastErr = errors.Unwrap(err)
	if c.lastErr == nil {
		c.lastErr = err
	}
	if c.g.opts.Hold && !c.retry && !c.closed {
		c.retry = true
		go c.reconnect()
	}
}

// connectLocked opens the upstream when it is not open.
func (c *conn) connectLocked(ctx context.Context) error {
	if c.up != nil {
		return nil
	}
	up, err := connectUpstream(ctx, c.s, c.g.opts.Getenv, c.onListChanged)
	if err != nil {
		c.g.opts.Logger.Warn("MCP server unavailable", "server", c.s.ID, "owner", c.owner.String(), "err", err)
		return fmt.Errorf("MCP server %s could not be started or reached: %w", c.s.ID, err)
	}
	c.up = up
	c.g.opts.Logger.Info("MCP server connected", "server", c.s.ID, "owner", c.owner.String())
	if c.g.opts.Hold {
		go c.watch(up)
	}
	return nil
}

// relistLocked reads the open upstream's tool list and stores it (and in the cache).
func (c *conn) relistLocked(ctx context.Context) error {
	tools, err := c.up.listTools(ctx, c.s.ConnectTimeout)
	if err != nil {
		return fmt.Errorf("MCP server %s could not be listed: %w", c.s.ID, err)
	}
	c.setListLocked(ctx, tools)
	return nil
}

// setListLocked stores an upstream tool list (and writes it to the cache).
func (c *conn) setListLocked(ctx context.Context, tools []*mcp.Tool) {
	c.cat = buildCatalog(c.s, tools, c.g.opts.Hold)
	for _, w := range c.cat.warnings {
		c.g.opts.Logger.Warn(w)
	}
	if c.g.opts.Cache != nil {
		if data, err := json.Marshal(tools); err == nil {
			if err := c.g.opts.Cache.PutGatewayCatalog(ctx, c.cacheKey(), data, c.g.opts.Clock()); err != nil {
				c.g.opts.Logger.Warn("gateway catalogue cache not written", "server", c.s.ID, "err", err)
			}
		}
	}
}

func (c *conn) dropLocked() {
	if c.up != nil {
		c.up.close()
		c.up = nil
	}
}

// onListChanged refreshes the list after the upstream said it changed. The list is read
// without holding the connection's lock (operations go on meanwhile, with the old list).
func (c *conn) onListChanged() {
	go func() {
		c.mu.Lock()
		up := c.up
		c.mu.Unlock()
		if up == nil {
			return
		}
		tools, err := up.listTools(context.Background(), c.s.ConnectTimeout)
		if err != nil {
			c.g.opts.Logger.Warn("MCP server list refresh failed", "server", c.s.ID, "err", err)
			return
		}
		c.mu.Lock()
		if c.up != up || c.closed {
			c.mu.Unlock()
			return
		}
		c.setListLocked(context.Background(), tools)
		c.mu.Unlock()
		c.g.changed()
	}()
}

// watch waits for a held connection to end and reopens it with backoff.
func (c *conn) watch(up *upstream) {
	_ = up.cs.Wait()
	c.mu.Lock()
	if c.up != up || c.closed {
		c.mu.Unlock()
		return
	}
	c.up = nil
	c.cat = nil
	c.failedLocked(errors.New("the connection was lost"))
	c.mu.Unlock()
	c.g.opts.Logger.Warn("MCP server connection lost; reconnecting", "server", c.s.ID, "owner", c.owner.String())
	c.g.changed()
}

const (
	minBackoff = 200 * time.Millisecond
	maxBackoff = 30 * time.Second
)

func (c *conn) reconnect() {
	delay := minBackoff
	for {
		time.Sleep(delay)
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		if closed {
			return
		}
		// connect and list without the lock: operations fail at once meanwhile
		up, err := connectUpstream(context.Background(), c.s, c.g.opts.Getenv, c.onListChanged)
		var tools []*mcp.Tool
		if err == nil {
			if tools, err = up.listTools(context.Background(), c.s.ConnectTimeout); err != nil {
				up.close()
			}
		}
		c.mu.Lock()
		if c.closed {
			c.retry = false
			c.mu.Unlock()
			if err == nil {
				up.close()
			}
			return
		}
		if err == nil && c.up != nil {
			// never while the loop runs (operations do not connect then); keep the open one
			up.close()
			c.retry, c.lastErr = false, nil
			c.mu.Unlock()
			return
		}
		if err == nil {
			c.up, c.retry, c.lastErr = up, false, nil
			c.setListLocked(context.Background(), tools)
			c.mu.Unlock()
			c.g.opts.Logger.Info("MCP server reconnected", "server", c.s.ID, "owner", c.owner.String())
			go c.watch(up)
			c.g.changed()
			return
		}
		c.lastErr = err
		c.mu.Unlock()
		delay = min(2*delay, maxBackoff)
	}
}

func (c *conn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.dropLocked()
}

// session returns the open upstream, connecting when needed.
func (c *conn) session(ctx context.Context) (*upstream, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("the gateway is closed")
	}
	if c.g.opts.NoConnect {
		return nil, errors.New("this command does not connect to MCP servers")
	}
	if err := c.ensureLocked(ctx); err != nil {
		return nil, err
	}
	return c.up, nil
}

// call runs one authorized call upstream and maps its result.
func (c *conn) call(ctx context.Context, call kernel.ParsedToolCall, now, upstreamName string, raw json.RawMessage) kernel.ToolResult {
	up, err := c.session(ctx)
	if err != nil {
		res := kernel.FailedResult(call.ToolCall, now, kernel.CodeToolExecutionFailed,
			fmt.Sprintf("MCP server %s could not be started or reached", c.s.ID))
		res.Error.Retryable = kernel.BoolPtr(true)
		return res
	}
	cctx, cancel := context.WithTimeout(ctx, c.s.CallTimeout)
	defer cancel()
	r, err := up.callTool(cctx, upstreamName, raw)
	if errors.Is(err, errResultTooLarge) {
		// the read stopped at the cap: what is left of the answer is unread, so the
		// connection cannot go on; the next call opens another
		c.mu.Lock()
		if c.up == up {
			c.up = nil
		}
		c.mu.Unlock()
		up.abort()
		c.g.opts.Logger.Warn("MCP call result over the cap; connection dropped", "server", c.s.ID, "tool", upstreamName)
		return kernel.FailedResult(call.ToolCall, now, kernel.CodeInvalidToolResult,
			fmt.Sprintf("MCP server %s returned a result larger than 4 MiB", c.s.ID))
	}
	if err != nil {
		msg := fmt.Sprintf("the call to MCP server %s failed", c.s.ID)
		if errors.Is(cctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			msg = fmt.Sprintf("the call to MCP server %s exceeded its callTimeout of %s and was cancelled", c.s.ID, c.s.CallTimeout)
		}
		c.g.opts.Logger.Warn("MCP call failed", "server", c.s.ID, "tool", upstreamName, "err", err.Error())
		res := kernel.FailedResult(call.ToolCall, now, kernel.CodeToolExecutionFailed, msg)
		res.Error.Retryable = kernel.BoolPtr(true)
		return res
	}
	return mapResult(call, now, c.s.ID, r)
}

// mapResult maps an upstream result onto a ToolResult: over MaxResultBytes ⇒
// invalid_tool_result; isError ⇒ upstream_tool_error with the upstream's text (capped);
// else the output is the structured content when there is one, the text when every
// content item is text, and the content list otherwise.
func mapResult(call kernel.ParsedToolCall, now, server string, r *mcp.CallToolResult) kernel.ToolResult {
	b, err := json.Marshal(r)
	if err != nil || len(b) > MaxResultBytes {
		return kernel.FailedResult(call.ToolCall, now, kernel.CodeInvalidToolResult,
			fmt.Sprintf("MCP server %s returned a result larger than 4 MiB", server))
	}
	text, allText := "", true
	for i, c := range r.Content {
		t, ok := c.(*mcp.TextContent)
		if !ok {
			allText = false
			continue
		}
		if i > 0 {
			text += "\n"
		}
		text += t.Text
	}
	if r.IsError {
		text = capBytes(text, MaxErrorTextBytes)
		msg := fmt.Sprintf("MCP server %s: the tool failed: %s", server, capRunes(text, 1800))
		if text == "" {
			msg = fmt.Sprintf("MCP server %s: the tool failed", server)
		}
		res := kernel.FailedResult(call.ToolCall, now, CodeUpstreamToolError, msg)
		if text != "" {
			res.Error.Details = map[string]any{"upstreamText": text}
		}
		return res
	}
	var out any
	switch {
	case r.StructuredContent != nil:
		out = r.StructuredContent
	case allText:
		out = text
	default:
		var v struct {
			Content any `json:"content"`
		}
		_ = json.Unmarshal(b, &v)
		out = v.Content
	}
	return kernel.ToolResult{CallID: call.ID, Tool: call.Tool, Status: kernel.StatusSucceeded, Output: out, CompletedAt: now}
}

func capBytes(s string, max int) string {
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for !utf8.ValidString(s) && len(s) > 0 {
		s = s[:len(s)-1]
	}
	return s
}

func capRunes(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	return string([]rune(s)[:max]) + "…"
}
