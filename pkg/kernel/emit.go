package kernel

// This file holds what the kernel emits: its audit events (the turn's
// authorization.checked and tool.invoked records) and how each is written.

import (
	"context"
	"strconv"
	"unicode/utf8"
)

func (k *Kernel) event(actx AccessContext, typ AuditEventType, outcome AuditOutcome) AuditEvent {
	ev := AuditEvent{Version: "1", ID: k.cfg.NewID(), Type: typ, Outcome: outcome, At: actx.Now,
		TraceID: actx.TraceID, NamespaceID: actx.World, Actor: actx.Actor, Authority: actx.Authority,
		Owner: actx.Owner, Purpose: actx.Purpose}
	if k.cfg.Clock != nil {
		ev.RecordedAt = FormatTimestamp(k.cfg.Clock().UnixMilli())
	}
	return ev
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

// AuditUnavailableKey is the result metadata key set when the call's tool.invoked record
// could not be written after the tool ran: the effect happened, its audit record is
// missing, and the host must say so (the CLI warns and exits non-zero).
const AuditUnavailableKey = "sharedos/auditUnavailable"

// finish writes the call's tool.invoked audit record, durably when the call may have
// changed state (a tool of any class but read ran). When it cannot be written
// OnAuditError is told, and, when the tool ran, the result is marked
// (AuditUnavailableKey). A refusal whose record is missing took no effect, and marking it
// would make the host report an effect that never happened: finish returns the error,
// and InvokeTool answers a refusal that has no other record failed audit_unavailable
// (every refusal reaches audit before it is answered).
func (t *Turn) finish(ctx context.Context, st *turnState, p *Plan, res *ToolResult, ran, durable bool) error {
	k := t.k
	if k.cfg.Audit == nil {
		return nil
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
			return err
		}
		meta := make(map[string]any, len(res.Metadata)+1)
		for key, v := range res.Metadata {
			meta[key] = v
		}
		meta[AuditUnavailableKey] = err.Error()
		res.Metadata = meta
		return err
	}
	return nil
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
	} else if p.unavailable != nil {
		if ev.Metadata == nil {
			ev.Metadata = map[string]any{}
		}
		ev.Metadata["catalogError"] = p.unavailable.AuditCause()
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
