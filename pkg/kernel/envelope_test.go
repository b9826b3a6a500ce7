package kernel_test

import (
	"context"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// An envelope refusal is denied without consulting or spending any grant, and the kernel
// writes its tool.invoked record (source envelope, the code, the surface's metadata), which
// ClassifyRefusal names GateEnvelope.
func TestRefuseInEnvelope(t *testing.T) {
	g := grant("g", []string{"read"}, kernel.ScopeDescendants, "docs")
	one := int64(1)
	g.Constraints.MaxUses = &one
	audit := &memAudit{}
	k := newKernel(t, []kernel.CapabilityGrant{g}, audit, echoTool("t.read", "read"))
	turn, err := k.BeginTurnWith(testContext(), kernel.TurnOptions{AuditMetadata: map[string]any{"surface": "mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"t.read", "bad\nname"} {
		res := turn.RefuseInEnvelope(context.Background(), call(name, `{"path":["docs","a"]}`), "escalation_pending", "pending", map[string]any{"escalation": "e1"})
		if res.Status != kernel.StatusDenied || res.Error.Code != "escalation_pending" || res.Gate != kernel.GateEnvelope || *res.Error.Retryable {
			t.Fatalf("result %+v", res)
		}
	}
	evs := audit.all()
	if len(evs) != 2 {
		t.Fatalf("events %+v", evs)
	}
	ev := evs[0]
	if ev.Type != kernel.EventToolInvoked || ev.Outcome != kernel.OutcomeDenied || ev.Source != "envelope" || ev.Reason != "escalation_pending" ||
		ev.Tool != "t.read" || ev.Metadata["surface"] != "mcp" || ev.Metadata["escalation"] != "e1" || kernel.ClassifyRefusal(ev) != kernel.GateEnvelope {
		t.Fatalf("event %+v", ev)
	}
	if evs[1].Tool != "" || evs[1].Metadata["toolName"] != `"bad\nname"` {
		t.Fatalf("unsafe name recorded verbatim: %+v", evs[1])
	}
	// the one use of the grant is still there
	if res := turn.InvokeTool(context.Background(), call("t.read", `{"path":["docs","a"]}`)); res.Status != kernel.StatusSucceeded {
		t.Fatalf("the envelope spent the grant: %+v", res)
	}
}
