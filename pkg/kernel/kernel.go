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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
	"sync/atomic"
	"time"
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
	// MessageTransport and MessageRouter configure messaging (spec 80): with both, the
	// kernel registers messages.request; SendMessage needs the transport alone.
	MessageTransport MessageTransport
	MessageRouter    MessageRequestRouter
	// MessageResolver derives a message's send requirement (default
	// RecipientScopedMessageCapability).
	MessageResolver MessageCapabilityResolver
	// NewMessageID mints the id of a messages.request envelope (default NewMessageID).
	NewMessageID func() string
	// MaxMessagePayload bounds a message's payload in bytes (default DefaultMaxMessagePayload).
	MaxMessagePayload int
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

	sending keyedLocks // SendMessage: one message id sent once at a time
}

// New creates a kernel with cfg's ports.
func New(cfg Config) *Kernel {
	k := &Kernel{cfg: cfg, static: make(map[string]*registered)}
	k.authz = Authorizer{Resolver: cfg.Resolver, Usage: cfg.Usage, Ceiling: cfg.Ceiling,
		Verifier: cfg.Verifier, Revocation: cfg.Revocation}
	if k.cfg.NewID == nil {
		k.cfg.NewID = randomID
	}
	if cfg.MessageTransport != nil && cfg.MessageRouter != nil {
		h := k.messageTool()
		k.static[h.Definition.Name] = &registered{handler: h, digest: digestDefinition(&h.Definition)}
	}
	return k
}

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

// ErrInvalidContext is returned (wrapped) when an access context fails the contract.
var ErrInvalidContext = errors.New("the access context does not match the SharedOS contract")
