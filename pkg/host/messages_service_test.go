package host

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestServiceMessagingRefusals: the embedded backend's messaging, for a context with no
// grant to send and no messaging configured: a malformed request is an invalid request,
// an unknown message is not found, a send without a grant is a refused receipt (a
// decision, not an error) — and after each, the mailbox holds nothing.
func TestServiceMessagingRefusals(t *testing.T) {
	t.Parallel()
	sess, _ := openSession(t, time.Now, "2026-08-03T09:00:00Z")
	ctx := context.Background()
	h := sess.h
	svc := h.Service()
	box := h.Mailbox()
	if box == nil {
		t.Fatal("the SQLite store keeps no messages")
	}
	empty := func(step string) {
		t.Helper()
		msgs, err := box.ListMessages(ctx, store.MessageFilter{World: h.Prepared.Context.World})
		if err != nil || len(msgs) != 0 {
			t.Fatalf("%s: the mailbox holds %d messages (%v), want none", step, len(msgs), err)
		}
	}
	reviewer := kernel.Address{Kind: kernel.KindAgent, ID: "reviewer"}
	for _, tc := range []struct {
		name string
		op   func() error
		code string
	}{
		{"no recipient", func() error {
			_, err := svc.SendMessage(ctx, api.SendMessageRequest{Payload: json.RawMessage(`{}`)})
			return err
		}, api.CodeInvalidRequest},
		{"no payload", func() error {
			_, err := svc.SendMessage(ctx, api.SendMessageRequest{To: reviewer})
			return err
		}, api.CodeInvalidRequest},
		{"two values", func() error {
			_, err := svc.SendMessage(ctx, api.SendMessageRequest{To: reviewer, Payload: json.RawMessage(`{} {}`)})
			return err
		}, api.CodeInvalidRequest},
		{"show unknown", func() error { _, err := svc.ShowMessage(ctx, "msg-nope"); return err }, api.CodeNotFound},
		{"reply unknown", func() error {
			_, err := svc.ReplyMessage(ctx, api.ReplyMessageRequest{ID: "msg-nope", Payload: json.RawMessage(`"ok"`)})
			return err
		}, api.CodeNotFound},
		{"reply without payload", func() error {
			_, err := svc.ReplyMessage(ctx, api.ReplyMessageRequest{ID: "msg-nope"})
			return err
		}, api.CodeInvalidRequest},
		{"wait unknown", func() error { _, err := svc.WaitReply(ctx, "msg-nope"); return err }, api.CodeNotFound},
	} {
		err := tc.op()
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != tc.code || ae.Message == "" {
			t.Errorf("%s: %v, want an *api.Error %s", tc.name, err, tc.code)
		}
		empty(tc.name)
	}
	sent, err := svc.SendMessage(ctx, api.SendMessageRequest{To: reviewer, Payload: json.RawMessage(`{"ask":"review"}`)})
	if err != nil {
		t.Fatalf("a send without a grant: %v, want a refused receipt", err)
	}
	if sent.Receipt.Status != kernel.DeliveryDenied || sent.Receipt.Error == nil || sent.Envelope.Sender.String() != "agent:helper" || sent.Envelope.Receiver != reviewer {
		t.Fatalf("a send without a grant = %+v, want denied from agent:helper to agent:reviewer", sent)
	}
	empty("a refused send")
	if in, err := svc.Inbox(ctx, api.InboxQuery{}); err != nil || len(in) != 0 {
		t.Fatalf("Inbox = %+v, %v; want empty", in, err)
	}
}
