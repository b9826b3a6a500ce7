package kernel

import (
	"context"
	"slices"
	"sort"
)

// CallExplanation is the result of ExplainCall: what InvokeTool would do with a call, and
// every gate that would refuse it.
type CallExplanation struct {
	Tool string `json:"tool"`
	// Allowed is true when the call would run (no gate refuses).
	Allowed bool `json:"allowed"`
	// Status, Code, Gate and Cause are what InvokeTool would return (Code, Gate and Cause
	// empty when allowed; Cause only for a tool_unavailable refusal).
	Status ToolStatus `json:"status"`
	Code   ErrorCode  `json:"code,omitempty"`
	Gate   Gate       `json:"gate,omitempty"`
	Cause  Cause      `json:"cause,omitempty"`
	// Findings lists every refusing gate in pipeline order; the first is the one a call
	// would report. Explain goes on past a refusal wherever the plan does, so that a tool
	// hidden for want of a grant still has its exact requirement resolved.
	Findings       []Finding              `json:"findings"`
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

// ExplainCall is a dry run of InvokeTool in every sense: the same plan, settled through
// the same ports without consuming a use; nothing is executed and nothing is audited (not
// even the turn's authority.resolved). A catalogue that cannot be resolved is a finding
// (tool_catalog_unavailable), as it is a result for InvokeTool.
func (t *Turn) ExplainCall(ctx context.Context, call ToolCall) *CallExplanation {
	st := t.state(ctx, false)
	p, _ := planCall(st, call) // a dry run never prepares: the preparation is dropped unread
	findings, disc, exec := p.resolve(func(_ Stage, ev *Evaluation) Settled {
		d, diag := t.k.authz.Settle(ctx, st.auth, t.actx, ev, false)
		return Settled{Decision: d, Diagnostic: diag}
	}, true)
	if findings == nil {
		findings = []Finding{}
	}
	e := &CallExplanation{Tool: call.Tool, Status: StatusSucceeded, Findings: findings, Definition: p.Tool,
		Registered: p.Tool != nil, NamespaceOn: p.NamespaceEnabled, ArgumentsError: p.ArgumentsError, Requirement: p.Requirement}
	if p.Tool != nil {
		e.Namespace = p.Tool.Namespace
	}
	if disc != nil {
		e.Discovery, e.DiscoveryDiag = &disc.Decision, &disc.Diagnostic
	}
	if exec != nil {
		e.Decision, e.DecisionDiag = &exec.Decision, &exec.Diagnostic
	}
	if len(findings) > 0 {
		f := findings[0]
		e.Status, e.Code, e.Gate, e.Cause = f.Status, f.Code, f.Gate, f.Cause
	}
	e.Allowed = len(findings) == 0
	return e
}

// ToolGateStatus reports, for one registered tool of the turn's catalogue, the first gate
// that hides it from the context (Gate and Cause empty when usable).
type ToolGateStatus struct {
	Definition ToolDefinition
	Usable     bool
	Gate       Gate
	Cause      Cause
}

// AllTools lists every registered tool of the context with the first gate that hides it,
// sorted by name: the namespace off (registration, namespace_disabled), an authority
// outage (infrastructure), then no discovering grant (the gate and code of the discovery
// decision: grant, ceiling or infrastructure). A namespace whose provider could not list
// its tools (ProviderUnavailableError) is one row, "<namespace>.*", gate registration,
// cause tool_catalog_unavailable. It is a dry run: nothing is audited.
func (t *Turn) AllTools(ctx context.Context) ([]ToolGateStatus, error) {
	st := t.state(ctx, false)
	if st.regErr != nil {
		return nil, st.regErr
	}
	if st.reg == nil { // authority unavailable: the registry is still listed
		if st.reg, st.regErr = t.registry(ctx); st.regErr != nil {
			return nil, st.regErr
		}
	}
	out := make([]ToolGateStatus, 0, len(st.reg.names))
	var ev Evaluation
	for _, n := range st.reg.names {
		def := st.reg.byName[n].handler.Definition
		s := ToolGateStatus{Definition: def}
		switch {
		case !slices.Contains(t.actx.EnabledToolNamespaces, def.Namespace):
			s.Gate, s.Cause = GateRegistration, CauseNamespaceDisabled
		case st.auth.unavailable != "":
			s.Gate, s.Cause = GateInfrastructure, CauseOf(ReasonAuthorityUnavailable)
		default:
			d := t.discover(ctx, st.auth, &def, &ev, 0)
			if d.Allowed {
				s.Usable = true
			} else if f := authorizationFinding(StageDiscovery, nil, d); f != nil {
				s.Gate, s.Cause = f.Gate, f.Cause
			}
		}
		out = append(out, s)
	}
	for _, u := range st.reg.unavailable {
		out = append(out, unavailableStatus(&u))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Definition.Name < out[j].Definition.Name })
	return out, nil
}

// unavailableStatus is the row of an unavailable namespace in AllTools: tool
// "<namespace>.*", gate registration, cause tool_catalog_unavailable, and a description
// naming the provider and its failure (AllTools is the operator's view; the cause is
// host detail the operator needs).
func unavailableStatus(u *UnavailableNamespace) ToolGateStatus {
	return ToolGateStatus{
		Definition: ToolDefinition{Name: u.Namespace + ".*", Namespace: u.Namespace, Description: u.AuditCause()},
		Gate:       GateRegistration,
		Cause:      Cause(CodeToolCatalogUnavailable),
	}
}

// String returns the code as a string.
func (c ReasonCode) String() string { return string(c) }
