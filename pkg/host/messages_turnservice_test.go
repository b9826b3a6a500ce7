package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/store"
)

const exchangeGrants = `version: 1
grants:
  - id: g-writer
    subject: agent:writer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, reviewer]}
        actions: [send]
        scope: exact
  - id: g-reviewer
    subject: agent:reviewer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, writer]}
        actions: [send]
        scope: exact
`

// TestTurnServiceMessaging: the messaging of a service over a driver's turn
// (TurnService, a scenario's send and reply steps) runs in that turn and under its
// context, not the host's: the send is from the turn's actor under its purpose and
// trace, the inbox is the turn's actor's, and the reply — in a turn begun with the
// driver's turn's options, so its audit metadata — carries the request's purpose and
// trace whatever the turn's. The host's own service sees none of it as its own.
func TestTurnServiceMessaging(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	grants := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(grants, []byte(exchangeGrants), 0o600); err != nil {
		t.Fatal(err)
	}
	writer := kernel.Address{Kind: kernel.KindAgent, ID: "writer"}
	reviewer := kernel.Address{Kind: kernel.KindAgent, ID: "reviewer"}
	s := &Settings{Root: root, State: filepath.Join(dir, "state", "state.db"), Grants: []string{grants},
		As: "agent:writer", Owner: "human:alice", Purpose: "p-host", Trace: "t-host", Now: "2026-06-01T09:00:00Z",
		Messaging: &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{writer: {Mode: mailbox.ModeWait}, reviewer: {Mode: mailbox.ModeWait}}}}
	p, err := Prepare(s, time.Now, Needs{Planes: true, Actor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx := context.Background()
	h, err := p.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}

	ask := h.Prepared.Context
	ask.Purpose, ask.TraceID = "p-ask", "t-ask"
	t1, err := h.BeginTurnAt(ctx, ask, map[string]any{"surface": "test", "step": "send"})
	if err != nil {
		t.Fatal(err)
	}
	sent, err := h.TurnService(t1, "").SendMessage(ctx, api.SendMessageRequest{To: reviewer, Payload: json.RawMessage(`{"ask":"deploy?"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if env := sent.Envelope; sent.Receipt.Status != kernel.DeliveryAccepted || env.Sender != writer || env.Purpose != "p-ask" || env.TraceID != "t-ask" {
		t.Fatalf("the turn's send = %+v, want accepted from agent:writer under p-ask/t-ask", sent)
	}

	answer := h.Prepared.Context
	answer.Actor, answer.Purpose, answer.TraceID = reviewer, "p-other", "t-other"
	t2, err := h.BeginTurnAt(ctx, answer, map[string]any{"surface": "test", "step": "reply"})
	if err != nil {
		t.Fatal(err)
	}
	svc := h.TurnService(t2, "")
	pending, err := svc.Inbox(ctx, api.InboxQuery{Status: store.MessagePending})
	if err != nil || len(pending) != 1 || pending[0].Envelope.ID != sent.Envelope.ID {
		t.Fatalf("the reviewer's turn's inbox = %+v, %v; want the one request", pending, err)
	}
	if own, err := h.Service().Inbox(ctx, api.InboxQuery{}); err != nil || len(own) != 0 {
		t.Fatalf("the host's (agent:writer's) inbox = %+v, %v; want empty", own, err)
	}
	reply, err := svc.ReplyMessage(ctx, api.ReplyMessageRequest{ID: sent.Envelope.ID, Payload: json.RawMessage(`"yes"`)})
	if err != nil {
		t.Fatal(err)
	}
	if env := reply.Envelope; reply.Receipt.Status != kernel.DeliveryDelivered || env.Sender != reviewer || env.Receiver != writer ||
		env.Purpose != "p-ask" || env.TraceID != "t-ask" || env.ReplyTo != sent.Envelope.ID {
		t.Fatalf("the turn's reply = %+v, want delivered from agent:reviewer to agent:writer under p-ask/t-ask", reply)
	}
	evs, err := h.Service().QueryAudit(ctx, api.AuditQuery{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	var steps []any
	for _, ev := range evs {
		if ev.Type == kernel.EventMessageSent {
			steps = append(steps, ev.Metadata["step"])
			if ev.TraceID != "t-ask" || ev.Metadata["surface"] != "test" {
				t.Errorf("message.sent by %s: trace %q, metadata %v; want t-ask and the step's metadata", ev.Actor, ev.TraceID, ev.Metadata)
			}
		}
	}
	if len(steps) != 2 || steps[0] != "send" || steps[1] != "reply" {
		t.Fatalf("message.sent records of steps %v, want [send reply]", steps)
	}
}
