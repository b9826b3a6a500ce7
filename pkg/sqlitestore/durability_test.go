package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// syncLevel is PRAGMA synchronous on a connection of db (1 NORMAL, 2 FULL).
func syncLevel(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), "PRAGMA synchronous").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDurabilityClasses: durable writes go through connections that fsync every commit
// (synchronous=FULL), write-ahead records and reads through synchronous=NORMAL ones, and
// both kinds of record read back alike, in order.
func TestDurabilityClasses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	if s.durableDB != nil {
		t.Error("the durable pool was opened before any durable write")
	}
	light := event("e1", kernel.EventToolCatalogListed, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
	if err := s.AppendWriteAhead(ctx, light); err != nil {
		t.Fatal(err)
	}
	if s.durableDB != nil {
		t.Error("a write-ahead record opened the durable pool")
	}
	heavy := event("e2", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T00:00:01Z")
	if err := s.Append(ctx, heavy); err != nil {
		t.Fatal(err)
	}
	db, err := s.durable()
	if err != nil {
		t.Fatal(err)
	}
	if n := syncLevel(t, db); n != 2 {
		t.Errorf("durable connections: synchronous = %d, want 2 (FULL)", n)
	}
	if n := syncLevel(t, s.db); n != 1 {
		t.Errorf("write-ahead connections: synchronous = %d, want 1 (NORMAL)", n)
	}
	evs, err := s.ListAudit(ctx, AuditFilter{Oldest: true})
	if err != nil || !reflect.DeepEqual(evs, []kernel.AuditEvent{light, heavy}) {
		t.Errorf("ListAudit = %+v, %v", evs, err)
	}
	// The write-ahead path keeps Append's rules.
	if err := s.AppendWriteAhead(ctx, light); err != nil {
		t.Errorf("the same event again = %v, want a no-op", err)
	}
	other := light
	other.Outcome = kernel.OutcomeFailed
	if err := s.AppendWriteAhead(ctx, other); !errors.Is(err, ErrDuplicate) {
		t.Errorf("another event with a recorded id = %v, want ErrDuplicate", err)
	}
	bad := event("e3", kernel.EventToolInvoked, kernel.OutcomeDenied, "2026-01-01T00:00:00Z")
	bad.Resource = &kernel.ResourceRef{Namespace: "files", Path: []string{".."}}
	if err := s.AppendWriteAhead(ctx, bad); err == nil {
		t.Error("an event that cannot be read back was accepted")
	}
	if err := s.AppendWriteAhead(ctx, kernel.AuditEvent{}); err == nil {
		t.Error("an event without an id was accepted")
	}
	if evs, _ := s.ListAudit(ctx, AuditFilter{}); len(evs) != 2 {
		t.Errorf("%d events after the refusals, want 2", len(evs))
	}
	// After Close both pools are gone.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, event("e4", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")); err == nil {
		t.Error("Append after Close succeeded")
	}
	if err := s.AppendWriteAhead(ctx, event("e5", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")); err == nil {
		t.Error("AppendWriteAhead after Close succeeded")
	}
}

// TestCloseNeverOpenedDurable: a store closed before any durable write refuses one after.
func TestCloseNeverOpenedDurable(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.durable(); err == nil {
		t.Error("the durable pool opened after Close")
	}
}

// TestAppendWriteAheadBatch: a batch is all or nothing — one multi-row statement, or
// (with a recorded id) a transaction in which a repeated event is a no-op and another
// event with a recorded id refuses the whole batch; an invalid event refuses it too.
func TestAppendWriteAheadBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	ev := func(id string) kernel.AuditEvent {
		return event(id, kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
	}
	count := func() int {
		evs, err := s.ListAudit(ctx, AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	if err := s.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{ev("a"), ev("b")}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{ev("c"), ev("a")}); err != nil {
		t.Errorf("a batch repeating a recorded event = %v, want the repeat a no-op", err)
	}
	if n := count(); n != 3 {
		t.Errorf("%d events, want 3", n)
	}
	other := ev("b")
	other.Outcome = kernel.OutcomeFailed
	if err := s.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{ev("d"), other}); !errors.Is(err, ErrDuplicate) {
		t.Errorf("a batch with another event under a recorded id = %v, want ErrDuplicate", err)
	}
	bad := ev("e")
	bad.Owner = kernel.Address{}
	if err := s.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{ev("f"), bad}); err == nil {
		t.Error("a batch with an invalid event was accepted")
	}
	if n := count(); n != 3 {
		t.Errorf("%d events after refused batches, want 3 (nothing of them written)", n)
	}
	var big []kernel.AuditEvent
	for i := range maxMultiInsert + 2 {
		big = append(big, ev(fmt.Sprintf("big-%d", i)))
	}
	if err := s.AppendWriteAheadBatch(ctx, big); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 3+len(big) {
		t.Errorf("%d events after a large batch, want %d", n, 3+len(big))
	}
	evs, _ := s.ListAudit(ctx, AuditFilter{Oldest: true, Limit: 2})
	if len(evs) != 2 || evs[0].ID != "a" || evs[1].ID != "b" {
		t.Errorf("order: %+v", evs)
	}
}
