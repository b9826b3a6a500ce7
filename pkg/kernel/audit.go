package kernel

// AuditEventType names what an audit event records.
type AuditEventType string

// Audit event types.
const (
	EventAuthorityResolved         AuditEventType = "authority.resolved"
	EventAuthorizationChecked      AuditEventType = "authorization.checked"
	EventToolInvoked               AuditEventType = "tool.invoked"
	EventToolCatalogListed         AuditEventType = "tool.catalog.listed"
	EventEscalationRequested       AuditEventType = "escalation.requested"
	EventNamespaceCatalogListed    AuditEventType = "tool.namespace.catalog.listed"
	EventNamespaceSelectionUpdated AuditEventType = "tool.namespace.selection.updated"
	EventResourceInvoked           AuditEventType = "resource.invoked"
	EventTurnEnded                 AuditEventType = "turn.ended"
	EventEscalationAutoDecided     AuditEventType = "escalation.auto_decided"
	EventMessageSent               AuditEventType = "message.sent"
)

// AuditOutcome is the outcome an audit event records.
type AuditOutcome string

// Audit outcomes.
const (
	OutcomeAllowed     AuditOutcome = "allowed"
	OutcomeDenied      AuditOutcome = "denied"
	OutcomeSucceeded   AuditOutcome = "succeeded"
	OutcomeFailed      AuditOutcome = "failed"
	OutcomeEscalated   AuditOutcome = "escalated"
	OutcomeInterrupted AuditOutcome = "interrupted"
)

// AuditEvent is one append-only audit record (version "1"). At is the context's now;
// RecordedAt, when set, the wall clock's.
type AuditEvent struct {
	Version string         `json:"version"`
	ID      string         `json:"id"`
	Type    AuditEventType `json:"type"`
	Outcome AuditOutcome   `json:"outcome"`
	At      string         `json:"at"`
	// RecordedAt is the wall-clock instant the event was written, when the kernel has
	// a clock (Config.Clock); At is the turn's instant, which a host may pin.
	RecordedAt         string             `json:"recordedAt,omitempty"`
	TraceID            string             `json:"traceId"`
	NamespaceID        string             `json:"namespaceId"`
	Actor              Address            `json:"actor"`
	Authority          Address            `json:"authority"`
	Owner              Address            `json:"owner"`
	Purpose            string             `json:"purpose"`
	Resource           *ResourceRef       `json:"resource,omitempty"`
	Action             string             `json:"action,omitempty"`
	GrantID            string             `json:"grantId,omitempty"`
	AuthorityHash      string             `json:"authorityHash,omitempty"`
	OperationID        string             `json:"operationId,omitempty"`
	Tool               string             `json:"tool,omitempty"`
	Reason             ErrorCode          `json:"reason,omitempty"`
	Source             string             `json:"source,omitempty"`
	Cause              Cause              `json:"cause,omitempty"`
	FailClosed         bool               `json:"failClosed,omitempty"`
	Consumed           *bool              `json:"consumed,omitempty"`
	EndedBy            string             `json:"endedBy,omitempty"`
	RequestedAuthority *CapabilityRequest `json:"requestedAuthority,omitempty"`
	Metadata           map[string]any     `json:"metadata,omitempty"`
	// Seq is the store's sequence number of the event (its order of recording), set
	// only on the events of a cursor read (store.AuditFilter.WithSeq,
	// api.AuditQuery.AfterSeq); the kernel never sets it and it is no part of the
	// recorded event.
	Seq int64 `json:"seq,omitempty"`
}

// Escalation is a recorded ask for a human decision. Nothing is granted while it is pending.
type Escalation struct {
	Reason             string             `json:"reason"`
	Reviewer           Address            `json:"reviewer"`
	RequestedAt        string             `json:"requestedAt"`
	Status             string             `json:"status"`
	RequestedAuthority *CapabilityRequest `json:"requestedAuthority,omitempty"`
}

// Gate names the gate of the pipeline a refusal came from. It is the one gate vocabulary
// of every surface: results, audit classification, explain, `tools list --all`.
type Gate string

// The gates (spec 20 §8).
const (
	// GateEnvelope: the turn's envelope (outside the catalogue, step or call limits).
	GateEnvelope Gate = "envelope"
	// GateRegistration: the tool is not registered, or its tool namespace is off.
	GateRegistration Gate = "registration"
	// GateRequest: the call or its context is malformed, or names another owner.
	GateRequest Gate = "request"
	// GateInfrastructure: a port failed; the refusal is fail-closed, not a policy answer.
	GateInfrastructure Gate = "infrastructure"
	// GateCeiling: the host ceiling refused what a grant allowed.
	GateCeiling Gate = "ceiling"
	// GateGrant: no grant allows it (none matches, exhausted, broken delegation).
	GateGrant Gate = "grant"
)

// GateOf is the code map of spec 20 §8: the gate an authorization or operation code
// belongs to, or "" for a code the kernel does not classify (a host classifies its own).
func GateOf[C ReasonCode | ErrorCode](c C) Gate {
	code := ReasonCode(c)
	switch {
	case IsInfrastructureDenial(code):
		return GateInfrastructure
	case code == ReasonHostPolicyDenied:
		return GateCeiling
	case code == ReasonInvalidContext, code == ReasonInvalidRequest, ErrorCode(code) == CodeTraceMismatch, ErrorCode(code) == CodeActorMismatch,
		ErrorCode(code) == CodeReceiverMismatch, ErrorCode(code) == CodeMessageContextMismatch:
		return GateRequest
	case code == ReasonNoMatchingGrant, code == ReasonGrantExhausted, code == ReasonDelegationChainInvalid:
		return GateGrant
	}
	return ""
}

// ClassifyRefusal names the gate a denied audit event came from, or "" when the event is
// not a refusal or its code is one the kernel does not know (hosts classify their own).
func ClassifyRefusal(ev AuditEvent) Gate {
	if ev.Outcome != OutcomeDenied || ev.Reason == "" {
		return ""
	}
	if ev.Type == EventToolInvoked && ev.Source == "envelope" {
		return GateEnvelope
	}
	if ev.Cause == CauseNotRegistered || ev.Cause == CauseNamespaceDisabled {
		return GateRegistration
	}
	if ev.FailClosed {
		return GateInfrastructure
	}
	if ev.Reason == CodeToolUnavailable {
		if ev.Cause == "" {
			return ""
		}
		return GateOf(ReasonCode(ev.Cause))
	}
	return GateOf(ev.Reason)
}

// ToolNamespaceDescriptor is one entry of the namespace catalogue.
type ToolNamespaceDescriptor struct {
	Namespace string   `json:"namespace"`
	Sources   []string `json:"sources"`
	ToolCount int      `json:"toolCount"`
	Enabled   bool     `json:"enabled"`
}

// ToolNamespaceSummary counts the catalogue's entries.
type ToolNamespaceSummary struct {
	Total    int `json:"total"`
	Enabled  int `json:"enabled"`
	Disabled int `json:"disabled"`
}

// ToolNamespaceCatalog lists every tool namespace registered for a context, enabled or not.
type ToolNamespaceCatalog struct {
	Namespaces []ToolNamespaceDescriptor `json:"namespaces"`
	Summary    ToolNamespaceSummary      `json:"summary"`
}

// ToolNamespaceUpdate is the patch of the namespace control plane.
type ToolNamespaceUpdate struct {
	Enable  []string `json:"enable,omitempty"`
	Disable []string `json:"disable,omitempty"`
}
