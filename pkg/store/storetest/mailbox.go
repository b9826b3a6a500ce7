package storetest

import (
	"encoding/json"
	"errors"
	"reflect"
	"sync"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// message is a request from → to with id and payload.
func message(id string, from, to kernel.Address, payload string) kernel.MessageEnvelope {
	return kernel.MessageEnvelope{Version: "1", ID: id, Sender: from, Receiver: to, Purpose: "storetest",
		Payload: json.RawMessage(payload), TraceID: "trace-" + id, CreatedAt: "2026-01-01T00:00:00Z"}
}

// replyTo is to's answer to req.
func replyTo(req kernel.MessageEnvelope, payload string) kernel.MessageEnvelope {
	r := message("re-"+req.ID, req.Receiver, req.Sender, payload)
	r.Purpose, r.TraceID, r.ReplyTo = req.Purpose, req.TraceID, req.ID
	return r
}

const acceptedAt = "2026-01-01T00:00:01Z"

func messageIDs(recs []store.MessageRecord) []string {
	out := []string{}
	for _, r := range recs {
		out = append(out, r.Envelope.ID)
	}
	return out
}

// testMailbox: DeliverMessage (idempotent on the same content, ErrDuplicate on other
// content, the in-flight bound), GetMessage, ListMessages and its filters, ReplyMessage
// and FailMessage (never changed once resolved), concurrent deliveries of one id (one
// row), and — for a store kept across opens — every record there after a reopen. A store
// without a mailbox is passed over.
func testMailbox(t T, c Config) {
	dir := t.TempDir()
	st := openAt(t, c, dir)
	mb, ok := st.(store.Mailbox)
	if !ok {
		t.Logf("the store has no mailbox")
		return
	}
	list := func(f store.MessageFilter) []store.MessageRecord {
		t.Helper()
		recs, err := mb.ListMessages(ctx, f)
		if err != nil {
			t.Fatalf("ListMessages(%+v): %v", f, err)
		}
		return recs
	}
	if _, err := mb.GetMessage(ctx, world1, "m1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetMessage of a fresh store = %v, want ErrNotFound", err)
	}
	if _, _, err := mb.DeliverMessage(ctx, "", message("m0", alice, helper, `1`), acceptedAt, 0); err == nil {
		t.Errorf("DeliverMessage with an empty world succeeded")
	}
	bad := message("m0", alice, helper, `1`)
	bad.Purpose = ""
	if _, _, err := mb.DeliverMessage(ctx, world1, bad, acceptedAt, 0); err == nil {
		t.Errorf("DeliverMessage of an invalid envelope succeeded")
	}
	m1 := message("m1", alice, helper, `{"b":2,"a":1}`)
	rec, created, err := mb.DeliverMessage(ctx, world1, m1, acceptedAt, 0)
	if err != nil || !created || rec.Status != store.MessagePending || rec.AcceptedAt != acceptedAt || string(rec.Envelope.Payload) != `{"a":1,"b":2}` {
		t.Fatalf("DeliverMessage(m1) = %+v, %v, %v", rec, created, err)
	}
	// the same content (differently spelled) is idempotent: the stored record, unchanged
	again := m1
	again.Payload = json.RawMessage(`{ "a": 1, "b": 2 }`)
	rec2, created, err := mb.DeliverMessage(ctx, world1, again, "2026-01-01T00:09:00Z", 0)
	if err != nil || created || !reflect.DeepEqual(rec2, rec) {
		t.Errorf("DeliverMessage(m1 again) = %+v, %v, %v; want the stored record, not created", rec2, created, err)
	}
	other := m1
	other.Payload = json.RawMessage(`2`)
	if _, _, err := mb.DeliverMessage(ctx, world1, other, acceptedAt, 0); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("DeliverMessage(m1 with other content) = %v, want ErrDuplicate", err)
	}
	if got, err := mb.GetMessage(ctx, world1, "m1"); err != nil || !reflect.DeepEqual(got, rec) {
		t.Errorf("GetMessage(m1) = %+v, %v; want %+v", got, err, rec)
	}
	// the same id in another world is another message
	if _, created, err := mb.DeliverMessage(ctx, world2, other, acceptedAt, 0); err != nil || !created {
		t.Errorf("DeliverMessage(m1 in world2) = %v, %v", created, err)
	}
	// the in-flight bound counts the sender's pending messages of the world
	if _, _, err := mb.DeliverMessage(ctx, world1, message("m2", alice, bob, `2`), acceptedAt, 2); err != nil {
		t.Fatalf("DeliverMessage(m2): %v", err)
	}
	if _, _, err := mb.DeliverMessage(ctx, world1, message("m3", alice, bob, `3`), acceptedAt, 2); !errors.Is(err, store.ErrInFlightExceeded) {
		t.Errorf("a third pending message with maxInFlight 2 = %v, want ErrInFlightExceeded", err)
	}
	if _, err := mb.GetMessage(ctx, world1, "m3"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused message was stored: %v", err)
	}
	if got := messageIDs(list(store.MessageFilter{World: world1})); !reflect.DeepEqual(got, []string{"m2", "m1"}) {
		t.Errorf("ListMessages(world1) = %v, want [m2 m1]", got)
	}
	if got := messageIDs(list(store.MessageFilter{World: world1, Receiver: helper})); !reflect.DeepEqual(got, []string{"m1"}) {
		t.Errorf("ListMessages(to helper) = %v", got)
	}
	// an answer
	reply := replyTo(m1, `{"ok":true}`)
	ans, err := mb.ReplyMessage(ctx, world1, reply, "2026-01-01T00:00:02Z")
	if err != nil || ans.Status != store.MessageAnswered || ans.Reply == nil || ans.Reply.ID != reply.ID || ans.ResolvedAt != "2026-01-01T00:00:02Z" {
		t.Fatalf("ReplyMessage(m1) = %+v, %v", ans, err)
	}
	if got, _ := mb.GetMessage(ctx, world1, "m1"); !reflect.DeepEqual(got, ans) {
		t.Errorf("GetMessage(m1) after the answer = %+v, want %+v", got, ans)
	}
	second := replyTo(m1, `{"ok":false}`)
	if got, err := mb.ReplyMessage(ctx, world1, second, "2026-01-01T00:00:03Z"); !errors.Is(err, store.ErrAlreadyResolved) || !reflect.DeepEqual(got, ans) {
		t.Errorf("a second answer = %+v, %v; want ErrAlreadyResolved and the first answer", got, err)
	}
	if _, err := mb.FailMessage(ctx, world1, "m1", kernel.CodeMessageReplyResolutionFailed, acceptedAt); !errors.Is(err, store.ErrAlreadyResolved) {
		t.Errorf("failing an answered message = %v, want ErrAlreadyResolved", err)
	}
	if _, err := mb.ReplyMessage(ctx, world1, replyTo(message("nope", alice, helper, `1`), `1`), acceptedAt); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an answer to an unknown message = %v, want ErrNotFound", err)
	}
	// a failure
	failed, err := mb.FailMessage(ctx, world1, "m2", kernel.CodeMessageReplyResolutionFailed, "2026-01-01T00:00:04Z")
	if err != nil || failed.Status != store.MessageFailed || failed.FailedCode != kernel.CodeMessageReplyResolutionFailed {
		t.Fatalf("FailMessage(m2) = %+v, %v", failed, err)
	}
	if _, err := mb.ReplyMessage(ctx, world1, replyTo(message("m2", alice, bob, `2`), `1`), acceptedAt); !errors.Is(err, store.ErrAlreadyResolved) {
		t.Errorf("an answer to a failed message = %v, want ErrAlreadyResolved", err)
	}
	if _, err := mb.FailMessage(ctx, world1, "zz", "x", acceptedAt); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("failing an unknown message = %v, want ErrNotFound", err)
	}
	for status, want := range map[string][]string{store.MessagePending: {}, store.MessageAnswered: {"m1"}, store.MessageFailed: {"m2"}} {
		if got := messageIDs(list(store.MessageFilter{World: world1, Status: status})); !reflect.DeepEqual(got, want) {
			t.Errorf("ListMessages(%s) = %v, want %v", status, got, want)
		}
	}
	if _, err := mb.ListMessages(ctx, store.MessageFilter{Status: "lost"}); err == nil {
		t.Errorf("ListMessages with an unknown status succeeded")
	}
	// one id delivered concurrently: one row, every caller the same record
	const n = 16
	var wg sync.WaitGroup
	recs := make([]store.MessageRecord, n)
	made := make([]bool, n)
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			recs[i], made[i], errs[i] = mb.DeliverMessage(ctx, world1, message("race", bob, helper, `{"same":true}`), acceptedAt, 0)
		}(i)
	}
	wg.Wait()
	createdN := 0
	for i := 0; i < n; i++ {
		if errs[i] != nil {
			t.Fatalf("concurrent DeliverMessage %d: %v", i, errs[i])
		}
		if made[i] {
			createdN++
		}
		if !reflect.DeepEqual(recs[i], recs[0]) {
			t.Errorf("concurrent DeliverMessage %d returned %+v, another %+v", i, recs[i], recs[0])
		}
	}
	if createdN != 1 || len(list(store.MessageFilter{World: world1, Sender: bob})) != 1 {
		t.Errorf("%d of %d concurrent deliveries of one id created it; want 1 row", createdN, n)
	}
	if c.Volatile {
		return
	}
	// kept across opens (the first instance abandoned unclosed, as a killed process leaves it)
	st2 := openAt(t, c, dir)
	mb2, ok := st2.(store.Mailbox)
	if !ok {
		t.Fatalf("the reopened store has no mailbox")
	}
	for id, want := range map[string]string{"m1": store.MessageAnswered, "m2": store.MessageFailed, "race": store.MessagePending} {
		got, err := mb2.GetMessage(ctx, world1, id)
		if err != nil || got.Status != want {
			t.Errorf("after a reopen, %s = %+v, %v; want %s", id, got, err, want)
		}
	}
}
