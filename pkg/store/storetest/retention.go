package storetest

import (
	"reflect"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// testAuditRetention (a store that implements store.AuditPruner): PruneAudit deletes the
// events older than its instant — of no escalation, of a resolved escalation, of
// another call of a pending escalation's trace, of a pending escalation's call in
// another world — and keeps the newer ones, an event whose instant does not parse, and
// every event of a pending escalation's call; once that escalation is resolved, its
// events go too. A second prune deletes nothing.
func testAuditRetention(t T, c Config) {
	st := open(t, c)
	pr, ok := st.(store.AuditPruner)
	if !ok {
		return
	}
	const old, recent = "2025-06-01T00:00:00Z", "2026-06-01T00:00:00Z"
	at := func(id, ts, trace, op, world string) kernel.AuditEvent {
		ev := event(id, kernel.EventToolInvoked, kernel.OutcomeSucceeded, ts)
		ev.TraceID, ev.OperationID, ev.NamespaceID, ev.Tool = trace, op, world, "files.read"
		return ev
	}
	open := escalation(world1, alice, "call-open")
	resolved := escalation(world1, alice, "call-res")
	for _, r := range []store.EscalationRecord{open, resolved} {
		if err := st.RecordEscalation(ctx, r); err != nil {
			t.Fatalf("RecordEscalation: %v", err)
		}
	}
	recs, err := st.ListEscalations(ctx, store.EscalationFilter{CallID: "call-res"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("ListEscalations: %v %v", recs, err)
	}
	res := store.EscalationResolution{Status: store.EscalationDenied, ResolvedBy: alice, ResolvedAt: recent}
	if _, err := st.ResolveEscalation(ctx, recs[0].ID, res, event("resolved-res", "escalation.resolved", kernel.OutcomeSucceeded, recent)); err != nil {
		t.Fatalf("ResolveEscalation: %v", err)
	}
	evs := []kernel.AuditEvent{
		at("old-plain", old, "trace-1", "call-1", world1),
		at("old-open", old, open.TraceID, "call-open", world1),
		at("old-open-trace", old, open.TraceID, "call-other", world1),
		at("old-resolved", old, resolved.TraceID, "call-res", world1),
		at("old-open-elsewhere", old, open.TraceID, "call-open", "world-elsewhere"),
		at("new", recent, "trace-1", "call-2", world1),
		at("undated", "not an instant", "trace-1", "call-3", world1),
	}
	for _, ev := range evs {
		if err := st.Append(ctx, ev); err != nil {
			t.Fatalf("Append(%s): %v", ev.ID, err)
		}
	}
	cut := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n, err := pr.PruneAudit(ctx, cut)
	if err != nil || n != 4 {
		t.Errorf("PruneAudit = %d, %v; want 4 deleted", n, err)
	}
	if got, want := ids(allEvents(t, st)), []string{"resolved-res", "old-open", "new", "undated"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after PruneAudit the trail holds %v, want %v", got, want)
	}
	if n, err := pr.PruneAudit(ctx, cut); err != nil || n != 0 {
		t.Errorf("PruneAudit again = %d, %v; want nothing deleted", n, err)
	}
	recs, err = st.ListEscalations(ctx, store.EscalationFilter{CallID: "call-open"})
	if err != nil || len(recs) != 1 {
		t.Fatalf("ListEscalations: %v %v", recs, err)
	}
	if _, err := st.ResolveEscalation(ctx, recs[0].ID, res, event("resolved-open", "escalation.resolved", kernel.OutcomeSucceeded, recent)); err != nil {
		t.Fatalf("ResolveEscalation: %v", err)
	}
	if n, err := pr.PruneAudit(ctx, cut); err != nil || n != 1 {
		t.Errorf("PruneAudit once the escalation is resolved = %d, %v; want 1 deleted", n, err)
	}
	if got, want := ids(allEvents(t, st)), []string{"resolved-res", "new", "undated", "resolved-open"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the second PruneAudit the trail holds %v, want %v", got, want)
	}
}
