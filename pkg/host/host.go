// Package host is the one assembly of a sharedos host: from Settings it builds the kernel
// with its planes (files, repo, sharedos.escalate), its stores (the state database), its
// grant source (grant files), its ceilings (the host ceiling of frozen paths and actions,
// and the namespace ceiling) and begins the turn of the run's context. Every surface —
// the CLI's commands, and the coming mcp, serve and test commands — builds its kernel
// here and only translates.
//
// Assembly runs in two phases so that bad input never touches the state database:
// Prepare checks every input the command needs (Needs: the trust boundary always, the
// root's existence only for commands that reach the planes; the ceiling, grant files,
// context and instant always) and builds the tool table once; Open then opens the state database, reads
// the namespace selection, builds the kernel and begins the turn. Close releases
// everything either phase opened. A host must never authorize, filter or audit on its
// own: that is the kernel's.
package host

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos/internal/uuid"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/internal/par"
	"github.com/sharedos/sharedos/internal/procenv"
	"github.com/sharedos/sharedos/pkg/fsplane"
	"github.com/sharedos/sharedos/pkg/gateway"
	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/hostceiling"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/repoplane"
	"github.com/sharedos/sharedos/pkg/store"
)

// Settings is what a surface resolved from its flags, environment and config file. Paths
// are absolute.
type Settings struct {
	ConfigFile string // "" when no configuration file was read
	// Env reads the environment the host may consult (HOME and XDG_CONFIG_HOME, for the
	// user's global git ignore file); nil: the process's (internal/procenv).
	Env func(string) string
	// ProcessEnv and Environ are the environment of the processes the host starts: an
	// MCP server's credentials fromEnv, PATH and HOME (ProcessEnv, gateway.Options.Getenv)
	// and an exec recipient's environment (Environ, its SHAREDOS_ variables left out).
	// nil: the process's (internal/procenv). The command line passes the process's own,
	// read in cmd's Main.
	ProcessEnv func(string) string
	Environ    func() []string

	Root  string
	State string
	// StateDir is the folder of the host's own local files, apart from the store: the
	// validated grant cache (cache/) and the snapshot blobs (snapshots/). "" : the state
	// database's folder (LocalDir), where they always were; a store that is not a file
	// (a later --state postgres://…) changes State and nothing else. The default store's
	// own files (its audit spool and selection stamp) stay beside its database.
	StateDir string
	Grants   []string
	// Tokens is the tokens file of `mcp --listen` ("" when none): authority like a grant
	// file, so it must lie outside the root too.
	Tokens string

	As, Owner, Authority string // raw addresses ("" when unset)
	World, Purpose       string // "" when unset (the grant files' context decides)
	Now                  string // raw --now ("" = the clock)
	Namespaces           []string
	NamespacesSet        bool
	Trace, CallID        string

	DefaultNamespaces []string
	MaxGrants         int
	RepoAuthorName    string
	RepoAuthorEmail   string
	// RepoExcludesFiles (config repo.excludesFiles) are the repo plane's excludes files;
	// nil (unset) means the user's global git ignore file when it lies outside the root.
	RepoExcludesFiles []string
	// ForbiddenNamespaces is the namespace ceiling (config ceiling.namespaces): tool
	// namespaces this host never enables.
	ForbiddenNamespaces []string
	FrozenPaths         []string
	FrozenActions       []string
	// GatewayLogger receives the gateway's connection events (nil: discarded).
	GatewayLogger *slog.Logger
	// MCPServers is the configuration's mcpServers (nil: none): external MCP servers
	// whose tools the host publishes through the gateway (spec 60).
	MCPServers *gateway.Config
	// Messaging is the configuration's agents: and messages: sections (nil: messaging
	// is not configured, and messages.request is not registered).
	Messaging *mailbox.Config
}

// LocalDir is the folder of the host's local files: StateDir, or the state database's
// folder when it is not set.
func (s *Settings) LocalDir() string {
	if s.StateDir != "" {
		return s.StateDir
	}
	return filepath.Dir(s.State)
}

// Kind classifies a host error for the surface that reports it.
type Kind int

// The kinds of host errors.
const (
	// KindUsage: an input of the run is wrong (a flag, a path, a grant-file context).
	KindUsage Kind = iota + 1
	// KindConfig: the configuration file is invalid.
	KindConfig
	// KindState: the state database is unavailable.
	KindState
	// KindInternal: the host itself failed.
	KindInternal
)

// Error is a host failure: a lowercase one-line message, a hint saying how to fix it, and
// the cause, if any.
type Error struct {
	Kind    Kind
	Message string
	Hint    string
	Err     error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func usageError(hint, format string, args ...any) *Error {
	return &Error{Kind: KindUsage, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// StateHint is the hint of a state database failure.
func StateHint(path string) string {
	if IsPostgresState(path) { // a DSN may hold a password: never echoed
		return postgresStateHint
	}
	return fmt.Sprintf("the state database %s is unreadable or not a sharedos database; move it aside (a new one is created) or pass --state FILE", path)
}

func stateError(err error, path string) *Error {
	return &Error{Kind: KindState, Message: err.Error(), Hint: StateHint(path), Err: err}
}

// Prepared is a host whose inputs were all checked and whose tool table is built; nothing
// has touched the state database yet.
type Prepared struct {
	Settings *Settings
	// Context is the run's access context (its enabled namespaces are filled by Open).
	Context kernel.AccessContext
	// Instant is the turn's instant: --now parsed once, or the clock's reading.
	Instant time.Time
	// Pinned is true when the instant came from --now.
	Pinned bool
	// Grants is the loaded grant set (nil when no grant file was named or it was refused).
	Grants *grantfile.Set
	// GrantErr is why the grant files were refused (the kernel then sees an unavailable
	// grant source); nil when they loaded.
	GrantErr error
	// CallID is the id the run's tool call gets.
	CallID string
	// Fallback is true when nothing named the context's identity and LocalOperator (a
	// command without Needs.Actor) stands for it.
	Fallback bool

	needs Needs

	clock      func() time.Time
	source     kernel.GrantSource
	resolver   kernel.DelegationChainResolver
	ceiling    kernel.HostCeiling
	frozen     [][]string // the ceiling's frozen files: paths, for the planes
	frozenRepo [][]string // and its frozen repo: paths, for the repo plane besides
	tools      []kernel.ToolHandler
	prepared   []kernel.PreparedTool // tools, prepared for the kernel (same order)
	preparing  *par.Task             // non-nil while they are prepared in the background
	prepareErr error                 // why they could not be
	index      *snapshotIndexRef
	closers    []io.Closer
	gw         *gateway.Gateway // the MCP servers' providers (nil before Open)
}

// Host is an opened host: the kernel of the run and the turn of its context.
type Host struct {
	*Prepared
	Kernel *kernel.Kernel
	Turn   *kernel.Turn
	Store  store.State
	// SelectionSource says where the context's enabled namespaces came from: "flag"
	// (--namespaces), "stored" or "default" (defaultNamespaces, nothing stored yet).
	SelectionSource string
}

// Needs says which parts of the host a command uses. The zero value is a command that
// reads the kernel's catalogues and the state database but never reaches a resource
// (namespaces, tools list, tools describe, escalations): the root need not exist (the
// trust boundary still holds: nothing that defines authority inside it) and no actor is
// needed.
type Needs struct {
	// Planes: the command reaches the files and repo planes (tools call, explain, mcp).
	// The root must be an existing directory. Without Planes the tools are built from
	// their definitions only (nothing under the root is opened) and the root need not
	// exist. Either way the trust boundary is enforced (every host opens the state
	// database): no grant file, config file or state database inside the root.
	Planes bool
	// Actor: the command acts as the context's actor (tools call, explain, tools list),
	// so one must be named (--as or a grant file's context.actor), else a usage error.
	// Without Actor, a missing actor is the owner (a person reading or setting their own
	// namespace selection acts for themselves), and with neither an actor nor an owner
	// nor any grant file it is LocalOperator.
	Actor bool
	// Unaudited: the kernel gets no audit sink. Only for shell completion, which asks the
	// kernel which tools the context may use on every TAB: a keystroke is not an action,
	// and recording it would bury the real calls. Nothing is ever invoked.
	Unaudited bool
	// HoldConnections: a long-lived surface (mcp). The gateway holds one connection per
	// (owner, MCP server), reconnects with backoff and refreshes the tool list when the
	// upstream says it changed; without it, a command reads the upstream tool lists from
	// the state database's cache and connects only when it must (spec 60 §3).
	HoldConnections bool
	// Workload says how the process uses its store (a short-lived command, a long-lived
	// server); the store chooses how it writes its write-ahead records accordingly
	// (OpenState).
	Workload Workload
}

// LocalOperator is the identity of a command that needs no actor when nothing names one
// (no --as, no --owner, no grant file): the operator at the terminal. It is reported
// (Prepared.Fallback) so that a surface can say so.
const LocalOperator = "human:operator"

// Prepare checks every input of s that needs asks for and builds the tool table. clock is
// read once when s.Now is empty. On error nothing is left open.
func Prepare(s *Settings, clock func() time.Time, needs Needs) (_ *Prepared, err error) {
	p := &Prepared{Settings: s, needs: needs, clock: clock}
	warmState(s)
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	// Every host opens the state database: the one trust-boundary check, before anything
	// is read or created (the root must exist only for a command that reaches it).
	if err := checkBoundary(s, needs.Planes); err != nil {
		return nil, err
	}
	if len(s.FrozenPaths) > 0 || len(s.FrozenActions) > 0 {
		c, err := hostceiling.New(s.FrozenPaths, s.FrozenActions)
		if err != nil {
			return nil, &Error{Kind: KindConfig, Hint: "fix the ceiling section of the config file",
				Message: fmt.Sprintf("config file %s: ceiling: %v", s.ConfigFile, err)}
		}
		if s.MCPServers != nil {
			if ns := s.MCPServers.CaseInsensitiveNamespaces(); len(ns) > 0 {
				c = c.WithCaseInsensitive(ns)
			}
		}
		p.ceiling = c
		p.frozen = c.FrozenPaths(fsplane.Namespace)
		p.frozenRepo = c.FrozenPaths(repoplane.Namespace)
	}
	if s.Now != "" {
		ms, err := kernel.ParseTimestamp(s.Now)
		if err != nil {
			return nil, usageError("pass --now as an RFC 3339 date-time with an offset, e.g. 2026-08-03T09:00:00Z",
				"invalid --now %q: not an RFC 3339 date-time with an offset", s.Now)
		}
		p.Instant, p.Pinned = time.UnixMilli(ms).UTC(), true
	} else {
		p.Instant = time.UnixMilli(clock().UnixMilli()).UTC()
	}

	// Without planes the tool table depends on none of what follows and touches nothing:
	// it is built, and its tools prepared for the kernel, while the grant files load (on
	// the other core). Its error is reported where it was built before, after every input
	// check. The planes are built only once every input was checked (the files plane
	// creates its snapshot directory); their tools are then prepared while Open opens the
	// state database.
	var tools *par.Task
	var toolsErr error
	toolsJoined := false
	if !needs.Planes {
		tools = par.Go(func() {
			if toolsErr = p.buildToolTable(); toolsErr == nil {
				toolsErr = p.prepareTools()
			}
		})
		defer func() { // before the Close above: nothing may still append to p.closers
			if !toolsJoined {
				tools.Abandon()
			}
		}()
	}

	// Grant files: none ⇒ no grants; refused ⇒ an unavailable source (fail-closed).
	p.source = emptySource{}
	var gctx grantfile.Context
	if len(s.Grants) > 0 {
		for _, g := range s.Grants {
			if _, err := os.Stat(g); errors.Is(err, fs.ErrNotExist) {
				return nil, usageError("name an existing grant file with --grants (or fix SHAREDOS_GRANTS or the config file's grants)",
					"grant file %s does not exist", g)
			}
		}
		stateDir := s.LocalDir()
		// The cache entry of a miss is written while the command runs; Close waits for it.
		set, err := grantfile.LoadSet(s.Grants, grantfile.SetOptions{CacheDir: filepath.Join(stateDir, "cache", "grants"),
			CacheKeyFile: filepath.Join(stateDir, "cache", "grants.key"), WriteBehind: true})
		switch {
		case err == nil:
			p.Grants, p.source, p.resolver, gctx = set, set, set, set.Context()
			p.closers = append(p.closers, waitCloser{set})
		case errors.Is(err, grantfile.ErrContextConflict):
			return nil, usageError("make the grant files' context blocks agree, or pass the field as a flag",
				"grant files disagree: %v", err)
		default:
			p.GrantErr = err
			p.source = unavailableSource{err: err}
			var refused *grantfile.RefusedError
			if errors.As(err, &refused) {
				gctx = refused.Context
			}
		}
	}
	if p.Context, p.Fallback, err = accessContext(s, gctx, p.Instant, needs.Actor, p.GrantErr != nil); err != nil {
		if errors.Is(err, errNoActor) && p.GrantErr != nil {
			// The refused file is the whole story: one error naming it, not "no actor".
			return nil, usageError("'sharedos grants lint FILE' lists every problem; or pass --as to run with authority unavailable",
				"grant files refused: %v", p.GrantErr)
		}
		return nil, err
	}
	p.CallID = s.CallID
	if p.CallID == "" {
		p.CallID = uuid.NewV7()
	}
	if s.NamespacesSet {
		sel, err := kernel.ValidateEnabledToolNamespaces(s.Namespaces)
		if err != nil {
			return nil, usageError("pass --namespaces as a comma-separated list of namespaces, e.g. files,repo",
				"invalid --namespaces %q: %v", strings.Join(s.Namespaces, ","), err)
		}
		p.Context.EnabledToolNamespaces = sel
	}
	if !needs.Planes {
		toolsJoined = true
		if tools.Wait(); toolsErr != nil {
			return nil, toolsErr
		}
		return p, nil
	}
	if err := p.buildToolTable(); err != nil {
		return nil, err
	}
	p.preparing = par.Go(func() { p.prepareErr = p.prepareTools() })
	return p, nil
}

// preparedTools waits for the tools prepared in the background, if any (preparing them
// itself if that has not started).
func (p *Prepared) preparedTools() error {
	if p.preparing != nil {
		p.preparing.Wait()
		p.preparing = nil
	}
	return p.prepareErr
}

// prepareTools prepares the tool table for the kernel (kernel.PrepareTool: checked and
// digested).
func (p *Prepared) prepareTools() error {
	p.prepared = make([]kernel.PreparedTool, len(p.tools))
	for i, t := range p.tools {
		pt, err := kernel.PrepareTool(t)
		if err != nil {
			return &Error{Kind: KindInternal, Message: fmt.Sprintf("register %s: %v", t.Definition.Name, err), Err: err}
		}
		p.prepared[i] = pt
	}
	return nil
}

// buildToolTable builds the planes over the root and the tool table, once. A command
// that needs no planes gets the same tool definitions over providers that open nothing.
func (p *Prepared) buildToolTable() error {
	s := p.Settings
	if !p.needs.Planes {
		tools, err := DefinitionTools()
		if err != nil {
			return &Error{Kind: KindInternal, Message: err.Error(), Err: err}
		}
		p.index = &snapshotIndexRef{}
		p.tools = tools
		return nil
	}
	instant := p.Instant
	var clock func() time.Time
	if p.Pinned {
		clock = func() time.Time { return instant }
	}
	p.index = &snapshotIndexRef{}
	files, err := fsplane.NewProvider(s.Root, fsplane.ProviderOptions{
		SnapshotDir: filepath.Join(s.LocalDir(), "snapshots"), Index: p.index, Now: clock, Frozen: p.frozen,
		Digests: (*digestCacheRef)(p.index)})
	if err != nil {
		return usageError("keep the state directory outside --root", "files plane: %v", err)
	}
	p.closers = append(p.closers, files)
	repo, err := repoplane.NewProvider(s.Root, repoplane.ProviderOptions{
		AuthorName: s.RepoAuthorName, AuthorEmail: s.RepoAuthorEmail, Now: clock,
		// the files plane's frozen paths hold across planes: a repository that contains
		// one never shows or stages it
		Frozen:        slices.Concat(p.frozen, p.frozenRepo),
		ExcludesFiles: repoExcludes(s)})
	if err != nil {
		return &Error{Kind: KindInternal, Message: fmt.Sprintf("repo plane: %v", err), Err: err}
	}
	fileTools, err := fsplane.Tools(files)
	if err != nil {
		return &Error{Kind: KindInternal, Message: err.Error(), Err: err}
	}
	repoTools, err := repoplane.Tools(repo)
	if err != nil {
		return &Error{Kind: KindInternal, Message: err.Error(), Err: err}
	}
	p.tools = slices.Concat(fileTools, repoTools, []kernel.ToolHandler{kernel.EscalationTool()})
	return nil
}

// Definition returns the definition of a registered tool, or nil (an unknown name still
// reaches the kernel, which refuses and audits it).
func (p *Prepared) Definition(name string) *kernel.ToolDefinition {
	for i := range p.tools {
		if p.tools[i].Definition.Name == name {
			d := p.tools[i].Definition
			return &d
		}
	}
	if name == kernel.MessageToolName && p.Settings.Messaging != nil {
		d := kernel.MessageToolDefinition() // the kernel registers it (messages.go)
		return &d
	}
	return nil
}

// Definitions returns the definitions of every registered tool, in registration order.
func (p *Prepared) Definitions() []kernel.ToolDefinition {
	out := make([]kernel.ToolDefinition, len(p.tools))
	for i := range p.tools {
		out[i] = p.tools[i].Definition
	}
	if p.Settings.Messaging != nil {
		out = append(out, kernel.MessageToolDefinition())
	}
	return out
}

// Open opens the state database, reads the context's namespace selection (unless
// --namespaces set it), builds the kernel with every port and tool, and begins the turn.
// On error the prepared host stays as it was (Close still releases it).
func (p *Prepared) Open(ctx context.Context) (*Host, error) { return p.open(ctx, nil) }

// open is Open over the state database shared when it is not nil (a principal cache's
// one handle, see Principals): the host then uses it and leaves it open on Close.
func (p *Prepared) open(ctx context.Context, shared store.State) (*Host, error) {
	s := p.Settings
	// The grants of the context are validated and indexed (by the kernel's code, as its
	// first turn would) on the other core while the state database opens; the kernel
	// adopts the result when a turn first needs its authority.
	var authority func() *kernel.PreparedAuthority
	if p.Grants != nil {
		var prepared *kernel.PreparedAuthority
		actx := p.Context
		task := par.Go(func() { prepared = kernel.PrepareAuthority(ctx, p.source, actx, s.MaxGrants) })
		authority = func() *kernel.PreparedAuthority { task.Wait(); return prepared }
	}
	st := shared
	if st == nil {
		var err error
		if st, err = OpenState(ctx, s, p.needs.Workload); err != nil {
			return nil, err
		}
		p.closers = append(p.closers, st)
	}
	p.index.st = st
	h := &Host{Prepared: p, Store: st, SelectionSource: "flag"}
	if !s.NamespacesSet {
		sel, stored, err := st.Selection(ctx, p.Context.World, p.Context.Owner)
		if err != nil {
			return nil, stateError(err, s.State)
		}
		p.Context.EnabledToolNamespaces = sel
		h.SelectionSource = map[bool]string{true: "stored", false: "default"}[stored]
	}
	jscompat.SortLocale(p.Context.EnabledToolNamespaces)
	var audit kernel.AuditSink = st
	if p.needs.Unaudited {
		audit = discardAudit{}
	}
	// the kernel audits into st and counts uses there: deliveries are written with their records
	transport, router := p.messagingPorts(mailboxOf(st), !p.needs.Unaudited)
	h.Kernel = kernel.New(kernel.Config{Grants: p.source, Resolver: p.resolver, Usage: st, Ceiling: p.ceiling,
		Settings: st, Audit: audit, MaxGrants: s.MaxGrants, ForbiddenNamespaces: s.ForbiddenNamespaces, Clock: p.clock,
		MessageTransport: transport, MessageRouter: router})
	if authority != nil {
		h.Kernel.AdoptAuthorityLater(authority)
	}
	if err := p.preparedTools(); err != nil {
		return nil, err
	}
	for i, t := range p.prepared {
		if err := h.Kernel.RegisterPrepared(t); err != nil {
			return nil, &Error{Kind: KindInternal, Message: fmt.Sprintf("register %s: %v", p.tools[i].Definition.Name, err), Err: err}
		}
	}
	// shell completion (unaudited) never starts a server: cached lists only
	p.gw = gateway.New(s.MCPServers, gateway.Options{Cache: st, Hold: p.needs.HoldConnections, Logger: s.GatewayLogger, Getenv: s.ProcessEnv,
		NoConnect: p.needs.Unaudited})
	p.closers = append(p.closers, p.gw)
	if err := registerProviders(h.Kernel, p.gw); err != nil {
		return nil, err
	}
	turn, err := h.Kernel.BeginTurn(p.Context)
	if err != nil {
		return nil, usageError("check --as, --owner, --authority, --world and --purpose", "%v", err)
	}
	h.Turn = turn
	p.Context = h.Turn.Context()
	return h, nil
}

// registerProviders registers the gateway's per-context providers on k.
func registerProviders(k *kernel.Kernel, gw *gateway.Gateway) error {
	for _, pr := range gw.Providers() {
		if err := k.RegisterToolProvider(pr); err != nil {
			return &Error{Kind: KindInternal, Message: fmt.Sprintf("register MCP server %s: %v", pr.ID(), err), Err: err}
		}
	}
	return nil
}

// Gateway returns the host's MCP gateway (nil before Open).
func (p *Prepared) Gateway() *gateway.Gateway { return p.gw }

// GatewayNamespaces returns the tool namespaces of the MCP servers that serve the
// context's owner.
func (p *Prepared) GatewayNamespaces() []string {
	if p.Settings.MCPServers == nil {
		return nil
	}
	var out []string
	for _, sv := range p.Settings.MCPServers.Servers {
		if sv.ServesOwner(p.Context.Owner) {
			out = append(out, sv.Namespace)
		}
	}
	return out
}

// MayProvide reports whether name lies in the namespace of an MCP server that serves the
// context's owner (its definition is known only once the server's list is read).
func (p *Prepared) MayProvide(name string) bool {
	ns, _, ok := strings.Cut(name, ".")
	return ok && slices.Contains(p.GatewayNamespaces(), ns)
}

// Definition returns the definition of a registered tool — a plane's, or an MCP
// server's from the tool lists this host has read — or nil.
func (h *Host) Definition(name string) *kernel.ToolDefinition {
	if d := h.Prepared.Definition(name); d != nil {
		return d
	}
	if h.gw != nil {
		return h.gw.Definition(h.Prepared.Context.Owner, name)
	}
	return nil
}

// Close releases everything the host opened (the planes' roots, the state database), in
// reverse order, and returns the first error.
func (p *Prepared) Close() error {
	_ = p.preparedTools()
	var first error
	for i := len(p.closers) - 1; i >= 0; i-- {
		if err := p.closers[i].Close(); err != nil && first == nil {
			first = err
		}
	}
	p.closers = nil
	return first
}

// snapshotIndexRef is the files plane's snapshot index until the state database opens
// (the plane is built before it, so that arguments are checked against the real tool
// table without touching the database). The kernel runs no tool before Open.
type snapshotIndexRef struct{ st store.State }

var errIndexNotOpen = errors.New("the state database is not open")

func (r *snapshotIndexRef) PutSnapshot(ctx context.Context, rec kernel.SnapshotRecord) error {
	if r.st == nil {
		return errIndexNotOpen
	}
	return r.st.PutSnapshot(ctx, rec)
}

func (r *snapshotIndexRef) ListSnapshots(ctx context.Context, scope kernel.SnapshotScope, limit int) ([]kernel.SnapshotRecord, error) {
	if r.st == nil {
		return nil, errIndexNotOpen
	}
	return r.st.ListSnapshots(ctx, scope, limit)
}

// digestCacheRef is the files plane's digest cache: the state database once it is open
// (until then every version is hashed).
type digestCacheRef snapshotIndexRef

func (r *digestCacheRef) LookupDigest(ctx context.Context, dev, ino uint64) (kernel.FileDigest, bool, error) {
	if r.st == nil {
		return kernel.FileDigest{}, false, errIndexNotOpen
	}
	return r.st.LookupDigest(ctx, dev, ino)
}

func (r *digestCacheRef) StoreDigest(ctx context.Context, d kernel.FileDigest) error {
	if r.st == nil {
		return errIndexNotOpen
	}
	return r.st.StoreDigest(ctx, d)
}

func (r *snapshotIndexRef) GetSnapshot(ctx context.Context, scope kernel.SnapshotScope, id string) (*kernel.SnapshotRecord, error) {
	if r.st == nil {
		return nil, errIndexNotOpen
	}
	return r.st.GetSnapshot(ctx, scope, id)
}

// DefinitionTools builds the tools every sharedos host registers (the planes' and
// sharedos.escalate) over providers that open nothing: what a command that lists,
// describes, completes or lints needs, without a root, a database or a kernel. The
// handlers must never be invoked.
func DefinitionTools() ([]kernel.ToolHandler, error) {
	fileTools, err := fsplane.Tools(definitionOnly(fsplane.Namespace))
	if err != nil {
		return nil, err
	}
	repoTools, err := repoplane.Tools(definitionOnly(repoplane.Namespace))
	if err != nil {
		return nil, err
	}
	return slices.Concat(fileTools, repoTools, []kernel.ToolHandler{kernel.EscalationTool()}), nil
}

// definitionOnly is a resource provider that only names its namespace: enough to build
// a plane's tool definitions without opening anything. It is never invoked (the command
// that uses it lists, describes or toggles; it does not call).
type definitionOnly string

func (n definitionOnly) Namespace() string { return string(n) }

func (n definitionOnly) Invoke(context.Context, kernel.ResourceOperation) (kernel.ResourceResult, error) {
	return kernel.ResourceResult{}, errors.New("this command does not reach the resource planes")
}

// errNoActor marks the "no actor" usage error.
var errNoActor = errors.New("no actor")

// accessContext resolves actor, owner, authority, world, purpose, now and trace (spec 40
// §2). needActor: a missing actor is an error; otherwise it is the owner, and with no
// owner, LocalOperator (fallback reports that) — unless the grant files were refused:
// their context may have named someone else, so that stays an error.
func accessContext(s *Settings, g grantfile.Context, instant time.Time, needActor, grantsRefused bool) (actx kernel.AccessContext, fallback bool, err error) {
	var hasActor, hasOwner bool
	switch {
	case s.As != "":
		if actx.Actor, err = ParseAddressFlag("as", s.As); err != nil {
			return actx, false, err
		}
		hasActor = true
	case g.Actor != nil:
		actx.Actor, hasActor = *g.Actor, true
	}
	switch {
	case s.Owner != "":
		if actx.Owner, err = ParseAddressFlag("owner", s.Owner); err != nil {
			return actx, false, err
		}
		hasOwner = true
	case g.Owner != nil:
		actx.Owner, hasOwner = *g.Owner, true
	}
	switch {
	case hasActor:
	case needActor || grantsRefused && !hasOwner:
		e := usageError("pass --as kind:id (e.g. --as agent:helper), or name a grant file whose context sets actor",
			"no actor: pass --as or a grant file context")
		e.Err = errNoActor
		return actx, false, e
	case hasOwner:
		actx.Actor = actx.Owner
	default:
		actx.Actor, _ = kernel.ParseAddress(LocalOperator)
		fallback = true
	}
	if !hasOwner {
		actx.Owner = actx.Actor
	}
	actx, err = finishContext(s, g, instant, actx)
	return actx, fallback, err
}

// finishContext resolves authority, world, purpose, now and trace.
func finishContext(s *Settings, g grantfile.Context, instant time.Time, actx kernel.AccessContext) (kernel.AccessContext, error) {
	var err error
	switch {
	case s.Authority != "":
		if actx.Authority, err = ParseAddressFlag("authority", s.Authority); err != nil {
			return actx, err
		}
	case g.Authority != nil:
		actx.Authority = *g.Authority
	default:
		actx.Authority = actx.Owner
	}
	actx.World = firstNonEmpty(s.World, g.World, "default")
	if t := strings.TrimSpace(actx.World); t != actx.World || t == "" || len(t) > 256 {
		return actx, usageError("a world is an identifier of 1 to 256 characters", "invalid --world %q", actx.World)
	}
	actx.Purpose = firstNonEmpty(s.Purpose, g.Purpose, "cli")
	if t := strings.TrimSpace(actx.Purpose); t != actx.Purpose || t == "" {
		return actx, usageError("a purpose is 1 to 512 characters without surrounding white space", "invalid --purpose %q", actx.Purpose)
	}
	actx.Now = kernel.FormatTimestamp(instant.UnixMilli())
	actx.TraceID = s.Trace
	if actx.TraceID == "" {
		actx.TraceID = NewUUID()
	}
	actx.EnabledToolNamespaces = []string{}
	if err := actx.Validate(); err != nil {
		return actx, usageError("check --trace, --world and --purpose", "invalid access context: %v", err)
	}
	return actx, nil
}

// ParseAddressFlag parses a kind:id (or JSON object) address flag.
func ParseAddressFlag(flag, value string) (kernel.Address, error) {
	a, err := kernel.ParseAddress(value)
	if err == nil {
		err = a.Validate()
	}
	if err != nil {
		return kernel.Address{}, usageError("an address is kind:id with kind human, agent, group or service (e.g. agent:helper), or its JSON object form",
			"invalid address for --%s: %q: %v", flag, value, err)
	}
	return a, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// CheckTrustBoundary checks, without preparing a host, that the root is an existing
// directory and that no trusted path of s (config, grant and tokens files, the state
// database and its folders) lies inside it, as Prepare does for a command that reaches
// the planes. A surface that serves several contexts checks its own files with it.
func CheckTrustBoundary(s *Settings) error { return checkBoundary(s, true) }

// CheckStateBoundary is the trust-boundary check of a surface that opens the state
// database without preparing a host (audit, escalations): the same check as Prepare's
// and CheckTrustBoundary's, except that the root need not exist (a root that does not
// exist yet is resolved to where it would be: a state database under it is refused
// all the same). A state database inside --root is refused by every command that opens
// it, not only by those that reach the planes: an agent holding a files grant on the
// root could have rewritten its namespace selection, usage counters and audit trail.
func CheckStateBoundary(s *Settings) error { return checkBoundary(s, false) }

// checkBoundary is the one trust-boundary check (checkTrustBoundary) of every command
// that opens the state database; rootMustExist: the root must also be an existing
// directory (a command that reaches the planes).
func checkBoundary(s *Settings, rootMustExist bool) error {
	if rootMustExist {
		rootReal, err := checkRoot(s.Root)
		if err != nil {
			return err
		}
		return checkTrustBoundary(s, rootReal)
	}
	return checkTrustBoundary(s, resolveExisting(s.Root))
}

// checkRoot requires the root to be an existing directory and returns its real path.
func checkRoot(root string) (string, error) {
	fi, err := os.Stat(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", usageError("pass --root DIR naming an existing directory (default: the working directory), or create it",
				"root directory %s does not exist", root)
		}
		return "", usageError("pass --root DIR naming a readable directory", "root directory %s: %v", root, unwrapPathErr(err))
	}
	if !fi.IsDir() {
		return "", usageError("pass --root DIR naming a directory", "root %s is not a directory", root)
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", usageError("", "root directory %s: %v", root, unwrapPathErr(err))
	}
	return real, nil
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkTrustBoundary refuses to start when a trusted path — the config file, a grant
// file, the tokens file, the state database, the validated grant cache and its key, the
// snapshot blobs, the store's own files (stateFiles: SQLite's audit spool and selection
// stamp) —
// resolves (after symbolic links) inside the root, or when the root lies inside one of
// the trusted directories: a files grant could then rewrite the very authority that
// limits it, or forge a cached grant or a snapshot (spec 40 §1).
func checkTrustBoundary(s *Settings, rootReal string) error {
	type item = boundaryItem
	items := []item{}
	if s.ConfigFile != "" {
		items = append(items, item{"config file", s.ConfigFile, false})
	}
	for _, g := range s.Grants {
		items = append(items, item{"grant file", g, false})
	}
	if s.MCPServers != nil {
		if s.MCPServers.File != s.ConfigFile {
			items = append(items, item{"mcpServers file", s.MCPServers.File, false})
		}
		for _, f := range s.MCPServers.SecretFiles() {
			items = append(items, item{"MCP server credential file", f, false})
		}
	}
	if s.Tokens != "" && !IsStoreTokens(s.Tokens) {
		items = append(items, item{"tokens file", s.Tokens, false})
	}
	stateDir := s.LocalDir()
	if !IsPostgresState(s.State) {
		items = append(items, item{"state database", s.State, false})
	}
	items = append(items, item{"grant cache", filepath.Join(stateDir, "cache"), true},
		item{"snapshot store", filepath.Join(stateDir, "snapshots"), true})
	items = append(items, stateFiles(s)...)
	for _, it := range items {
		real := resolveExisting(it.path)
		if within(rootReal, real) {
			return usageError("--root is the tree the files and repo tools reach (default: the working directory); pass --root DIR for that tree, or --state FILE (and grant and config files) outside it, so that no files grant can rewrite them",
				"%s %s lies inside the root %s; refusing to start", it.what, it.path, rootReal)
		}
		if it.dir && within(real, rootReal) {
			return usageError("keep --root outside the state directory, so that no files grant can rewrite its cache or snapshots",
				"the root %s lies inside the %s %s; refusing to start", rootReal, it.what, it.path)
		}
	}
	return nil
}

// resolveExisting resolves symbolic links in p; for a path that does not exist yet, it
// resolves its nearest existing parent and appends the rest, following a dangling link
// to where its target would be.
func resolveExisting(p string) string {
	rest := ""
	cur := filepath.Clean(p)
	for hops := 0; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest)
		}
		// A dangling link is followed by hand: its target does not exist yet, but a file
		// created through it (a state database, a stamp) would be created there.
		if fi, err := os.Lstat(cur); err == nil && fi.Mode()&os.ModeSymlink != 0 && hops < 40 {
			if target, err := os.Readlink(cur); err == nil {
				hops++
				if !filepath.IsAbs(target) {
					target = filepath.Join(filepath.Dir(cur), target)
				}
				cur = filepath.Clean(target)
				continue
			}
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return filepath.Clean(p)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// waitCloser waits, on Close, for the grant cache entry a set is writing.
type waitCloser struct{ set *grantfile.Set }

func (w waitCloser) Close() error {
	w.set.Wait()
	return nil
}

// discardAudit is the audit sink of an unaudited host (shell completion): it keeps
// nothing.
type discardAudit struct{}

func (discardAudit) Append(context.Context, kernel.AuditEvent) error { return nil }

// emptySource is the grant source without grant files: no grants at all.
type emptySource struct{}

func (emptySource) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return []kernel.CapabilityGrant{}, nil
}

// unavailableSource is the grant source of refused grant files: every load fails, so
// the kernel denies authority_unavailable (fail-closed).
type unavailableSource struct{ err error }

func (u unavailableSource) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return nil, u.err
}

// NewUUID returns a random (version 4) UUID.
func NewUUID() string { return uuid.New() }

// repoExcludes is the repo plane's excludes files: the configured list, else the
// user's global git ignore file when it exists outside the root (a file inside the
// root could be written by the agents the ignore rules are meant to restrain).
func repoExcludes(s *Settings) []string {
	if s.RepoExcludesFiles != nil {
		return s.RepoExcludesFiles
	}
	getenv := s.Env
	if getenv == nil {
		getenv = procenv.Getenv
	}
	f := repoplane.DefaultExcludesFile(getenv)
	if f == "" {
		return nil
	}
	if root, err := filepath.Abs(s.Root); err == nil {
		if rel, err := filepath.Rel(root, f); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return nil
		}
	}
	return []string{f}
}
