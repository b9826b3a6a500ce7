package kernel_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// typeFailAudit is a write-ahead sink that refuses every event of the types in fail (on
// either path) and keeps the others.
type typeFailAudit struct {
	mu     sync.Mutex
	fail   []kernel.AuditEventType
	events []kernel.AuditEvent
}

func (a *typeFailAudit) Append(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if slices.Contains(a.fail, ev.Type) {
		return errors.New("audit down")
	}
	a.events = append(a.events, ev)
	return nil
}

func (a *typeFailAudit) AppendWriteAhead(ctx context.Context, ev kernel.AuditEvent) error {
	return a.Append(ctx, ev)
}

// TestRefusalIsAnsweredOnlyOnceAudited: every refusal reaches audit before it is
// answered. A refusal whose only record cannot be written — a decision settled before
// the authorization (the discovery check), or a call refused before any decision (an
// unknown tool, a disabled namespace), whose tool.invoked record is its trace — is
// answered failed audit_unavailable, not denied: a client never holds a refusal the trail
// lacks. A refusal whose decision record was written stays denied when only its
// tool.invoked record fails.
func TestRefusalIsAnsweredOnlyOnceAudited(t *testing.T) {
	readOnly := grant("g-read", []string{"read"}, kernel.ScopeDescendants)
	createOnly := grant("g-create", []string{"create"}, kernel.ScopeDescendants)
	for _, c := range []struct {
		name   string
		grants []kernel.CapabilityGrant
		tool   string
		actx   func(*kernel.AccessContext)
		fail   []kernel.AuditEventType
		status kernel.ToolStatus
		code   kernel.ErrorCode
	}{
		{"discovery refused, its record lost", []kernel.CapabilityGrant{createOnly}, "t.read", nil,
			[]kernel.AuditEventType{kernel.EventAuthorizationChecked}, kernel.StatusFailed, kernel.CodeAuditUnavailable},
		{"discovery refused, recorded", []kernel.CapabilityGrant{createOnly}, "t.read", nil,
			nil, kernel.StatusDenied, kernel.CodeToolUnavailable},
		{"unknown tool, its record lost", []kernel.CapabilityGrant{readOnly}, "t.nope", nil,
			[]kernel.AuditEventType{kernel.EventToolInvoked}, kernel.StatusFailed, kernel.CodeAuditUnavailable},
		{"unknown tool, recorded", []kernel.CapabilityGrant{readOnly}, "t.nope", nil,
			nil, kernel.StatusDenied, kernel.CodeToolUnavailable},
		{"namespace disabled, its record lost", []kernel.CapabilityGrant{readOnly}, "t.read",
			func(a *kernel.AccessContext) { a.EnabledToolNamespaces = []string{} },
			[]kernel.AuditEventType{kernel.EventToolInvoked}, kernel.StatusFailed, kernel.CodeAuditUnavailable},
		{"authorization refused and recorded, tool.invoked lost", []kernel.CapabilityGrant{grant("g-docs", []string{"read"}, kernel.ScopeDescendants, "docs")},
			"t.read", nil, []kernel.AuditEventType{kernel.EventToolInvoked}, kernel.StatusDenied, kernel.ErrorCode(kernel.ReasonNoMatchingGrant)},
	} {
		t.Run(c.name, func(t *testing.T) {
			ran := false
			tool := echoTool("t.read", "read")
			inner := tool.Invoke
			tool.Invoke = func(ctx context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
				ran = true
				return inner(ctx, actx, call)
			}
			audit := &typeFailAudit{fail: c.fail}
			k := kernel.New(kernel.Config{Grants: &grantStore{grants: c.grants}, Audit: audit})
			if err := k.RegisterTool(tool); err != nil {
				t.Fatal(err)
			}
			actx := testContext()
			if c.actx != nil {
				c.actx(&actx)
			}
			res := k.InvokeTool(context.Background(), actx, call(c.tool, `{"path":["a"]}`))
			if res.Status != c.status || res.Error == nil || res.Error.Code != c.code || ran {
				t.Fatalf("%+v (error %+v, ran=%v), want %s %s", res, res.Error, ran, c.status, c.code)
			}
			if res.Status == kernel.StatusDenied {
				denied := 0
				for _, ev := range audit.events {
					if ev.Outcome == kernel.OutcomeDenied {
						denied++
					}
				}
				if denied == 0 {
					t.Fatalf("answered denied with no denied record: %+v", audit.events)
				}
			}
		})
	}
}
