package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// envelope is what the minting tool's preparation mints: a fresh identity, for the
// recipient and by the resolution (its sequence number) it was prepared from.
type envelope struct {
	ID         int
	To         string
	Resolution int
}

// mintingTool is a messages.request-like tool (spec 80 §3) over the files namespace: its
// ResolveCall resolves the recipient-scoped requirement ["to", recipient, n], n the
// resolution's sequence number, and returns a preparation that mints an envelope; Invoke
// delivers the envelope it is handed. It counts every resolution and mint, and keeps
// every minted and every delivered envelope.
type mintingTool struct {
	mu           sync.Mutex
	resolutions  int
	minted       []*envelope
	delivered    []any
	failPrepare  bool
	panicPrepare bool
	// admit, when set, is the resolution's Admit; admits counts its calls
	admit  func(context.Context) error
	admits int
}

func (m *mintingTool) handler() kernel.ToolHandler {
	return kernel.ToolHandler{
		Definition: kernel.ToolDefinition{Name: "msg.request", Description: "sends a request", Namespace: "files", Source: "native",
			ReadWrite: kernel.ClassWrite, InputSchema: map[string]any{"type": "object"}, RequiredCapability: req("send")},
		ParseArguments: func(raw json.RawMessage) (any, error) {
			var a struct {
				To string `json:"to"`
			}
			if err := json.Unmarshal(raw, &a); err != nil {
				return nil, err
			}
			return a.To, nil
		},
		ResolveCall: func(_ kernel.AccessContext, call kernel.ParsedToolCall) (kernel.Resolution, error) {
			if call.Prepared != nil {
				return kernel.Resolution{}, errors.New("a resolution was handed a prepared value")
			}
			to := call.Parsed.(string)
			m.mu.Lock()
			m.resolutions++
			seq := m.resolutions
			m.mu.Unlock()
			var admit func(context.Context) error
			if m.admit != nil {
				admit = func(ctx context.Context) error {
					m.mu.Lock()
					m.admits++
					m.mu.Unlock()
					return m.admit(ctx)
				}
			}
			return kernel.Resolution{Requirement: req("send", "to", to, strconv.Itoa(seq)), Admit: admit,
				Prepare: func(context.Context) (any, error) {
					m.mu.Lock()
					defer m.mu.Unlock()
					if m.failPrepare {
						return nil, errors.New("secret mint failure")
					}
					if m.panicPrepare {
						panic("secret mint panic")
					}
					e := &envelope{ID: len(m.minted) + 1, To: to, Resolution: seq}
					m.minted = append(m.minted, e)
					return e, nil
				}}, nil
		},
		Invoke: func(_ context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
			m.mu.Lock()
			m.delivered = append(m.delivered, call.Prepared)
			m.mu.Unlock()
			e, ok := call.Prepared.(*envelope)
			if !ok {
				return kernel.FailedResult(call.ToolCall, actx.Now, "message_request_not_prepared", "no prepared envelope"), nil
			}
			return kernel.ToolResult{CallID: call.ID, Tool: call.Tool, Status: kernel.StatusSucceeded,
				Output: map[string]any{"envelope": e.ID, "to": e.To}, CompletedAt: actx.Now}, nil
		},
	}
}

func (m *mintingTool) counts() (resolutions, mints, deliveries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.resolutions, len(m.minted), len(m.delivered)
}

// sendGrant allows "send" to the given recipients (all of them without any), at most
// max times.
func sendGrant(max int64, to ...string) kernel.CapabilityGrant {
	path := []string{}
	if len(to) == 1 {
		path = []string{"to", to[0]}
	}
	g := grant("g-send", []string{"send"}, kernel.ScopeDescendants, path...)
	g.Constraints.MaxUses = &max
	return g
}

func mintCall(id, to string) kernel.ToolCall {
	c := call("msg.request", `{"to":"`+to+`"}`)
	c.ID = id
	return c
}

// checkedPath is the resource path of the allowed authorization.checked record of callID.
func checkedPath(t *testing.T, events []kernel.AuditEvent, callID string) []string {
	t.Helper()
	for _, ev := range events {
		if ev.Type == kernel.EventAuthorizationChecked && ev.OperationID == callID && ev.Outcome == kernel.OutcomeAllowed {
			return ev.Resource.Path
		}
	}
	t.Fatalf("no allowed authorization.checked record for %s", callID)
	return nil
}

// TestPreparedValueIsHandedToInvoke: an allowed call is prepared exactly once, after its
// authorization was audited, and Invoke receives that very instance — prepared by the
// resolution that was authorized (the kernel did not resolve the call again in between).
func TestPreparedValueIsHandedToInvoke(t *testing.T) {
	m := &mintingTool{}
	audit := &memAudit{}
	usage := newMemUsage()
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{sendGrant(5)}}, Usage: usage, Audit: audit})
	if err := k.RegisterTool(m.handler()); err != nil {
		t.Fatal(err)
	}
	res := k.InvokeTool(context.Background(), testContext(), mintCall("call-1", "carol"))
	if res.Status != kernel.StatusSucceeded {
		t.Fatalf("result %+v", res)
	}
	resolutions, mints, deliveries := m.counts()
	if resolutions != 1 || mints != 1 || deliveries != 1 {
		t.Fatalf("resolutions %d, mints %d, deliveries %d; want 1 each", resolutions, mints, deliveries)
	}
	if m.delivered[0] != any(m.minted[0]) {
		t.Fatalf("Invoke got %+v, not the instance prepared (%+v)", m.delivered[0], m.minted[0])
	}
	e := m.minted[0]
	want := []string{"to", "carol", strconv.Itoa(e.Resolution)}
	if got := checkedPath(t, audit.all(), "call-1"); !slices.Equal(got, want) {
		t.Fatalf("authorized %v, but the envelope was prepared by the resolution of %v", got, want)
	}
	if used := usage.used[usageKey(kernel.UsageKey{World: "world-a", Issuer: alice, Subject: bob, GrantID: "g-send"})]; used != 1 {
		t.Fatalf("%d uses spent, want exactly 1", used)
	}
}

// TestPreparedValueStaysWithItsCall: two calls of one turn that share an id each deliver
// their own envelope; nothing is looked up by call id.
func TestPreparedValueStaysWithItsCall(t *testing.T) {
	m := &mintingTool{}
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{sendGrant(5)}}, Usage: newMemUsage()})
	if err := k.RegisterTool(m.handler()); err != nil {
		t.Fatal(err)
	}
	turn := mustTurn(t, k, testContext())
	for _, to := range []string{"carol", "dave"} {
		res := turn.InvokeTool(context.Background(), mintCall("same-id", to))
		if out, _ := res.Output.(map[string]any); res.Status != kernel.StatusSucceeded || out["to"] != to {
			t.Fatalf("call to %s: %+v", to, res)
		}
	}
	if _, mints, _ := m.counts(); mints != 2 || m.delivered[0] == m.delivered[1] {
		t.Fatalf("%d mints, delivered %+v; want one envelope per call", mints, m.delivered)
	}
}

// TestRefusedCallIsNeverPrepared: a call refused at any gate after its requirement
// resolved (no grant for the recipient, an exhausted grant) is never prepared nor
// invoked; a failing preparation fails the call without Invoke and without its text.
func TestRefusedCallIsNeverPrepared(t *testing.T) {
	m := &mintingTool{}
	usage := newMemUsage()
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{sendGrant(1, "carol")}}, Usage: usage})
	if err := k.RegisterTool(m.handler()); err != nil {
		t.Fatal(err)
	}
	turn := mustTurn(t, k, testContext())
	res := turn.InvokeTool(context.Background(), mintCall("c1", "mallory"))
	if res.Status != kernel.StatusDenied || res.Error.Code != kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant) {
		t.Fatalf("call to mallory: %+v, want denied no_matching_grant", res)
	}
	if res := turn.InvokeTool(context.Background(), mintCall("c2", "carol")); res.Status != kernel.StatusSucceeded {
		t.Fatalf("call to carol: %+v", res)
	}
	res = turn.InvokeTool(context.Background(), mintCall("c3", "carol"))
	if res.Status != kernel.StatusDenied || res.Cause != kernel.CauseOf(kernel.ReasonGrantExhausted) {
		t.Fatalf("second call to carol: %+v, want denied for the exhausted grant", res)
	}
	resolutions, mints, deliveries := m.counts()
	if resolutions != 3 || mints != 1 || deliveries != 1 {
		t.Fatalf("resolutions %d, mints %d, deliveries %d; want 3, 1, 1 (only the allowed call prepared)", resolutions, mints, deliveries)
	}

	for _, m2 := range []*mintingTool{{failPrepare: true}, {panicPrepare: true}} {
		k2 := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{sendGrant(5)}}, Usage: newMemUsage()})
		if err := k2.RegisterTool(m2.handler()); err != nil {
			t.Fatal(err)
		}
		res = k2.InvokeTool(context.Background(), testContext(), mintCall("c4", "carol"))
		if res.Status != kernel.StatusFailed || res.Error.Code != kernel.CodeToolExecutionFailed || strings.Contains(res.Error.Message, "secret") {
			t.Fatalf("failing preparation: %+v, want failed tool_execution_failed without the error's text", res)
		}
		if _, _, deliveries := m2.counts(); deliveries != 0 {
			t.Fatal("Invoke ran although the preparation failed")
		}
	}
}

// TestExplainNeverPrepares: ExplainCall resolves the exact requirement of an allowed and
// of a refused call, but prepares (mints) nothing, invokes nothing, writes no audit
// record and spends no use.
func TestExplainNeverPrepares(t *testing.T) {
	m := &mintingTool{}
	audit := &memAudit{}
	usage := newMemUsage()
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{sendGrant(1, "carol")}}, Usage: usage, Audit: audit})
	if err := k.RegisterTool(m.handler()); err != nil {
		t.Fatal(err)
	}
	turn := mustTurn(t, k, testContext())
	for _, c := range []struct {
		to      string
		allowed bool
	}{{"carol", true}, {"mallory", false}} {
		e := turn.ExplainCall(context.Background(), mintCall("x-"+c.to, c.to))
		if e.Allowed != c.allowed || e.Requirement == nil || !slices.Equal(e.Requirement.Resource.Path[:2], []string{"to", c.to}) {
			t.Fatalf("explain %s: %+v", c.to, e)
		}
	}
	resolutions, mints, deliveries := m.counts()
	if resolutions != 2 || mints != 0 || deliveries != 0 {
		t.Fatalf("resolutions %d, mints %d, deliveries %d; want 2, 0, 0", resolutions, mints, deliveries)
	}
	if evs := audit.all(); len(evs) != 0 {
		t.Fatalf("explain wrote %d audit records: %+v", len(evs), evs)
	}
	if len(usage.used) != 0 {
		t.Fatalf("explain spent uses: %v", usage.used)
	}
}

// TestResolveCallBesideResolveRequirement: a handler sets one resolver, never both.
func TestResolveCallBesideResolveRequirement(t *testing.T) {
	h := (&mintingTool{}).handler()
	h.ResolveRequirement = func(kernel.AccessContext, kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
		return req("send"), nil
	}
	if _, err := kernel.PrepareTool(h); err == nil {
		t.Fatal("a handler with both ResolveCall and ResolveRequirement was accepted")
	}
}

// TestAdmitRefusesBeforeSpending: a resolution's Admit runs after the call would be
// allowed and before its use is spent: a typed refusal denies the call with its code at
// the request gate, any other error (or a panic) fails it tool_execution_failed without
// its text; either way no use is spent, nothing is prepared or delivered, and the call's
// tool.invoked record says so. A call refused by its grants is never admitted, and
// explain never admits.
func TestAdmitRefusesBeforeSpending(t *testing.T) {
	for _, c := range []struct {
		name   string
		admit  func(context.Context) error
		status kernel.ToolStatus
		code   kernel.ErrorCode
	}{
		{"refused", func(context.Context) error {
			return &kernel.ResolutionRefusedError{Code: "messages_in_flight_exceeded", Message: "too many in flight"}
		}, kernel.StatusDenied, "messages_in_flight_exceeded"},
		{"error", func(context.Context) error { return errors.New("secret store failure") }, kernel.StatusFailed, kernel.CodeToolExecutionFailed},
		{"panic", func(context.Context) error { panic("secret admit panic") }, kernel.StatusFailed, kernel.CodeToolExecutionFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &mintingTool{admit: c.admit}
			audit, usage := &memAudit{}, newMemUsage()
			g := sendGrant(5, "carol")
			k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{g}}, Usage: usage, Audit: audit})
			if err := k.RegisterTool(m.handler()); err != nil {
				t.Fatal(err)
			}
			turn := mustTurn(t, k, testContext())
			res := turn.InvokeTool(context.Background(), mintCall("c1", "carol"))
			if res.Status != c.status || res.Error == nil || res.Error.Code != c.code || res.Gate != kernel.GateRequest || strings.Contains(res.Error.Message, "secret") {
				t.Fatalf("%+v %+v, want %s %s at the request gate", res, res.Error, c.status, c.code)
			}
			if n, _ := usage.GetUsage(context.Background(), kernel.UsageKeyOf(&g)); n != 0 {
				t.Fatalf("%d uses spent by a call refused at admission", n)
			}
			if _, mints, deliveries := m.counts(); mints != 0 || deliveries != 0 || m.admits != 1 {
				t.Fatalf("admits %d, mints %d, deliveries %d; want 1, 0, 0", m.admits, mints, deliveries)
			}
			var invoked int
			for _, ev := range audit.events {
				if ev.Type == kernel.EventToolInvoked && ev.OperationID == "c1" && ev.Reason == c.code && string(ev.Outcome) == string(c.status) {
					invoked++
				}
			}
			if invoked != 1 {
				t.Fatalf("%d tool.invoked records of the refusal, want 1: %+v", invoked, audit.events)
			}
			// refused by its grants: settled as usual, never admitted; explain never admits
			if res := turn.InvokeTool(context.Background(), mintCall("c2", "mallory")); res.Status != kernel.StatusDenied || res.Error.Code == c.code {
				t.Fatalf("no grant: %+v", res)
			}
			turn.ExplainCall(context.Background(), mintCall("x1", "carol"))
			if m.admits != 1 {
				t.Fatalf("%d admits, want 1 (a call refused by its grants or explained was admitted)", m.admits)
			}
		})
	}
}
