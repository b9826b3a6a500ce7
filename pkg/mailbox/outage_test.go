package mailbox_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/store"
)

// flakyBox is a mailbox whose reads and failures fail while down is set (the database
// restarting under a waiter), counting the calls that failed.
type flakyBox struct {
	store.Mailbox
	down                atomic.Bool
	failedGets, failedF atomic.Int64
}

var errDown = errors.New("state database unavailable: connection refused")

func (b *flakyBox) GetMessage(ctx context.Context, world, id string) (store.MessageRecord, error) {
	if b.down.Load() {
		b.failedGets.Add(1)
		return store.MessageRecord{}, errDown
	}
	return b.Mailbox.GetMessage(ctx, world, id)
}

func (b *flakyBox) FailMessage(ctx context.Context, world, id string, code kernel.ErrorCode, at string) (store.MessageRecord, error) {
	if b.down.Load() {
		b.failedF.Add(1)
		return store.MessageRecord{}, errDown
	}
	return b.Mailbox.FailMessage(ctx, world, id, code, at)
}

// until polls cond (every millisecond, two minutes at most: a bound, not a measured
// delay) and fails t when it never holds.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 2 minutes", what)
		}
	}
}

// TestWaitOutlivesAnOutage: a waiter whose reads of the mailbox fail (the database
// restarting) keeps waiting, and returns the reply recorded once the store is back —
// never a failure for a request that stays pending and is answered after (issue 24:
// never answered twice).
func TestWaitOutlivesAnOutage(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	box := &flakyBox{Mailbox: st}
	cfg := config()
	cfg.ReplyTimeout = time.Hour
	r := &mailbox.Router{Box: box, Config: cfg, Poll: time.Millisecond}
	ctx := context.Background()
	req := request("m-outage", reviewer)
	if _, _, err := st.DeliverMessage(ctx, world, req, "2026-08-03T09:00:00.000Z", 0); err != nil {
		t.Fatal(err)
	}
	box.down.Store(true)
	type result struct {
		reply kernel.MessageEnvelope
		err   error
	}
	done := make(chan result, 1)
	go func() {
		reply, err := r.ResolveReply(ctx, actxOf(asker, "review", req.TraceID), req, kernel.MessageDeliveryResult{})
		done <- result{reply, err}
	}()
	until(t, "three failed reads", func() bool { return box.failedGets.Load() >= 3 || len(done) > 0 })
	box.down.Store(false)
	if _, err := st.ReplyMessage(ctx, world, answerOf(req, `"after the outage"`), "2026-08-03T09:00:01.000Z"); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if res.err != nil || string(res.reply.Payload) != `"after the outage"` {
		t.Fatalf("the waiter returned %+v, %v; want the reply recorded after the outage", res.reply, res.err)
	}
}

// TestGiveUpOutlivesAnOutage: a requester that gives up (its wait cancelled) while the
// store cannot be written is told its request failed only once the mailbox records it
// failed: the resolution is tried again until the store is back, and a reply after that
// is refused.
func TestGiveUpOutlivesAnOutage(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	box := &flakyBox{Mailbox: st}
	cfg := config()
	cfg.ReplyTimeout = time.Hour
	r := &mailbox.Router{Box: box, Config: cfg, Poll: time.Millisecond}
	req := request("m-give-up", reviewer)
	if _, _, err := st.DeliverMessage(context.Background(), world, req, "2026-08-03T09:00:00.000Z", 0); err != nil {
		t.Fatal(err)
	}
	box.down.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.ResolveReply(ctx, actxOf(asker, "review", req.TraceID), req, kernel.MessageDeliveryResult{})
		done <- err
	}()
	until(t, "a failed read", func() bool { return box.failedGets.Load() >= 1 })
	cancel()
	until(t, "three failed resolutions", func() bool { return box.failedF.Load() >= 3 || len(done) > 0 })
	box.down.Store(false)
	if err := <-done; !errors.Is(err, mailbox.ErrNoReply) {
		t.Fatalf("the waiter returned %v; want ErrNoReply", err)
	}
	rec, err := st.GetMessage(context.Background(), world, req.ID)
	if err != nil || rec.Status != store.MessageFailed || rec.FailedCode != kernel.CodeMessageReplyResolutionFailed {
		t.Fatalf("after the requester was told it failed, the request is %+v, %v; want failed %s", rec, err, kernel.CodeMessageReplyResolutionFailed)
	}
	if _, err := st.ReplyMessage(context.Background(), world, answerOf(req, `"late"`), "2026-08-03T09:00:01.000Z"); !errors.Is(err, store.ErrAlreadyResolved) {
		t.Fatalf("a reply after the failure: %v; want ErrAlreadyResolved", err)
	}
}
