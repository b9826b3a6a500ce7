package sqlitestore

import (
	"context"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestPruneKeepsTheTrailAppendOnly: after PruneAudit (which drops and re-creates the
// trigger of deletes in its transaction) a DELETE or UPDATE of an event is still refused
// and changes nothing.
func TestPruneKeepsTheTrailAppendOnly(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	ev := kernel.AuditEvent{Version: "1", ID: "e1", Type: kernel.EventToolInvoked, Outcome: kernel.OutcomeSucceeded,
		At: "2026-06-01T00:00:00Z", TraceID: "t", NamespaceID: "w",
		Actor: kernel.Address{Kind: "agent", ID: "a"}, Authority: kernel.Address{Kind: "human", ID: "h"}, Owner: kernel.Address{Kind: "human", ID: "h"}}
	if err := s.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneAudit(ctx, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil || n != 0 {
		t.Fatalf("PruneAudit = %d, %v", n, err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE audit_events SET tool = 'x'`); err == nil {
		t.Errorf("an UPDATE of the trail after a prune succeeded")
	}
	if _, err := s.db.ExecContext(ctx, `DELETE FROM audit_events`); err == nil {
		t.Errorf("a DELETE of the trail after a prune succeeded")
	}
	if evs, err := s.ListAudit(ctx, AuditFilter{}); err != nil || len(evs) != 1 || evs[0].Tool != "" {
		t.Errorf("the trail after the refusals = %+v, %v", evs, err)
	}
}
