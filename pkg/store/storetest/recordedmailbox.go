package storetest

import (
	"context"
	"errors"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// testRecordedMailbox: a delivery and a reply written with their records
// (store.RecordedMailbox) — the message and its records, and with a reserved use the
// spent use too, or none of them: a refusal (other content, the in-flight bound, a reply
// to an unknown or resolved message), a records function that fails and a use reserved
// elsewhere write nothing and spend nothing. A store without it is passed over.
func testRecordedMailbox(t T, c Config) {
	st := open(t, c)
	mb, ok := st.(store.RecordedMailbox)
	if !ok {
		t.Logf("the store has no recorded mailbox")
		return
	}
	rs, reserving := st.(kernel.ReservingUsageStore)
	k := usageKey("send")
	reserve := func() kernel.UsageReservation {
		t.Helper()
		if !reserving {
			return nil
		}
		r, ok, err := rs.ReserveUse(ctx, k, 100)
		if err != nil || !ok {
			t.Fatalf("ReserveUse = %v, %v", ok, err)
		}
		return r
	}
	var trail []string
	records := func(ids ...string) func(store.MessageRecord) ([]kernel.AuditEvent, error) {
		return func(store.MessageRecord) ([]kernel.AuditEvent, error) {
			var evs []kernel.AuditEvent
			for _, id := range ids {
				evs = append(evs, event(id, kernel.EventMessageSent, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z"))
			}
			return evs, nil
		}
	}
	check := func(what string, spent int64, messages int) {
		t.Helper()
		if got := ids(allEvents(t, st)); !sameStrings(got, trail) {
			t.Errorf("after %s the trail holds %s, want %s", what, q(got), q(trail))
		}
		if reserving {
			if n := usage(t, st, k); n != spent {
				t.Errorf("after %s %d uses are spent, want %d", what, n, spent)
			}
		}
		recs, err := mb.ListMessages(ctx, store.MessageFilter{World: world1})
		if err != nil || len(recs) != messages {
			t.Errorf("after %s the mailbox holds %d messages (%v), want %d", what, len(recs), err, messages)
		}
	}
	var spent int64
	if reserving {
		spent = 1
	}

	// a delivery with its records and its use: all of them
	m1 := message("m1", alice, helper, `{"n":1}`)
	rec, created, err := mb.DeliverMessageRecorded(ctx, world1, m1, acceptedAt, 2, reserve(), records("m1-decision", "m1-sent"))
	if err != nil || !created || rec.Status != store.MessagePending {
		t.Fatalf("DeliverMessageRecorded(m1) = %+v, %v, %v", rec, created, err)
	}
	trail = append(trail, "m1-decision", "m1-sent")
	check("a recorded delivery", spent, 1)

	// the same message again: idempotent, this send's records and use written
	if _, created, err := mb.DeliverMessageRecorded(ctx, world1, m1, "2026-01-01T00:09:00Z", 2, reserve(), records("m1-again")); err != nil || created {
		t.Fatalf("DeliverMessageRecorded(m1 again) = %v, %v; want the stored record", created, err)
	}
	trail = append(trail, "m1-again")
	if reserving {
		spent++
	}
	check("the same message again", spent, 1)

	// refusals: nothing written, nothing spent
	other := message("m1", alice, helper, `{"n":2}`)
	if _, _, err := mb.DeliverMessageRecorded(ctx, world1, other, acceptedAt, 2, reserve(), records("conflict")); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("DeliverMessageRecorded of other content under m1 = %v, want ErrDuplicate", err)
	}
	check("a delivery of other content under a stored id", spent, 1)
	m2 := message("m2", alice, helper, `2`)
	if _, _, err := mb.DeliverMessageRecorded(ctx, world1, m2, acceptedAt, 1, reserve(), records("over")); !errors.Is(err, store.ErrInFlightExceeded) {
		t.Errorf("DeliverMessageRecorded over the in-flight bound = %v, want ErrInFlightExceeded", err)
	}
	check("a delivery over the in-flight bound", spent, 1)
	failing := func(store.MessageRecord) ([]kernel.AuditEvent, error) { return nil, errors.New("no record") }
	if _, _, err := mb.DeliverMessageRecorded(ctx, world1, m2, acceptedAt, 2, reserve(), failing); err == nil {
		t.Errorf("DeliverMessageRecorded whose records failed succeeded")
	}
	check("a delivery whose records failed", spent, 1)
	foreign := &foreignReservation{}
	if _, _, err := mb.DeliverMessageRecorded(ctx, world1, m2, acceptedAt, 2, foreign, records("foreign")); !errors.Is(err, store.ErrForeignReservation) || foreign.released != 1 {
		t.Errorf("DeliverMessageRecorded with another store's use = %v (released %d times), want ErrForeignReservation, released once", err, foreign.released)
	}
	check("a delivery with another store's use", spent, 1)

	// replies
	if _, err := mb.ReplyMessageRecorded(ctx, world1, replyTo(m2, `0`), acceptedAt, reserve(), records("unknown")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReplyMessageRecorded to an unknown message = %v, want ErrNotFound", err)
	}
	check("a reply to an unknown message", spent, 1)
	if _, err := mb.ReplyMessageRecorded(ctx, world1, replyTo(m1, `"a"`), acceptedAt, reserve(), failing); err == nil {
		t.Errorf("ReplyMessageRecorded whose records failed succeeded")
	}
	check("a reply whose records failed", spent, 1)
	if got, err := mb.GetMessage(ctx, world1, "m1"); err != nil || got.Status != store.MessagePending {
		t.Errorf("m1 after a reply whose records failed: %+v, %v; want pending", got, err)
	}
	rec, err = mb.ReplyMessageRecorded(ctx, world1, replyTo(m1, `"yes"`), acceptedAt, reserve(), records("reply-decision", "reply-sent"))
	if err != nil || rec.Status != store.MessageAnswered || rec.Reply == nil || string(rec.Reply.Payload) != `"yes"` {
		t.Fatalf("ReplyMessageRecorded(m1) = %+v, %v", rec, err)
	}
	trail = append(trail, "reply-decision", "reply-sent")
	if reserving {
		spent++
	}
	check("a recorded reply", spent, 1)
	if _, err := mb.ReplyMessageRecorded(ctx, world1, replyTo(m1, `"no"`), acceptedAt, reserve(), records("late")); !errors.Is(err, store.ErrAlreadyResolved) {
		t.Errorf("ReplyMessageRecorded to an answered message = %v, want ErrAlreadyResolved", err)
	}
	check("a reply to an answered message", spent, 1)
	if got, err := mb.GetMessage(ctx, world1, "m1"); err != nil || got.Reply == nil || string(got.Reply.Payload) != `"yes"` {
		t.Errorf("m1 after a late reply: %+v, %v; want the first answer", got, err)
	}
}

// foreignReservation is a use reserved by another store: it counts its releases.
type foreignReservation struct{ released int }

func (f *foreignReservation) Commit(_ context.Context, _ *kernel.AuditEvent) error {
	return errors.New("a foreign reservation is never committed here")
}

func (f *foreignReservation) Release() error { f.released++; return nil }
