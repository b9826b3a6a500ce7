package kernel_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// echoTool is a minimal tool over files with an argument-derived requirement.
func echoTool(name, action string) kernel.ToolHandler {
	return kernel.ToolHandler{
		Definition: kernel.ToolDefinition{Name: name, Description: "echo", Namespace: "files", Source: "native",
			ReadWrite: kernel.ClassRead, InputSchema: map[string]any{"type": "object"},
			RequiredCapability: req(action)},
		ParseArguments: func(raw json.RawMessage) (any, error) {
			var a struct {
				Path []string `json:"path"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, err
			}
			if err := kernel.ValidatePath(a.Path); err != nil {
				return nil, err
			}
			return a.Path, nil
		},
		ResolveRequirement: func(actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
			return req(action, call.Parsed.([]string)...), nil
		},
		Invoke: func(_ context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
			return kernel.ToolResult{CallID: call.ID, Tool: call.Tool, Status: kernel.StatusSucceeded, Output: call.Parsed, CompletedAt: actx.Now}, nil
		},
	}
}

func newKernel(t *testing.T, grants []kernel.CapabilityGrant, audit *memAudit, tools ...kernel.ToolHandler) *kernel.Kernel {
	t.Helper()
	cfg := kernel.Config{Grants: &grantStore{grants: grants}, Usage: newMemUsage(), Settings: &memSettings{selection: []string{}}}
	if audit != nil {
		cfg.Audit = audit
	}
	k := kernel.New(cfg)
	for _, h := range tools {
		if err := k.RegisterTool(h); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

func call(tool, args string) kernel.ToolCall {
	return kernel.ToolCall{ID: "call-1", Tool: tool, Arguments: json.RawMessage(args), TraceID: "trace-1", RequestedAt: admitted}
}

func TestInvokePipelineCodes(t *testing.T) {
	g := grant("g", []string{"read"}, kernel.ScopeDescendants, "docs")
	cases := []struct {
		name   string
		mod    func(*kernel.AccessContext, *kernel.ToolCall)
		status kernel.ToolStatus
		code   kernel.ErrorCode
		cause  kernel.Cause
	}{
		{"allowed", nil, kernel.StatusSucceeded, "", ""},
		{"trace mismatch", func(_ *kernel.AccessContext, c *kernel.ToolCall) { c.TraceID = "other" }, kernel.StatusDenied, kernel.CodeTraceMismatch, ""},
		{"not registered", func(_ *kernel.AccessContext, c *kernel.ToolCall) { c.Tool = "files.nope" }, kernel.StatusDenied, kernel.CodeToolUnavailable, kernel.CauseNotRegistered},
		{"namespace disabled", func(a *kernel.AccessContext, _ *kernel.ToolCall) { a.EnabledToolNamespaces = nil }, kernel.StatusDenied, kernel.CodeToolUnavailable, kernel.CauseNamespaceDisabled},
		{"not discoverable", func(_ *kernel.AccessContext, c *kernel.ToolCall) { c.Tool = "t.write" }, kernel.StatusDenied, kernel.CodeToolUnavailable, kernel.Cause(kernel.ReasonNoMatchingGrant)},
		{"arguments not an object", func(_ *kernel.AccessContext, c *kernel.ToolCall) { c.Arguments = json.RawMessage(`[1]`) }, kernel.StatusFailed, kernel.CodeInvalidToolArguments, ""},
		{"arguments rejected", func(_ *kernel.AccessContext, c *kernel.ToolCall) { c.Arguments = json.RawMessage(`{"path":[".."]}`) }, kernel.StatusFailed, kernel.CodeInvalidToolArguments, ""},
		{"outside the grant", func(_ *kernel.AccessContext, c *kernel.ToolCall) { c.Arguments = json.RawMessage(`{"path":["docsx"]}`) }, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant), ""},
		{"invalid context", func(a *kernel.AccessContext, _ *kernel.ToolCall) { a.Purpose = " " }, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonInvalidContext), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			audit := &memAudit{}
			k := newKernel(t, []kernel.CapabilityGrant{g}, audit, echoTool("t.read", "read"), echoTool("t.write", "write"))
			actx := testContext()
			cl := call("t.read", `{"path":["docs","a"]}`)
			if c.mod != nil {
				c.mod(&actx, &cl)
			}
			res := k.InvokeTool(context.Background(), actx, cl)
			if res.Status != c.status {
				t.Fatalf("status %s, want %s (%+v)", res.Status, c.status, res.Error)
			}
			if c.code != "" && res.Error.Code != c.code {
				t.Fatalf("code %s, want %s", res.Error.Code, c.code)
			}
			if res.Error != nil && (res.Error.Retryable == nil || *res.Error.Retryable) {
				t.Fatalf("kernel errors must carry retryable:false")
			}
			if c.name == "invalid context" {
				return
			}
			var invoked *kernel.AuditEvent
			for _, ev := range audit.all() {
				if ev.Type == kernel.EventToolInvoked {
					e := ev
					invoked = &e
				}
			}
			if invoked == nil || invoked.Cause != c.cause || invoked.OperationID != "call-1" {
				t.Fatalf("tool.invoked audit %+v, want cause %q", invoked, c.cause)
			}
		})
	}
}

func TestInvokeToolResultChecks(t *testing.T) {
	g := grant("g", []string{"read"}, kernel.ScopeDescendants)
	bad := echoTool("t.bad", "read")
	bad.Invoke = func(_ context.Context, actx kernel.AccessContext, c kernel.ParsedToolCall) (kernel.ToolResult, error) {
		return kernel.ToolResult{CallID: c.ID, Tool: c.Tool, Status: "maybe", CompletedAt: actx.Now}, nil
	}
	panicky := echoTool("t.panic", "read")
	panicky.Invoke = func(context.Context, kernel.AccessContext, kernel.ParsedToolCall) (kernel.ToolResult, error) {
		panic("secret token")
	}
	wide := echoTool("t.wide", "read")
	wide.Definition.RequiredCapability = req("read", "docs")
	wide.ResolveRequirement = func(kernel.AccessContext, kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
		return req("read", "doc"), nil
	}
	k := newKernel(t, []kernel.CapabilityGrant{g}, nil, bad, panicky, wide)
	for tool, want := range map[string]kernel.ErrorCode{"t.bad": kernel.CodeInvalidToolResult, "t.panic": kernel.CodeToolExecutionFailed, "t.wide": kernel.CodeInvalidToolRequirement} {
		res := k.InvokeTool(context.Background(), testContext(), call(tool, `{"path":["docs"]}`))
		if res.Status != kernel.StatusFailed || res.Error.Code != want {
			t.Errorf("%s: %+v, want failed %s", tool, res, want)
		}
		if strings.Contains(res.Error.Message, "secret") {
			t.Errorf("%s: handler error leaked into the result", tool)
		}
	}
}

func TestRefusalIsAuditedByCallID(t *testing.T) {
	audit := &memAudit{}
	g := grant("g", []string{"read"}, kernel.ScopeDescendants, "docs")
	k := newKernel(t, []kernel.CapabilityGrant{g}, audit, echoTool("t.read", "read"))
	res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["secret"]}`))
	if res.Status != kernel.StatusDenied || res.Error.Details["requiredAuthority"] == nil {
		t.Fatalf("result %+v", res)
	}
	refusal, decision := deniedRecords("call-1", audit.all())
	if refusal == nil || kernel.ClassifyRefusal(*refusal) != kernel.GateGrant ||
		refusal.Reason != kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant) || decision == nil {
		t.Fatalf("refusal %+v, decision %+v", refusal, decision)
	}
	if decision.RequestedAuthority == nil || decision.Consumed == nil {
		t.Fatalf("decision audit lacks requestedAuthority/consumed: %+v", decision)
	}
	if r, d := deniedRecords("other-call", audit.all()); r != nil || d != nil {
		t.Fatal("a call's records are found by its id, never by recency")
	}
}

// deniedRecords finds the denied tool.invoked and authorization.checked records of call
// callID (by operationId).
func deniedRecords(callID string, events []kernel.AuditEvent) (refusal, decision *kernel.AuditEvent) {
	for i := range events {
		ev := &events[i]
		if ev.OperationID != callID || ev.Outcome != kernel.OutcomeDenied {
			continue
		}
		switch ev.Type {
		case kernel.EventToolInvoked:
			refusal = ev
		case kernel.EventAuthorizationChecked:
			decision = ev
		}
	}
	return refusal, decision
}

func TestClassifyRefusal(t *testing.T) {
	cases := []struct {
		ev   kernel.AuditEvent
		want kernel.Gate
	}{
		{kernel.AuditEvent{Outcome: kernel.OutcomeSucceeded, Reason: "x"}, ""},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied}, ""},
		{kernel.AuditEvent{Type: kernel.EventToolInvoked, Outcome: kernel.OutcomeDenied, Reason: kernel.CodeToolUnavailable, Source: "envelope"}, kernel.GateEnvelope},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: kernel.CodeToolUnavailable, Cause: kernel.CauseNotRegistered}, kernel.GateRegistration},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: kernel.CodeToolUnavailable, Cause: kernel.CauseNamespaceDisabled}, kernel.GateRegistration},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant), FailClosed: true}, kernel.GateInfrastructure},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: kernel.CodeToolUnavailable, Cause: "grant_exhausted"}, kernel.GateGrant},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: kernel.CodeToolUnavailable}, ""},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied)}, kernel.GateCeiling},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: kernel.CodeTraceMismatch}, kernel.GateRequest},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: kernel.ErrorCodeOf(kernel.ReasonUsageStoreUnavailable)}, kernel.GateInfrastructure},
		{kernel.AuditEvent{Outcome: kernel.OutcomeDenied, Reason: "host_specific"}, ""},
	}
	for i, c := range cases {
		if got := kernel.ClassifyRefusal(c.ev); got != c.want {
			t.Errorf("case %d: gate %q, want %q", i, got, c.want)
		}
	}
}

func TestEscalation(t *testing.T) {
	audit := &memAudit{}
	g := kernel.CapabilityGrant{ID: "esc", NamespaceID: "world-a", Subject: bob, Issuer: alice, IssuedAt: "2026-08-03T08:00:00.000Z",
		Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "sharedos", Path: []string{"escalation"}}, Actions: []string{"request"}, Scope: kernel.ScopeExact}}}
	k := newKernel(t, []kernel.CapabilityGrant{g}, audit, kernel.EscalationTool())
	actx := testContext()
	actx.EnabledToolNamespaces = []string{"sharedos"}
	tools, err := k.ListTools(context.Background(), actx)
	if err != nil || !kernel.EscalationOffered(tools) {
		t.Fatalf("escalate not offered: %v %v", tools, err)
	}
	res := k.InvokeTool(context.Background(), actx, call(kernel.EscalationToolName, `{"reason":"approve?"}`))
	if res.Status != kernel.StatusFailed || res.Error.Code != kernel.CodeEscalationNotTerminated {
		t.Fatalf("handler result %+v", res)
	}
	esc, err := mustTurn(t, k, actx).RecordEscalation(context.Background(), kernel.EscalationReason(json.RawMessage(`{"reason":"  approve?  "}`)), nil)
	if err != nil || esc.Status != "pending" || esc.Reviewer != alice || esc.Reason != "approve?" {
		t.Fatalf("escalation %+v %v", esc, err)
	}
	evs := audit.all()
	last := evs[len(evs)-1]
	if last.Type != kernel.EventEscalationRequested || last.Outcome != kernel.OutcomeEscalated || last.Reason != kernel.CodeEscalationRequested {
		t.Fatalf("audit %+v", last)
	}
	long := strings.Repeat("a", 511) + "😀" + "tail"
	if r := kernel.EscalationReason(json.RawMessage(`{"reason":"` + long + `"}`)); jscompat.UTF16Len(r) != 511 {
		t.Fatalf("a surrogate pair must not be split: len %d", jscompat.UTF16Len(r))
	}
	if r := kernel.EscalationReason(json.RawMessage(`{"reason":3}`)); !strings.Contains(r, "without saying") {
		t.Fatalf("reason %q", r)
	}
}

func TestNamespaceControlPlane(t *testing.T) {
	k := newKernel(t, nil, nil, echoTool("t.read", "read"), kernel.EscalationTool())
	actx := testContext()
	cat, sel, err := mustTurn(t, k, actx).UpdateToolNamespaces(context.Background(), kernel.ToolNamespaceUpdate{Enable: []string{"sharedos", "ghost"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(sel, ",") != "ghost,sharedos" || cat.Summary.Total != 2 || cat.Summary.Enabled != 1 {
		t.Fatalf("selection %v catalogue %+v", sel, cat)
	}
	for _, bad := range []string{`{}`, `{"enable":[]}`, `{"enable":["a"],"disable":["a"]}`, `{"enable":["a","a"]}`, `{"enable":["a"],"x":1}`, `[]`, `{"enable":"a"}`, `{"enable":[" "]}`} {
		if _, err := kernel.ParseToolNamespaceUpdate([]byte(bad)); !errors.Is(err, kernel.ErrInvalidUpdate) {
			t.Errorf("%s: err %v, want ErrInvalidUpdate", bad, err)
		}
	}
	noStore := kernel.New(kernel.Config{})
	if _, _, err := mustTurn(t, noStore, actx).UpdateToolNamespaces(context.Background(), kernel.ToolNamespaceUpdate{Enable: []string{"a"}}); !errors.Is(err, kernel.ErrMissingRegistration) {
		t.Fatalf("err %v", err)
	}
	got, err := kernel.ApplyToolNamespaceUpdate([]string{"b", "a"}, kernel.ToolNamespaceUpdate{Enable: []string{"c", "a"}, Disable: []string{"b"}})
	if err != nil || strings.Join(got, ",") != "a,c" {
		t.Fatalf("apply %v %v", got, err)
	}
}

func TestRegistration(t *testing.T) {
	k := kernel.New(kernel.Config{})
	if err := k.RegisterTool(echoTool("t.read", "read")); err != nil {
		t.Fatal(err)
	}
	if err := k.RegisterTool(echoTool("t.read", "read")); !errors.Is(err, kernel.ErrDuplicateRegistration) {
		t.Fatalf("err %v", err)
	}
	bad := echoTool("t.bad", "read")
	bad.Definition.Annotations = &kernel.ToolAnnotations{Destructive: kernel.BoolPtr(true)}
	if err := k.RegisterTool(bad); err == nil {
		t.Fatal("a read tool marked destructive must be refused")
	}
	bad = echoTool("bad name!", "read")
	if err := k.RegisterTool(bad); err == nil {
		t.Fatal("an invalid name must be refused")
	}
}

func TestListToolsFailsClosed(t *testing.T) {
	audit := &memAudit{}
	k := kernel.New(kernel.Config{Grants: &grantStore{mode: "throws"}, Audit: audit})
	_ = k.RegisterTool(echoTool("t.read", "read"))
	tools, err := k.ListTools(context.Background(), testContext())
	if err != nil || len(tools) != 0 {
		t.Fatalf("tools %v err %v: an outage must list nothing, without error", tools, err)
	}
	found := false
	for _, ev := range audit.all() {
		if ev.Type == kernel.EventToolCatalogListed && ev.Reason == kernel.ErrorCodeOf(kernel.ReasonAuthorityUnavailable) && ev.FailClosed {
			found = true
		}
	}
	if !found {
		t.Fatal("the withheld catalogue must be audited fail-closed")
	}
}

func TestExplainCall(t *testing.T) {
	g := grant("g", []string{"read"}, kernel.ScopeDescendants, "docs")
	k := newKernel(t, []kernel.CapabilityGrant{g}, nil, echoTool("t.read", "read"), echoTool("t.write", "write"))
	actx := testContext()
	actx.EnabledToolNamespaces = nil
	turn := mustTurn(t, k, actx)
	e := turn.ExplainCall(context.Background(), call("t.write", `{"path":["docs","a"]}`))
	if e.Allowed || len(e.Findings) != 3 || e.Code != kernel.CodeToolUnavailable || e.Cause != kernel.CauseNamespaceDisabled {
		t.Fatalf("explanation %+v", e)
	}
	if e.Requirement == nil || e.Requirement.Action != "write" || kernel.JoinPath(e.Requirement.Resource.Path) != "docs/a" {
		t.Fatalf("requirement %+v: explain must resolve the exact requirement past the hidden gates", e.Requirement)
	}
	all, err := turn.AllTools(context.Background())
	if err != nil || len(all) != 2 || all[0].Gate != kernel.GateRegistration {
		t.Fatalf("all tools %+v %v", all, err)
	}
}

// snapshotSource is a SnapshotGrantSource test double.
type snapshotSource struct{ snap kernel.GrantSnapshot }

func (s snapshotSource) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return nil, errors.New("LoadGrantSnapshot must be preferred")
}

func (s snapshotSource) LoadGrantSnapshot(context.Context, kernel.AccessContext) (kernel.GrantSnapshot, error) {
	return s.snap, nil
}

// TestHashGrantsReference: the authority hash is hex(SHA-256(the JSON array, escaped as
// JSON.stringify, of the sorted canonical JSON of each grant)), whatever the count — below
// and above the count from which the work is shared with a second goroutine, with equal
// grants, and with strings that need escaping.
func TestHashGrantsReference(t *testing.T) {
	t.Parallel()
	reference := func(grants []kernel.CapabilityGrant) string {
		parts := make([]string, len(grants))
		for i := range grants {
			parts[i] = string(kernel.CanonicalGrant(&grants[i]))
		}
		slices.Sort(parts)
		doc, err := json.Marshal(parts)
		if err != nil {
			t.Fatal(err)
		}
		canon, err := kernel.CanonicalJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(canon)
		return hex.EncodeToString(sum[:])
	}
	for _, n := range []int{0, 1, 2, 3, 511, 512, 513, 2001} {
		grants := make([]kernel.CapabilityGrant, n)
		for i := range grants {
			// descending ids, so that neither half arrives sorted; every 7th a repeat
			id := fmt.Sprintf("g-%05d \"q\" \\ \x01 é", n-i)
			if i%7 == 6 {
				id = fmt.Sprintf("g-%05d \"q\" \\ \x01 é", n-i+1)
			}
			grants[i] = grant(id, []string{"read"}, kernel.ScopeDescendants, "docs", fmt.Sprint(i%13))
		}
		if got, want := kernel.HashGrants(grants), reference(grants); got != want {
			t.Fatalf("%d grants: hash %s, want %s", n, got, want)
		}
	}
}

func TestSnapshotGrantSource(t *testing.T) {
	ctx := context.Background()
	actx := testContext()
	g := grant("g", []string{"read"}, kernel.ScopeDescendants)
	want := kernel.NewAuthority([]kernel.CapabilityGrant{g}, actx, 0).Hash()
	if h := kernel.HashGrants([]kernel.CapabilityGrant{g}); h != want {
		t.Fatalf("HashGrants %s, want %s", h, want)
	}
	auth := kernel.ResolveAuthority(ctx, snapshotSource{kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{g}, Hash: "precomputed"}}, actx, 0)
	if auth.Unavailable() != "" || auth.Hash() != "precomputed" {
		t.Fatalf("snapshot authority: %q %q", auth.Unavailable(), auth.Hash())
	}
	bad := g
	bad.IssuedAt = "not a time"
	if u := kernel.ResolveAuthority(ctx, snapshotSource{kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{bad}}}, actx, 0).Unavailable(); u != kernel.AuthorityInvalidGrantMaterial {
		t.Fatalf("an unvalidated snapshot must be validated: %q", u)
	}
	other := g
	other.Subject = carol
	if u := kernel.ResolveAuthority(ctx, snapshotSource{kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{other}}}, actx, 0).Unavailable(); u != kernel.AuthorityGrantScopeMismatch {
		t.Fatalf("the scope check applies to validated snapshots too: %q", u)
	}
	// A validated snapshot whose grant has an unparsable instant still never allows.
	var z kernel.Authorizer
	a := kernel.ResolveAuthority(ctx, snapshotSource{kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{bad}}}, actx, 0)
	if d, _ := z.Authorize(ctx, a, actx, req("read", "x"), kernel.AuthorizeOptions{}); d.Allowed {
		t.Fatalf("allowed with an unparsable issuedAt: %+v", d)
	}
}

// failingAudit refuses events of one type.
type failingAudit struct {
	memAudit
	failType kernel.AuditEventType
}

func (a *failingAudit) Append(ctx context.Context, ev kernel.AuditEvent) error {
	if ev.Type == a.failType {
		return errors.New("audit down")
	}
	return a.memAudit.Append(ctx, ev)
}

// TestAuditFailureRefuses: a pre-effect audit write that fails refuses the operation
// (fail-closed); the tool never runs.
func TestAuditFailureRefuses(t *testing.T) {
	g := grant("g", []string{"read"}, kernel.ScopeDescendants)
	for _, c := range []struct {
		failType kernel.AuditEventType
		status   kernel.ToolStatus
		code     kernel.ErrorCode
	}{
		{kernel.EventAuthorityResolved, kernel.StatusFailed, kernel.CodeAuditUnavailable}, // the real cause, not authority
		{kernel.EventAuthorizationChecked, kernel.StatusFailed, kernel.CodeAuditUnavailable},
	} {
		ran := false
		tool := echoTool("t.read", "read")
		inner := tool.Invoke
		tool.Invoke = func(ctx context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
			ran = true
			return inner(ctx, actx, call)
		}
		k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{g}}, Audit: &failingAudit{failType: c.failType}})
		if err := k.RegisterTool(tool); err != nil {
			t.Fatal(err)
		}
		res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["a"]}`))
		if res.Status != c.status || res.Error.Code != c.code || ran {
			t.Fatalf("%s failing: %+v (ran=%v), want %s %s", c.failType, res, ran, c.status, c.code)
		}
	}
}

// TestCatalogHash: the catalogue identity in audit is the same for the same definitions
// (whatever the registration order) and changes when a definition changes.
func TestCatalogHash(t *testing.T) {
	hashOf := func(tools ...kernel.ToolHandler) string {
		audit := &memAudit{}
		k := newKernel(t, []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants)}, audit, tools...)
		if _, err := k.ListTools(context.Background(), testContext()); err != nil {
			t.Fatal(err)
		}
		for _, ev := range audit.all() {
			if ev.Type == kernel.EventToolCatalogListed {
				h, _ := ev.Metadata["catalogHash"].(string)
				if len(h) != 64 {
					t.Fatalf("catalogHash %q", h)
				}
				return h
			}
		}
		t.Fatal("no tool.catalog.listed event")
		return ""
	}
	a, b := echoTool("t.a", "read"), echoTool("t.b", "read")
	if hashOf(a, b) != hashOf(b, a) {
		t.Fatal("registration order changed the catalogue hash")
	}
	changed := echoTool("t.b", "read")
	changed.Definition.Description = "another description"
	if hashOf(a, b) == hashOf(a, changed) {
		t.Fatal("a changed definition kept the catalogue hash")
	}
}

// TestPreparedTools: a tool prepared before any kernel exists (PrepareTool) registers as
// RegisterTool would: the same checks (an invalid definition fails at PrepareTool, a
// duplicate or an unprepared value at RegisterPrepared) and the same catalogue hash.
func TestPreparedTools(t *testing.T) {
	hashOf := func(prepared bool, tools ...kernel.ToolHandler) string {
		t.Helper()
		audit := &memAudit{}
		k := newKernel(t, []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants)}, audit)
		for _, h := range tools {
			if !prepared {
				if err := k.RegisterTool(h); err != nil {
					t.Fatal(err)
				}
				continue
			}
			p, err := kernel.PrepareTool(h)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.RegisterPrepared(p); err != nil {
				t.Fatal(err)
			}
		}
		return listedCatalogHash(t, k, audit)
	}
	a, b := echoTool("t.a", "read"), echoTool("t.b", "read")
	if got, want := hashOf(true, a, b), hashOf(false, a, b); got != want || len(got) != 64 {
		t.Fatalf("prepared catalogue hash %q, registered %q", got, want)
	}
	bad := echoTool("t.bad", "read")
	bad.Definition.Annotations = &kernel.ToolAnnotations{Destructive: kernel.BoolPtr(true)}
	if _, err := kernel.PrepareTool(bad); err == nil {
		t.Fatal("a read tool marked destructive must be refused")
	}
	k := kernel.New(kernel.Config{})
	p, err := kernel.PrepareTool(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.RegisterPrepared(p); err != nil {
		t.Fatal(err)
	}
	if err := k.RegisterPrepared(p); !errors.Is(err, kernel.ErrDuplicateRegistration) {
		t.Fatalf("duplicate prepared tool: %v", err)
	}
	if err := k.RegisterTool(a); !errors.Is(err, kernel.ErrDuplicateRegistration) {
		t.Fatalf("a registered tool after its prepared one: %v", err)
	}
	if err := k.RegisterPrepared(kernel.PreparedTool{}); err == nil {
		t.Fatal("an unprepared tool was registered")
	}
}

// TestEventIDs: 32 lowercase hex digits, unique, and ordered by the millisecond they were
// minted in (so the trail's id index grows at its end).
func TestEventIDs(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for i := 0; i < 2000; i++ {
		id := kernel.NewEventID()
		if len(id) != 32 || strings.Trim(id, "0123456789abcdef") != "" {
			t.Fatalf("id %q is not 32 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %q minted twice", id)
		}
		seen[id] = true
		if prev != "" && id[:12] < prev[:12] {
			t.Fatalf("time prefix went back: %s after %s", id, prev)
		}
		prev = id
	}
	a := kernel.NewEventID()
	time.Sleep(3 * time.Millisecond)
	if b := kernel.NewEventID(); b <= a {
		t.Fatalf("an id minted later sorts first: %s <= %s", b, a)
	}
}

// TestDefinitionDigest: the catalogue hash changes whenever any part of a definition
// changes — every field, nested schema values, their types, a map key — and not with the
// order a map was built in. If a field is added to ToolDefinition (or the types it
// holds), digestDefinition must hash it: the field counts below fail until it does.
func TestDefinitionDigest(t *testing.T) {
	for typ, n := range map[reflect.Type]int{reflect.TypeOf(kernel.ToolDefinition{}): 10, reflect.TypeOf(kernel.ToolAnnotations{}): 3,
		reflect.TypeOf(kernel.CapabilityRequirement{}): 2, reflect.TypeOf(kernel.ResourceRef{}): 3, reflect.TypeOf(kernel.Address{}): 2} {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, not %d: hash the new one in digestDefinition", typ, typ.NumField(), n)
		}
	}
	hashOf := func(tool kernel.ToolHandler) string {
		t.Helper()
		audit := &memAudit{}
		k := newKernel(t, []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants)}, audit, tool)
		return listedCatalogHash(t, k, audit)
	}
	base := func() kernel.ToolHandler {
		h := echoTool("t.read", "read")
		h.Definition.InputSchema = map[string]any{"type": "object", "properties": map[string]any{
			"path": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "maxItems": 64},
			"n":    map[string]any{"type": "integer", "minimum": json.Number("1"), "default": 3.5, "enum": []any{1, int64(2), "x", true, nil}},
		}, "required": []any{"path"}, "additionalProperties": false}
		h.Definition.OutputSchema = map[string]any{"type": "object"}
		h.Definition.Annotations = &kernel.ToolAnnotations{ReadOnly: kernel.BoolPtr(true), Idempotent: kernel.BoolPtr(false)}
		h.Definition.Metadata = map[string]any{"k": []string{"a", "b"}}
		return h
	}
	ref := hashOf(base())
	// the same definition, its maps built in another order
	same := base()
	same.Definition.InputSchema = map[string]any{"additionalProperties": false, "required": []any{"path"}, "properties": map[string]any{
		"n":    map[string]any{"enum": []any{1, int64(2), "x", true, nil}, "default": 3.5, "minimum": json.Number("1"), "type": "integer"},
		"path": map[string]any{"maxItems": 64, "items": map[string]any{"type": "string"}, "type": "array"},
	}, "type": "object"}
	if hashOf(same) != ref {
		t.Fatal("the order a map was built in changed the hash")
	}
	owner := alice
	mutations := map[string]func(d *kernel.ToolDefinition){
		"name":        func(d *kernel.ToolDefinition) { d.Name = "t.read2" },
		"description": func(d *kernel.ToolDefinition) { d.Description = "other" },
		"input type":  func(d *kernel.ToolDefinition) { d.InputSchema["type"] = "objects" },
		"nested value": func(d *kernel.ToolDefinition) {
			d.InputSchema["properties"].(map[string]any)["path"].(map[string]any)["maxItems"] = 65
		},
		"value type": func(d *kernel.ToolDefinition) {
			d.InputSchema["properties"].(map[string]any)["path"].(map[string]any)["maxItems"] = "64"
		},
		"enum element": func(d *kernel.ToolDefinition) {
			d.InputSchema["properties"].(map[string]any)["n"].(map[string]any)["enum"] = []any{1, int64(2), "x", false, nil}
		},
		"number": func(d *kernel.ToolDefinition) {
			d.InputSchema["properties"].(map[string]any)["n"].(map[string]any)["minimum"] = json.Number("2")
		},
		"map key": func(d *kernel.ToolDefinition) {
			d.InputSchema["requires"] = d.InputSchema["required"]
			delete(d.InputSchema, "required")
		},
		"additionalProps":    func(d *kernel.ToolDefinition) { d.InputSchema["additionalProperties"] = true },
		"output schema":      func(d *kernel.ToolDefinition) { d.OutputSchema = nil },
		"requirement action": func(d *kernel.ToolDefinition) { d.RequiredCapability.Action = "list" },
		"requirement path":   func(d *kernel.ToolDefinition) { d.RequiredCapability.Resource.Path = []string{"docs"} },
		"requirement owner":  func(d *kernel.ToolDefinition) { d.RequiredCapability.Resource.Owner = &owner },
		"annotation":         func(d *kernel.ToolDefinition) { d.Annotations.Idempotent = kernel.BoolPtr(true) },
		"annotation unset":   func(d *kernel.ToolDefinition) { d.Annotations.ReadOnly = nil },
		"no annotations":     func(d *kernel.ToolDefinition) { d.Annotations = nil },
		"metadata":           func(d *kernel.ToolDefinition) { d.Metadata = map[string]any{"k": []string{"a", "c"}} },
	}
	for name, mutate := range mutations {
		h := base()
		mutate(&h.Definition)
		if h.Definition.Validate() != nil {
			t.Logf("%s: skipped, invalid", name)
			continue // only valid definitions register
		}
		if hashOf(h) == ref {
			t.Errorf("%s: the catalogue hash did not change", name)
		}
	}
}

// listedCatalogHash lists k's tools and returns the catalogue hash its
// tool.catalog.listed record names.
func listedCatalogHash(t *testing.T, k *kernel.Kernel, audit *memAudit) string {
	t.Helper()
	if _, err := k.ListTools(context.Background(), testContext()); err != nil {
		t.Fatal(err)
	}
	for _, ev := range audit.all() {
		if ev.Type == kernel.EventToolCatalogListed {
			return ev.Metadata["catalogHash"].(string)
		}
	}
	t.Fatal("no tool.catalog.listed event")
	return ""
}
