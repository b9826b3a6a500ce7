package host

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestReplyKeepsTheRequestsAuditMetadata (issue 24): a reply made through a session's
// request service (serve's /v1: its request's metadata on every record) takes the
// request's purpose and trace in a turn of its own, and that turn's records — the
// decision and the reply's message.sent — still carry the request's metadata.
func TestReplyKeepsTheRequestsAuditMetadata(t *testing.T) {
	t.Parallel()
	sess, _ := openSession(t, time.Now, "2026-08-03T09:00:00Z")
	ctx := context.Background()
	h := sess.h
	box := h.Mailbox()
	asker := kernel.Address{Kind: kernel.KindAgent, ID: "asker"}
	req := kernel.MessageEnvelope{Version: "1", ID: "req-1", Sender: asker, Receiver: h.Prepared.Context.Actor, Purpose: "review",
		Payload: json.RawMessage(`{"q":1}`), TraceID: "trace-req-1", CreatedAt: "2026-08-03T09:00:00Z"}
	if _, _, err := box.DeliverMessage(ctx, h.Prepared.Context.World, req, "2026-08-03T09:00:00Z", 0); err != nil {
		t.Fatal(err)
	}
	svc := sess.RequestService(map[string]any{"requestId": "http-1"}, "", "http", "")
	sent, err := svc.ReplyMessage(ctx, api.ReplyMessageRequest{ID: "req-1", Payload: json.RawMessage(`"ok"`)})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := h.Store.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, ev := range evs {
		if ev.Type != kernel.EventMessageSent && ev.Type != kernel.EventAuthorizationChecked {
			continue
		}
		if ev.TraceID != "trace-req-1" {
			continue
		}
		found++
		if ev.Metadata["requestId"] != "http-1" {
			t.Errorf("the reply's %s record has metadata %v, want requestId http-1", ev.Type, ev.Metadata)
		}
	}
	if found < 2 {
		t.Fatalf("%d records of the reply (receipt %+v), want its decision and its message.sent", found, sent.Receipt)
	}
}
