package storetest_test

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
	"github.com/sharedos/sharedos/pkg/store/storetest"
)

// openSQLite opens the sqlitestore kept in dir.
func openSQLite(t storetest.T, dir string) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "state.db"), sqlitestore.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return st
}

// wrapping is a Config opening a sqlitestore wrapped by wrap.
func wrapping(wrap func(*sqlitestore.Store) store.State) storetest.Config {
	return storetest.Config{Open: func(t storetest.T, dir string) store.State { return wrap(openSQLite(t, dir)) }}
}

// TestCheckPassesAGoodStore: Check reports nothing for a store that keeps the contract
// (the control of the tests below: what fails there is the broken part).
func TestCheckPassesAGoodStore(t *testing.T) {
	t.Parallel()
	if err := storetest.Check(wrapping(func(s *sqlitestore.Store) store.State { return s })); err != nil {
		t.Errorf("Check of sqlitestore failed:\n%v", err)
	}
}

// racyCounter is a usage counter that reads the count, then writes it in another step:
// no transaction holds the two together. gate holds every reader between its read and
// its write until all the racing goroutines have read, which makes the race the suite
// runs certain to interleave.
type racyCounter struct {
	*sqlitestore.Store
	gate *gate
}

func (r racyCounter) TryConsume(ctx context.Context, key kernel.UsageKey, max int64) (bool, error) {
	n, err := r.GetUsage(ctx, key)
	if err != nil || n >= max {
		return false, err
	}
	r.gate.wait()
	return r.Store.TryConsume(ctx, key, math.MaxInt64) // the write, believing the read
}

// gate lets its waiters go once n of them wait (or after a bound, so that a suite that
// raced fewer goroutines fails instead of hanging).
type gate struct {
	mu      sync.Mutex
	n       int
	waiting int
	open    chan struct{}
}

func newGate(n int) *gate { return &gate{n: n, open: make(chan struct{})} }

func (g *gate) wait() {
	g.mu.Lock()
	g.waiting++
	if g.waiting == g.n {
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-time.After(30 * time.Second):
	}
}

// TestRacyCounterFails: a usage counter that reads and then writes without a transaction
// fails the suite's race of 16 goroutines for one maxUses grant.
func TestRacyCounterFails(t *testing.T) {
	t.Parallel()
	g := newGate(16)
	err := storetest.CheckOnly(wrapping(func(s *sqlitestore.Store) store.State { return racyCounter{s, g} }), "ConcurrentTryConsume")
	if err == nil {
		t.Fatal("the suite passed a usage counter that reads, then writes without a transaction")
	}
	if !strings.Contains(err.Error(), "ConcurrentTryConsume") || !strings.Contains(err.Error(), "want exactly 5") {
		t.Errorf("the suite failed it, but not for spending too many uses:\n%v", err)
	}
}

// The stores below each break one promise of the contract; the suite must fail each in
// the subtest that checks that promise (others may notice too).

// lateResolution appends a resolution's audit event after the resolution, not in its
// transaction.
type lateResolution struct{ *sqlitestore.Store }

func (l lateResolution) ResolveEscalation(ctx context.Context, id int64, res store.EscalationResolution, ev kernel.AuditEvent) (store.EscalationRecord, error) {
	placeholder := ev
	placeholder.ID, placeholder.Resource = ev.ID+"-placeholder", nil
	rec, err := l.Store.ResolveEscalation(ctx, id, res, placeholder)
	if err != nil {
		return rec, err
	}
	return rec, l.Append(ctx, ev)
}

// ownerAfterLimit applies the owner and actor filters to what a limited query returned.
type ownerAfterLimit struct{ *sqlitestore.Store }

func (o ownerAfterLimit) ListAudit(ctx context.Context, f store.AuditFilter) ([]kernel.AuditEvent, error) {
	owner, actor := f.Owner, f.Actor
	f.Owner, f.Actor = kernel.Address{}, kernel.Address{}
	evs, err := o.Store.ListAudit(ctx, f)
	var out []kernel.AuditEvent
	for _, ev := range evs {
		if (owner.IsZero() || ev.Owner == owner) && (actor.IsZero() || ev.Actor == actor) {
			out = append(out, ev)
		}
	}
	return out, err
}

// lateRecord commits a reserved use, then appends its record.
type lateRecord struct{ *sqlitestore.Store }

func (l lateRecord) ReserveUse(ctx context.Context, key kernel.UsageKey, max int64) (kernel.UsageReservation, bool, error) {
	r, ok, err := l.Store.ReserveUse(ctx, key, max)
	if r != nil {
		r = lateCommit{r, l.Store}
	}
	return r, ok, err
}

type lateCommit struct {
	kernel.UsageReservation
	st *sqlitestore.Store
}

func (c lateCommit) Commit(ctx context.Context, ev *kernel.AuditEvent) error {
	if err := c.UsageReservation.Commit(ctx, nil); err != nil || ev == nil {
		return err
	}
	return c.st.Append(ctx, *ev)
}

// unwrappedNotFound reports an unknown escalation with an error of its own.
type unwrappedNotFound struct{ *sqlitestore.Store }

func (u unwrappedNotFound) GetEscalation(ctx context.Context, id int64) (store.EscalationRecord, error) {
	rec, err := u.Store.GetEscalation(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		err = errors.New("no such escalation")
	}
	return rec, err
}

// eventByEvent writes a batch one event at a time, each in a transaction of its own,
// and notices the caller gave up (its context) only after the first.
type eventByEvent struct{ *sqlitestore.Store }

func (e eventByEvent) AppendWriteAheadBatch(ctx context.Context, evs []kernel.AuditEvent) error {
	for i, ev := range evs {
		c := ctx
		if i == 0 {
			c = context.WithoutCancel(ctx)
		}
		if err := e.AppendWriteAhead(c, ev); err != nil {
			return err
		}
	}
	return nil
}

// amnesiac keeps its records in a directory of its own, not in the one it is given: it
// keeps nothing across opens, yet does not say it is volatile.
func amnesiac() storetest.Config {
	return storetest.Config{Open: func(t storetest.T, _ string) store.State { return openSQLite(t, t.TempDir()) }}
}

// failedSubtests are the subtests a Check error names.
func failedSubtests(err error) []string {
	var out []string
	for _, line := range strings.Split(err.Error(), "\n") {
		if name, ok := strings.CutSuffix(line, ":"); ok && slices.Contains(storetest.SubtestNames(), name) {
			out = append(out, name)
		}
	}
	return out
}

func TestBrokenStoresFail(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		config   storetest.Config
		subtests []string
	}{
		{"a resolution recorded apart from its audit event", wrapping(func(s *sqlitestore.Store) store.State { return lateResolution{s} }), []string{"EscalationResolve"}},
		{"owner and actor filtered after the limit", wrapping(func(s *sqlitestore.Store) store.State { return ownerAfterLimit{s} }), []string{"AuditQuery"}},
		{"a use committed apart from its record", wrapping(func(s *sqlitestore.Store) store.State { return lateRecord{s} }), []string{"ReservingUsage"}},
		{"ErrNotFound not wrapped", wrapping(func(s *sqlitestore.Store) store.State { return unwrappedNotFound{s} }), []string{"Escalations"}},
		{"a store that keeps nothing across opens", amnesiac(), []string{"CrashConsistency"}},
		{"a batch written event by event", wrapping(func(s *sqlitestore.Store) store.State { return eventByEvent{s} }), []string{"WriteAheadBatchAudit", "Cancelled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := storetest.Check(tc.config)
			if err == nil {
				t.Fatalf("the suite passed a store with %s", tc.name)
			}
			failed := failedSubtests(err)
			for _, want := range tc.subtests {
				if !slices.Contains(failed, want) {
					t.Errorf("subtests failed: %q, want %s among them:\n%v", failed, want, err)
				}
			}
		})
	}
}

// TestCheckRecordsFatalAndPanic: a subtest that ends with Fatalf, or whose store panics,
// is reported, and the subtests after it still run.
func TestCheckRecordsFatalAndPanic(t *testing.T) {
	t.Parallel()
	cfg := wrapping(func(s *sqlitestore.Store) store.State { return panicky{s} })
	err := storetest.Check(cfg)
	if err == nil || !strings.Contains(err.Error(), "Snapshots:\n\tpanic: ListSnapshots panicked") {
		t.Errorf("Check of a store that panics = %v, want the panic reported for Snapshots", err)
	}
	failing := storetest.Config{Open: func(t storetest.T, dir string) store.State {
		t.Fatalf("cannot open %s", filepath.Base(dir))
		return nil
	}}
	err = storetest.Check(failing)
	if err == nil {
		t.Fatal("Check passed a store that cannot be opened")
	}
	if failed := failedSubtests(err); !slices.Equal(failed, storetest.SubtestNames()) {
		t.Errorf("Check of a store that cannot be opened reported %q, want every subtest", failed)
	}
	for _, name := range storetest.SubtestNames() {
		if !strings.Contains(err.Error(), name+":\n\tcannot open ") {
			t.Errorf("Check did not report subtest %s of a store that cannot be opened:\n%v", name, err)
		}
	}
}

// panicky panics when listing snapshots.
type panicky struct{ *sqlitestore.Store }

func (panicky) ListSnapshots(context.Context, kernel.SnapshotScope, int) ([]kernel.SnapshotRecord, error) {
	panic("ListSnapshots panicked")
}
