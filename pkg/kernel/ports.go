package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// GrantSource loads the grants of one context: exactly those with the context's
// namespaceId, subject == actor and issuer == authority, in a stable order, with no policy
// applied. An error means an outage; the kernel then refuses with authority_unavailable.
// A source that returns grants outside that scope is treated as an outage too.
type GrantSource interface {
	LoadGrants(ctx context.Context, actx AccessContext) ([]CapabilityGrant, error)
}

// GrantSnapshot is the grants of one context as a SnapshotGrantSource keeps them.
type GrantSnapshot struct {
	Grants []CapabilityGrant
	// Hash, when non-empty, is HashGrants(Grants) as the source computed it once for its
	// snapshot; the kernel uses it as the authority hash instead of recomputing it. It is
	// audit identity only and never affects a decision.
	Hash string
}

// SnapshotGrantSource is an optional extension of GrantSource for sources that keep a
// parsed snapshot (grant files cached by content digest): the kernel calls
// LoadGrantSnapshot instead of LoadGrants and reuses the snapshot's authority hash. The
// kernel still validates every grant against the contract: a cache may skip parsing,
// never the contract check.
type SnapshotGrantSource interface {
	GrantSource
	LoadGrantSnapshot(ctx context.Context, actx AccessContext) (GrantSnapshot, error)
}

// DelegationChainResolver looks up a delegation ancestor by (world, grant id) over every
// trusted grant, including ones not issued to the actor. It returns (nil, nil) when the
// grant does not exist and an error only for an outage.
type DelegationChainResolver interface {
	ResolveGrant(ctx context.Context, namespaceID, grantID string) (*CapabilityGrant, error)
}

// UsageKey names the use counter of one bounded grant: its world, issuer, subject and
// id. Two grants that share an id but not a world, an issuer or a subject never share
// uses (a grant id is unique only within what one issuer gives one subject).
type UsageKey struct {
	World   string
	Issuer  Address
	Subject Address
	GrantID string
}

// UsageKeyOf is the usage key of g.
func UsageKeyOf(g *CapabilityGrant) UsageKey {
	return UsageKey{World: g.NamespaceID, Issuer: g.Issuer, Subject: g.Subject, GrantID: g.ID}
}

// UsageStore counts the uses of bounded grants (maxUses) per UsageKey. TryConsume
// atomically spends one use when fewer than max were spent and reports whether it did;
// GetUsage reads the count. An error is an outage and refuses the call with
// usage_store_unavailable.
type UsageStore interface {
	TryConsume(ctx context.Context, key UsageKey, max int64) (bool, error)
	GetUsage(ctx context.Context, key UsageKey) (int64, error)
}

// ReservingUsageStore is an optional extension of UsageStore for the reference's order of
// a consuming decision (ADR 0029): reserve the use, write the decision's audit record,
// commit both together, and only then run the tool — so a process killed anywhere in
// between leaves either the spent use and its record, or neither. ReserveUse reserves
// one use when fewer than max were spent (ok=false, no reservation, when they all were).
type ReservingUsageStore interface {
	UsageStore
	ReserveUse(ctx context.Context, key UsageKey, max int64) (UsageReservation, bool, error)
}

// UsageReservation is a reserved use. Commit appends ev (when non-nil) and spends the use
// in one transaction; an error spends nothing and records nothing. Release gives the use
// back. Exactly one of them is called.
type UsageReservation interface {
	Commit(ctx context.Context, ev *AuditEvent) error
	Release() error
}

// HostCeiling lets a host narrow (never widen) an allow. Narrow sees the allow decision
// for one candidate grant and returns it unchanged to keep it, or a decision with
// Allowed=false to refuse that grant (the code becomes host_policy_denied; a metadata
// object is kept). An error, or an allow naming another grant, is a malfunction and
// refuses with host_policy_unavailable.
type HostCeiling interface {
	Narrow(allow AuthorizationDecision, req CapabilityRequirement, actx AccessContext) (AuthorizationDecision, error)
}

// GrantVerifier is an optional extra eligibility check per grant (false or error rejects
// that grant with reason "verifier").
type GrantVerifier interface {
	Verify(ctx context.Context, grant *CapabilityGrant, actx AccessContext) (bool, error)
}

// RevocationCheck is the answer of a GrantRevocationSource.
type RevocationCheck struct {
	Revision        string
	RevokedGrantIDs []string
}

// GrantRevocationSource is an optional live revocation check, asked once per candidate
// with the leaf id first and its ancestors after. Revoked ids must be a subset of the ids
// asked; an error or a malformed answer refuses immediately with authority_unavailable.
type GrantRevocationSource interface {
	Check(ctx context.Context, actx AccessContext, grantIDs []string) (RevocationCheck, error)
}

// ToolNamespaceSettingsStore persists each (world, owner)'s enabled tool namespaces.
// ApplyUpdate applies the patch atomically against fresh state, may narrow it by host
// policy (never widen), persists it and returns the effective selection.
type ToolNamespaceSettingsStore interface {
	ApplyUpdate(ctx context.Context, actx AccessContext, update ToolNamespaceUpdate) ([]string, error)
}

// AuditedSettingsStore is an optional extension of ToolNamespaceSettingsStore that
// stores a selection and appends its audit event in one transaction, so that a namespace
// change is never recorded without its effect nor made without its record: event is
// called with the selection that takes effect, and its result is appended with it (an
// error from either rolls both back).
type AuditedSettingsStore interface {
	ToolNamespaceSettingsStore
	ApplyUpdateAudited(ctx context.Context, actx AccessContext, update ToolNamespaceUpdate, event func(selection []string) AuditEvent) ([]string, error)
}

// AuditSink receives audit events. Append must not keep ev after it returns unless it
// copies it. An error on a pre-effect event refuses the operation (audit_unavailable).
type AuditSink interface {
	Append(ctx context.Context, ev AuditEvent) error
}

// WriteAheadAuditSink is an AuditSink with a second, cheaper way to write an event: one
// that is atomic and visible to every reader when AppendWriteAhead returns, like Append,
// but need not be forced to stable storage yet (a power failure before the sink's next
// durable write may lose it; a crash of the process may not). The kernel uses it only for
// the records of work that changed nothing, so that a read-only operation forces nothing
// to the disk:
//
//   - write-ahead: authority.resolved, tool.catalog.listed, tool.namespace.catalog.listed,
//     an authorization.checked that spent no use (discovery, denials, non-consuming
//     decisions), and the tool.invoked record of a call that changed nothing (refused
//     before it ran, or of a read-class tool);
//   - durable (Append): everything else — an authorization.checked that spent a use, the
//     tool.invoked record of a tool that may have written (any class but read) once it
//     ran, a namespace selection update, an escalation — each written before the effect
//     is reported, as ADR 0029's reserve → audit → commit order requires.
//
// An error of either refuses or fails exactly as an Append error would.
type WriteAheadAuditSink interface {
	AuditSink
	AppendWriteAhead(ctx context.Context, ev AuditEvent) error
}

// WriteAheadBatchAuditSink is a WriteAheadAuditSink that can write several write-ahead
// events in one transaction: all of them or none. With it, the decision record of a
// read-class tool's call (when it spent no use) is not written before the read but
// together with the call's tool.invoked record, after the read and before its result is
// returned: a read changes nothing until its output is reported, and an output is never
// reported without both records (when the batch fails the call fails audit_unavailable
// and its output is withheld).
type WriteAheadBatchAuditSink interface {
	WriteAheadAuditSink
	AppendWriteAheadBatch(ctx context.Context, evs []AuditEvent) error
}

// ContextToolProvider supplies the tools of exactly one trusted context (a user's MCP
// servers, say). It is called once per operation (or turn) and must never mutate shared
// state. An error fails the whole catalogue with tool_catalog_unavailable, unless it is
// a *ProviderUnavailableError naming the provider's own tool namespaces: then only those
// namespaces are unavailable (see ProviderUnavailableError).
type ContextToolProvider interface {
	ID() string
	ListTools(ctx context.Context, actx AccessContext) ([]ToolHandler, error)
}

// ErrDuplicateRegistration is returned when a tool or provider name is registered twice.
var ErrDuplicateRegistration = errors.New("a tool or tool provider of this name is already registered")

// ErrMissingRegistration is returned when an optional port a method needs is not configured.
var ErrMissingRegistration = errors.New("the port this operation needs is not configured")

// ErrToolCatalogUnavailable is returned (wrapped) when the per-context catalogue cannot be
// resolved: a provider failed or two tools share a name.
var ErrToolCatalogUnavailable = errors.New("the tool catalogue could not be resolved for this context")

// CatalogError is a per-context catalogue that could not be resolved: a provider failed
// (Cause is its error), returned an invalid definition, or two tools share a name. It
// matches ErrToolCatalogUnavailable. Its message names the provider, never the cause: a
// provider's error is host detail, written to the audit trail (catalogError), not shown
// to callers.
type CatalogError struct {
	Provider string
	Cause    error
	msg      string
}

func (e *CatalogError) Error() string { return e.msg }

// Is reports ErrToolCatalogUnavailable.
func (e *CatalogError) Is(target error) bool { return target == ErrToolCatalogUnavailable }

// Unwrap returns the provider's error, if any.
func (e *CatalogError) Unwrap() error { return e.Cause }

// ProviderUnavailableError is the error a ContextToolProvider returns to confine its
// failure to its own tool namespaces (a gateway server that cannot be started, reached
// or listed in time): the turn's catalogue is resolved without its tools, each of
// Namespaces is reported unavailable (the listing's audit record names it with the
// cause, `tools list --all` shows it), a call of a tool named "<namespace>.…" fails
// tool_catalog_unavailable naming the provider, and every other tool is decided as
// usual. A provider may confine its failure only to namespaces no other tool of the
// catalogue uses: when one does, or Namespaces is empty, the whole catalogue fails as
// for any other error.
type ProviderUnavailableError struct {
	Namespaces []string
	Cause      error
}

func (e *ProviderUnavailableError) Error() string {
	if e.Cause == nil {
		return "tool namespaces " + strings.Join(e.Namespaces, ", ") + " are unavailable"
	}
	return e.Cause.Error()
}

// Unwrap returns the provider's cause.
func (e *ProviderUnavailableError) Unwrap() error { return e.Cause }

// UnavailableNamespace is a tool namespace whose provider could not list its tools in
// this turn (see ProviderUnavailableError).
type UnavailableNamespace struct {
	Namespace string
	Provider  string
	Cause     error
}

// Message is the one line a caller is shown: the namespace and its provider, never the
// cause (host detail, in the audit trail).
func (u *UnavailableNamespace) Message() string {
	return fmt.Sprintf("tool namespace %q is unavailable: context tool provider %q failed to resolve its catalog", u.Namespace, u.Provider)
}

// AuditCause is what the audit trail records: the message and the provider's error.
func (u *UnavailableNamespace) AuditCause() string {
	if u.Cause == nil {
		return u.Message()
	}
	return u.Message() + ": " + u.Cause.Error()
}

// catalogCause is what the audit trail records of a catalogue failure: the message, and
// the provider's error when there is one.
func catalogCause(err error) string {
	var ce *CatalogError
	if errors.As(err, &ce) && ce.Cause != nil {
		return ce.msg + ": " + ce.Cause.Error()
	}
	return err.Error()
}

// ErrInvalidUpdate is returned (wrapped in a *ContractError) for a malformed namespace patch.
var ErrInvalidUpdate = errors.New("tool namespace update does not match the SharedOS contract")
