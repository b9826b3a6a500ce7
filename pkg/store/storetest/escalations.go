package storetest

import (
	"errors"
	"reflect"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// escalation is a pending escalation asked in (world, owner) by call.
func escalation(world string, owner kernel.Address, call string) store.EscalationRecord {
	return store.EscalationRecord{World: world, Owner: owner, TraceID: "trace-" + call, CallID: call,
		Escalation: kernel.Escalation{Reason: "needs " + call, Reviewer: owner, RequestedAt: "2026-01-01T00:00:00Z",
			Status: store.EscalationPending}}
}

// calls are the call ids of recs, in order.
func calls(recs []store.EscalationRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.CallID
	}
	return out
}

// record records recs in order and returns them as the store lists them, oldest first.
func record(t T, st store.State, recs ...store.EscalationRecord) []store.EscalationRecord {
	t.Helper()
	for _, r := range recs {
		if err := st.RecordEscalation(ctx, r); err != nil {
			t.Fatalf("RecordEscalation(%s): %v", r.CallID, err)
		}
	}
	all, err := st.ListEscalations(ctx, store.EscalationFilter{Limit: len(recs)})
	if err != nil {
		t.Fatalf("ListEscalations: %v", err)
	}
	if len(all) != len(recs) {
		t.Fatalf("ListEscalations returned %d records, want the %d just recorded", len(all), len(recs))
	}
	for i, j := 0, len(all)-1; i < j; i, j = i+1, j-1 {
		all[i], all[j] = all[j], all[i]
	}
	return all
}

// list lists f's escalations, failing on an error.
func list(t T, st store.State, f store.EscalationFilter) []store.EscalationRecord {
	t.Helper()
	recs, err := st.ListEscalations(ctx, f)
	if err != nil {
		t.Fatalf("ListEscalations(%+v): %v", f, err)
	}
	return recs
}

// testEscalations: RecordEscalation, GetEscalation by id and ListEscalations with its
// filters; ids number the escalations in recording order.
func testEscalations(t T, c Config) {
	st := open(t, c)
	if recs := list(t, st, store.EscalationFilter{}); len(recs) != 0 {
		t.Errorf("a fresh store lists %d escalations", len(recs))
	}
	if _, err := st.GetEscalation(ctx, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetEscalation(1) of a fresh store = %v, want store.ErrNotFound", err)
	}
	if err := st.RecordEscalation(ctx, escalation("", alice, "bad-1")); err == nil {
		t.Errorf("RecordEscalation with an empty world succeeded")
	}
	if err := st.RecordEscalation(ctx, escalation(world1, kernel.Address{}, "bad-2")); err == nil {
		t.Errorf("RecordEscalation with an invalid owner succeeded")
	}
	in := []store.EscalationRecord{escalation(world1, alice, "c1"), escalation(world1, bob, "c2"), escalation(world2, alice, "c3")}
	in[0].ID = 99 // ignored
	recs := record(t, st, in...)
	for i, r := range recs {
		want := in[i]
		want.ID = r.ID
		if !reflect.DeepEqual(r, want) {
			t.Errorf("escalation %d reads back as %+v, want %+v", i+1, r, want)
		}
		if r.ID < 1 || i > 0 && r.ID <= recs[i-1].ID {
			t.Errorf("escalation ids %d, %d, %d: want positive and increasing in recording order", recs[0].ID, recs[1].ID, recs[2].ID)
		}
		got, err := st.GetEscalation(ctx, r.ID)
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Errorf("GetEscalation(%d) = %+v, %v; want %+v", r.ID, got, err, r)
		}
	}
	for _, id := range []int64{0, -1, recs[2].ID + 1000} {
		if _, err := st.GetEscalation(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetEscalation(%d) = %v, want store.ErrNotFound", id, err)
		}
	}
	cases := []struct {
		name string
		f    store.EscalationFilter
		want []string
	}{
		{"everything", store.EscalationFilter{}, []string{"c3", "c2", "c1"}},
		{"world", store.EscalationFilter{World: world1}, []string{"c2", "c1"}},
		{"owner", store.EscalationFilter{Owner: alice}, []string{"c3", "c1"}},
		{"owner of another kind", store.EscalationFilter{Owner: aliceAgent}, nil},
		{"world and owner", store.EscalationFilter{World: world1, Owner: alice}, []string{"c1"}},
		{"pending", store.EscalationFilter{Status: store.EscalationPending}, []string{"c3", "c2", "c1"}},
		{"approved", store.EscalationFilter{Status: store.EscalationApproved}, nil},
		{"limit", store.EscalationFilter{Limit: 2}, []string{"c3", "c2"}},
		{"filter before the limit", store.EscalationFilter{Owner: alice, Limit: 1}, []string{"c3"}},
		{"filter before the limit, world", store.EscalationFilter{World: world1, Limit: 1}, []string{"c2"}},
		{"call id", store.EscalationFilter{CallID: "c2"}, []string{"c2"}},
		{"call id before the limit", store.EscalationFilter{CallID: "c1", Limit: 1}, []string{"c1"}},
		{"call id and another owner", store.EscalationFilter{CallID: "c2", Owner: alice}, nil},
	}
	for _, tc := range cases {
		if got := calls(list(t, st, tc.f)); !sameStrings(got, tc.want) {
			t.Errorf("ListEscalations(%s) = %s, want %s", tc.name, q(got), q(tc.want))
		}
	}
	if _, err := st.ListEscalations(ctx, store.EscalationFilter{Status: "maybe"}); err == nil {
		t.Errorf("ListEscalations with an unknown status succeeded")
	}
}

// testEscalationResolve: ResolveEscalation records the decision and its audit event
// together (both or neither), once.
func testEscalationResolve(t T, c Config) {
	st := open(t, c)
	recs := record(t, st, escalation(world1, alice, "c1"), escalation(world1, alice, "c2"))
	id1, id2 := recs[0].ID, recs[1].ID
	res := store.EscalationResolution{Status: store.EscalationApproved, ResolvedBy: alice, ResolvedAt: "2026-01-01T01:00:00Z", Note: "ok"}
	ev := event("resolved-1", "escalation.resolved", kernel.OutcomeSucceeded, "2026-01-01T01:00:00Z")
	got, err := st.ResolveEscalation(ctx, id1, res, ev)
	if err != nil {
		t.Fatalf("ResolveEscalation: %v", err)
	}
	want := recs[0]
	want.Resolution = &res
	want.Escalation.Status = store.EscalationApproved
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ResolveEscalation returned %+v, want %+v", got, want)
	}
	if back, err := st.GetEscalation(ctx, id1); err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("GetEscalation after resolving = %+v, %v; want %+v", back, err, want)
	}
	if got := ids(allEvents(t, st)); !sameStrings(got, []string{"resolved-1"}) {
		t.Errorf("the trail after a resolution holds %s, want [resolved-1]", q(got))
	}
	if got := calls(list(t, st, store.EscalationFilter{Status: store.EscalationApproved})); !sameStrings(got, []string{"c1"}) {
		t.Errorf("approved escalations: %s, want [c1]", q(got))
	}
	if got := calls(list(t, st, store.EscalationFilter{Status: store.EscalationPending})); !sameStrings(got, []string{"c2"}) {
		t.Errorf("pending escalations: %s, want [c2]", q(got))
	}

	// A resolution is never changed, and a refused one records nothing.
	deny := store.EscalationResolution{Status: store.EscalationDenied, ResolvedBy: bob, ResolvedAt: "2026-01-01T02:00:00Z"}
	again, err := st.ResolveEscalation(ctx, id1, deny, event("resolved-2", "escalation.resolved", kernel.OutcomeSucceeded, "2026-01-01T02:00:00Z"))
	if !errors.Is(err, store.ErrAlreadyResolved) {
		t.Errorf("resolving a resolved escalation = %v, want store.ErrAlreadyResolved", err)
	}
	if !reflect.DeepEqual(again, want) {
		t.Errorf("resolving a resolved escalation returned %+v, want the record as it is, %+v", again, want)
	}
	if _, err := st.ResolveEscalation(ctx, id2+1000, res, event("resolved-3", "escalation.resolved", kernel.OutcomeSucceeded, "2026-01-01T02:00:00Z")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resolving an unknown escalation = %v, want store.ErrNotFound", err)
	}
	refused := []struct {
		name string
		res  store.EscalationResolution
		ev   kernel.AuditEvent
	}{
		{"an unknown status", store.EscalationResolution{Status: "maybe", ResolvedBy: alice}, event("resolved-4", "escalation.resolved", kernel.OutcomeSucceeded, "2026-01-01T02:00:00Z")},
		{"the pending status", store.EscalationResolution{Status: store.EscalationPending, ResolvedBy: alice}, event("resolved-5", "escalation.resolved", kernel.OutcomeSucceeded, "2026-01-01T02:00:00Z")},
		{"an invalid reviewer", store.EscalationResolution{Status: store.EscalationDenied}, event("resolved-6", "escalation.resolved", kernel.OutcomeSucceeded, "2026-01-01T02:00:00Z")},
		{"a record that would not read back", deny, unreadable("resolved-7")},
		{"another record under a recorded id", deny, event("resolved-1", "escalation.resolved", kernel.OutcomeFailed, "2026-01-01T02:00:00Z")},
	}
	for _, r := range refused {
		if _, err := st.ResolveEscalation(ctx, id2, r.res, r.ev); err == nil {
			t.Errorf("ResolveEscalation with %s succeeded", r.name)
		}
	}
	if back, err := st.GetEscalation(ctx, id2); err != nil || back.Resolution != nil || back.Escalation.Status != store.EscalationPending {
		t.Errorf("after refused resolutions escalation %d = %+v, %v; want it pending", id2, back, err)
	}
	if back, err := st.GetEscalation(ctx, id1); err != nil || !reflect.DeepEqual(back, want) {
		t.Errorf("after refused resolutions escalation %d = %+v, %v; want %+v", id1, back, err, want)
	}
	if got := ids(allEvents(t, st)); !sameStrings(got, []string{"resolved-1"}) {
		t.Errorf("refused resolutions left the trail %s, want [resolved-1]", q(got))
	}
	if _, err := st.ResolveEscalation(ctx, id2, deny, event("resolved-8", "escalation.resolved", kernel.OutcomeSucceeded, "2026-01-01T02:00:00Z")); err != nil {
		t.Errorf("ResolveEscalation(deny): %v", err)
	}
	if got := calls(list(t, st, store.EscalationFilter{Status: store.EscalationDenied})); !sameStrings(got, []string{"c2"}) {
		t.Errorf("denied escalations: %s, want [c2]", q(got))
	}
}
