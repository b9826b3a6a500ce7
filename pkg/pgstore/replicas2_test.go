package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestReplicasUpdateSelectionWithoutLoss: replicas each enabling another namespace of
// one (world, owner) at once — the first of them with nothing stored yet — lose none of
// the updates, and each update's record is there.
func TestReplicasUpdateSelectionWithoutLoss(t *testing.T) {
	_, dsn := openFresh(t)
	ctx := context.Background()
	const replicas, rounds = 8, 4
	stores := make([]*pgstore.Store, replicas)
	for i := range stores {
		stores[i] = openReplica(t, dsn)
		warm(t, stores[i])
	}
	for round := range rounds {
		owner := kernel.Address{Kind: kernel.KindHuman, ID: fmt.Sprintf("u%d", round)}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, st := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				actx := kernel.AccessContext{World: "w1", Actor: helper, Authority: owner, Owner: owner, Purpose: "test", TraceID: "trace-1"}
				_, err := st.ApplyUpdateAudited(ctx, actx, kernel.ToolNamespaceUpdate{Enable: []string{fmt.Sprintf("ns%d", i)}},
					func([]string) kernel.AuditEvent { return decision(fmt.Sprintf("sel-%d-%d", round, i), "selection") })
				if err != nil {
					t.Errorf("ApplyUpdateAudited #%d: %v", i, err)
				}
			}()
		}
		close(start) // all at once: the updates overlap
		wg.Wait()
		sel, stored, err := stores[0].Selection(ctx, "w1", owner)
		if err != nil || !stored {
			t.Fatalf("Selection = %v, %v, %v", sel, stored, err)
		}
		for i := range replicas {
			if ns := fmt.Sprintf("ns%d", i); !slices.Contains(sel, ns) {
				t.Errorf("round %d: the selection %q lost the update that enabled %s", round, sel, ns)
			}
		}
	}
	if n := allowedRecords(t, stores[0], "selection"); n != replicas*rounds {
		t.Errorf("%d records of %d updates", n, replicas*rounds)
	}
}

// warm fills st's pool with a few open connections, so that replicas started together
// overlap in the database rather than in connecting.
func warm(t *testing.T, st *pgstore.Store) {
	t.Helper()
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := st.LastAuditSeq(context.Background()); err != nil {
				t.Errorf("LastAuditSeq: %v", err)
			}
		}()
	}
	wg.Wait()
}

// TestReplicasResolveOnce: replicas resolving one escalation at once: exactly one
// resolves it (with its record), every other gets store.ErrAlreadyResolved, and the
// trail holds one resolution record.
func TestReplicasResolveOnce(t *testing.T) {
	st, dsn := openFresh(t)
	ctx := context.Background()
	if err := st.RecordEscalation(ctx, store.EscalationRecord{World: "w1", Owner: alice, TraceID: "trace-1", CallID: "c1",
		Escalation: kernel.Escalation{Reason: "needs c1", Reviewer: alice, RequestedAt: "2026-01-01T00:00:00Z", Status: store.EscalationPending}}); err != nil {
		t.Fatalf("RecordEscalation: %v", err)
	}
	recs, err := st.ListEscalations(ctx, store.EscalationFilter{})
	if err != nil || len(recs) != 1 {
		t.Fatalf("ListEscalations = %v, %v", recs, err)
	}
	const replicas = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, already := 0, 0
	start := make(chan struct{})
	for i := range replicas {
		r := openReplica(t, dsn)
		warm(t, r)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res := store.EscalationResolution{Status: store.EscalationApproved, ResolvedBy: alice, ResolvedAt: "2026-01-01T00:00:00Z"}
			_, err := r.ResolveEscalation(ctx, recs[0].ID, res, decision(fmt.Sprintf("res-%d", i), "resolution"))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, store.ErrAlreadyResolved):
				already++
			default:
				t.Errorf("ResolveEscalation #%d: %v", i, err)
			}
		}()
	}
	close(start) // all at once: the resolutions overlap
	wg.Wait()
	if won != 1 || already != replicas-1 {
		t.Errorf("%d replicas resolved the escalation and %d were told it was resolved; want 1 and %d", won, already, replicas-1)
	}
	if n := allowedRecords(t, st, "resolution"); n != 1 {
		t.Errorf("%d resolution records, want 1", n)
	}
}
