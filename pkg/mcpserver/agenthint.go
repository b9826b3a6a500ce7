package mcpserver

import (
	"github.com/sharedos/sharedos/pkg/kernel"
)

// The agent-facing sentences a refusal's text ends with (security issue 20, item 7).
// They say what the agent itself can do. They never tell it to run an operator command:
// an agent with a shell that followed "run 'sharedos explain …'" would reach
// `explain --apply`, which writes grant files. The operator's hint (the CLI's, naming the
// commands) goes to the server's log, and the CLI, `explain` and the audit trail keep
// theirs.
const (
	hintAskEscalate    = "not permitted; if the task needs it, ask a human reviewer with sharedos.escalate (this ends your turn)"
	hintOperatorGrant  = "not permitted; an operator must grant it"
	hintUnavailable    = "this tool is not available in this session; use the tools that tools/list offers"
	hintCeiling        = "the host's policy refuses this call; do not retry it"
	hintOutage         = "the host could not decide (it fails closed); retry later, and report it if it persists"
	hintBadRequest     = "correct the request; the message says what is wrong with it"
	hintContext        = "this session's context is invalid; an operator must fix it"
	hintArguments      = "correct the arguments; the tool's inputSchema in tools/list says what it takes"
	hintCatalogue      = "a tool provider failed; no partial catalogue is served; retry later"
	hintNotTerminated  = "sharedos.escalate ends a turn and is never executed"
	hintTransient      = "the failure is transient; retry the call"
	hintToolFailed     = "the call was allowed but the tool could not complete it; the message says why"
	hintPending        = "make no further tool calls; an operator resolves the escalation"
	hintNoEscalation   = "no further escalation is permitted in this session; end your turn"
	hintAuditUnwritten = "the host could not record the call; retry it"
)

// AgentHint is the one sentence an agent reads last in a refusal's text: what it can do
// about res. escalate says whether this session offers sharedos.escalate: a refusal that a
// grant could lift then says to ask with it; without it, that an operator must grant it —
// naming no command, grant file or grant. A cause is not spelled out (the agent sees it only
// as _meta's code): an unavailable tool is unavailable, whatever hid it.
func AgentHint(res kernel.ToolResult, escalate bool) string {
	if res.Error == nil {
		return ""
	}
	code := res.Error.Code
	if res.Status != kernel.StatusDenied {
		switch code {
		case kernel.CodeInvalidToolArguments:
			return hintArguments
		case kernel.CodeToolCatalogUnavailable:
			return hintCatalogue
		case kernel.CodeEscalationNotTerminated:
			return hintNotTerminated
		case kernel.CodeAuditUnavailable:
			return hintAuditUnwritten
		}
		if res.Error.Retryable != nil && *res.Error.Retryable {
			return hintTransient
		}
		return hintToolFailed
	}
	notPermitted := hintOperatorGrant
	if escalate {
		notPermitted = hintAskEscalate
	}
	switch {
	case code == CodeEscalationPending:
		return hintPending
	case code == kernel.CodeToolUnavailable:
		if res.Cause == kernel.CauseNotRegistered {
			return hintUnavailable
		}
		return hintUnavailable + "; " + notPermitted
	case kernel.IsInfrastructureDenial(code):
		return hintOutage
	case res.Gate == kernel.GateCeiling || code == kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied):
		return hintCeiling
	case code == kernel.ErrorCodeOf(kernel.ReasonInvalidRequest):
		return hintBadRequest
	case code == kernel.ErrorCodeOf(kernel.ReasonInvalidContext) || code == kernel.CodeTraceMismatch:
		return hintContext
	}
	return notPermitted
}
