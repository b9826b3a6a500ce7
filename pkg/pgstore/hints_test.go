package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// readCounter is a mailbox that counts the reads of a message that returned.
type readCounter struct {
	store.Mailbox
	reads atomic.Int64
}

func (c *readCounter) GetMessage(ctx context.Context, world, id string) (store.MessageRecord, error) {
	rec, err := c.Mailbox.GetMessage(ctx, world, id)
	c.reads.Add(1)
	return rec, err
}

// hintFixture is replica A (the store openFresh gives), replica B (a second store on the
// same database, opened with opts) and one request from helper to alice, delivered
// through A.
type hintFixture struct {
	a, b *pgstore.Store
	dsn  string
	req  kernel.MessageEnvelope
	cfg  *mailbox.Config
}

func newHintFixture(t *testing.T, opts pgstore.Options) *hintFixture {
	t.Helper()
	a, dsn := openFresh(t)
	b, err := pgstore.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	req := kernel.MessageEnvelope{Version: "1", ID: "msg-1", Sender: helper, Receiver: alice, Purpose: "test",
		Payload: json.RawMessage(`{"ask":"deploy?"}`), TraceID: "trace-1", CreatedAt: "2026-01-01T00:00:00.000Z"}
	now := kernel.FormatTimestamp(time.Now().UnixMilli())
	if _, _, err := a.DeliverMessage(context.Background(), "w1", req, now, 0); err != nil {
		t.Fatal(err)
	}
	cfg := &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{alice: {Mode: mailbox.ModeWait}}, ReplyTimeout: time.Hour}
	return &hintFixture{a: a, b: b, dsn: dsn, req: req, cfg: cfg}
}

type waited struct {
	reply kernel.MessageEnvelope
	err   error
}

// wait starts B's router waiting for the reply (polling every poll) and returns once it
// has read the mailbox once (the request pending then).
func (f *hintFixture) wait(t *testing.T, poll time.Duration) <-chan waited {
	t.Helper()
	box := &readCounter{Mailbox: f.b}
	r := &mailbox.Router{Box: box, Config: f.cfg, Notifier: f.b.MessageHints(), Poll: poll}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out := make(chan waited, 1)
	go func() {
		reply, err := r.ResolveReply(ctx, kernel.AccessContext{World: "w1", Actor: helper}, f.req, kernel.MessageDeliveryResult{})
		out <- waited{reply, err}
	}()
	if !until(time.Minute, func() bool { return box.reads.Load() > 0 }) {
		t.Fatal("B's router did not read the mailbox within a minute")
	}
	return out
}

// listening waits until B's listener is connected (and has woken every waiter once).
func (f *hintFixture) listening(t *testing.T) uint32 {
	t.Helper()
	var pid uint32
	if !until(time.Minute, func() bool { pid = f.b.ListenerPID(); return pid != 0 }) {
		t.Fatal("B's listener did not connect within a minute")
	}
	return pid
}

func (f *hintFixture) reply() kernel.MessageEnvelope {
	return kernel.MessageEnvelope{Version: "1", ID: "msg-2", ReplyTo: f.req.ID, Sender: alice, Receiver: helper, Purpose: "test",
		Payload: json.RawMessage(`{"ok":true}`), TraceID: "trace-1", CreatedAt: "2026-01-01T00:00:01.000Z"}
}

// woken returns what B's waiter returned, failing t when it returns nothing within a
// minute (a test bound: its poll is an hour, so only a hint can have woken it).
func woken(t *testing.T, out <-chan waited, why string) waited {
	t.Helper()
	select {
	case w := <-out:
		return w
	case <-time.After(time.Minute):
		t.Fatalf("B's waiter (polling every hour) was not woken within a minute: %s", why)
		return waited{}
	}
}

// TestMessageWaiterWokenByNotify: a request waiting on replica B (its poll an hour, so
// only a hint can wake it before the test's bound) is woken by the reply recorded
// through replica A — another store, another hub: the NOTIFY of A's resolution,
// through B's listener — and returns A's reply; a failure recorded through A wakes a
// second waiter the same way.
func TestMessageWaiterWokenByNotify(t *testing.T) {
	f := newHintFixture(t, pgstore.Options{})
	f.b.MessageHints().Subscribe("w0", "none") // starts B's listener
	f.listening(t)
	out := f.wait(t, time.Hour)
	if _, err := f.a.ReplyMessage(context.Background(), "w1", f.reply(), kernel.FormatTimestamp(time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	w := woken(t, out, "the reply's NOTIFY did not reach it")
	if w.err != nil || w.reply.ID != "msg-2" || string(w.reply.Payload) != `{"ok":true}` {
		t.Fatalf("B's waiter returned %+v, %v; want A's reply msg-2", w.reply, w.err)
	}

	// a failure is announced too
	req2 := f.req
	req2.ID = "msg-3"
	if _, _, err := f.a.DeliverMessage(context.Background(), "w1", req2, kernel.FormatTimestamp(time.Now().UnixMilli()), 0); err != nil {
		t.Fatal(err)
	}
	f.req = req2
	out = f.wait(t, time.Hour)
	if _, err := f.a.FailMessage(context.Background(), "w1", "msg-3", kernel.CodeMessageReplyResolutionFailed, kernel.FormatTimestamp(time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	if w := woken(t, out, "the failure's NOTIFY did not reach it"); !errors.Is(w.err, mailbox.ErrNoReply) {
		t.Fatalf("B's waiter returned %+v, %v; want ErrNoReply (failed)", w.reply, w.err)
	}
}

// TestMessageWaiterWokenAtListenerReconnect: a resolution whose notification is lost (the
// row updated without NOTIFY, as when it came while B's listener was disconnected) wakes
// B's waiter (its poll an hour) once B's listener, its backend ended by
// pg_terminate_backend, reconnects — every waiter reads the mailbox once at each LISTEN.
func TestMessageWaiterWokenAtListenerReconnect(t *testing.T) {
	f := newHintFixture(t, pgstore.Options{})
	f.b.MessageHints().Subscribe("w0", "none")
	old := f.listening(t)
	out := f.wait(t, time.Hour)
	admin, err := pgx.Connect(context.Background(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), `UPDATE messages SET status = 'failed', failed_code = 'message_reply_resolution_failed',
		resolved_at = '2026-01-01T00:00:02.000Z' WHERE world = 'w1' AND id = $1`, f.req.ID); err != nil {
		t.Fatal(err)
	}
	var ok bool
	if err := admin.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int32(old)).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate the listener's backend %d: %v, %v", old, ok, err)
	}
	if w := woken(t, out, "the listener's reconnect did not wake it"); !errors.Is(w.err, mailbox.ErrNoReply) {
		t.Fatalf("B's waiter returned %+v, %v; want ErrNoReply (failed)", w.reply, w.err)
	}
	if p := f.b.ListenerPID(); p == old {
		t.Fatalf("B's listener is still on backend %d", p)
	}
}

// TestMessagePollDeliversWithoutNotify: B's listener's backend is ended
// (pg_terminate_backend) while a request waits on B (polling every 20 ms, the
// fallback); once the listener has reconnected (and woken every waiter), the request is
// answered without a notification (the row updated directly, as by a process that sends
// none): the poll alone delivers it.
func TestMessagePollDeliversWithoutNotify(t *testing.T) {
	f := newHintFixture(t, pgstore.Options{})
	f.b.MessageHints().Subscribe("w0", "none")
	old := f.listening(t)
	out := f.wait(t, 20*time.Millisecond)
	admin, err := pgx.Connect(context.Background(), f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var ok bool
	if err := admin.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int32(old)).Scan(&ok); err != nil || !ok {
		t.Fatalf("terminate the listener's backend %d: %v, %v", old, ok, err)
	}
	if !until(time.Minute, func() bool { p := f.b.ListenerPID(); return p != 0 && p != old }) {
		t.Fatalf("B's listener did not reconnect (pid %d)", f.b.ListenerPID())
	}
	text, err := json.Marshal(f.reply())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(context.Background(), `UPDATE messages SET status = 'answered', reply = $2,
		resolved_at = '2026-01-01T00:00:02.000Z' WHERE world = 'w1' AND id = $1`, f.req.ID, string(text)); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-out:
		if w.err != nil || w.reply.ID != "msg-2" {
			t.Fatalf("B's waiter returned %+v, %v; want the reply msg-2", w.reply, w.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("B's waiter (polling every 20 ms) did not get the reply within a minute")
	}
}
