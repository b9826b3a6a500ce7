package kernel

import "context"

// RefuseInEnvelope records and returns the refusal of call by the host's envelope: a
// limit the host holds around the kernel's pipeline (spec 30 §4: the MCP escalation
// latch's escalation_pending, a turn's step or call limits) refuses the call before any
// gate runs. The envelope only ever removes authority: the call is denied, nothing is
// planned, settled or executed, and no grant is consulted or spent. The kernel writes
// the call's tool.invoked record (outcome denied, source "envelope", the code as reason,
// meta merged into the turn's audit metadata), so that a surface never audits on its
// own; ClassifyRefusal names its gate GateEnvelope.
//
// When the record cannot be written the call is still refused, and the result carries
// AuditUnavailableKey as for InvokeTool.
func (t *Turn) RefuseInEnvelope(ctx context.Context, call ToolCall, code ErrorCode, message string, meta map[string]any) ToolResult {
	res := DeniedResult(call, t.actx.Now, code, message)
	res.Gate = GateEnvelope
	k := t.k
	if k.cfg.Audit == nil {
		return res
	}
	ev := k.event(t.actx, EventToolInvoked, OutcomeDenied)
	ev.OperationID = auditSafe(call.ID)
	ev.Tool = call.Tool
	ev.Source = "envelope"
	ev.Reason = code
	ev.Metadata = make(map[string]any, len(meta)+1)
	for key, v := range meta {
		ev.Metadata[key] = v
	}
	if !validToolName(call.Tool) {
		ev.Tool = ""
		ev.Metadata["toolName"] = quoteBounded(call.Tool)
	}
	if err := t.audit(ctx, ev); err != nil {
		if k.cfg.OnAuditError != nil {
			k.cfg.OnAuditError(err)
		}
		res.Metadata = map[string]any{AuditUnavailableKey: err.Error()}
	}
	return res
}
