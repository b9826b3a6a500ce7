package mailbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestInFlightRefusedBeforeSpending (issue 24): a requester at its in-flight bound is
// refused messages_in_flight_exceeded before its use is spent — by messages.request and
// by a direct send — and the refusal is audited; nothing else changes (no message row,
// no use, the pending ones as they were).
func TestInFlightRefusedBeforeSpending(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	cfg := config()
	cfg.MaxInFlight = 2
	g := sendGrant("g-send", asker, reviewer, 10)
	k := kernel.New(kernel.Config{Grants: grants{g}, Usage: st, Audit: st,
		MessageTransport: &mailbox.Transport{Box: st, Config: cfg}, MessageRouter: &mailbox.Router{Box: st, Config: cfg}})
	turn := func() *kernel.Turn {
		tu, err := k.BeginTurn(actxOf(asker, "review", "trace-1"))
		if err != nil {
			t.Fatal(err)
		}
		return tu
	}
	send := func(id string) kernel.MessageDeliveryResult {
		env := request(id, reviewer)
		env.TraceID = "trace-1"
		r, err := turn().SendMessage(ctx, env)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, id := range []string{"m1", "m2"} {
		if r := send(id); r.Status != kernel.DeliveryAccepted {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	if u := used(t, st, g); u != 2 {
		t.Fatalf("%d uses spent, want 2", u)
	}
	before, err := st.ListMessages(ctx, store.MessageFilter{World: world})
	if err != nil {
		t.Fatal(err)
	}
	// the direct send over the bound
	if r := send("m3"); r.Status != kernel.DeliveryDenied || r.Error == nil || r.Error.Code != kernel.CodeMessagesInFlightExceeded {
		t.Fatalf("direct send over the bound: %+v", r)
	}
	// messages.request over the bound
	res := turn().InvokeTool(ctx, kernel.ToolCall{ID: "c1", Tool: kernel.MessageToolName, TraceID: "trace-1", RequestedAt: "2026-08-03T09:00:00.000Z",
		Arguments: json.RawMessage(`{"recipient":{"kind":"agent","agentId":"reviewer"},"payload":{"q":2}}`)})
	if res.Status != kernel.StatusDenied || res.Error == nil || res.Error.Code != kernel.CodeMessagesInFlightExceeded || res.Gate != kernel.GateRequest {
		t.Fatalf("messages.request over the bound: %+v %+v", res, res.Error)
	}
	if u := used(t, st, g); u != 2 {
		t.Fatalf("%d uses spent after the refusals, want 2 (a refusal spent one)", u)
	}
	after, err := st.ListMessages(ctx, store.MessageFilter{World: world})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("the mailbox changed: %+v -> %+v", before, after)
	}
	// both refusals are on the record
	evs, err := st.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var sent, invoked int
	for _, ev := range evs {
		if ev.Reason != kernel.CodeMessagesInFlightExceeded || ev.Outcome != kernel.OutcomeDenied {
			continue
		}
		switch ev.Type {
		case kernel.EventMessageSent:
			if ev.Metadata["messageId"] == "m3" {
				sent++
			}
		case kernel.EventToolInvoked:
			if ev.Tool == kernel.MessageToolName && ev.OperationID == "c1" {
				invoked++
			}
		}
	}
	if sent != 1 || invoked != 1 {
		t.Fatalf("audited %d message.sent and %d tool.invoked refusals, want 1 and 1", sent, invoked)
	}
	// once a request is answered there is room again
	if _, err := st.ReplyMessage(ctx, world, answerOf(before[0].Envelope, `"ok"`), "2026-08-03T09:00:01.000Z"); err != nil {
		t.Fatal(err)
	}
	if r := send("m4"); r.Status != kernel.DeliveryAccepted {
		t.Fatalf("after an answer: %+v", r)
	}
}
