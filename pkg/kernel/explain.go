package kernel

import (
	"context"
	"slices"
)

// GateFinding is one gate that would refuse a call.
type GateFinding struct {
	Gate    RefusalGate `json:"gate"`
	Code    ReasonCode  `json:"code"`
	Cause   string      `json:"cause,omitempty"`
	Message string      `json:"message"`
}

// CallExplanation is the result of ExplainCall: what InvokeTool would do with a call, and
// every gate that would refuse it.
type CallExplanation struct {
	Tool string `json:"tool"`
	// Allowed is true when the call would run (no gate refuses).
	Allowed bool `json:"allowed"`
	// Status and Code are what InvokeTool would return (Code empty when allowed); Cause is
	// the hidden cause of a tool_unavailable refusal.
	Status ToolStatus `json:"status"`
	Code   ReasonCode `json:"code,omitempty"`
	Cause  string     `json:"cause,omitempty"`
	// Findings lists every refusing gate in pipeline order; the first is the one a call
	// would report. Explain goes on past a refusal wherever it still can, so that a tool
	// hidden for want of a grant still has its exact requirement resolved.
	Findings       []GateFinding          `json:"findings"`
	Definition     *ToolDefinition        `json:"-"`
	Registered     bool                   `json:"registered"`
	Namespace      string                 `json:"namespace,omitempty"`
	NamespaceOn    bool                   `json:"namespaceEnabled"`
	ArgumentsError string                 `json:"argumentsError,omitempty"`
	Requirement    *CapabilityRequirement `json:"requirement,omitempty"`
	Discovery      *AuthorizationDecision `json:"discovery,omitempty"`
	DiscoveryDiag  *Diagnostic            `json:"discoveryDiagnostic,omitempty"`
	Decision       *AuthorizationDecision `json:"decision,omitempty"`
	DecisionDiag   *Diagnostic            `json:"decisionDiagnostic,omitempty"`
}

func (e *CallExplanation) add(gate RefusalGate, code ReasonCode, cause, msg string, status ToolStatus) {
	if len(e.Findings) == 0 {
		e.Status, e.Code, e.Cause = status, code, cause
	}
	e.Findings = append(e.Findings, GateFinding{Gate: gate, Code: code, Cause: cause, Message: msg})
}

// ExplainCall runs the InvokeTool pipeline as a dry run: nothing is consumed, nothing is
// executed, and no decision or invocation is audited (only the turn's authority
// resolution, once per turn, as for any operation). It returns an error only when the catalogue cannot
// be resolved (ErrToolCatalogUnavailable) or the context is invalid.
func (t *Turn) ExplainCall(ctx context.Context, actx AccessContext, call ToolCall) (*CallExplanation, error) {
	if err := validContext(&actx); err != nil {
		return nil, err
	}
	if err := t.check(actx); err != nil {
		return nil, err
	}
	k := t.k
	e := &CallExplanation{Tool: call.Tool, Status: StatusSucceeded, Findings: []GateFinding{}}
	if call.TraceID != actx.TraceID {
		e.add(GateRequest, CodeTraceMismatch, "", "the call's traceId does not match the context's", StatusDenied)
	}
	auth := t.Authority(ctx, actx)
	if auth.unavailable != "" {
		e.add(GateInfrastructure, ReasonAuthorityUnavailable, ReasonAuthorityUnavailable.String(),
			"authority could not be loaded ("+auth.unavailable+")", StatusDenied)
		return e, nil
	}
	reg, err := t.registry(ctx, actx)
	if err != nil {
		return nil, err
	}
	h := reg.byName[call.Tool]
	if h == nil {
		e.add(GateRegistration, CodeToolUnavailable, CauseNotRegistered, "no tool of this name is registered for this context", StatusDenied)
		return e, nil
	}
	def := h.handler.Definition
	e.Definition, e.Registered, e.Namespace = &def, true, def.Namespace
	e.NamespaceOn = slices.Contains(actx.EnabledToolNamespaces, def.Namespace)
	if !e.NamespaceOn {
		e.add(GateRegistration, CodeToolUnavailable, CauseNamespaceDisabled, "tool namespace "+def.Namespace+" is not enabled", StatusDenied)
	}
	dd, ddiag := k.authz.CanDiscover(ctx, auth, actx, def.RequiredCapability, "")
	e.Discovery, e.DiscoveryDiag = &dd, &ddiag
	if !dd.Allowed {
		gate := gateForCode(string(dd.ReasonCode))
		if gate == "" {
			gate = GateGrant
		}
		e.add(gate, CodeToolUnavailable, string(dd.ReasonCode), "no grant makes this tool discoverable ("+string(dd.ReasonCode)+")", StatusDenied)
	}
	parsed, perr := parseArguments(&h.handler, call.Arguments)
	if perr != nil {
		e.ArgumentsError = perr.Error()
		e.add(GateRequest, CodeInvalidToolArguments, "", "invalid tool arguments: "+perr.Error(), StatusFailed)
		return e, nil
	}
	pcall := ParsedToolCall{ToolCall: call, Parsed: parsed}
	req, rerr := resolveRequirement(&h.handler, actx, pcall)
	if rerr != nil {
		e.add(GateRequest, CodeToolRequirementResolutionFailed, "", "the tool could not resolve what this call requires", StatusFailed)
		return e, nil
	}
	e.Requirement = &req
	if req.Resource.Owner != nil && *req.Resource.Owner != actx.Owner {
		d, diag := k.authz.Authorize(ctx, auth, actx, req, AuthorizeOptions{})
		e.Decision, e.DecisionDiag = &d, &diag
		e.add(GateRequest, d.ReasonCode, "", "the call names a resource of another owner", StatusDenied)
		return e, nil
	}
	if !WithinCeiling(req, def.RequiredCapability, actx.Owner) {
		e.add(GateRequest, CodeInvalidToolRequirement, "", "the tool resolved a requirement outside its declared ceiling", StatusFailed)
		return e, nil
	}
	d, diag := k.authz.Authorize(ctx, auth, actx, req, AuthorizeOptions{})
	e.Decision, e.DecisionDiag = &d, &diag
	if !d.Allowed {
		gate := gateForCode(string(d.ReasonCode))
		e.add(gate, d.ReasonCode, "", denialMessage(d.ReasonCode, req), StatusDenied)
	}
	e.Allowed = len(e.Findings) == 0
	return e, nil
}

// String returns the code as a string.
func (c ReasonCode) String() string { return string(c) }

// ToolGateStatus reports, for one registered tool of the turn's catalogue, the first gate that
// hides it from the context ("" when usable).
type ToolGateStatus struct {
	Definition ToolDefinition
	Usable     bool
	Gate       string // "namespace" or "grant" (or "infrastructure" on an outage)
	Cause      string // namespace_disabled, or the discovery decision's code
}

// AllTools lists every registered tool of the context with the first gate that hides it,
// sorted by name: namespace off first, then no discovering grant. It is what an operator
// needs to see why a tool is missing; no decision is audited.
func (t *Turn) AllTools(ctx context.Context, actx AccessContext) ([]ToolGateStatus, error) {
	if err := validContext(&actx); err != nil {
		return nil, err
	}
	if err := t.check(actx); err != nil {
		return nil, err
	}
	reg, err := t.registry(ctx, actx)
	if err != nil {
		return nil, err
	}
	auth := t.Authority(ctx, actx)
	out := make([]ToolGateStatus, 0, len(reg.names))
	for _, n := range reg.names {
		def := reg.byName[n].handler.Definition
		s := ToolGateStatus{Definition: def}
		switch {
		case !slices.Contains(actx.EnabledToolNamespaces, def.Namespace):
			s.Gate, s.Cause = "namespace", CauseNamespaceDisabled
		case auth.unavailable != "":
			s.Gate, s.Cause = "infrastructure", string(ReasonAuthorityUnavailable)
		default:
			d, _ := t.k.authz.CanDiscover(ctx, auth, actx, def.RequiredCapability, "")
			if d.Allowed {
				s.Usable = true
			} else if IsInfrastructureDenial(d.ReasonCode) {
				s.Gate, s.Cause = "infrastructure", string(d.ReasonCode)
			} else {
				s.Gate, s.Cause = "grant", string(d.ReasonCode)
			}
		}
		out = append(out, s)
	}
	return out, nil
}
