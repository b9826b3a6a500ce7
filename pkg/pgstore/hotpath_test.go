package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestGroupedAppendsEachGetTheirAnswer: write-ahead appends that meet are written in one
// transaction, and each still gets its own answer: a group holding an event under a
// recorded id with other content fails as a whole, then each append is tried alone —
// only that one is refused (ErrDuplicate), every other is recorded, and a refusal's
// record in a group is recorded too.
func TestGroupedAppendsEachGetTheirAnswer(t *testing.T) {
	st, _ := openFresh(t)
	ctx := context.Background()
	if err := st.AppendWriteAhead(ctx, decision("taken", "g0")); err != nil {
		t.Fatal(err)
	}
	release := pgstore.HoldAuditGroups(st)
	defer release()
	const n = 12
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writes the first group, held until release
		defer wg.Done()
		errs[0] = st.AppendWriteAhead(ctx, decision("first", "g1"))
	}()
	if !until(30*time.Second, func() bool { return pgstore.AuditGroupWaiting(st) == 0 && heldWriting(st) }) {
		t.Fatal("the first append did not start writing its group")
	}
	for i := 1; i <= n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ev := decision(fmt.Sprintf("ev-%d", i), "g1")
			switch i {
			case 5: // another event under a recorded id
				ev = decision("taken", "g-other")
			case 7: // a refusal's record
				ev.Outcome = kernel.OutcomeDenied
			}
			if i == 9 { // a batch: all or none, in order
				ev2 := decision(fmt.Sprintf("ev-%d-b", i), "g1")
				errs[i] = st.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{ev, ev2})
				return
			}
			errs[i] = st.AppendWriteAhead(ctx, ev)
		}()
	}
	if !until(30*time.Second, func() bool { return pgstore.AuditGroupWaiting(st) == n }) {
		t.Fatalf("%d appends joined the waiting group, want %d", pgstore.AuditGroupWaiting(st), n)
	}
	release()
	wg.Wait()
	for i, err := range errs {
		if i == 5 {
			if !errors.Is(err, store.ErrDuplicate) {
				t.Errorf("the append of another event under a recorded id: %v, want ErrDuplicate", err)
			}
			continue
		}
		if err != nil {
			t.Errorf("append #%d: %v", i, err)
		}
	}
	evs, err := st.ListAudit(ctx, store.AuditFilter{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ev := range evs {
		ids = append(ids, ev.ID)
		if ev.ID == "taken" && ev.OperationID != "g0" {
			t.Errorf("the recorded event under id taken was replaced: %+v", ev)
		}
	}
	want := []string{"taken", "first"}
	for i := 1; i <= n; i++ {
		if i != 5 {
			want = append(want, fmt.Sprintf("ev-%d", i))
		}
		if i == 9 {
			want = append(want, "ev-9-b")
		}
	}
	if len(ids) != len(want) {
		t.Fatalf("recorded %d events %q, want %d", len(ids), ids, len(want))
	}
	for _, id := range want {
		if !slices.Contains(ids, id) {
			t.Errorf("event %s is not recorded (recorded %q)", id, ids)
		}
	}
	if i, j := slices.Index(ids, "ev-9"), slices.Index(ids, "ev-9-b"); i < 0 || j != i+1 {
		t.Errorf("a batch's events are not recorded together in order: %q", ids)
	}
}

// heldWriting reports whether st's group writer is held (the first group is being
// written): a group waits only while one is written, so an append made now joins it.
func heldWriting(st *pgstore.Store) bool { return pgstore.AuditGroupWriting(st) }

// TestSelectionCacheFollowsTheRevision: with its listener running, a store answers a
// selection from the selections it read while the revision did not move — a change
// that bumped nothing (the trigger disabled, which no write path can do) is not seen —
// and reads it again once its view of the revision moved: another replica's change is
// seen once its notification (or the poll) came, a change of its own at once; a store
// without a listener reads the database every time.
func TestSelectionCacheFollowsTheRevision(t *testing.T) {
	a, dsn := openFresh(t)
	b := openReplica(t, dsn)
	plain := openReplica(t, dsn)
	pgstore.WithoutListener(plain)
	ctx := context.Background()
	a.Revision() // starts the listener, as serve does
	if !until(30*time.Second, func() bool { return pgstore.SelectionCacheLive(a) }) {
		t.Fatal("the listener did not connect")
	}
	actx := kernel.AccessContext{World: "w1", Actor: helper, Authority: alice, Owner: alice, Purpose: "test", TraceID: "t"}
	if _, err := b.ApplyUpdate(ctx, actx, kernel.ToolNamespaceUpdate{Enable: []string{"repo"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AwaitRevision(ctx, b.Revision()); err != nil {
		t.Fatal(err)
	}
	sel := func(st *pgstore.Store) []string {
		t.Helper()
		s, _, err := st.Selection(ctx, "w1", alice)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if got := sel(a); !slices.Equal(got, []string{"files", "repo"}) {
		t.Fatalf("after the replica's change: %q", got)
	}
	// a change that bumps no revision: only a store that reads the database sees it
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{"ALTER TABLE namespace_settings DISABLE TRIGGER USER",
		"UPDATE namespace_settings SET selection = '{files}' WHERE world = 'w1'",
		"ALTER TABLE namespace_settings ENABLE TRIGGER USER"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if got := sel(a); !slices.Equal(got, []string{"files", "repo"}) {
		t.Errorf("the cached selection: %q, want the one read at this revision", got)
	}
	if got := sel(plain); !slices.Equal(got, []string{"files"}) {
		t.Errorf("a store without a listener: %q, want the database's", got)
	}
	// the revision moves (another replica's change): read again
	if _, err := b.ApplyUpdate(ctx, actx, kernel.ToolNamespaceUpdate{Enable: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AwaitRevision(ctx, b.Revision()); err != nil {
		t.Fatal(err)
	}
	if got := sel(a); !slices.Equal(got, []string{"files", "x"}) {
		t.Errorf("after another replica's change: %q, want [files x]", got)
	}
	// its own change: at once
	if _, err := a.ApplyUpdate(ctx, actx, kernel.ToolNamespaceUpdate{Disable: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if got := sel(a); !slices.Equal(got, []string{"files"}) {
		t.Errorf("after its own change: %q, want [files]", got)
	}
}
