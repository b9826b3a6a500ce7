// Package api is the one interface every surface of sharedos consumes — the command
// line, the MCP server, the scenario runner and, later, HTTP /v1 — with its request and
// result types: [Service] is every operation a surface offers. pkg/host implements it
// over the embedded kernel (the embedded backend); a remote client implements it over
// HTTP. A surface translates between its own protocol and this package and reaches
// nothing below it.
//
// The types are wire contracts: they reuse the kernel's contract types (ToolDefinition,
// ToolResult, AuditEvent, AccessContext, …), which are the JSON of spec 10/20, and add
// what a surface shows beside them. This package must never import a store, a plane or
// the host: a remote client that imports it must not link any of them (an import test at
// the module's root holds it to that).
package api

import (
	"context"
	"encoding/json"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Service is every operation a surface offers, for the access context the service was
// opened for (the embedded backend: the run's one turn; a remote backend: the principal
// of its credentials).
//
// Errors: a refusal is a decision, never an error — Invoke returns a denied ToolResult
// and Explain an explanation that is not allowed. An operation that could not be carried
// out returns an error; an *Error says what kind (its Code) and how to fix it (its
// Hint), and any other error is the backend's own (the embedded backend's open errors,
// which the surface that built it already knows how to report).
type Service interface {
	// Registry returns what the service registers without listing anything: its tools
	// (the planes' and sharedos.escalate; an MCP server's tools are not among them until
	// its list is read) and the tool namespaces of the MCP servers that serve the
	// context's owner. It opens no state.
	Registry(ctx context.Context) (Registry, error)
	// Definition returns the definition of the tool name, or nil when no tool of that
	// name is known. With list, a name in an MCP server's namespace whose list was not
	// read yet is looked up by reading it (which may connect to the server); without,
	// only what is known already is returned.
	Definition(ctx context.Context, name string, list bool) (*kernel.ToolDefinition, error)
	// ListTools returns the usable catalogue of the context: registered, namespace
	// enabled, discoverable under a grant (the three gates). It is audited.
	ListTools(ctx context.Context) (ToolList, error)
	// ListAllTools returns every registered tool with the first gate that hides it,
	// sorted by name.
	ListAllTools(ctx context.Context) ([]ToolStatus, error)
	// Invoke calls a tool once, fully authorized and audited.
	Invoke(ctx context.Context, req InvokeRequest) (InvokeResult, error)
	// Explain is a dry run of Invoke: every gate that would refuse the call, the
	// requirement, the candidate grants and the fixes. It consumes nothing, executes
	// nothing and mints no identity.
	Explain(ctx context.Context, req InvokeRequest) (Explanation, error)
	// Namespaces returns the tool namespace catalogue of the context's (world, owner)
	// and its effective selection. It is audited.
	Namespaces(ctx context.Context) (Namespaces, error)
	// UpdateNamespaces applies one patch to the stored selection of the context's
	// (world, owner) and returns what took effect. A malformed patch is an *Error with
	// CodeInvalidRequest and nothing is stored.
	UpdateNamespaces(ctx context.Context, u kernel.ToolNamespaceUpdate) (NamespacesUpdated, error)
	// Escalate records an escalation of the context (the turn ends escalated); an
	// escalation its own authorization refuses is a denied result, not an error.
	Escalate(ctx context.Context, req EscalateRequest) (EscalateResult, error)
	// ListEscalations returns recorded escalations, the most recently recorded first.
	ListEscalations(ctx context.Context, q EscalationQuery) ([]EscalationRecord, error)
	// ResolveEscalation records the reviewer's decision on one escalation, with its
	// audit event. It grants nothing.
	ResolveEscalation(ctx context.Context, req ResolveRequest) (Resolved, error)
	// QueryAudit returns the audit events q selects, the latest instant first (ties: the
	// newest recorded first), or the oldest recorded first with q.Oldest.
	QueryAudit(ctx context.Context, q AuditQuery) ([]kernel.AuditEvent, error)
	// ExportAudit returns the recorded tool calls q selects (tool.invoked events; q.Types
	// is ignored), oldest first, the newest q.Limit of them, each with the authorization
	// records of its call: what a scenario that replays them needs.
	ExportAudit(ctx context.Context, q AuditQuery) ([]AuditCall, error)
}

// Registry is what a service registers before anything is listed.
type Registry struct {
	// Tools are the registered tools' definitions, in registration order.
	Tools []kernel.ToolDefinition `json:"tools"`
	// ProvidedNamespaces are the tool namespaces of the MCP servers that serve the
	// context's owner: their tools are known once their lists are read.
	ProvidedNamespaces []string `json:"providedNamespaces"`
	// Context is the access context the service acts in, as far as it is known before
	// anything is opened (its enabled namespaces are read with the state).
	Context kernel.AccessContext `json:"context"`
}

// ToolList is the usable catalogue of a context.
type ToolList struct {
	Tools []kernel.ToolDefinition `json:"tools"`
	// Context is the access context the catalogue was listed for.
	Context kernel.AccessContext `json:"context"`
	// SelectionSource says where the context's enabled namespaces came from, as in
	// Namespaces.
	SelectionSource string `json:"selectionSource,omitempty"`
}

// ToolStatus is one registered tool and the first gate that hides it (gate and cause
// only when it is not usable): one row of `tools list --all`.
type ToolStatus struct {
	Tool      string       `json:"tool"`
	Namespace string       `json:"namespace"`
	Source    string       `json:"source"`
	ReadWrite string       `json:"readWrite"`
	Usable    bool         `json:"usable"`
	Gate      kernel.Gate  `json:"gate,omitempty"`
	Cause     kernel.Cause `json:"cause,omitempty"`
	// Definition is the tool's whole definition.
	Definition kernel.ToolDefinition `json:"-"`
}

// InvokeRequest is one tool call: the tool and its arguments. The call id and the trace
// are the service's (the embedded backend: the run's) unless ID and TraceID name them (a
// remote caller's ToolCall); a TraceID other than the context's is refused by the kernel
// (trace_mismatch). The instant is always the service's.
type InvokeRequest struct {
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	ID        string          `json:"id,omitempty"`
	TraceID   string          `json:"traceId,omitempty"`
}

// InvokeResult is a call's result and the definition of the tool it named (nil when no
// tool of that name is known), which a surface uses to say how to change a refusal.
type InvokeResult struct {
	Result     kernel.ToolResult      `json:"result"`
	Definition *kernel.ToolDefinition `json:"definition,omitempty"`
}

// Namespaces is the tool namespace catalogue of a (world, owner), its effective
// selection (which may name namespaces without tools) and where the selection came from:
// "flag" (a selection for this run only), "stored", or "default" (nothing stored yet).
// It is the JSON of `namespaces list`.
type Namespaces struct {
	Namespaces         []kernel.ToolNamespaceDescriptor `json:"namespaces"`
	Summary            kernel.ToolNamespaceSummary      `json:"summary"`
	EffectiveSelection []string                         `json:"effectiveSelection"`
	World              string                           `json:"world"`
	Owner              kernel.Address                   `json:"owner"`
	SelectionSource    string                           `json:"selectionSource"`
}

// NamespacesUpdated is what a namespace patch took effect as: the catalogue and the
// stored selection (SelectionSource "stored"), and whether the context runs under a
// selection of its own that the patch did not change (RunSelectionKept: the embedded
// backend's --namespaces).
type NamespacesUpdated struct {
	Namespaces
	RunSelectionKept bool `json:"runSelectionKept,omitempty"`
}

// EscalateRequest asks for a human decision: the call of sharedos.escalate the context
// made. The call's tool is always sharedos.escalate; its id and trace are the service's
// when empty, as Invoke's, and its instant is always the service's.
type EscalateRequest struct {
	Call kernel.ToolCall `json:"call"`
	// IfOffered is the turn's driver's branch (the CLI's `tools call sharedos.escalate`,
	// HTTP's POST /v1/tools/escalate): the escalation is recorded only when the
	// context's catalogue offers sharedos.escalate; when it does not, nothing is recorded
	// and the result is NotOffered (the caller then invokes the call as any other tool,
	// and the kernel refuses it).
	IfOffered bool `json:"ifOffered,omitempty"`
}

// EscalateResult is a recorded escalation, or — when the escalation's own authorization
// refused it — the denied result of the call (Escalation is then nil), or, for an
// IfOffered request whose context's catalogue does not offer sharedos.escalate,
// NotOffered (both nil).
type EscalateResult struct {
	Escalation *kernel.Escalation `json:"escalation,omitempty"`
	Denied     *kernel.ToolResult `json:"denied,omitempty"`
	NotOffered bool               `json:"notOffered,omitempty"`
}

// EscalationQuery selects escalations: those of the context's (world, owner), or with
// All of every world and owner; Status ("" any), CallID ("" any) and Limit (0: all)
// narrow it.
type EscalationQuery struct {
	All    bool   `json:"all,omitempty"`
	Status string `json:"status,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	// CallID keeps the escalation recorded for this escalate call's id ("": any): how a
	// surface that latched a call finds its escalation's number and resolution.
	CallID string `json:"callId,omitempty"`
}

// EscalationRecord is one recorded escalation with where it was asked and its
// resolution: the JSON of `escalations list`. It is the kernel's contract type, the one
// the store keeps (one definition).
type EscalationRecord = kernel.EscalationRecord

// EscalationResolution is a reviewer's decision on an escalation (the kernel's type). It
// grants nothing.
type EscalationResolution = kernel.EscalationResolution

// Escalation statuses (the kernel's).
const (
	EscalationPending  = kernel.EscalationPending
	EscalationApproved = kernel.EscalationApproved
	EscalationDenied   = kernel.EscalationDenied
)

// ResolveRequest decides escalation ID: Status is EscalationApproved or
// EscalationDenied; the reviewer is the context's owner.
type ResolveRequest struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

// Resolved is an escalation after a resolution; Unchanged is true when it was already
// resolved with the same decision (nothing was recorded again).
type Resolved struct {
	Record    EscalationRecord `json:"escalation"`
	Unchanged bool             `json:"unchanged,omitempty"`
}

// AuditQuery selects audit events. Zero fields select everything.
type AuditQuery struct {
	Types    []string `json:"types,omitempty"`
	Outcomes []string `json:"outcomes,omitempty"`
	Tool     string   `json:"tool,omitempty"`
	// Operation is a call id, or a prefix of exactly one among the events the other
	// fields (but Owner and Actor) select; an ambiguous prefix is an *Error with
	// CodeInvalidRequest naming the matches.
	Operation string         `json:"operation,omitempty"`
	TraceID   string         `json:"traceId,omitempty"`
	World     string         `json:"world,omitempty"`
	Owner     kernel.Address `json:"owner,omitzero"`
	Actor     kernel.Address `json:"actor,omitzero"`
	// SinceMillis keeps events at or after this Unix millisecond (0: no bound).
	SinceMillis int64 `json:"sinceMillis,omitempty"`
	// Limit caps the events (0: all).
	Limit int `json:"limit,omitempty"`
	// Oldest orders by recording, the oldest first (QueryAudit).
	Oldest bool `json:"oldest,omitempty"`
	// AfterSeq makes QueryAudit a cursor read: only the events recorded after the one
	// of this sequence number (0: from the first), in recording order (Oldest is
	// implied), each with its Seq set — the last one's Seq is the AfterSeq of the next
	// read, which then misses nothing recorded since. Nil: no cursor, and no event
	// carries a Seq. ExportAudit ignores it.
	AfterSeq *int64 `json:"afterSeq,omitempty"`
}

// AuditCall is one recorded tool call (its tool.invoked event) and the
// authorization.checked records of its call, oldest first.
type AuditCall struct {
	Call   kernel.AuditEvent   `json:"call"`
	Checks []kernel.AuditEvent `json:"checks"`
}

// Error codes of an *Error: the codes of the wire's error envelope.
const (
	CodeInvalidRequest         = "invalid_request"
	CodeStateUnavailable       = "state_unavailable"
	CodeToolCatalogUnavailable = "tool_catalog_unavailable"
	CodeConfigInvalid          = "config_invalid"
	CodeInternalError          = "internal_error"
	CodeNotFound               = "not_found"
)

// Error is an operation that could not be carried out: Code says what kind, Message is
// one lowercase line naming what is wrong, Hint how to fix it ("" when none), Err the
// cause.
type Error struct {
	Code    string
	Message string
	Hint    string
	Err     error
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
