package kernel

import (
	"context"
	"errors"
	"fmt"
)

// EventEscalationResolved is the audit type of a reviewer's decision on a recorded
// escalation (RecordEscalationResolution).
const EventEscalationResolved AuditEventType = "escalation.resolved"

// The decisions of EscalationDecision.
const (
	EscalationDecisionApproved = "approved"
	EscalationDecisionDenied   = "denied"
)

// EscalationDecision is a reviewer's decision on one recorded escalation, as the kernel
// records it. It grants nothing: authority still comes only from grant sources.
type EscalationDecision struct {
	// Escalation is the store's number of the escalation (the event's metadata
	// "escalation").
	Escalation int64
	// CallID is the id of the escalate call (the event's operationId) and RequestTraceID
	// the trace it was asked in (metadata "requestTraceId").
	CallID, RequestTraceID string
	// Decision is EscalationDecisionApproved or EscalationDecisionDenied.
	Decision string
	// Note is the reviewer's note ("" when none; recorded either way).
	Note string
	// Source is the surface the decision came through ("cli"; the event's source).
	Source string
}

// ErrCatalogueUnavailable is matched by the error of a turn's driver that had to list
// the turn's catalogue (to know whether sharedos.escalate is offered) and could not: the
// host's escalation branch (host.Escalations.EscalateIfOffered) returns it, so that a
// surface that imports only the kernel tells it from a failed record.
var ErrCatalogueUnavailable = errors.New("the tool catalogue is unavailable")

// ErrInvalidDecision is wrapped by RecordEscalationResolution's error when the decision
// is neither approved nor denied; nothing was written.
var ErrInvalidDecision = errors.New("invalid escalation decision")

// RecordEscalationResolution records the reviewer's decision d: it builds the turn's
// escalation.resolved event and hands it to write, which must store the resolution and
// append the event in one transaction (both or neither; store.Escalations'
// ResolveEscalation). The reviewer is the turn's owner: the event's actor, authority and
// owner are all the owner (the person deciding acts on their own behalf, whoever the
// context's actor is). The event carries the turn's audit metadata.
//
// Unlike the kernel's other events it carries no recordedAt: the decision's instant is
// the turn's (at), and the record keeps the shape `escalations resolve` always wrote.
// Nothing is authorized here: the host checked that the turn's (world, owner) is the
// escalation's before calling. It returns the event written; write's error is returned
// wrapped and means nothing was written.
func (t *Turn) RecordEscalationResolution(ctx context.Context, d EscalationDecision, write func(context.Context, AuditEvent) error) (AuditEvent, error) {
	if d.Decision != EscalationDecisionApproved && d.Decision != EscalationDecisionDenied {
		return AuditEvent{}, fmt.Errorf("%w %q: want %s or %s", ErrInvalidDecision, d.Decision, EscalationDecisionApproved, EscalationDecisionDenied)
	}
	actx := t.actx
	ev := t.k.event(actx, EventEscalationResolved, OutcomeSucceeded)
	ev.RecordedAt = ""
	ev.Actor = actx.Owner
	ev.Authority = actx.Owner
	ev.OperationID = d.CallID
	ev.Tool = EscalationToolName
	ev.Source = d.Source
	ev.Metadata = map[string]any{"escalation": d.Escalation, "decision": d.Decision, "note": d.Note, "requestTraceId": d.RequestTraceID}
	ev = t.k.prepare(t.withMeta(ev))
	if err := write(ctx, ev); err != nil {
		return AuditEvent{}, fmt.Errorf("record escalation resolution: %w", err)
	}
	return ev, nil
}

// Escalation statuses: a recorded escalation's (Escalation.Status) and a resolution's.
const (
	EscalationPending  = "pending"
	EscalationApproved = EscalationDecisionApproved
	EscalationDenied   = EscalationDecisionDenied
)

// EscalationRecord is one recorded escalation, the context it was asked in and its
// resolution: the one definition that the store keeps (store.EscalationRecord) and a
// surface shows (api.EscalationRecord, the JSON of `escalations list`) — both are this
// type.
type EscalationRecord struct {
	// ID numbers the escalations of a store (1, 2, …, in recording order); set by the
	// store's reads and resolution, ignored when it is recorded.
	ID int64 `json:"id"`
	Escalation
	World   string  `json:"world"`
	Owner   Address `json:"owner"`
	TraceID string  `json:"traceId"`
	CallID  string  `json:"callId"`
	// Resolution is the reviewer's decision, nil while the escalation is pending. When
	// set, Escalation.Status is its status.
	Resolution *EscalationResolution `json:"resolution,omitempty"`
}

// EscalationResolution is a reviewer's decision on a recorded escalation. It grants
// nothing: authority still comes only from grant sources.
type EscalationResolution struct {
	Status     string  `json:"status"` // EscalationApproved or EscalationDenied
	ResolvedBy Address `json:"resolvedBy"`
	ResolvedAt string  `json:"resolvedAt"`
	Note       string  `json:"note,omitempty"`
}
