package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestDurableAuditCommitsOutsideTheLock: a durable transaction that appends audit events
// commits with synchronous_commit off (so the audit lock is not held through the log
// flush) and is waited for afterwards.
func TestDurableAuditCommitsOutsideTheLock(t *testing.T) {
	st, _ := openFresh(t)
	got, err := pgstore.SynchronousCommitInDurableAudit(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	if got != "off" {
		t.Errorf("synchronous_commit %q in a durable audit transaction, want off (the flush is waited for after the commit)", got)
	}
	if pgstore.FlushRounds(st) == 0 {
		t.Error("the durable audit transaction returned without a flush round")
	}
}

// TestDurableWritesReturnOnlyAfterTheirFlush: a spend's Commit, a durable Append, a
// refusal's record (write-ahead class, but durable) and a selection change each commit
// (visible to another replica) and then wait for a flush round that begins after their
// commit: none returns while that round is held, and each returns once it is done. While
// they wait, another replica still appends (the audit lock is not held by a waiter).
func TestDurableWritesReturnOnlyAfterTheirFlush(t *testing.T) {
	st, dsn := openFresh(t)
	other := openReplica(t, dsn)
	ctx := context.Background()
	// a first durable write, flushed, so that the held round below is one the writes
	// under test join
	if err := st.Append(ctx, decision("warm", "g0")); err != nil {
		t.Fatal(err)
	}
	entered, release := pgstore.HoldFlushes(st)
	defer release()
	r, ok, err := st.ReserveUse(ctx, key("g1"), 10)
	if err != nil || !ok {
		t.Fatalf("ReserveUse = %v, %v", ok, err)
	}
	refusal := decision("refused", "g2")
	refusal.Outcome = kernel.OutcomeDenied
	writes := []struct {
		name, id string
		do       func() error
	}{
		{"reservation Commit", "spent", func() error { ev := decision("spent", "g1"); return r.Commit(ctx, &ev) }},
		{"Append", "effect", func() error { return st.Append(ctx, decision("effect", "g3")) }},
		{"AppendWriteAhead of a refusal", "refused", func() error { return st.AppendWriteAhead(ctx, refusal) }},
	}
	done := make([]chan error, len(writes))
	returned := make(chan string, len(writes))
	for i, w := range writes {
		done[i] = make(chan error, 1)
		go func() {
			err := w.do()
			done[i] <- err
			returned <- w.name
		}()
	}
	select {
	case <-entered:
	case name := <-returned:
		t.Fatalf("%s returned before any flush round began", name)
	case <-time.After(2 * time.Minute):
		t.Fatal("no flush round began")
	}
	for i, w := range writes {
		// committed, visible to another replica ...
		if !until(2*time.Minute, func() bool { return recorded(t, other, w.id) }) {
			t.Fatalf("%s: its record never became visible", w.name)
		}
		// ... but not returned: the round that proves it durable is held (the round
		// may be the one held or the next, which waits for it)
		select {
		case err := <-done[i]:
			t.Fatalf("%s returned (%v) before the flush that makes it durable", w.name, err)
		default:
		}
	}
	// the audit lock is free while they wait: another replica appends meanwhile
	if err := other.AppendWriteAhead(ctx, decision("meanwhile", "g4")); err != nil {
		t.Fatalf("another replica's append while durable writes wait: %v", err)
	}
	release()
	for i, w := range writes {
		select {
		case err := <-done[i]:
			if err != nil {
				t.Errorf("%s: %v", w.name, err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("%s did not return after the flush", w.name)
		}
	}
	if n, err := other.GetUsage(ctx, key("g1")); err != nil || n != 1 {
		t.Errorf("GetUsage = %d, %v; want 1", n, err)
	}
}

// recorded reports whether the event id is in st's trail.
func recorded(t *testing.T, st *pgstore.Store, id string) bool {
	t.Helper()
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	for _, ev := range evs {
		if ev.ID == id {
			return true
		}
	}
	return false
}

// TestFollowerMissesNothingUnderConcurrentWriters: writers on three replicas append at
// once by every path that writes audit (a spend's Commit, a durable Append, a durable
// batch, grouped write-ahead appends, a refusal) while a follower reads the trail by
// cursor (ListAuditAfter from the last seq it read, as `audit export --since` and the
// LastAuditSeq followers do). The follower ends with every event exactly once: no event
// becomes visible with a seq below one already read.
func TestFollowerMissesNothingUnderConcurrentWriters(t *testing.T) {
	st, dsn := openFresh(t)
	replicas := []*pgstore.Store{st, openReplica(t, dsn), openReplica(t, dsn)}
	follower := openReplica(t, dsn)
	ctx := context.Background()
	const writers, perWriter = 12, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter)
	want := map[string]bool{}
	for w := range writers {
		for j := range perWriter {
			want[fmt.Sprintf("w%d-%d", w, j)] = true
			if w%4 == 2 && j%5 == 0 {
				want[fmt.Sprintf("w%d-%d-b", w, j)] = true
			}
		}
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := replicas[w%len(replicas)]
			for j := range perWriter {
				id := fmt.Sprintf("w%d-%d", w, j)
				ev := decision(id, fmt.Sprintf("g%d", w))
				var err error
				switch {
				case w%4 == 0:
					var r kernel.UsageReservation
					var ok bool
					r, ok, err = s.ReserveUse(ctx, key(fmt.Sprintf("g%d", w)), 1_000_000)
					if err == nil && !ok {
						err = fmt.Errorf("reserve %s: refused", id)
					}
					if err == nil {
						err = r.Commit(ctx, &ev)
					}
				case w%4 == 1:
					err = s.Append(ctx, ev)
				case w%4 == 2 && j%5 == 0:
					err = s.AppendBatch(ctx, []kernel.AuditEvent{ev, decision(id+"-b", "gb")})
				case w%4 == 3 && j%3 == 0:
					ev.Outcome = kernel.OutcomeDenied
					err = s.AppendWriteAhead(ctx, ev)
				default:
					err = s.AppendWriteAhead(ctx, ev)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", id, err)
				}
			}
		}()
	}
	writing := make(chan struct{})
	go func() { wg.Wait(); close(writing) }()
	seen := map[string]int{}
	var cursor int64
	read := func() {
		for {
			evs, last, err := follower.ListAuditAfter(ctx, store.AuditFilter{AfterSeq: cursor, Limit: 50})
			if err != nil {
				t.Fatalf("ListAuditAfter(%d): %v", cursor, err)
			}
			for _, ev := range evs {
				seen[ev.ID]++
			}
			cursor = last
			if len(evs) < 50 {
				return
			}
		}
	}
	for done := false; !done; {
		select {
		case <-writing:
			done = true
		default:
		}
		read() // the last read begins after every writer returned
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	missed := 0
	for id := range want {
		if seen[id] == 0 {
			missed++
			if missed <= 5 {
				t.Errorf("the follower missed %s", id)
			}
		}
	}
	if missed > 0 {
		t.Errorf("the follower missed %d of %d events", missed, len(want))
	}
	for id, n := range seen {
		if !want[id] {
			t.Errorf("the follower read %s, which no writer wrote", id)
		}
		if n > 1 {
			t.Errorf("the follower read %s %d times", id, n)
		}
	}
}

// TestCommitBesideAnotherEventSpendsNothing: a reservation whose record's id is recorded
// already with other content is refused (ErrDuplicate) and spends nothing — the record's
// check travels in the same message as the COMMIT, so the spend cannot commit without
// its record; the same record again commits (an append again is a no-op).
func TestCommitBesideAnotherEventSpendsNothing(t *testing.T) {
	st, _ := openFresh(t)
	ctx := context.Background()
	if err := st.Append(ctx, decision("taken", "g-other")); err != nil {
		t.Fatal(err)
	}
	r, ok, err := st.ReserveUse(ctx, key("g1"), 10)
	if err != nil || !ok {
		t.Fatalf("ReserveUse = %v, %v", ok, err)
	}
	ev := decision("taken", "g1")
	if err := r.Commit(ctx, &ev); !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("Commit beside another event under its id = %v, want ErrDuplicate", err)
	}
	if n, err := st.GetUsage(ctx, key("g1")); err != nil || n != 0 {
		t.Errorf("after the refused commit GetUsage = %d, %v; want 0", n, err)
	}
	if err := r.Release(); err != nil {
		t.Errorf("Release after a refused commit: %v", err)
	}
	// the store still works, and the same event again is a no-op that commits the spend
	r, ok, err = st.ReserveUse(ctx, key("g1"), 10)
	if err != nil || !ok {
		t.Fatalf("ReserveUse again = %v, %v", ok, err)
	}
	same := decision("taken", "g-other")
	if err := r.Commit(ctx, &same); err != nil {
		t.Fatalf("Commit with the recorded event itself: %v", err)
	}
	if n, err := st.GetUsage(ctx, key("g1")); err != nil || n != 1 {
		t.Errorf("GetUsage = %d, %v; want 1", n, err)
	}
}
