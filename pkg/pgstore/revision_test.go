package pgstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// dbRevision reads the revision row of dsn's database.
func dbRevision(t *testing.T, dsn string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(context.Background(), "SELECT rev FROM sharedos_revision").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// until polls cond (every 10 ms) until it holds or limit passes — a test timeout, not a
// measured delay — and reports whether it held.
func until(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond) // polling for a state, not waiting for time to pass
	}
	return true
}

// TestRevisionFollowsEveryChange: a selection update, an escalation recorded and its
// resolution each bump the database's revision by one, and the writing store's own view
// includes its write as soon as the write returns (no listener runs: nothing else could
// have raised it); a spent use bumps nothing.
func TestRevisionFollowsEveryChange(t *testing.T) {
	st, dsn := openFresh(t)
	pgstore.WithoutListener(st)
	ctx := context.Background()
	if got := dbRevision(t, dsn); got != 0 {
		t.Fatalf("revision of a fresh database = %d, want 0", got)
	}
	actx := kernel.AccessContext{World: "w1", Actor: helper, Authority: alice, Owner: alice, Purpose: "test", TraceID: "t"}
	steps := []struct {
		what string
		do   func() error
	}{
		{"a selection update", func() error {
			_, err := st.ApplyUpdateAudited(ctx, actx, kernel.ToolNamespaceUpdate{Disable: []string{"files"}},
				func([]string) kernel.AuditEvent { return decision("sel-1", "selection") })
			return err
		}},
		{"an escalation recorded", func() error {
			return st.RecordEscalation(ctx, store.EscalationRecord{World: "w1", Owner: alice, TraceID: "t", CallID: "c1",
				Escalation: kernel.Escalation{Reason: "r", Reviewer: alice, RequestedAt: "2026-01-01T00:00:00Z", Status: store.EscalationPending}})
		}},
		{"an escalation resolved", func() error {
			recs, err := st.ListEscalations(ctx, store.EscalationFilter{})
			if err != nil || len(recs) != 1 {
				return errors.Join(err, errors.New("want one escalation"))
			}
			_, err = st.ResolveEscalation(ctx, recs[0].ID, store.EscalationResolution{Status: store.EscalationApproved,
				ResolvedBy: alice, ResolvedAt: "2026-01-01T00:00:00Z"}, decision("res-1", "resolution"))
			return err
		}},
	}
	for i, s := range steps {
		if err := s.do(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		want := int64(i + 1)
		if got := dbRevision(t, dsn); got != want {
			t.Errorf("after %s the database's revision is %d, want %d", s.what, got, want)
		}
		if got := st.Revision(); got != want {
			t.Errorf("after %s the writer's own view is %d, want %d", s.what, got, want)
		}
	}
	if _, err := st.TryConsume(ctx, key("g1"), 5); err != nil {
		t.Fatal(err)
	}
	if got := dbRevision(t, dsn); got != int64(len(steps)) {
		t.Errorf("a spent use moved the revision to %d", got)
	}
}

// TestAwaitRevision: a store with no listener reaches a revision another store wrote by
// reading the database (AwaitRevision refreshes); a revision the database has not
// reached is an error once the caller's context ends, and the view stays where it was.
func TestAwaitRevision(t *testing.T) {
	a, dsn := openFresh(t)
	b := openReplica(t, dsn)
	pgstore.WithoutListener(b)
	ctx := context.Background()
	actx := kernel.AccessContext{World: "w1", Actor: helper, Authority: alice, Owner: alice, Purpose: "test", TraceID: "t"}
	if _, err := a.ApplyUpdate(ctx, actx, kernel.ToolNamespaceUpdate{Disable: []string{"files"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.Revision(); got != 0 {
		t.Fatalf("B's view before it awaited anything: %d (no listener, no read)", got)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if got, err := b.AwaitRevision(wctx, 1); err != nil || got != 1 {
		t.Fatalf("AwaitRevision(1) = %d, %v; want 1", got, err)
	}
	short, cancel2 := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel2()
	if got, err := b.AwaitRevision(short, 99); err == nil || got != 1 {
		t.Fatalf("AwaitRevision(99) on a database at 1 = %d, %v; want an error, the view at 1", got, err)
	}
}

// TestRevisionReachesOtherReplicasByNotify: a change through replica A raises replica
// B's view by its notification alone (B polls once an hour). The delay is logged, not
// asserted.
func TestRevisionReachesOtherReplicasByNotify(t *testing.T) {
	a, dsn := openFresh(t)
	b, err := pgstore.Open(context.Background(), dsn, pgstore.Options{DefaultNamespaces: []string{"files"}, RevisionPoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !until(time.Minute, func() bool { return b.ListenerPID() != 0 }) {
		t.Fatal("B's listener did not connect within a minute")
	}
	actx := kernel.AccessContext{World: "w1", Actor: helper, Authority: alice, Owner: alice, Purpose: "test", TraceID: "t"}
	for i := range 20 {
		if _, err := a.ApplyUpdate(context.Background(), actx, kernel.ToolNamespaceUpdate{Disable: []string{"files"}}); err != nil {
			t.Fatal(err)
		}
		want := dbRevision(t, dsn)
		if want != int64(i+1) {
			t.Fatalf("change %d: the database's revision is %d", i, want)
		}
		t0 := time.Now()
		if !until(30*time.Second, func() bool { return b.Revision() >= want }) {
			t.Fatalf("change %d: B's view is %d, A wrote %d: no notification reached B", i, b.Revision(), want)
		}
		if i == 19 {
			t.Logf("A's change seen by B's listener after %v", time.Since(t0))
		}
	}
}

// TestRevisionPollCatchesUpWhenNotifyIsLost: replica B's listener backend is killed
// (pg_terminate_backend) and the revision is then raised without a notification (as if
// it had been lost while B reconnected): B's view catches up by polling, and its
// listener reconnects on a new backend.
func TestRevisionPollCatchesUpWhenNotifyIsLost(t *testing.T) {
	_, dsn := openFresh(t)
	b, err := pgstore.Open(context.Background(), dsn, pgstore.Options{DefaultNamespaces: []string{"files"}, RevisionPoll: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !until(time.Minute, func() bool { return b.ListenerPID() != 0 }) {
		t.Fatal("B's listener did not connect within a minute")
	}
	old := b.ListenerPID()
	admin, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	for round := range 3 {
		var ok bool
		if err := admin.QueryRow(context.Background(), "SELECT pg_terminate_backend($1)", int32(old)).Scan(&ok); err != nil || !ok {
			t.Fatalf("terminate the listener's backend %d: %v, %v", old, ok, err)
		}
		// a change whose notification never comes: the row alone moves
		var want int64
		if err := admin.QueryRow(context.Background(), "UPDATE sharedos_revision SET rev = rev + 1 RETURNING rev").Scan(&want); err != nil {
			t.Fatal(err)
		}
		if !until(time.Minute, func() bool { return b.Revision() >= want }) {
			t.Fatalf("round %d: B's view is %d, the database's %d: the poll did not catch up", round, b.Revision(), want)
		}
		if !until(time.Minute, func() bool { p := b.ListenerPID(); return p != 0 && p != old }) {
			t.Fatalf("round %d: B's listener did not reconnect (pid %d)", round, b.ListenerPID())
		}
		old = b.ListenerPID()
	}
}
