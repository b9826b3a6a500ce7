// Package kernel is the SharedOS permission kernel: the contracts (grants, contexts, tool
// definitions, results, audit events), the authorization algorithm, the per-context tool
// catalogue with its three gates (registered, tool namespace enabled, capability granted),
// the namespace control plane and the escalation affordance.
//
// The package is pure: it performs no I/O of its own. Everything stateful — where grants
// come from, usage counters, namespace settings, audit, tool implementations — is a port
// (an interface in ports.go) that a host wires in. It must never import another package
// of this module, and a denial is always a decision value, never a Go error; no error
// path can produce an allow.
package kernel

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// Config wires a Kernel's ports. Only Grants is required for authority; a nil port
// disables what depends on it (see each port's doc). Tools and per-context tool
// providers are added with RegisterTool and RegisterToolProvider, which report errors.
type Config struct {
	Grants     GrantSource
	Resolver   DelegationChainResolver
	Usage      UsageStore
	Ceiling    HostCeiling
	Verifier   GrantVerifier
	Revocation GrantRevocationSource
	Settings   ToolNamespaceSettingsStore
	Audit      AuditSink
	// ForbiddenNamespaces are the tool namespaces this host never
	// enables, whatever a context's selection or a namespace update says.
	ForbiddenNamespaces []string
	// MaxGrants bounds the grants one context may resolve (default DefaultMaxGrants).
	MaxGrants int
	// NewID mints audit event ids (default: NewEventID — time-ordered, 80 random bits, hex).
	NewID func() string
	// Clock is the wall clock. When set, every audit event records the wall-clock
	// instant it was written (recordedAt) beside the turn's instant (at), and the
	// effectful operations (ListTools, InvokeTool) refuse a grant that is not active at
	// the wall clock's instant even when the turn's instant (which a host may pin, e.g.
	// --now) says it is: a pinned instant may only remove authority. The dry runs
	// (ExplainCall, AllTools) evaluate the turn's instant alone. Nil: no wall clock.
	Clock func() time.Time
	// OnAuditError receives audit failures after an effect, which cannot refuse anymore.
	OnAuditError func(error)
}

type registered struct {
	handler ToolHandler
	digest  [32]byte
	from    string // the provider id that supplied it ("" for a static tool)
}

// Kernel hosts the tool registry and decides every discovery and invocation. Register
// tools and providers before serving operations; a Kernel is then safe for concurrent use.
type Kernel struct {
	cfg       Config
	authz     Authorizer
	auths     authorityCache
	pending   []func() *PreparedAuthority // AdoptAuthorityLater, adopted at the next resolution
	mu        sync.RWMutex
	static    map[string]*registered
	staticReg *registry // newRegistry(static), built on first use after registrations
	providers []ContextToolProvider

	memoMu   sync.Mutex
	lastMemo atomic.Pointer[memoKey] // the last memo key (authorityMemoKey)
	recorded map[string]struct{}     // authority.resolved records written (TurnOptions.AuthorityResolvedOnce)
}

// New creates a kernel with cfg's ports.
func New(cfg Config) *Kernel {
	k := &Kernel{cfg: cfg, static: make(map[string]*registered)}
	k.authz = Authorizer{Resolver: cfg.Resolver, Usage: cfg.Usage, Ceiling: cfg.Ceiling,
		Verifier: cfg.Verifier, Revocation: cfg.Revocation}
	if k.cfg.NewID == nil {
		k.cfg.NewID = randomID
	}
	return k
}

// Authorizer returns the kernel's authorizer (its ports as configured).
func (k *Kernel) Authorizer() *Authorizer { return &k.authz }

// randomID mints an audit event id: 32 hex digits, the wall clock's Unix milliseconds
// (48 bits) then 80 random bits. Unique as a random id is (80 bits per millisecond), and
// ordered by time, so that the trail's id index grows at its end instead of touching a
// random page on every write (one page less per record and commit).
func randomID() string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	_, _ = rand.Read(b[6:])
	return hex.EncodeToString(b[:])
}

// NewEventID mints an audit event id as the kernel does by default (see Config.NewID).
func NewEventID() string { return randomID() }

func validateHandler(h *ToolHandler) error {
	if err := h.Definition.Validate(); err != nil {
		return fmt.Errorf("tool definition does not match the SharedOS contract: %w", err)
	}
	if h.Invoke == nil {
		return fmt.Errorf("tool %s: %w", h.Definition.Name, contractErr("invoke", "is required"))
	}
	return nil
}

// digestDefinition identifies a definition inside the catalogue hash: the SHA-256 of
// every field of the definition, each length-prefixed or tagged (so two definitions that
// differ anywhere differ in the bytes hashed), map keys sorted. It walks the values
// itself instead of encoding JSON (a process registers its tools once, on the way to its
// first answer); a value of a type it does not know is hashed as its encoding/json
// encoding. The catalogue hash is an opaque audit identity, not a cross-host format.
func digestDefinition(d *ToolDefinition) [32]byte {
	w := digester{h: sha256.New(), buf: make([]byte, 0, 8<<10)}
	w.str("sharedos tool definition v2")
	w.str(d.Name)
	w.str(d.Description)
	w.str(d.Namespace)
	w.str(d.Source)
	w.str(string(d.ReadWrite))
	w.value(d.InputSchema)
	w.value(d.OutputSchema)
	r := &d.RequiredCapability
	w.str(r.Resource.Namespace)
	w.strs(r.Resource.Path)
	w.addr(r.Resource.Owner)
	w.str(r.Action)
	if a := d.Annotations; a == nil {
		w.tag('-')
	} else {
		w.tag('a')
		w.optBool(a.ReadOnly)
		w.optBool(a.Destructive)
		w.optBool(a.Idempotent)
	}
	w.value(d.Metadata)
	w.flush()
	var sum [32]byte
	w.h.Sum(sum[:0])
	return sum
}

// digester writes values, unambiguously, into a hash, through one buffer.
type digester struct {
	h   hash.Hash
	buf []byte
}

func (w *digester) flush() {
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
}

func (w *digester) tag(c byte) { w.buf = append(w.buf, c) }

func (w *digester) count(n int) { w.buf = binary.AppendUvarint(w.buf, uint64(n)) }

func (w *digester) str(s string) {
	w.count(len(s))
	w.buf = append(w.buf, s...)
	if len(w.buf) > 4<<10 {
		w.flush()
	}
}

func (w *digester) strs(ss []string) {
	w.count(len(ss))
	for _, s := range ss {
		w.str(s)
	}
}

func (w *digester) addr(a *Address) {
	if a == nil {
		w.tag('-')
		return
	}
	w.tag('@')
	w.str(string(a.Kind))
	w.str(a.ID)
}

func (w *digester) optBool(b *bool) {
	switch {
	case b == nil:
		w.tag('-')
	case *b:
		w.tag('t')
	default:
		w.tag('f')
	}
}

func (w *digester) value(v any) {
	switch x := v.(type) {
	case nil:
		w.tag('n')
	case bool:
		if x {
			w.tag('t')
		} else {
			w.tag('f')
		}
	case string:
		w.tag('s')
		w.str(x)
	case json.Number:
		w.tag('#')
		w.str(string(x))
	case float64:
		w.tag('#')
		w.str(strconv.FormatFloat(x, 'g', -1, 64))
	case int:
		w.tag('#')
		w.str(strconv.Itoa(x))
	case int64:
		w.tag('#')
		w.str(strconv.FormatInt(x, 10))
	case []string:
		w.tag('[')
		w.strs(x)
	case []any:
		w.tag('[')
		w.count(len(x))
		for _, e := range x {
			w.value(e)
		}
	case map[string]any:
		if x == nil {
			w.tag('n')
			return
		}
		w.tag('{')
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.count(len(keys))
		for _, k := range keys {
			w.str(k)
			w.value(x[k])
		}
	default:
		b, err := json.Marshal(x)
		if err != nil {
			b = []byte(fmt.Sprintf("%T %v", x, x))
		}
		w.tag('j')
		w.str(string(b))
	}
}

// RegisterTool adds a static, process-wide tool. It fails on an invalid definition or a
// name already registered (ErrDuplicateRegistration).
func (k *Kernel) RegisterTool(h ToolHandler) error {
	t, err := PrepareTool(h)
	if err != nil {
		return err
	}
	return k.RegisterPrepared(t)
}

// PreparedTool is a tool handler the kernel has checked against the contract and
// digested for the catalogue hash, ready for RegisterPrepared. Preparing needs no
// kernel, so a host can prepare its tools while it loads its other inputs.
type PreparedTool struct{ r *registered }

// PrepareTool checks h as RegisterTool does (an invalid definition fails) and digests its
// definition.
func PrepareTool(h ToolHandler) (PreparedTool, error) {
	if err := validateHandler(&h); err != nil {
		return PreparedTool{}, err
	}
	return PreparedTool{&registered{handler: h, digest: digestDefinition(&h.Definition)}}, nil
}

// RegisterPrepared adds a prepared static tool; it is RegisterTool without the work
// PrepareTool did. It fails on a tool that was not prepared or a name already registered
// (ErrDuplicateRegistration). A prepared tool may be registered on several kernels.
func (k *Kernel) RegisterPrepared(t PreparedTool) error {
	if t.r == nil {
		return contractErr("tool", "was not prepared with PrepareTool")
	}
	name := t.r.handler.Definition.Name
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.static[name]; dup {
		return fmt.Errorf("tool %q: %w", name, ErrDuplicateRegistration)
	}
	k.static[name] = t.r
	k.staticReg = nil
	return nil
}

// RegisterToolProvider adds a per-context tool provider; ids are trimmed, non-empty and unique.
func (k *Kernel) RegisterToolProvider(p ContextToolProvider) error {
	id := jscompat.JSTrim(p.ID())
	if id == "" {
		return contractErr("id", "tool provider id must not be empty")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, q := range k.providers {
		if jscompat.JSTrim(q.ID()) == id {
			return fmt.Errorf("tool provider %q: %w", id, ErrDuplicateRegistration)
		}
	}
	k.providers = append(k.providers, p)
	sort.SliceStable(k.providers, func(i, j int) bool {
		return jscompat.LocaleLess(jscompat.JSTrim(k.providers[i].ID()), jscompat.JSTrim(k.providers[j].ID()))
	})
	return nil
}

// registry is the resolved, unfiltered catalogue of one turn.
type registry struct {
	byName map[string]*registered
	names  []string
	hash   string

	nsOnce     sync.Once
	namespaces []ToolNamespaceDescriptor // namespaceSummary
}

func newRegistry(byName map[string]*registered) *registry {
	r := &registry{byName: byName, names: make([]string, 0, len(byName))}
	for n := range byName {
		r.names = append(r.names, n)
	}
	sort.Strings(r.names)
	hs := sha256.New()
	for _, n := range r.names {
		d := byName[n].digest
		hs.Write(d[:])
	}
	r.hash = hex.EncodeToString(hs.Sum(nil))
	return r
}

// staticRegistry is the registry of the static tools, built once per set of
// registrations and shared by every turn without per-context providers.
func (k *Kernel) staticRegistry() (*registry, []ContextToolProvider) {
	k.mu.RLock()
	r, providers := k.staticReg, k.providers
	k.mu.RUnlock()
	if r != nil {
		return r, providers
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.staticReg == nil {
		k.staticReg = newRegistry(maps.Clone(k.static))
	}
	return k.staticReg, k.providers
}

func (k *Kernel) resolveRegistry(ctx context.Context, actx AccessContext) (*registry, error) {
	static, providers := k.staticRegistry()
	if len(providers) == 0 {
		return static, nil
	}
	byName := maps.Clone(static.byName)
	for _, p := range providers {
		hs, err := p.ListTools(ctx, cloneContext(actx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, &CatalogError{Provider: p.ID(), Cause: err,
				msg: fmt.Sprintf("context tool provider %q failed to resolve its catalog", p.ID())}
		}
		for i := range hs {
			h := hs[i]
			if err := validateHandler(&h); err != nil {
				return nil, &CatalogError{Provider: p.ID(), msg: fmt.Sprintf("context tool provider %q: %v", p.ID(), err)}
			}
			if prev, dup := byName[h.Definition.Name]; dup {
				first := "the static tools"
				if prev.from != "" {
					first = fmt.Sprintf("provider %q", prev.from)
				}
				return nil, &CatalogError{Provider: p.ID(),
					msg: fmt.Sprintf("tool %q is offered by both %s and provider %q", h.Definition.Name, first, p.ID())}
			}
			byName[h.Definition.Name] = &registered{handler: h, digest: digestDefinition(&h.Definition), from: p.ID()}
		}
	}
	return newRegistry(byName), nil
}

func cloneContext(actx AccessContext) AccessContext {
	actx.EnabledToolNamespaces = slices.Clone(actx.EnabledToolNamespaces)
	return actx
}

// Turn is one turn of one context: it holds the validated context (its enabled tool
// namespaces already narrowed by Config.ForbiddenNamespaces) and what is resolved once
// per turn — the authority (grants loaded once, an outage held for the whole turn) and
// the unfiltered tool registry (providers called once). Every operation of the turn is
// decided against them at the context's instant. A Turn is safe for concurrent use.
//
// The turn's authority.resolved audit event is written once, by the first audited
// operation (ListTools, InvokeTool, the namespace and escalation operations); the dry
// runs (ExplainCall, AllTools) write nothing.
type Turn struct {
	k       *Kernel
	actx    AccessContext
	instant int64 // actx.Now, parsed once
	meta    map[string]any
	once    bool // TurnOptions.AuthorityResolvedOnce

	authOnce sync.Once
	auth     *Authority

	auditOnce sync.Once
	audited   *Authority // auth, or an unavailable one when its audit record failed
	auditErr  error      // why the turn's authority.resolved record could not be written

	regOnce sync.Once
	reg     *registry
	regErr  error
}

// TurnOptions tune a turn.
type TurnOptions struct {
	// AuditMetadata is merged into the metadata of every audit event the turn writes
	// (a surface's name, its session id, the client: "surface", "session", "client").
	// Keys the kernel sets itself win. The map is not copied; do not change it after.
	AuditMetadata map[string]any
	// AuthorityResolvedOnce is for a long-lived session that begins a turn per operation
	// (an MCP session): the turn writes its authority.resolved record only when this
	// kernel has not yet written one for the same authority (its snapshot hash and grant
	// count), the same context identity (actor, authority, owner, world, purpose, trace)
	// and the same AuditMetadata. Every later record of the session names that
	// authorityHash, which the session's first authority.resolved record describes; a
	// changed grant set is a new hash and is recorded again. An unavailable authority is
	// recorded by every turn, and a record that could not be written is tried again by
	// the next turn.
	AuthorityResolvedOnce bool
}

// BeginTurn starts a turn for actx. It fails (matching ErrInvalidContext) when actx does
// not match the contract.
func (k *Kernel) BeginTurn(actx AccessContext) (*Turn, error) {
	return k.BeginTurnWith(actx, TurnOptions{})
}

// BeginTurnWith is BeginTurn with options.
func (k *Kernel) BeginTurnWith(actx AccessContext, opts TurnOptions) (*Turn, error) {
	actx = cloneContext(actx)
	if err := actx.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidContext, err)
	}
	if len(k.cfg.ForbiddenNamespaces) > 0 {
		actx.EnabledToolNamespaces = slices.DeleteFunc(actx.EnabledToolNamespaces, func(n string) bool {
			return slices.Contains(k.cfg.ForbiddenNamespaces, n)
		})
	}
	instant, _ := ParseTimestamp(actx.Now) // Validate parsed it already
	return &Turn{k: k, actx: actx, instant: instant, meta: opts.AuditMetadata, once: opts.AuthorityResolvedOnce}, nil
}

// Context returns a copy of the turn's context.
func (t *Turn) Context() AccessContext { return cloneContext(t.actx) }

// Authority returns the turn's authority, loading it on first use. It writes no audit
// record (see Turn).
func (t *Turn) Authority(ctx context.Context) *Authority {
	t.authOnce.Do(func() { t.auth = t.k.resolveAuthority(ctx, t.actx) })
	return t.auth
}

// auditedAuthority is Authority after the turn's authority.resolved event was written;
// when it cannot be, the turn's audited operations run under no authority.
func (t *Turn) auditedAuthority(ctx context.Context) *Authority {
	auth := t.Authority(ctx)
	t.auditOnce.Do(func() {
		t.audited = auth
		k := t.k
		if k.cfg.Audit == nil {
			return
		}
		memo := ""
		if t.once && auth.unavailable == "" {
			memo = t.authorityMemoKey(auth)
			if k.authorityRecorded(memo) {
				return
			}
		}
		ev := k.event(t.actx, EventAuthorityResolved, OutcomeSucceeded)
		if auth.unavailable != "" {
			ev.Outcome = OutcomeFailed
			ev.Reason = ErrorCodeOf(ReasonAuthorityUnavailable)
			ev.FailClosed = true
			ev.Metadata = map[string]any{"authority": auth.unavailable}
		} else {
			// O(1) in the grants: the set is named by its hash, not listed.
			ev.AuthorityHash = auth.Hash()
			ev.Metadata = map[string]any{"grantCount": len(auth.grants)}
		}
		ev.Metadata["hostCeiling"] = map[bool]string{true: "installed", false: "absent"}[k.cfg.Ceiling != nil]
		if err := t.auditWriteAhead(ctx, ev); err != nil {
			t.audited = UnavailableAuthority(string(CodeAuditUnavailable))
			t.auditErr = err
			return
		}
		if memo != "" {
			k.markAuthorityRecorded(memo)
		}
	})
	return t.audited
}

// maxAuthorityMemo bounds the authority.resolved memo (see TurnOptions.AuthorityResolvedOnce);
// when full it is emptied, which only means records written again.
const maxAuthorityMemo = 1024

// authorityMemoKey identifies what a turn's authority.resolved record says but its
// instant and id.
func (t *Turn) authorityMemoKey(auth *Authority) string {
	a := &t.actx
	// A session's turns share the authority and the metadata map (TurnOptions: not to
	// be changed after): the key of the last turn is reused when nothing it names changed.
	var metaPtr uintptr
	if t.meta != nil {
		metaPtr = reflect.ValueOf(t.meta).Pointer()
	}
	last := t.k.lastMemo.Load()
	if last != nil && last.auth == auth && last.metaPtr == metaPtr && last.actor == a.Actor && last.authority == a.Authority &&
		last.owner == a.Owner && last.world == a.World && last.purpose == a.Purpose && last.trace == a.TraceID {
		return last.key
	}
	key := t.buildMemoKey(auth)
	if key != "" {
		t.k.lastMemo.Store(&memoKey{auth: auth, meta: t.meta, metaPtr: metaPtr, actor: a.Actor, authority: a.Authority, owner: a.Owner,
			world: a.World, purpose: a.Purpose, trace: a.TraceID, key: key})
	}
	return key
}

// memoKey is the last authority.resolved memo key built, with what it was built from. It
// holds the authority and the metadata map themselves, so that neither address can be
// reused by another value while it is compared by address.
type memoKey struct {
	auth                    *Authority
	meta                    map[string]any
	metaPtr                 uintptr
	actor, authority, owner Address
	world, purpose, trace   string
	key                     string
}

func (t *Turn) buildMemoKey(auth *Authority) string {
	a := &t.actx
	b := make([]byte, 0, 256)
	b = append(b, auth.Hash()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(auth.grants)), 10)
	for _, v := range []string{a.Actor.String(), a.Authority.String(), a.Owner.String(), a.World, a.Purpose, a.TraceID} {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, v)
	}
	b = append(b, ' ')
	// sorted keys: a stable identity (json.Marshal's bytes)
	b, ok := appendJSONValue(b, t.meta, 0)
	if !ok {
		return "" // unencodable metadata: record every turn
	}
	return string(b)
}

func (k *Kernel) authorityRecorded(key string) bool {
	if key == "" {
		return false
	}
	k.memoMu.Lock()
	defer k.memoMu.Unlock()
	_, ok := k.recorded[key]
	return ok
}

func (k *Kernel) markAuthorityRecorded(key string) {
	k.memoMu.Lock()
	defer k.memoMu.Unlock()
	if k.recorded == nil || len(k.recorded) >= maxAuthorityMemo {
		k.recorded = make(map[string]struct{})
	}
	k.recorded[key] = struct{}{}
}

func (t *Turn) registry(ctx context.Context) (*registry, error) {
	t.regOnce.Do(func() { t.reg, t.regErr = t.k.resolveRegistry(ctx, t.actx) })
	return t.reg, t.regErr
}

// state resolves what a plan is evaluated against; audited selects an effectful
// operation: the turn's authority.resolved event is written first, and the time rules
// are held to the wall clock too (see Config.Clock).
func (t *Turn) state(ctx context.Context, audited bool) *turnState {
	st := &turnState{actx: t.actx, instant: t.instant}
	if audited {
		st.wall = t.k.wallNow()
		st.auth = t.auditedAuthority(ctx)
		st.auditErr = t.auditErr
	} else {
		st.auth = t.Authority(ctx)
	}
	if st.auth.unavailable == "" {
		st.reg, st.regErr = t.registry(ctx)
	}
	return st
}

func (k *Kernel) event(actx AccessContext, typ AuditEventType, outcome AuditOutcome) AuditEvent {
	ev := AuditEvent{Version: "1", ID: k.cfg.NewID(), Type: typ, Outcome: outcome, At: actx.Now,
		TraceID: actx.TraceID, NamespaceID: actx.World, Actor: actx.Actor, Authority: actx.Authority,
		Owner: actx.Owner, Purpose: actx.Purpose}
	if k.cfg.Clock != nil {
		ev.RecordedAt = FormatTimestamp(k.cfg.Clock().UnixMilli())
	}
	return ev
}

// wallNow is the wall clock's instant in Unix milliseconds, or 0 without a clock.
func (k *Kernel) wallNow() int64 {
	if k.cfg.Clock == nil {
		return 0
	}
	return k.cfg.Clock().UnixMilli()
}

func (k *Kernel) audit(ctx context.Context, ev AuditEvent) error {
	if k.cfg.Audit == nil {
		return nil
	}
	return k.cfg.Audit.Append(ctx, k.prepare(ev))
}

// prepare finishes an event before it is written: an outage code is fail-closed.
func (k *Kernel) prepare(ev AuditEvent) AuditEvent {
	if ev.Reason != "" && IsInfrastructureDenial(ev.Reason) {
		ev.FailClosed = true
	}
	return ev
}

// auditWriteAhead writes the record of work that changed nothing: without forcing it to
// the disk when the sink can (WriteAheadAuditSink), durably otherwise.
func (k *Kernel) auditWriteAhead(ctx context.Context, ev AuditEvent) error {
	if k.cfg.Audit == nil {
		return nil
	}
	if wa, ok := k.cfg.Audit.(WriteAheadAuditSink); ok {
		return wa.AppendWriteAhead(ctx, k.prepare(ev))
	}
	return k.cfg.Audit.Append(ctx, k.prepare(ev))
}

func (k *Kernel) auditAfter(ctx context.Context, ev AuditEvent, durable bool) {
	write := k.auditWriteAhead
	if durable {
		write = k.audit
	}
	if err := write(ctx, ev); err != nil && k.cfg.OnAuditError != nil {
		k.cfg.OnAuditError(err)
	}
}

// withMeta merges the turn's audit metadata into ev (the kernel's own keys win).
func (t *Turn) withMeta(ev AuditEvent) AuditEvent {
	if len(t.meta) == 0 {
		return ev
	}
	m := make(map[string]any, len(ev.Metadata)+len(t.meta))
	for k, v := range t.meta {
		m[k] = v
	}
	for k, v := range ev.Metadata {
		m[k] = v
	}
	ev.Metadata = m
	return ev
}

// audit writes one of the turn's events durably (pre-effect: its error refuses the
// operation).
func (t *Turn) audit(ctx context.Context, ev AuditEvent) error { return t.k.audit(ctx, t.withMeta(ev)) }

// auditWriteAhead writes one of the turn's records of work that changed nothing (see
// WriteAheadAuditSink; pre-effect: its error refuses the operation).
func (t *Turn) auditWriteAhead(ctx context.Context, ev AuditEvent) error {
	return t.k.auditWriteAhead(ctx, t.withMeta(ev))
}

// auditAfter writes one of the turn's events after its effect (durably when the effect
// may have changed state).
func (t *Turn) auditAfter(ctx context.Context, ev AuditEvent, durable bool) {
	t.k.auditAfter(ctx, t.withMeta(ev), durable)
}

// ErrInvalidContext is returned (wrapped) when an access context fails the contract.
var ErrInvalidContext = errors.New("the access context does not match the SharedOS contract")

// ListTools is the filtered catalogue of one operation in a turn of its own (see
// Turn.ListTools).
func (k *Kernel) ListTools(ctx context.Context, actx AccessContext) ([]ToolDefinition, error) {
	t, err := k.BeginTurn(actx)
	if err != nil {
		return nil, err
	}
	return t.ListTools(ctx)
}

// ListTools is the filtered catalogue: every registered tool whose namespace is enabled
// and whose declared bound some grant can discover, sorted by name. An authority outage
// yields an empty catalogue (fail-closed), not an error; an unresolvable registry yields
// an error matching ErrToolCatalogUnavailable; a listing whose audit record cannot be
// written fails.
func (t *Turn) ListTools(ctx context.Context) ([]ToolDefinition, error) {
	k := t.k
	st := t.state(ctx, true)
	if st.auditErr != nil {
		return nil, fmt.Errorf("write audit: %w", st.auditErr)
	}
	if st.auth.unavailable != "" {
		ev := k.event(t.actx, EventToolCatalogListed, OutcomeDenied)
		ev.Reason = ErrorCodeOf(ReasonAuthorityUnavailable)
		ev.Metadata = map[string]any{"enabledNamespaces": t.actx.EnabledToolNamespaces, "withheldCount": 0}
		t.auditAfter(ctx, ev, false)
		return []ToolDefinition{}, nil
	}
	if st.regErr != nil {
		if k.cfg.Audit != nil {
			ev := k.event(t.actx, EventToolCatalogListed, OutcomeFailed)
			ev.Reason = CodeToolCatalogUnavailable
			ev.AuthorityHash = st.auth.Hash()
			ev.Metadata = map[string]any{"enabledNamespaces": t.actx.EnabledToolNamespaces, "catalogError": catalogCause(st.regErr)}
			t.auditAfter(ctx, ev, false)
		}
		return nil, st.regErr
	}
	out := make([]ToolDefinition, 0, len(st.reg.names))
	withheld, outage := 0, false
	var ev Evaluation
	for _, n := range st.reg.names {
		def := &st.reg.byName[n].handler.Definition
		if !slices.Contains(t.actx.EnabledToolNamespaces, def.Namespace) {
			continue
		}
		d := t.discover(ctx, st.auth, def, &ev, st.wall)
		if !d.Allowed {
			withheld++
			if IsInfrastructureDenial(d.ReasonCode) {
				outage = true
			}
			continue
		}
		out = append(out, *def)
	}
	if k.cfg.Audit != nil {
		ev := k.event(t.actx, EventToolCatalogListed, OutcomeSucceeded)
		ev.AuthorityHash = st.auth.Hash()
		ev.FailClosed = outage
		ev.Metadata = map[string]any{"catalogHash": st.reg.hash, "enabledNamespaces": t.actx.EnabledToolNamespaces,
			"withheldCount": withheld}
		if err := t.auditWriteAhead(ctx, ev); err != nil {
			return nil, fmt.Errorf("write audit: %w", err)
		}
	}
	return out, nil
}

// discover is the catalogue check of one tool at the turn's instant (and wall, when set);
// ev is scratch space reused across the tools of one listing.
func (t *Turn) discover(ctx context.Context, auth *Authority, def *ToolDefinition, ev *Evaluation, wall int64) AuthorizationDecision {
	evaluateInto(ev, auth, &t.actx, t.instant, t.instant, wall, def.RequiredCapability, true)
	d, _ := t.k.authz.Settle(ctx, auth, t.actx, ev, false)
	return d
}

// InvokeTool decides and runs one call in a turn of its own (see Turn.InvokeTool). An
// invalid context is refused invalid_context without an audit record.
func (k *Kernel) InvokeTool(ctx context.Context, actx AccessContext, call ToolCall) ToolResult {
	t, err := k.BeginTurn(actx)
	if err != nil {
		now := actx.Now
		if _, perr := ParseTimestamp(now); perr != nil {
			now = FormatTimestamp(0)
		}
		return DeniedResult(call, now, ErrorCodeOf(ReasonInvalidContext), "the access context does not match the SharedOS contract")
	}
	return t.InvokeTool(ctx, call)
}

// InvokeTool decides and runs one call: Plan (pure: every gate of spec 20 §5 in order),
// then Settle (the ports: delegation, revocation, host ceiling, usage — consuming only for
// the execution check — each decision audited), then Execute, then the tool.invoked
// audit record. It never returns an error: every outcome, including infrastructure
// outages, is a ToolResult, and a refusal carries its gate and cause.
func (t *Turn) InvokeTool(ctx context.Context, call ToolCall) ToolResult {
	k := t.k
	st := t.state(ctx, true)
	p := planCall(st, call)
	// A read-class tool changes nothing until its output is reported, so with a sink that
	// can batch, its decision record (when it spent no use) is written together with its
	// tool.invoked record in one write-ahead transaction after the read and before the
	// result is returned; if that fails the output is withheld (audit_unavailable).
	batch, _ := k.cfg.Audit.(WriteAheadBatchAuditSink)
	deferOK := batch != nil && p.handler != nil && p.handler.Definition.ReadWrite == ClassRead
	var auditErr error
	var pending *AuditEvent
	findings, _, _ := p.resolve(func(stage Stage, ev *Evaluation) Settled {
		if stage == StageAuthorization {
			d, diag, rec, err := t.settleConsuming(ctx, st.auth, call, ev, deferOK)
			auditErr, pending = err, rec
			return Settled{Decision: d, Diagnostic: diag}
		}
		d, diag := k.authz.Settle(ctx, st.auth, t.actx, ev, false)
		if k.cfg.Audit != nil && (stage != StageDiscovery || !d.Allowed) {
			t.auditAfter(ctx, t.decisionEvent(st.auth, call, ev.Requirement, d, diag, false), false)
		}
		return Settled{Decision: d, Diagnostic: diag}
	}, false)
	now := t.actx.Now
	var res ToolResult
	ran := false
	switch {
	case auditErr != nil:
		res = FailedResult(call, now, CodeAuditUnavailable, "the decision could not be audited; the call was refused")
		res.Gate = GateInfrastructure
	case len(findings) > 0:
		res = findings[0].Result(call, now)
	default:
		res, ran = t.execute(ctx, p), true
	}
	if pending != nil {
		invoked := t.invokedEvent(st, p, &res)
		evs := []AuditEvent{k.prepare(t.withMeta(*pending)), k.prepare(t.withMeta(invoked))}
		if err := batch.AppendWriteAheadBatch(ctx, evs); err != nil {
			if k.cfg.OnAuditError != nil {
				k.cfg.OnAuditError(err)
			}
			res = FailedResult(call, now, CodeAuditUnavailable, "the decision could not be audited; the call was refused")
			res.Gate = GateInfrastructure
		}
		return res
	}
	t.finish(ctx, st, p, &res, ran, ran && p.handler.Definition.ReadWrite != ClassRead)
	return res
}

// settleConsuming settles a consuming authorization and writes its authorization.checked
// record before any effect, in the reference's order (ADR 0029): on a reserving usage
// store the use is reserved, then committed together with the record; otherwise the use
// is spent and the record written after. The error is the record's (the use is then not
// spent on a reserving store); the caller must refuse the effect. With deferOK, a record
// that spent no use is returned unwritten instead, for the caller to write with the
// call's tool.invoked record before it reports anything.
func (t *Turn) settleConsuming(ctx context.Context, auth *Authority, call ToolCall, ev *Evaluation, deferOK bool) (AuthorizationDecision, Diagnostic, *AuditEvent, error) {
	k := t.k
	d, diag, reservation := k.authz.settle(ctx, auth, t.actx, ev, true, true)
	if reservation != nil {
		var rec *AuditEvent
		if k.cfg.Audit != nil {
			e := k.prepare(t.withMeta(t.decisionEvent(auth, call, ev.Requirement, d, diag, true)))
			rec = &e
		}
		return d, diag, nil, reservation.Commit(ctx, rec)
	}
	if k.cfg.Audit == nil {
		return d, diag, nil, nil
	}
	if deferOK && !diag.Consumed {
		rec := t.decisionEvent(auth, call, ev.Requirement, d, diag, true)
		return d, diag, &rec, nil
	}
	rec := t.decisionEvent(auth, call, ev.Requirement, d, diag, true)
	if diag.Consumed {
		return d, diag, nil, t.audit(ctx, rec) // a spent use: durable before the effect
	}
	return d, diag, nil, t.auditWriteAhead(ctx, rec)
}

// execute runs the planned, authorized call and checks what the tool returned.
func (t *Turn) execute(ctx context.Context, p *Plan) ToolResult {
	call, now := p.Call, t.actx.Now
	res, err := invokeSafely(ctx, p.handler, t.actx, p.parsed)
	if err != nil {
		return FailedResult(call, now, CodeToolExecutionFailed, "the tool failed while executing")
	}
	if res.CallID != call.ID || res.Tool != call.Tool || res.Check() != nil {
		return FailedResult(call, now, CodeInvalidToolResult, "the tool returned a result that does not match the contract")
	}
	res.Gate, res.Cause = "", ""
	return res
}

// AuditUnavailableKey is the result metadata key set when the call's tool.invoked record
// could not be written after the tool ran: the effect happened, its audit record is
// missing, and the host must say so (the CLI warns and exits non-zero).
const AuditUnavailableKey = "sharedos/auditUnavailable"

// finish writes the call's tool.invoked audit record, durably when the call may have
// changed state (a tool of any class but read ran). When it cannot be written
// OnAuditError is told, and, when the tool ran, the result is marked
// (AuditUnavailableKey): a refusal whose record is missing took no effect, and marking it
// would make the host report an effect that never happened.
func (t *Turn) finish(ctx context.Context, st *turnState, p *Plan, res *ToolResult, ran, durable bool) {
	k := t.k
	if k.cfg.Audit == nil {
		return
	}
	ev := t.invokedEvent(st, p, res)
	write := t.auditWriteAhead
	if durable {
		write = t.audit
	}
	if err := write(ctx, ev); err != nil {
		if k.cfg.OnAuditError != nil {
			k.cfg.OnAuditError(err)
		}
		if !ran {
			return
		}
		meta := make(map[string]any, len(res.Metadata)+1)
		for key, v := range res.Metadata {
			meta[key] = v
		}
		meta[AuditUnavailableKey] = err.Error()
		res.Metadata = meta
	}
}

// invokedEvent is the call's tool.invoked record for res.
func (t *Turn) invokedEvent(st *turnState, p *Plan, res *ToolResult) AuditEvent {
	k := t.k
	ev := k.event(t.actx, EventToolInvoked, AuditOutcome(res.Status))
	ev.OperationID = auditSafe(p.Call.ID)
	ev.Tool = p.Call.Tool
	if !validToolName(p.Call.Tool) {
		// Agent-supplied text that cannot be a tool name (escape sequences, line breaks)
		// is refused like any unknown name, and never reaches the audit trail verbatim:
		// it is recorded quoted, bounded.
		ev.Tool = ""
		ev.Metadata = map[string]any{"toolName": quoteBounded(p.Call.Tool)}
	}
	ev.Source = "kernel"
	ev.Cause = res.Cause
	if res.Error != nil {
		ev.Reason = res.Error.Code
		if res.Cause != "" && IsInfrastructureDenial(ReasonCode(res.Cause)) {
			ev.FailClosed = true
		}
	}
	if st.auth.unavailable == "" {
		ev.AuthorityHash = st.auth.Hash()
	}
	if p.catalogHash != "" {
		if ev.Metadata == nil {
			ev.Metadata = map[string]any{}
		}
		ev.Metadata["catalogHash"] = p.catalogHash
	}
	if st.regErr != nil {
		if ev.Metadata == nil {
			ev.Metadata = map[string]any{}
		}
		ev.Metadata["catalogError"] = catalogCause(st.regErr)
	}
	return ev
}

// quoteBounded is s as a Go-quoted ASCII string, cut to 256 bytes of input first.
func quoteBounded(s string) string {
	if len(s) > 256 {
		s = s[:256]
	}
	return strconv.QuoteToASCII(s)
}

// auditSafe is an agent-supplied identifier as the audit trail may hold it: unchanged
// when it has no control character (C0, DEL, C1) and is valid UTF-8, quoted otherwise.
func auditSafe(s string) string {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return quoteBounded(s)
		}
	}
	return s
}

// noRejections is the empty rejectedGrants list, boxed once.
var noRejections any = []RejectedGrant{}

// decisionEvent is the authorization.checked record of one settled authorization.
func (t *Turn) decisionEvent(auth *Authority, call ToolCall, req CapabilityRequirement, d AuthorizationDecision, diag Diagnostic, consume bool) AuditEvent {
	outcome := OutcomeAllowed
	if !d.Allowed {
		outcome = OutcomeDenied
	}
	ev := t.k.event(t.actx, EventAuthorizationChecked, outcome)
	r := req.Resource
	ev.Resource = &r
	ev.Action = req.Action
	ev.GrantID = d.MatchedGrantID
	ev.OperationID = auditSafe(call.ID)
	ev.Tool = call.Tool
	if !d.Allowed {
		ev.Reason = ErrorCodeOf(d.ReasonCode)
	}
	ev.Consumed = BoolPtr(consume && diag.Consumed)
	if auth.unavailable == "" {
		ev.AuthorityHash = auth.Hash()
	}
	meta := map[string]any{"grantsResolved": diag.GrantsResolved, "rejectedGrants": noRejections}
	if diag.RejectedGrants != nil {
		meta["rejectedGrants"] = diag.RejectedGrants
	}
	if diag.MissingDependency != "" {
		meta["missingDependency"] = diag.MissingDependency
	}
	for key, v := range d.Metadata {
		meta[key] = v
	}
	ev.Metadata = meta
	ev.RequestedAuthority = d.RequiredAuthority
	return ev
}

func invokeSafely(ctx context.Context, h *ToolHandler, actx AccessContext, call ParsedToolCall) (res ToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tool panicked: %v", r)
		}
	}()
	return h.Invoke(ctx, cloneContext(actx), call)
}
