package storetest

import (
	"bytes"
	"reflect"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// testCrashConsistency: a record of every class committed by one instance of the store
// is there when the store is opened again while that instance is abandoned without
// Close (as a killed process abandons it), and a reservation neither committed nor
// released spent nothing and recorded nothing. Only the reading instance runs after the
// abandonment: the abandoned one may hold locks a killed process's would have dropped.
func testCrashConsistency(t T, c Config) {
	dir := t.TempDir()
	st := openAt(t, c, dir)
	var order []string // the trail, as written
	recorded := func(id string) { order = append(order, id) }

	sel, err := st.ApplyUpdate(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-a"}})
	if err != nil {
		t.Fatalf("ApplyUpdate: %v", err)
	}
	if as, ok := st.(kernel.AuditedSettingsStore); ok {
		sel, err = as.ApplyUpdateAudited(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-b"}},
			func([]string) kernel.AuditEvent { return invoked("crash-selection") })
		if err != nil {
			t.Fatalf("ApplyUpdateAudited: %v", err)
		}
		recorded("crash-selection")
	}
	for range 2 {
		if ok, err := st.TryConsume(ctx, usageKey("consumed"), 3); err != nil || !ok {
			t.Fatalf("TryConsume = %v, %v", ok, err)
		}
	}
	rs, reserving := st.(kernel.ReservingUsageStore)
	if reserving {
		r, ok, err := rs.ReserveUse(ctx, usageKey("reserved"), 3)
		if err != nil || !ok {
			t.Fatalf("ReserveUse = %v, %v", ok, err)
		}
		ev := invoked("crash-use")
		if err := r.Commit(ctx, &ev); err != nil {
			t.Fatalf("Commit: %v", err)
		}
		recorded("crash-use")
	}
	if err := st.Append(ctx, invoked("crash-durable")); err != nil {
		t.Fatalf("Append: %v", err)
	}
	recorded("crash-durable")
	if wa, ok := st.(kernel.WriteAheadAuditSink); ok {
		if err := wa.AppendWriteAhead(ctx, invoked("crash-write-ahead")); err != nil {
			t.Fatalf("AppendWriteAhead: %v", err)
		}
		recorded("crash-write-ahead")
	}
	if b, ok := st.(kernel.WriteAheadBatchAuditSink); ok {
		if err := b.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{invoked("crash-batch-1"), invoked("crash-batch-2")}); err != nil {
			t.Fatalf("AppendWriteAheadBatch: %v", err)
		}
		recorded("crash-batch-1")
		recorded("crash-batch-2")
	}
	escs := record(t, st, escalation(world1, alice, "c1"), escalation(world1, alice, "c2"))
	res := store.EscalationResolution{Status: store.EscalationDenied, ResolvedBy: alice, ResolvedAt: "2026-01-01T01:00:00Z"}
	resolved, err := st.ResolveEscalation(ctx, escs[0].ID, res, invoked("crash-resolved"))
	if err != nil {
		t.Fatalf("ResolveEscalation: %v", err)
	}
	recorded("crash-resolved")
	scope := kernel.SnapshotScope{World: world1, Owner: alice, Root: "/srv/root"}
	snap := snapshot(scope, "s1", 100, nil)
	if err := st.PutSnapshot(ctx, snap); err != nil {
		t.Fatalf("PutSnapshot: %v", err)
	}
	digest := kernel.FileDigest{Stamp: kernel.FileStamp{Dev: 1, Ino: 2, Size: 3}, Digest: [32]byte{4}, RecordedNs: 5}
	if err := st.StoreDigest(ctx, digest); err != nil {
		t.Fatalf("StoreDigest: %v", err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	if err := st.PutGatewayCatalog(ctx, "k1", []byte("[]"), at); err != nil {
		t.Fatalf("PutGatewayCatalog: %v", err)
	}
	// Last, a reservation the instance never finishes.
	if reserving {
		r, ok, err := rs.ReserveUse(ctx, usageKey("abandoned"), 3)
		if err != nil || !ok {
			t.Fatalf("ReserveUse = %v, %v", ok, err)
		}
		t.Cleanup(func() { _ = r.Release() }) // before the abandoned instance is closed
	}

	// The store opened again, the first instance abandoned.
	again := openAt(t, c, dir)
	if got, stored := selection(t, again, world1, alice); !stored || !sameStrings(got, sel) {
		t.Errorf("after reopening, the selection is %s (stored %v), want %s", q(got), stored, q(sel))
	}
	if n := usage(t, again, usageKey("consumed")); n != 2 {
		t.Errorf("after reopening, the uses spent by TryConsume are %d, want 2", n)
	}
	if reserving {
		if n := usage(t, again, usageKey("reserved")); n != 1 {
			t.Errorf("after reopening, the committed reservation spent %d uses, want 1", n)
		}
		if n := usage(t, again, usageKey("abandoned")); n != 0 {
			t.Errorf("after reopening, a reservation never committed spent %d uses, want 0", n)
		}
	}
	if got := ids(allEvents(t, again)); !sameStrings(got, order) {
		t.Errorf("after reopening, the trail holds %s, want %s", q(got), q(order))
	}
	if got, err := again.GetEscalation(ctx, escs[0].ID); err != nil || !reflect.DeepEqual(got, resolved) {
		t.Errorf("after reopening, escalation %d = %+v, %v; want %+v", escs[0].ID, got, err, resolved)
	}
	if got, err := again.GetEscalation(ctx, escs[1].ID); err != nil || !reflect.DeepEqual(got, escs[1]) {
		t.Errorf("after reopening, escalation %d = %+v, %v; want %+v", escs[1].ID, got, err, escs[1])
	}
	if got, err := again.GetSnapshot(ctx, scope, "s1"); err != nil || got == nil || !sameSnapshot(*got, snap) {
		t.Errorf("after reopening, snapshot s1 = %+v, %v; want %+v", got, err, snap)
	}
	if got, ok, err := again.LookupDigest(ctx, 1, 2); err != nil || !ok || got != digest {
		t.Errorf("after reopening, the digest = %+v, %v, %v; want %+v", got, ok, err, digest)
	}
	if data, stored, ok, err := again.GetGatewayCatalog(ctx, "k1"); err != nil || !ok || !bytes.Equal(data, []byte("[]")) || !stored.Equal(at) {
		t.Errorf("after reopening, the gateway catalogue = %q at %v, %v, %v; want [] at %v", data, stored, ok, err, at)
	}
}
