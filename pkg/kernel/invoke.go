package kernel

// This file holds the invocation path: InvokeTool settles a plan, audits and executes it,
// and hands the call's prepared value (Resolution.Prepare) to the tool.

import (
	"context"
	"errors"
	"fmt"
)

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
	p, hooks := planCall(st, call)
	// A read-class tool changes nothing until its output is reported, so with a sink that
	// can batch, its decision record (when it spent no use) is written together with its
	// tool.invoked record in one write-ahead transaction after the read and before the
	// result is returned; if that fails the output is withheld (audit_unavailable).
	batch, _ := k.cfg.Audit.(WriteAheadBatchAuditSink)
	deferOK := batch != nil && p.handler != nil && p.handler.Definition.ReadWrite == ClassRead
	var auditErr, admitErr error
	var pending *AuditEvent
	decided := false // a refusal's decision record was written
	findings, _, _ := p.resolve(func(stage Stage, ev *Evaluation) Settled {
		if stage == StageAuthorization {
			if hooks.Admit != nil {
				// admitted before anything is spent (Resolution.Admit); a call that
				// would be refused anyway is settled below as usual, its refusal audited
				if d, diag := k.authz.Settle(ctx, st.auth, t.actx, ev, false); d.Allowed {
					if admitErr = admitSafely(ctx, hooks.Admit); admitErr != nil {
						return Settled{Decision: d, Diagnostic: diag}
					}
				}
			}
			d, diag, rec, err := t.settleConsuming(ctx, st.auth, call, ev, deferOK)
			auditErr, pending = err, rec
			decided = err == nil && rec == nil && !d.Allowed
			return Settled{Decision: d, Diagnostic: diag}
		}
		d, diag := k.authz.Settle(ctx, st.auth, t.actx, ev, false)
		if k.cfg.Audit != nil && (stage != StageDiscovery || !d.Allowed) {
			// A refusal is answered only once its record is written (every refusal
			// reaches audit): a record that cannot be written turns the answer into
			// failed audit_unavailable, like an authorization's below.
			if err := t.auditWriteAhead(ctx, t.decisionEvent(st.auth, call, ev.Requirement, d, diag, false)); err != nil {
				if k.cfg.OnAuditError != nil {
					k.cfg.OnAuditError(err)
				}
				auditErr = err
			} else if !d.Allowed {
				decided = true
			}
		}
		return Settled{Decision: d, Diagnostic: diag}
	}, false)
	now := t.actx.Now
	var res ToolResult
	ran := false
	switch {
	case errors.Is(auditErr, ErrSpendClaimLost):
		res = FailedResult(call, now, CodeSpendClaimLost, "another attempt of this request took it over; this attempt spent nothing")
		res.Gate = GateInfrastructure
	case auditErr != nil:
		res = FailedResult(call, now, CodeAuditUnavailable, "the decision could not be audited; the call was refused")
		res.Gate = GateInfrastructure
	case len(findings) > 0:
		res = findings[0].Result(call, now)
	case admitErr != nil:
		var refused *ResolutionRefusedError
		if errors.As(admitErr, &refused) {
			res = DeniedResult(call, now, refused.Code, refused.Message)
		} else {
			res = FailedResult(call, now, CodeToolExecutionFailed, "the tool could not check the call before spending its use")
		}
		res.Gate = GateRequest
	default:
		res, ran = t.execute(ctx, p, hooks.Prepare), true
	}
	if ran {
		// The effect is done (or cut short): its records are written even when the
		// caller's context was cancelled meanwhile (an interrupted call is audited).
		ctx = context.WithoutCancel(ctx)
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
	if err := t.finish(ctx, st, p, &res, ran, ran && p.handler.Definition.ReadWrite != ClassRead); err != nil && !ran && !decided &&
		(res.Error == nil || res.Error.Code != CodeAuditUnavailable) {
		// A refusal with no decision record (refused before any authorization, such as
		// an unknown tool or a disabled namespace): its tool.invoked record is its only
		// trace, so it is not answered as a refusal without it.
		res = FailedResult(call, now, CodeAuditUnavailable, "the refusal could not be audited; the call was refused")
		res.Gate = GateInfrastructure
	}
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
	if diag.ClaimLost {
		// another attempt holds the request now: it decides and records the call, this
		// one records nothing
		return d, diag, nil, ErrSpendClaimLost
	}
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

// execute runs the planned, authorized call and checks what the tool returned. It calls
// the preparation of the call's resolution (Resolution.Prepare) once, and hands its value
// to Invoke with the parsed call the plan was resolved from.
func (t *Turn) execute(ctx context.Context, p *Plan, prepare preparation) ToolResult {
	call, now := p.Call, t.actx.Now
	parsed := p.parsed
	if prepare != nil {
		v, err := prepareSafely(ctx, prepare)
		if err != nil {
			return FailedResult(call, now, CodeToolExecutionFailed, "the tool failed while preparing the call")
		}
		parsed.Prepared = v
	}
	res, err := invokeSafely(ctx, p.handler, t.actx, parsed)
	if errors.Is(ctx.Err(), context.Canceled) && (err != nil || res.Status != StatusSucceeded) {
		// The caller cancelled the call (an interrupt): whatever the tool made of it
		// (a transport error, its own code), the result says so.
		r := FailedResult(call, now, CodeCancelled, "the call was interrupted before it completed; it may have taken effect in part")
		r.Error.Retryable = BoolPtr(true)
		return r
	}
	if err != nil {
		return FailedResult(call, now, CodeToolExecutionFailed, "the tool failed while executing")
	}
	if res.CallID != call.ID || res.Tool != call.Tool || res.Check() != nil {
		return FailedResult(call, now, CodeInvalidToolResult, "the tool returned a result that does not match the contract")
	}
	res.Gate, res.Cause = "", ""
	return res
}

func invokeSafely(ctx context.Context, h *ToolHandler, actx AccessContext, call ParsedToolCall) (res ToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("tool panicked: %v", r)
		}
	}()
	return h.Invoke(ctx, cloneContext(actx), call)
}

func admitSafely(ctx context.Context, admit func(context.Context) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("admit panicked: %v", r)
		}
	}()
	return admit(ctx)
}

func prepareSafely(ctx context.Context, prepare preparation) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("prepare panicked: %v", r)
		}
	}()
	return prepare(ctx)
}
