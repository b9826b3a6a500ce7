package kernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Stage is one step of the invocation pipeline (spec 20 §5), in pipeline order.
type Stage int

// The stages of the invocation pipeline, in order.
const (
	StageCall          Stage = iota // the call names an id and a tool
	StageTrace                      // the call's trace is the context's
	StageAuthority                  // the turn's grants loaded
	StageCatalogue                  // the per-context registry resolved
	StageRegistration               // the tool is registered
	StageNamespace                  // its tool namespace is enabled
	StageDiscovery                  // some grant can discover its declared bound
	StageArguments                  // the arguments parse
	StageRequirement                // the requirement resolves from the arguments
	StageOwner                      // the requirement names the context's owner
	StageDeclaredBound              // the requirement lies inside the declared bound
	StageAuthorization              // a grant allows the requirement
)

var stageNames = [...]string{"call", "trace", "authority", "catalogue", "registration", "namespace", "discovery",
	"arguments", "requirement", "owner", "declared_bound", "authorization"}

// String names the stage.
func (s Stage) String() string {
	if s < 0 || int(s) >= len(stageNames) {
		return fmt.Sprintf("stage(%d)", int(s))
	}
	return stageNames[s]
}

// MarshalJSON writes the stage's name.
func (s Stage) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// UnmarshalJSON reads a stage's name (a remote client reading an explanation); an
// unknown name is an error.
func (s *Stage) UnmarshalJSON(data []byte) error {
	var name string
	if err := json.Unmarshal(data, &name); err != nil {
		return err
	}
	for i, n := range stageNames {
		if n == name {
			*s = Stage(i)
			return nil
		}
	}
	return fmt.Errorf("unknown stage %q", name)
}

// Finding is one gate's refusal of a call: the stage and gate it came from, the result
// status and code a call would get, the hidden cause of a tool_unavailable refusal, and
// an operator-facing message.
type Finding struct {
	Gate    Gate       `json:"gate"`
	Code    ErrorCode  `json:"code"`
	Cause   Cause      `json:"cause,omitempty"`
	Message string     `json:"message"`
	Stage   Stage      `json:"stage"`
	Status  ToolStatus `json:"status"`
	// RequiredAuthority is what a no_matching_grant execution refusal lacked.
	RequiredAuthority *CapabilityRequest `json:"-"`
}

// Settled is an authorization finished by Settle: the decision and what it looked at.
type Settled struct {
	Decision   AuthorizationDecision
	Diagnostic Diagnostic
}

// step is one evaluated stage of a plan: a pure refusal, or an authorization to settle.
type step struct {
	stage    Stage
	finding  *Finding
	pending  *Evaluation
	terminal bool // nothing after this step was evaluated
}

// Plan is the pure evaluation of one call against a turn's state (its context, authority
// and registry): every stage of the pipeline in order, each either passed, refused (a
// Finding), or an authorization Evaluation still to settle through the ports. Planning
// calls no port and has no side effects; the tool's own argument parser and requirement
// resolver are treated as pure functions of the call. InvokeTool settles the plan
// (consuming), audits and executes it; ExplainCall settles it without consuming and
// renders it. Both therefore make one and the same decision.
type Plan struct {
	Call ToolCall
	// Tool is the registered definition (nil when not registered or not reached).
	Tool *ToolDefinition
	// NamespaceEnabled says whether the tool's namespace is enabled for the context.
	NamespaceEnabled bool
	// Requirement is what the arguments require (nil when not reached).
	Requirement *CapabilityRequirement
	// ArgumentsError is why the arguments did not parse ("" when they did or were not reached).
	ArgumentsError string
	// Discovery and Execution are the pure authorizations of the declared bound and of
	// the requirement (nil when not reached).
	Discovery, Execution *Evaluation

	steps       []step
	handler     *ToolHandler
	parsed      ParsedToolCall
	catalogHash string
	unavailable *UnavailableNamespace // the call's tool is in this unavailable namespace

	// storage for the pointers above, so that a plan is one allocation
	tool                 ToolDefinition
	requirement          CapabilityRequirement
	discEval, execEval   Evaluation
	discovery, execution Settled
	stepBuf              [6]step
}

// turnState is what a plan is evaluated against; its effectful parts (authority, registry)
// were resolved by the turn beforehand.
type turnState struct {
	actx    AccessContext
	instant int64 // actx.Now, parsed once per turn
	wall    int64 // the wall-clock floor of effectful decisions (0: none; dry runs)
	// auditErr is why the turn's authority.resolved record could not be written: the
	// audit trail is down, and a call is refused for that, not for want of authority
	auditErr error
	auth     *Authority
	reg      *registry
	regErr   error
}

// planCall evaluates call against st. It is pure. hooks are the call's resolution's
// Prepare and Admit (zero when none or when the call is refused before or at the
// requirement): the plan does not hold them, so that only the caller that keeps them —
// InvokeTool, which admits before it spends and hands Prepare to execute — can ever run
// them; the dry runs discard them.
func planCall(st *turnState, call ToolCall) (p *Plan, hooks Resolution) {
	p = &Plan{Call: call}
	p.steps = p.stepBuf[:0]
	refuse := func(stage Stage, gate Gate, status ToolStatus, code ErrorCode, cause Cause, msg string, terminal bool) {
		p.steps = append(p.steps, step{stage: stage, terminal: terminal,
			finding: &Finding{Stage: stage, Gate: gate, Status: status, Code: code, Cause: cause, Message: msg}})
	}
	if validIdent("id", call.ID) != nil || validIdent("tool", call.Tool) != nil {
		refuse(StageCall, GateRequest, StatusDenied, ErrorCodeOf(ReasonInvalidRequest), "", "the tool call needs an id and a tool name", true)
		return p, Resolution{}
	}
	if call.TraceID != st.actx.TraceID {
		refuse(StageTrace, GateRequest, StatusDenied, CodeTraceMismatch, "", "the call's traceId does not match the context's", false)
	}
	if st.auditErr != nil {
		refuse(StageAuthority, GateInfrastructure, StatusFailed, CodeAuditUnavailable, "",
			"the audit trail could not be written ("+st.auditErr.Error()+"); the call was refused", true)
		return p, Resolution{}
	}
	if st.auth.unavailable != "" {
		refuse(StageAuthority, GateInfrastructure, StatusDenied, ErrorCodeOf(ReasonAuthorityUnavailable), CauseOf(ReasonAuthorityUnavailable),
			"authority could not be loaded for this context ("+st.auth.unavailable+"); the call was refused", true)
		return p, Resolution{}
	}
	if st.regErr != nil {
		refuse(StageCatalogue, GateInfrastructure, StatusFailed, CodeToolCatalogUnavailable, "",
			"the tool catalogue could not be resolved for this context: "+st.regErr.Error(), true)
		return p, Resolution{}
	}
	p.catalogHash = st.reg.hash
	h := st.reg.byName[call.Tool]
	if h == nil {
		if u := st.reg.unavailableFor(call.Tool); u != nil {
			p.unavailable = u
			refuse(StageCatalogue, GateRegistration, StatusFailed, CodeToolCatalogUnavailable, "", u.Message(), true)
			return p, Resolution{}
		}
		refuse(StageRegistration, GateRegistration, StatusDenied, CodeToolUnavailable, CauseNotRegistered,
			"no tool of this name is registered for this context", true)
		return p, Resolution{}
	}
	p.handler = &h.handler
	p.tool = h.handler.Definition
	p.Tool = &p.tool
	def := &p.tool
	p.NamespaceEnabled = slices.Contains(st.actx.EnabledToolNamespaces, def.Namespace)
	if !p.NamespaceEnabled {
		refuse(StageNamespace, GateRegistration, StatusDenied, CodeToolUnavailable, CauseNamespaceDisabled,
			"tool namespace "+def.Namespace+" is not enabled", false)
	}
	evaluateInto(&p.discEval, st.auth, &st.actx, st.instant, st.instant, st.wall, def.RequiredCapability, true)
	p.Discovery = &p.discEval
	p.steps = append(p.steps, step{stage: StageDiscovery, pending: p.Discovery})

	parsed, perr := parseArguments(p.handler, call.Arguments)
	if perr != nil {
		p.ArgumentsError = perr.Error()
		refuse(StageArguments, GateRequest, StatusFailed, CodeInvalidToolArguments, "", "invalid tool arguments: "+perr.Error(), true)
		return p, Resolution{}
	}
	p.parsed = ParsedToolCall{ToolCall: call, Parsed: parsed}
	res, rerr := resolveRequirement(p.handler, st.actx, p.parsed)
	var refused *ResolutionRefusedError
	if errors.As(rerr, &refused) {
		refuse(StageRequirement, GateRequest, StatusDenied, refused.Code, "", refused.Message, true)
		return p, Resolution{}
	}
	if rerr != nil {
		refuse(StageRequirement, GateRequest, StatusFailed, CodeToolRequirementResolutionFailed, "",
			"the tool could not resolve what this call requires", true)
		return p, Resolution{}
	}
	req := res.Requirement
	p.requirement = req
	p.Requirement = &p.requirement
	evaluateInto(&p.execEval, st.auth, &st.actx, st.instant, st.instant, st.wall, req, false)
	p.Execution = &p.execEval
	if req.Resource.Owner != nil && *req.Resource.Owner != st.actx.Owner {
		// The authorizer's pre-check refuses it (invalid_request); it is settled and
		// audited like any authorization, without consuming.
		p.steps = append(p.steps, step{stage: StageOwner, pending: p.Execution, terminal: true})
		return p, Resolution{}
	}
	if !WithinDeclaredBound(req, def.RequiredCapability, st.actx.Owner) {
		refuse(StageDeclaredBound, GateRequest, StatusFailed, CodeInvalidToolRequirement, "",
			"the tool resolved a requirement outside its declared bound", true)
		return p, Resolution{}
	}
	p.steps = append(p.steps, step{stage: StageAuthorization, pending: p.Execution})
	return p, Resolution{Prepare: res.Prepare, Admit: res.Admit}
}

// preparation is a Resolution's Prepare.
type preparation = func(ctx context.Context) (any, error)

// resolve walks the plan's steps in order, deciding each pending authorization with
// settle. With all unset it stops at the first refusal (InvokeTool); with all set it goes
// on wherever the plan does (explain). It returns the findings in pipeline order and the
// settled discovery and execution authorizations (nil when not settled).
func (p *Plan) resolve(settle func(Stage, *Evaluation) Settled, all bool) (findings []Finding, discovery, execution *Settled) {
	for _, s := range p.steps {
		if !all && len(findings) > 0 {
			break
		}
		if s.finding != nil {
			findings = append(findings, *s.finding)
			continue
		}
		out := settle(s.stage, s.pending)
		if s.stage == StageDiscovery {
			p.discovery = out
			discovery = &p.discovery
		} else {
			p.execution = out
			execution = &p.execution
		}
		if f := authorizationFinding(s.stage, p.Requirement, out.Decision); f != nil {
			findings = append(findings, *f)
		}
	}
	return findings, discovery, execution
}

// authorizationFinding is the refusal a settled authorization gives its stage, or nil.
func authorizationFinding(stage Stage, req *CapabilityRequirement, d AuthorizationDecision) *Finding {
	if d.Allowed {
		return nil
	}
	gate := GateOf(d.ReasonCode)
	if gate == "" {
		gate = GateGrant
	}
	switch stage {
	case StageDiscovery:
		return &Finding{Stage: stage, Gate: gate, Status: StatusDenied, Code: CodeToolUnavailable, Cause: CauseOf(d.ReasonCode),
			Message: "no grant makes this tool discoverable (" + string(d.ReasonCode) + ")"}
	case StageOwner:
		return &Finding{Stage: stage, Gate: GateRequest, Status: StatusDenied, Code: ErrorCodeOf(d.ReasonCode),
			Message: "the call names a resource of another owner"}
	}
	return &Finding{Stage: stage, Gate: gate, Status: StatusDenied, Code: ErrorCodeOf(d.ReasonCode),
		Message: denialMessage(d.ReasonCode, *req), RequiredAuthority: d.RequiredAuthority}
}

// Result is the ToolResult a call refused by f gets, carrying f's gate and cause.
func (f *Finding) Result(call ToolCall, now string) ToolResult {
	msg := f.Message
	if f.Code == CodeToolUnavailable {
		msg = fmt.Sprintf("tool %q is not available", call.Tool)
	}
	var res ToolResult
	if f.Status == StatusDenied {
		res = DeniedResult(call, now, f.Code, msg)
	} else {
		res = FailedResult(call, now, f.Code, msg)
	}
	if f.RequiredAuthority != nil {
		res.Error.Details = map[string]any{"requiredAuthority": f.RequiredAuthority}
	}
	res.Gate, res.Cause = f.Gate, f.Cause
	return res
}

func denialMessage(code ReasonCode, req CapabilityRequirement) string {
	where := req.Resource.Namespace + ":" + JoinPath(req.Resource.Path)
	switch code {
	case ReasonNoMatchingGrant:
		return fmt.Sprintf("no grant allows %q on %s", req.Action, where)
	case ReasonGrantExhausted:
		return fmt.Sprintf("the grant that allows %q on %s has no uses left", req.Action, where)
	case ReasonHostPolicyDenied:
		return "the host's policy ceiling refused this call"
	case ReasonDelegationChainInvalid:
		return "the delegation chain of the matching grant is invalid"
	case ReasonDelegationChainUnverified:
		return "the delegation chain of the matching grant could not be verified"
	case ReasonUsageStoreUnavailable:
		return "the usage store is unavailable; a grant with bounded uses cannot be used"
	case ReasonHostPolicyUnavailable:
		return "the host policy is unavailable; the call was refused"
	case ReasonAuthorityUnavailable:
		return "authority is unavailable; the call was refused"
	case ReasonInvalidRequest:
		return "the request is invalid"
	case ReasonInvalidContext:
		return "the access context is invalid"
	}
	return string(code)
}

// WithinDeclaredBound reports whether a resolved requirement lies inside a tool's declared
// bound (its requiredCapability): same action, same resource namespace, same effective
// owner, and the bound's path a segment-prefix of the requirement's.
func WithinDeclaredBound(req, bound CapabilityRequirement, ctxOwner Address) bool {
	if req.Action != bound.Action || req.Resource.Namespace != bound.Resource.Namespace {
		return false
	}
	ro, co := ctxOwner, ctxOwner
	if req.Resource.Owner != nil {
		ro = *req.Resource.Owner
	}
	if bound.Resource.Owner != nil {
		co = *bound.Resource.Owner
	}
	return ro == co && PathWithin(bound.Resource.Path, req.Resource.Path)
}

func parseArguments(h *ToolHandler, raw json.RawMessage) (parsed any, err error) {
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, errors.New("arguments must be a JSON object")
	}
	if h.ParseArguments == nil {
		if !json.Valid(raw) {
			return nil, errors.New("arguments must be a JSON object")
		}
		return raw, nil
	}
	// The tool's parser decodes the arguments (once) and refuses what is not JSON.
	defer func() {
		if r := recover(); r != nil {
			parsed, err = nil, errors.New("the argument parser failed")
		}
	}()
	return h.ParseArguments(raw)
}

// resolveRequirement runs the handler's resolver (ResolveCall or ResolveRequirement) on
// the parsed call; without one the requirement is the declared bound.
func resolveRequirement(h *ToolHandler, actx AccessContext, call ParsedToolCall) (res Resolution, err error) {
	if h.ResolveRequirement == nil && h.ResolveCall == nil {
		return Resolution{Requirement: cloneRequirement(h.Definition.RequiredCapability)}, nil
	}
	defer func() {
		if r := recover(); r != nil {
			res, err = Resolution{}, errors.New("resolveRequirement panicked")
		}
	}()
	if h.ResolveCall != nil {
		res, err = h.ResolveCall(cloneContext(actx), call)
	} else {
		res.Requirement, err = h.ResolveRequirement(cloneContext(actx), call)
	}
	if err == nil {
		err = res.Requirement.Validate()
	}
	return res, err
}
