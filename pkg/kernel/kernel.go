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
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
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
	// MaxGrants bounds the grants one context may resolve (default DefaultMaxGrants).
	MaxGrants int
	// NewID mints audit event ids (default: 128 random bits, hex).
	NewID func() string
	// OnAuditError receives audit failures after an effect, which cannot refuse anymore.
	OnAuditError func(error)
}

type registered struct {
	handler ToolHandler
	digest  [32]byte
}

// Kernel hosts the tool registry and decides every discovery and invocation. Register
// tools and providers before serving operations; a Kernel is then safe for concurrent use.
type Kernel struct {
	cfg       Config
	authz     Authorizer
	mu        sync.RWMutex
	static    map[string]*registered
	providers []ContextToolProvider
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

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func validateHandler(h *ToolHandler) error {
	if err := h.Definition.Validate(); err != nil {
		return fmt.Errorf("tool definition does not match the SharedOS contract: %w", err)
	}
	if h.Invoke == nil {
		return fmt.Errorf("tool %s: %w", h.Definition.Name, contractErr("invoke", "is required"))
	}
	return nil
}

// digestDefinition identifies a definition inside the catalogue hash. encoding/json is
// deterministic (struct fields in order, map keys sorted), so the digest is stable for a
// definition; the catalogue hash is an opaque audit identity, not a cross-host format.
func digestDefinition(d *ToolDefinition) [32]byte {
	b, _ := json.Marshal(d)
	return sha256.Sum256(b)
}

// RegisterTool adds a static, process-wide tool. It fails on an invalid definition or a
// name already registered (ErrDuplicateRegistration).
func (k *Kernel) RegisterTool(h ToolHandler) error {
	if err := validateHandler(&h); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.static[h.Definition.Name]; dup {
		return fmt.Errorf("tool %q: %w", h.Definition.Name, ErrDuplicateRegistration)
	}
	k.static[h.Definition.Name] = &registered{handler: h, digest: digestDefinition(&h.Definition)}
	return nil
}

// RegisterToolProvider adds a per-context tool provider; ids are trimmed, non-empty and unique.
func (k *Kernel) RegisterToolProvider(p ContextToolProvider) error {
	id := JSTrim(p.ID())
	if id == "" {
		return contractErr("id", "tool provider id must not be empty")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, q := range k.providers {
		if JSTrim(q.ID()) == id {
			return fmt.Errorf("tool provider %q: %w", id, ErrDuplicateRegistration)
		}
	}
	k.providers = append(k.providers, p)
	sort.SliceStable(k.providers, func(i, j int) bool { return LocaleLess(JSTrim(k.providers[i].ID()), JSTrim(k.providers[j].ID())) })
	return nil
}

// registry is the resolved, unfiltered catalogue of one turn.
type registry struct {
	byName map[string]*registered
	names  []string
	hash   string
}

func (k *Kernel) resolveRegistry(ctx context.Context, actx AccessContext) (*registry, error) {
	k.mu.RLock()
	r := &registry{byName: make(map[string]*registered, len(k.static))}
	for n, h := range k.static {
		r.byName[n] = h
	}
	providers := slices.Clone(k.providers)
	k.mu.RUnlock()
	for _, p := range providers {
		hs, err := p.ListTools(ctx, cloneContext(actx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("context tool provider %q failed to resolve its catalog: %w", p.ID(), ErrToolCatalogUnavailable)
		}
		for i := range hs {
			h := hs[i]
			if err := validateHandler(&h); err != nil {
				return nil, fmt.Errorf("context tool provider %q: %v: %w", p.ID(), err, ErrToolCatalogUnavailable)
			}
			if _, dup := r.byName[h.Definition.Name]; dup {
				return nil, fmt.Errorf("tool %q registered twice (provider %q): %w", h.Definition.Name, p.ID(), ErrToolCatalogUnavailable)
			}
			r.byName[h.Definition.Name] = &registered{handler: h, digest: digestDefinition(&h.Definition)}
		}
	}
	r.names = make([]string, 0, len(r.byName))
	for n := range r.byName {
		r.names = append(r.names, n)
	}
	sort.Strings(r.names)
	hs := sha256.New()
	for _, n := range r.names {
		d := r.byName[n].digest
		hs.Write(d[:])
	}
	r.hash = hex.EncodeToString(hs.Sum(nil))
	return r, nil
}

func cloneContext(actx AccessContext) AccessContext {
	actx.EnabledToolNamespaces = slices.Clone(actx.EnabledToolNamespaces)
	return actx
}

// turnKey identifies a turn: everything of the context but now and the namespace selection.
type turnKey struct {
	world                   string
	actor, authority, owner Address
	purpose, trace          string
}

func keyOf(actx AccessContext) turnKey {
	return turnKey{actx.NamespaceID, actx.Actor, actx.Authority, actx.Owner, actx.Purpose, actx.TraceID}
}

// Turn holds what is resolved once per turn: the authority (grants loaded once, an outage
// held for the whole turn) and the unfiltered tool registry (providers called once). The
// permission filter and namespace enablement are re-applied on every operation. A Turn
// is safe for concurrent use.
type Turn struct {
	k   *Kernel
	key turnKey

	authOnce sync.Once
	auth     *Authority

	regOnce sync.Once
	reg     *registry
	regErr  error
}

// BeginTurn starts a turn for actx. Operations on the turn must use contexts with the same
// world, actor, authority, owner, purpose and trace; now and the enabled namespaces may
// differ per operation.
func (k *Kernel) BeginTurn(actx AccessContext) *Turn { return &Turn{k: k, key: keyOf(actx)} }

// Authority returns the turn's authority, loading it on first use (and auditing
// authority.resolved once).
func (t *Turn) Authority(ctx context.Context, actx AccessContext) *Authority {
	t.authOnce.Do(func() {
		t.auth = ResolveAuthority(ctx, t.k.cfg.Grants, actx, t.k.cfg.MaxGrants)
		ev := t.k.event(actx, EventAuthorityResolved, OutcomeSucceeded)
		if t.auth.unavailable != "" {
			ev.Outcome = OutcomeFailed
			ev.Reason = ReasonAuthorityUnavailable
			ev.FailClosed = true
			ev.Metadata = map[string]any{"authority": t.auth.unavailable}
		} else {
			if t.k.cfg.Audit != nil {
				ev.AuthorityHash = t.auth.Hash()
			}
			ev.Metadata = map[string]any{"grantIds": t.auth.GrantIDs(), "grantCount": len(t.auth.grants)}
		}
		ev.Metadata["hostCeiling"] = map[bool]string{true: "installed", false: "absent"}[t.k.cfg.Ceiling != nil]
		if err := t.k.audit(ctx, ev); err != nil {
			t.auth = UnavailableAuthority(string(CodeAuditUnavailable))
		}
	})
	return t.auth
}

func (t *Turn) registry(ctx context.Context, actx AccessContext) (*registry, error) {
	t.regOnce.Do(func() { t.reg, t.regErr = t.k.resolveRegistry(ctx, actx) })
	return t.reg, t.regErr
}

func (t *Turn) check(actx AccessContext) error {
	if keyOf(actx) != t.key {
		return contractErr("", "the access context does not belong to this turn")
	}
	return nil
}

func (k *Kernel) event(actx AccessContext, typ AuditEventType, outcome AuditOutcome) AuditEvent {
	return AuditEvent{Version: "1", ID: k.cfg.NewID(), Type: typ, Outcome: outcome, At: actx.Now,
		TraceID: actx.TraceID, NamespaceID: actx.NamespaceID, Actor: actx.Actor, Authority: actx.Authority,
		Owner: actx.Owner, Purpose: actx.Purpose}
}

func (k *Kernel) audit(ctx context.Context, ev AuditEvent) error {
	if k.cfg.Audit == nil {
		return nil
	}
	if ev.Reason != "" && IsInfrastructureDenial(ev.Reason) {
		ev.FailClosed = true
	}
	return k.cfg.Audit.Append(ctx, ev)
}

func (k *Kernel) auditAfter(ctx context.Context, ev AuditEvent) {
	if err := k.audit(ctx, ev); err != nil && k.cfg.OnAuditError != nil {
		k.cfg.OnAuditError(err)
	}
}

// ErrInvalidContext is returned (wrapped) when an access context fails the contract.
var ErrInvalidContext = errors.New("invalid_context")

func validContext(actx *AccessContext) error {
	if err := actx.Validate(); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidContext, err)
	}
	return nil
}

// ListTools is the filtered catalogue of one operation: every registered tool whose
// namespace is enabled and whose declared ceiling some grant can discover, sorted by
// name. An authority outage yields an empty catalogue (fail-closed), not an error; an
// unresolvable registry yields an error matching ErrToolCatalogUnavailable.
func (k *Kernel) ListTools(ctx context.Context, actx AccessContext) ([]ToolDefinition, error) {
	return k.BeginTurn(actx).ListTools(ctx, actx)
}

// ListTools is Kernel.ListTools within the turn.
func (t *Turn) ListTools(ctx context.Context, actx AccessContext) ([]ToolDefinition, error) {
	if err := validContext(&actx); err != nil {
		return nil, err
	}
	if err := t.check(actx); err != nil {
		return nil, err
	}
	k := t.k
	auth := t.Authority(ctx, actx)
	if auth.unavailable != "" {
		ev := k.event(actx, EventToolCatalogListed, OutcomeDenied)
		ev.Reason = ReasonAuthorityUnavailable
		ev.Metadata = map[string]any{"enabledNamespaces": actx.EnabledToolNamespaces, "withheldCount": 0}
		k.auditAfter(ctx, ev)
		return []ToolDefinition{}, nil
	}
	reg, err := t.registry(ctx, actx)
	if err != nil {
		return nil, err
	}
	out := make([]ToolDefinition, 0, len(reg.names))
	withheld, outage := 0, false
	for _, n := range reg.names {
		h := reg.byName[n]
		if !slices.Contains(actx.EnabledToolNamespaces, h.handler.Definition.Namespace) {
			continue
		}
		d, _ := k.authz.CanDiscover(ctx, auth, actx, h.handler.Definition.RequiredCapability, "")
		if !d.Allowed {
			withheld++
			if IsInfrastructureDenial(d.ReasonCode) {
				outage = true
			}
			continue
		}
		out = append(out, h.handler.Definition)
	}
	if k.cfg.Audit != nil {
		ev := k.event(actx, EventToolCatalogListed, OutcomeSucceeded)
		ev.AuthorityHash = auth.Hash()
		ev.FailClosed = outage
		ev.Metadata = map[string]any{"catalogHash": reg.hash, "enabledNamespaces": actx.EnabledToolNamespaces,
			"withheldCount": withheld}
		if err := k.audit(ctx, ev); err != nil {
			return nil, fmt.Errorf("write audit: %w", err)
		}
	}
	return out, nil
}

// InvokeTool decides and runs one call. See the package's pipeline: trace, authority,
// registry, registration, namespace, discovery, arguments, requirement, owner, ceiling
// bound, consuming authorization, execution. It never returns an error: every outcome,
// including infrastructure outages, is a ToolResult.
func (k *Kernel) InvokeTool(ctx context.Context, actx AccessContext, call ToolCall) ToolResult {
	return k.BeginTurn(actx).InvokeTool(ctx, actx, call)
}

// invocation carries one call through the pipeline.
type invocation struct {
	t    *Turn
	actx AccessContext
	call ToolCall
	auth *Authority
	reg  *registry
}

func (iv *invocation) finish(ctx context.Context, res ToolResult, cause string) ToolResult {
	k := iv.t.k
	outcome := AuditOutcome(res.Status)
	ev := k.event(iv.actx, EventToolInvoked, outcome)
	ev.OperationID = iv.call.ID
	ev.Tool = iv.call.Tool
	ev.Source = "kernel"
	ev.Cause = cause
	if res.Error != nil {
		ev.Reason = res.Error.Code
		if cause != "" && IsInfrastructureDenial(ReasonCode(cause)) {
			ev.FailClosed = true
		}
	}
	if iv.auth != nil && iv.auth.unavailable == "" && k.cfg.Audit != nil {
		ev.AuthorityHash = iv.auth.Hash()
	}
	if iv.reg != nil {
		ev.Metadata = map[string]any{"catalogHash": iv.reg.hash}
	}
	k.auditAfter(ctx, ev)
	return res
}

func (iv *invocation) decisionEvent(req CapabilityRequirement, d AuthorizationDecision, diag Diagnostic, consume bool) AuditEvent {
	k := iv.t.k
	outcome := OutcomeAllowed
	if !d.Allowed {
		outcome = OutcomeDenied
	}
	ev := k.event(iv.actx, EventAuthorizationChecked, outcome)
	r := req.Resource
	ev.Resource = &r
	ev.Action = req.Action
	ev.GrantID = d.MatchedGrantID
	ev.OperationID = iv.call.ID
	ev.Tool = iv.call.Tool
	if !d.Allowed {
		ev.Reason = d.ReasonCode
	}
	ev.Consumed = BoolPtr(consume && diag.Consumed)
	if iv.auth != nil && iv.auth.unavailable == "" {
		ev.AuthorityHash = iv.auth.Hash()
	}
	meta := map[string]any{"grantsResolved": diag.GrantsResolved, "rejectedGrants": diag.RejectedGrants}
	if diag.RejectedGrants == nil {
		meta["rejectedGrants"] = []RejectedGrant{}
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

// InvokeTool is Kernel.InvokeTool within the turn.
func (t *Turn) InvokeTool(ctx context.Context, actx AccessContext, call ToolCall) ToolResult {
	k := t.k
	iv := &invocation{t: t, actx: actx, call: call}
	now := actx.Now
	if err := validContext(&actx); err != nil {
		if _, perr := ParseTimestamp(now); perr != nil {
			now = FormatTimestamp(0)
		}
		return DeniedResult(call, now, ReasonInvalidContext, "the access context does not match the SharedOS contract")
	}
	if err := t.check(actx); err != nil {
		return DeniedResult(call, now, ReasonInvalidContext, err.Error())
	}
	if validIdent("id", call.ID) != nil || validIdent("tool", call.Tool) != nil {
		return iv.finish(ctx, DeniedResult(call, now, ReasonInvalidRequest, "the tool call needs an id and a tool name"), "")
	}
	// 1. trace
	if call.TraceID != actx.TraceID {
		return iv.finish(ctx, DeniedResult(call, now, CodeTraceMismatch, "the call's traceId does not match the context's"), "")
	}
	// 2. authority
	iv.auth = t.Authority(ctx, actx)
	if iv.auth.unavailable != "" {
		return iv.finish(ctx, DeniedResult(call, now, ReasonAuthorityUnavailable,
			"authority could not be loaded for this context; the call was refused"), string(ReasonAuthorityUnavailable))
	}
	// 3. registry
	reg, err := t.registry(ctx, actx)
	if err != nil {
		return iv.finish(ctx, FailedResult(call, now, CodeToolCatalogUnavailable, "the tool catalogue could not be resolved for this context"), "")
	}
	iv.reg = reg
	unavailable := func(cause string) ToolResult {
		return iv.finish(ctx, DeniedResult(call, now, CodeToolUnavailable, fmt.Sprintf("tool %q is not available", call.Tool)), cause)
	}
	// 4. registered
	h := reg.byName[call.Tool]
	if h == nil {
		return unavailable(CauseNotRegistered)
	}
	def := &h.handler.Definition
	// 5. namespace
	if !slices.Contains(actx.EnabledToolNamespaces, def.Namespace) {
		return unavailable(CauseNamespaceDisabled)
	}
	// 6. discoverable
	if d, diag := k.authz.CanDiscover(ctx, iv.auth, actx, def.RequiredCapability, ""); !d.Allowed {
		k.auditAfter(ctx, iv.decisionEvent(def.RequiredCapability, d, diag, false))
		return unavailable(string(d.ReasonCode))
	}
	// 7. arguments
	parsed, perr := parseArguments(&h.handler, call.Arguments)
	if perr != nil {
		return iv.finish(ctx, FailedResult(call, now, CodeInvalidToolArguments, "invalid tool arguments: "+perr.Error()), "")
	}
	pcall := ParsedToolCall{ToolCall: call, Parsed: parsed}
	// 8. requirement
	req, rerr := resolveRequirement(&h.handler, actx, pcall)
	if rerr != nil {
		return iv.finish(ctx, FailedResult(call, now, CodeToolRequirementResolutionFailed, "the tool could not resolve what this call requires"), "")
	}
	// 9. owner
	if req.Resource.Owner != nil && *req.Resource.Owner != actx.Owner {
		d, diag := k.authz.Authorize(ctx, iv.auth, actx, req, AuthorizeOptions{})
		k.auditAfter(ctx, iv.decisionEvent(req, d, diag, false))
		return iv.finish(ctx, DeniedResult(call, now, d.ReasonCode, "the call names a resource of another owner"), "")
	}
	// 10. within the declared ceiling
	if !WithinCeiling(req, def.RequiredCapability, actx.Owner) {
		return iv.finish(ctx, FailedResult(call, now, CodeInvalidToolRequirement, "the tool resolved a requirement outside its declared ceiling"), "")
	}
	// 11. consuming authorization
	d, diag := k.authz.Authorize(ctx, iv.auth, actx, req, AuthorizeOptions{Consume: true})
	if err := k.audit(ctx, iv.decisionEvent(req, d, diag, true)); err != nil {
		return iv.finish(ctx, FailedResult(call, now, CodeAuditUnavailable, "the decision could not be audited; the call was refused"), "")
	}
	if !d.Allowed {
		res := DeniedResult(call, now, d.ReasonCode, denialMessage(d.ReasonCode, req))
		if d.RequiredAuthority != nil {
			res.Error.Details = map[string]any{"requiredAuthority": d.RequiredAuthority}
		}
		return iv.finish(ctx, res, "")
	}
	// 12. execute
	res, ierr := invokeSafely(ctx, &h.handler, actx, pcall)
	if ierr != nil {
		return iv.finish(ctx, FailedResult(call, now, CodeToolExecutionFailed, "the tool failed while executing"), "")
	}
	if res.CallID != call.ID || res.Tool != call.Tool || res.Check() != nil {
		return iv.finish(ctx, FailedResult(call, now, CodeInvalidToolResult, "the tool returned a result that does not match the contract"), "")
	}
	return iv.finish(ctx, res, "")
}

func denialMessage(code ReasonCode, req CapabilityRequirement) string {
	where := req.Resource.Namespace + ":" + JoinPath(req.Resource.Path)
	switch code {
	case ReasonNoMatchingGrant:
		return fmt.Sprintf("no grant allows %q on %s", req.Action, where)
	case ReasonGrantExhausted:
		return fmt.Sprintf("the grant that allows %q on %s has no uses left", req.Action, where)
	case ReasonHostPolicyDenied:
		return "the host's policy ceiling refused this call"
	case ReasonDelegationChainInvalid:
		return "the delegation chain of the matching grant is invalid"
	case ReasonDelegationChainUnverified:
		return "the delegation chain of the matching grant could not be verified"
	case ReasonUsageStoreUnavailable:
		return "the usage store is unavailable; bounded grants cannot be used"
	case ReasonHostPolicyUnavailable:
		return "the host policy is unavailable; the call was refused"
	case ReasonAuthorityUnavailable:
		return "authority is unavailable; the call was refused"
	case ReasonInvalidRequest:
		return "the request is invalid"
	case ReasonInvalidContext:
		return "the access context is invalid"
	}
	return string(code)
}

// WithinCeiling reports whether a resolved requirement lies inside a tool's declared
// ceiling: same action, same resource namespace, same effective owner, and the ceiling's
// path a segment-prefix of the requirement's.
func WithinCeiling(req, ceiling CapabilityRequirement, ctxOwner Address) bool {
	if req.Action != ceiling.Action || req.Resource.Namespace != ceiling.Resource.Namespace {
		return false
	}
	ro, co := ctxOwner, ctxOwner
	if req.Resource.Owner != nil {
		ro = *req.Resource.Owner
	}
	if ceiling.Resource.Owner != nil {
		co = *ceiling.Resource.Owner
	}
	return ro == co && PathWithin(ceiling.Resource.Path, req.Resource.Path)
}

func parseArguments(h *ToolHandler, raw json.RawMessage) (parsed any, err error) {
	trimmed := strings.TrimSpace(string(raw))
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(raw) {
		return nil, errors.New("arguments must be a JSON object")
	}
	if h.ParseArguments == nil {
		return raw, nil
	}
	defer func() {
		if r := recover(); r != nil {
			parsed, err = nil, errors.New("the argument parser failed")
		}
	}()
	return h.ParseArguments(raw)
}

func resolveRequirement(h *ToolHandler, actx AccessContext, call ParsedToolCall) (req CapabilityRequirement, err error) {
	if h.ResolveRequirement == nil {
		return cloneRequirement(h.Definition.RequiredCapability), nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = errors.New("resolveRequirement panicked")
		}
	}()
	req, err = h.ResolveRequirement(cloneContext(actx), call)
	if err == nil {
		err = req.Validate()
	}
	return req, err
}

func invokeSafely(ctx context.Context, h *ToolHandler, actx AccessContext, call ParsedToolCall) (res ToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tool panicked: %v", r)
		}
	}()
	return h.Invoke(ctx, cloneContext(actx), call)
}
