package mailbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

var (
	owner    = kernel.Address{Kind: kernel.KindHuman, ID: "olga"}
	asker    = kernel.Address{Kind: kernel.KindAgent, ID: "asker"}
	reviewer = kernel.Address{Kind: kernel.KindAgent, ID: "reviewer"}
	runner   = kernel.Address{Kind: kernel.KindAgent, ID: "summarizer"}
)

const world = "w"

func openStore(t testing.TB, path string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func config() *mailbox.Config {
	return &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{reviewer: {Mode: mailbox.ModeWait},
		runner: {Mode: mailbox.ModeExec, Command: []string{"summarize"}}}}
}

func actxOf(actor kernel.Address, purpose, trace string) kernel.AccessContext {
	return kernel.AccessContext{World: world, Actor: actor, Authority: owner, Owner: owner, Purpose: purpose, TraceID: trace,
		EnabledToolNamespaces: []string{"messages"}, Now: "2026-08-03T09:00:00.000Z"}
}

func request(id string, to kernel.Address) kernel.MessageEnvelope {
	return kernel.MessageEnvelope{Version: "1", ID: id, Sender: asker, Receiver: to, Purpose: "review", Payload: json.RawMessage(`{"q":1}`),
		TraceID: "trace-" + id, CreatedAt: "2026-08-03T09:00:00.000Z"}
}

func answerOf(req kernel.MessageEnvelope, payload string) kernel.MessageEnvelope {
	return kernel.MessageEnvelope{Version: "1", ID: "re-" + req.ID, Sender: req.Receiver, Receiver: req.Sender, Purpose: req.Purpose,
		Payload: json.RawMessage(payload), TraceID: req.TraceID, CreatedAt: req.CreatedAt, ReplyTo: req.ID}
}

// TestTransportReceipts: accepted (with the first acceptance's timestamp on a repeat),
// recipient_unreachable for an unconfigured recipient, message_id_conflict for other
// content under a delivered id, messages_in_flight_exceeded past the bound; a reply is
// delivered once and refused after.
func TestTransportReceipts(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	cfg := config()
	cfg.MaxInFlight = 2
	clock := time.Date(2026, 8, 3, 9, 0, 0, 0, time.UTC)
	tr := &mailbox.Transport{Box: st, Config: cfg, Now: func() time.Time { clock = clock.Add(time.Second); return clock }}
	ctx, a := context.Background(), actxOf(asker, "review", "t")
	deliver := func(env kernel.MessageEnvelope) kernel.MessageDeliveryResult {
		t.Helper()
		r, err := tr.Deliver(ctx, a, env)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	first := deliver(request("m1", reviewer))
	if first.Status != kernel.DeliveryAccepted {
		t.Fatalf("%+v", first)
	}
	if again := deliver(request("m1", reviewer)); again.Status != first.Status || again.Timestamp != first.Timestamp {
		t.Fatalf("a repeated delivery got %+v, the first %+v", again, first)
	}
	changed := request("m1", reviewer)
	changed.Payload = json.RawMessage(`2`)
	if r := deliver(changed); r.Status != kernel.DeliveryFailed || r.Error.Code != mailbox.CodeMessageIDConflict {
		t.Fatalf("other content: %+v", r)
	}
	if r := deliver(request("m2", kernel.Address{Kind: kernel.KindAgent, ID: "nobody"})); r.Status != kernel.DeliveryDenied || r.Error.Code != kernel.CodeRecipientUnreachable {
		t.Fatalf("unrouted: %+v", r)
	}
	if r := deliver(request("m3", runner)); r.Status != kernel.DeliveryAccepted {
		t.Fatalf("m3: %+v", r)
	}
	if r := deliver(request("m4", reviewer)); r.Status != kernel.DeliveryDenied || r.Error.Code != kernel.CodeMessagesInFlightExceeded {
		t.Fatalf("a third in flight: %+v", r)
	}
	if _, err := st.GetMessage(ctx, world, "m4"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused message was stored: %v", err)
	}
	reply := answerOf(request("m1", reviewer), `"yes"`)
	if r := deliver(reply); r.Status != kernel.DeliveryDelivered {
		t.Fatalf("reply: %+v", r)
	}
	reply.ID = "re-again"
	if r := deliver(reply); r.Status != kernel.DeliveryDenied || r.Error.Code != mailbox.CodeMessageAlreadyResolved {
		t.Fatalf("second reply: %+v", r)
	}
	orphan := answerOf(request("zz", reviewer), `1`)
	if r := deliver(orphan); r.Status != kernel.DeliveryDenied || r.Error.Code != mailbox.CodeMessageNotFound {
		t.Fatalf("orphan reply: %+v", r)
	}
}

// TestRouterWaitGetsTheReply: a wait request is answered by another writer of the
// mailbox; the router returns that reply.
func TestRouterWaitGetsTheReply(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	ctx := context.Background()
	req := request("m1", reviewer)
	if _, _, err := st.DeliverMessage(ctx, world, req, "2026-08-03T09:00:00.000Z", 0); err != nil {
		t.Fatal(err)
	}
	r := &mailbox.Router{Box: st, Config: config(), Poll: time.Millisecond}
	done := make(chan struct{})
	var got kernel.MessageEnvelope
	var err error
	go func() {
		defer close(done)
		got, err = r.ResolveReply(ctx, actxOf(asker, "review", req.TraceID), req, kernel.MessageDeliveryResult{})
	}()
	if _, rerr := st.ReplyMessage(ctx, world, answerOf(req, `{"ok":true}`), "2026-08-03T09:00:01.000Z"); rerr != nil {
		t.Fatal(rerr)
	}
	<-done
	if err != nil || got.ID != "re-m1" || string(got.Payload) != `{"ok":true}` {
		t.Fatalf("reply %+v, %v", got, err)
	}
}

// TestRouterCancelledFailsTheRequest: a cancelled wait resolves the request failed, so a
// late answer is refused (never answered after its requester gave up).
func TestRouterCancelledFailsTheRequest(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	req := request("m1", reviewer)
	if _, _, err := st.DeliverMessage(context.Background(), world, req, "2026-08-03T09:00:00.000Z", 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &mailbox.Router{Box: st, Config: config(), Poll: time.Millisecond}
	if _, err := r.ResolveReply(ctx, actxOf(asker, "review", req.TraceID), req, kernel.MessageDeliveryResult{}); !errors.Is(err, mailbox.ErrNoReply) {
		t.Fatalf("err %v, want ErrNoReply", err)
	}
	rec, _ := st.GetMessage(context.Background(), world, "m1")
	if rec.Status != store.MessageFailed || rec.FailedCode != kernel.CodeMessageReplyResolutionFailed {
		t.Fatalf("record %+v", rec)
	}
	if _, err := st.ReplyMessage(context.Background(), world, answerOf(req, `1`), "2026-08-03T09:00:01.000Z"); !errors.Is(err, store.ErrAlreadyResolved) {
		t.Fatalf("a late answer: %v", err)
	}
}

// TestRouterExec: an exec recipient's command is run with the request; a command that
// answers gives its reply, one that exits without answering fails the request.
func TestRouterExec(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	ctx := context.Background()
	var mu sync.Mutex
	var ran []string
	answer := true
	r := &mailbox.Router{Box: st, Config: config(), Poll: time.Hour, // only the command's exit wakes the router
		Run: func(ctx context.Context, route mailbox.Route, req kernel.MessageEnvelope, w string) error {
			mu.Lock()
			ran = append(ran, fmt.Sprintln(route.Command, req.ID, w))
			mu.Unlock()
			if answer {
				_, err := st.ReplyMessage(ctx, w, answerOf(req, `"summary"`), "2026-08-03T09:00:01.000Z")
				return err
			}
			return errors.New("exit status 3")
		}}
	for _, id := range []string{"m1", "m2"} {
		if _, _, err := st.DeliverMessage(ctx, world, request(id, runner), "2026-08-03T09:00:00.000Z", 0); err != nil {
			t.Fatal(err)
		}
	}
	got, err := r.ResolveReply(ctx, actxOf(asker, "review", "trace-m1"), request("m1", runner), kernel.MessageDeliveryResult{})
	if err != nil || string(got.Payload) != `"summary"` {
		t.Fatalf("exec reply %+v, %v", got, err)
	}
	answer = false
	if _, err := r.ResolveReply(ctx, actxOf(asker, "review", "trace-m2"), request("m2", runner), kernel.MessageDeliveryResult{}); !errors.Is(err, mailbox.ErrNoReply) {
		t.Fatalf("a command without a reply: %v", err)
	}
	if rec, _ := st.GetMessage(ctx, world, "m2"); rec.Status != store.MessageFailed {
		t.Fatalf("m2 %+v", rec)
	}
	if len(ran) != 2 || ran[0] != "[summarize] m1 w\n" {
		t.Fatalf("ran %v", ran)
	}
}

// TestReattach: after a restart the waiter re-attaches: an answered request gives its
// reply, a pending one within its timeout goes on waiting, one past its timeout (by the
// injected clock) is resolved failed; a failed one stays failed.
func TestReattach(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	ctx := context.Background()
	for _, id := range []string{"answered", "late", "failed"} {
		if _, _, err := st.DeliverMessage(ctx, world, request(id, reviewer), "2026-08-03T09:00:00.000Z", 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := st.ReplyMessage(ctx, world, answerOf(request("answered", reviewer), `1`), "2026-08-03T09:00:01.000Z"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.FailMessage(ctx, world, "failed", kernel.CodeMessageReplyResolutionFailed, "2026-08-03T09:00:01.000Z"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 8, 3, 9, 10, 0, 0, time.UTC) // past the 5 minute default
	r := &mailbox.Router{Box: st, Config: config(), Poll: time.Millisecond, Now: func() time.Time { return now }}
	if got, err := r.Reattach(ctx, world, "answered"); err != nil || got.ReplyTo != "answered" {
		t.Fatalf("answered: %+v %v", got, err)
	}
	if _, err := r.Reattach(ctx, world, "late"); !errors.Is(err, mailbox.ErrNoReply) {
		t.Fatalf("late: %v", err)
	}
	if rec, _ := st.GetMessage(ctx, world, "late"); rec.Status != store.MessageFailed {
		t.Fatalf("late %+v", rec)
	}
	if _, err := r.Reattach(ctx, world, "failed"); !errors.Is(err, mailbox.ErrNoReply) {
		t.Fatalf("failed: %v", err)
	}
	if _, err := r.Reattach(ctx, world, "unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
	// within its timeout, the wait goes on until the answer comes
	if _, _, err := st.DeliverMessage(ctx, world, request("fresh", reviewer), "2026-08-03T09:09:00.000Z", 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := r.Reattach(ctx, world, "fresh"); done <- err }()
	if _, err := st.ReplyMessage(ctx, world, answerOf(request("fresh", reviewer), `2`), "2026-08-03T09:10:01.000Z"); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("fresh: %v", err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []mailbox.Config{
		{ReplyTimeout: 25 * time.Hour},
		{ReplyTimeout: time.Millisecond},
		{MaxInFlight: -1},
		{Routes: map[kernel.Address]mailbox.Route{reviewer: {Mode: "poll"}}},
		{Routes: map[kernel.Address]mailbox.Route{reviewer: {Mode: mailbox.ModeExec}}},
		{Routes: map[kernel.Address]mailbox.Route{reviewer: {Mode: mailbox.ModeWait, Command: []string{"x"}}}},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v validated", c)
		}
	}
	if err := config().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestRouterWokenByNotifier: with a notifier, a reply recorded through the transport
// wakes the waiting router at once; its poll (an hour here) never comes. Without the
// wake-up the wait would end at its context's deadline, unanswered.
func TestRouterWokenByNotifier(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	cfg := config()
	hub := mailbox.NewHub()
	tr := &mailbox.Transport{Box: st, Config: cfg, Notifier: hub}
	read := &firstRead{Mailbox: st, done: make(chan struct{})}
	r := &mailbox.Router{Box: read, Config: cfg, Notifier: hub, Poll: time.Hour}
	ctx := context.Background()
	actx := actxOf(asker, "review", "trace-1")
	req := kernel.MessageEnvelope{Version: "1", ID: "m-notify", Sender: asker, Receiver: reviewer, Purpose: "review",
		Payload: json.RawMessage(`1`), TraceID: "trace-1", CreatedAt: "2026-08-03T09:00:00.000Z"}
	if res, err := tr.Deliver(ctx, actx, req); err != nil || res.Status != kernel.DeliveryAccepted {
		t.Fatalf("deliver: %+v %v", res, err)
	}
	type out struct {
		reply kernel.MessageEnvelope
		err   error
	}
	done := make(chan out, 1)
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	go func() {
		reply, err := r.ResolveReply(waitCtx, actx, req, kernel.MessageDeliveryResult{})
		done <- out{reply, err}
	}()
	<-read.done // the wait read the request pending: only a wake-up (or the hour) reads again
	answer := answerOf(req, `"yes"`)
	if res, err := tr.Deliver(ctx, actxOf(reviewer, "review", "trace-1"), answer); err != nil || res.Status != kernel.DeliveryDelivered {
		t.Fatalf("answer: %+v %v", res, err)
	}
	got := <-done
	if got.err != nil || got.reply.ID != answer.ID {
		t.Fatalf("the waiter got %+v, %v; want the answer %s (woken by the hint, not the hour's poll)", got.reply, got.err, answer.ID)
	}
}

// firstRead is a mailbox that closes done after its first GetMessage returned.
type firstRead struct {
	store.Mailbox
	done chan struct{}
	once sync.Once
}

func (f *firstRead) GetMessage(ctx context.Context, world, id string) (store.MessageRecord, error) {
	rec, err := f.Mailbox.GetMessage(ctx, world, id)
	f.once.Do(func() { close(f.done) })
	return rec, err
}

// TestHubNotifyAll: NotifyAll wakes every subscriber of every (world, id) once (a
// subscriber not yet reading stays woken once); Notify wakes only its own.
func TestHubNotifyAll(t *testing.T) {
	h := mailbox.NewHub()
	a, cancelA := h.Subscribe("w", "a")
	defer cancelA()
	b, cancelB := h.Subscribe("w2", "b")
	defer cancelB()
	h.Notify("w", "a")
	select {
	case <-b:
		t.Fatal("Notify of w/a woke the subscriber of w2/b")
	default:
	}
	<-a
	h.NotifyAll()
	h.NotifyAll()
	for name, ch := range map[string]<-chan struct{}{"w/a": a, "w2/b": b} {
		select {
		case <-ch:
		default:
			t.Fatalf("NotifyAll did not wake the subscriber of %s", name)
		}
		select {
		case <-ch:
			t.Fatalf("the subscriber of %s was woken twice", name)
		default:
		}
	}
}
