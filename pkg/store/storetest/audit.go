package storetest

import (
	"errors"
	"reflect"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// checkAppend checks the rules every way of appending one event keeps: events read back
// as written, in order; the same event again is a no-op; another event under a recorded
// id wraps store.ErrDuplicate; an event without an id or that would not read back is
// refused; a refusal writes nothing. With deferred (Config.DeferredDuplicates) another
// event under a recorded id may instead be accepted and dropped: it never replaces the
// recorded one.
func checkAppend(t T, st store.State, name string, deferred bool, appendOne func(kernel.AuditEvent) error) {
	t.Helper()
	if seq, err := st.LastAuditSeq(ctx); err != nil || seq != 0 {
		t.Errorf("LastAuditSeq of an empty trail = %d, %v; want 0", seq, err)
	}
	e1 := event("e1", kernel.EventToolCatalogListed, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
	e2 := invoked("e2")
	e2.Tool, e2.OperationID = "files.read", "call-1"
	var seqs []int64
	for _, ev := range []kernel.AuditEvent{e1, e2} {
		if err := appendOne(ev); err != nil {
			t.Fatalf("%s(%s): %v", name, ev.ID, err)
		}
		seq, err := st.LastAuditSeq(ctx)
		if err != nil {
			t.Fatalf("LastAuditSeq: %v", err)
		}
		seqs = append(seqs, seq)
	}
	if seqs[0] < 1 || seqs[1] <= seqs[0] {
		t.Errorf("LastAuditSeq after each of two appends = %v, want positive and increasing", seqs)
	}
	if evs := allEvents(t, st); !reflect.DeepEqual(evs, []kernel.AuditEvent{e1, e2}) {
		t.Errorf("%s: the trail reads back %+v, want %+v", name, evs, []kernel.AuditEvent{e1, e2})
	}
	checkCursor(t, st, []kernel.AuditEvent{e1, e2}, seqs)
	if err := appendOne(e1); err != nil {
		t.Errorf("%s of a recorded event again = %v, want a no-op", name, err)
	}
	other := e1
	other.Outcome = kernel.OutcomeFailed
	if err := appendOne(other); !errors.Is(err, store.ErrDuplicate) && (!deferred || err != nil) {
		t.Errorf("%s of another event under a recorded id = %v, want store.ErrDuplicate", name, err)
	}
	if err := appendOne(kernel.AuditEvent{}); err == nil {
		t.Errorf("%s of an event without an id succeeded", name)
	}
	if err := appendOne(unreadable("e3")); err == nil {
		t.Errorf("%s of an event that would not read back succeeded", name)
	}
	if evs := allEvents(t, st); !reflect.DeepEqual(evs, []kernel.AuditEvent{e1, e2}) {
		t.Errorf("%s: after the refusals the trail holds %+v, want e1 and e2 as first written", name, evs)
	}
	if seq, err := st.LastAuditSeq(ctx); err != nil || seq != seqs[1] {
		t.Errorf("LastAuditSeq after refusals and a no-op = %d, %v; want %d", seq, err, seqs[1])
	}
}

// testAudit: Append (kernel.AuditSink).
func testAudit(t T, c Config) {
	st := open(t, c)
	checkAppend(t, st, "Append", false, func(ev kernel.AuditEvent) error { return st.Append(ctx, ev) })
}

// testWriteAheadAudit: AppendWriteAhead keeps Append's rules, and records of both kinds
// are read back in the order they were written (kernel.WriteAheadAuditSink).
func testWriteAheadAudit(t T, c Config) {
	st := open(t, c)
	wa, ok := st.(kernel.WriteAheadAuditSink)
	if !ok {
		t.Logf("the store is not a kernel.WriteAheadAuditSink: nothing to check")
		return
	}
	checkAppend(t, st, "AppendWriteAhead", c.DeferredDuplicates, func(ev kernel.AuditEvent) error { return wa.AppendWriteAhead(ctx, ev) })
	for i, id := range []string{"w1", "d1", "w2", "d2"} {
		write := wa.AppendWriteAhead
		if i%2 == 1 {
			write = st.Append
		}
		if err := write(ctx, invoked(id)); err != nil {
			t.Fatalf("append %s: %v", id, err)
		}
	}
	if got := ids(allEvents(t, st)); !sameStrings(got, []string{"e1", "e2", "w1", "d1", "w2", "d2"}) {
		t.Errorf("write-ahead and durable records read back as %s, want [e1 e2 w1 d1 w2 d2] (the order they were written)", q(got))
	}
}

// testWriteAheadBatch: a batch is written whole or not at all; a repeated event in it is
// a no-op (kernel.WriteAheadBatchAuditSink).
func testWriteAheadBatch(t T, c Config) {
	st := open(t, c)
	b, ok := st.(kernel.WriteAheadBatchAuditSink)
	if !ok {
		t.Logf("the store is not a kernel.WriteAheadBatchAuditSink: nothing to check")
		return
	}
	checkAppend(t, st, "AppendWriteAheadBatch of one", c.DeferredDuplicates, func(ev kernel.AuditEvent) error {
		return b.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{ev})
	})
	if err := b.AppendWriteAheadBatch(ctx, nil); err != nil {
		t.Errorf("an empty batch = %v, want nil", err)
	}
	if err := b.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{invoked("a"), invoked("b")}); err != nil {
		t.Fatalf("AppendWriteAheadBatch: %v", err)
	}
	if err := b.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{invoked("c"), invoked("a")}); err != nil {
		t.Errorf("a batch repeating a recorded event = %v, want the repeat a no-op", err)
	}
	want := []string{"e1", "e2", "a", "b", "c"}
	other := invoked("b")
	other.Outcome = kernel.OutcomeFailed
	switch err := b.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{invoked("d"), other}); {
	case c.DeferredDuplicates && err == nil:
		want = append(want, "d") // the clash dropped, the rest written
	case !errors.Is(err, store.ErrDuplicate):
		t.Errorf("a batch with another event under a recorded id = %v, want store.ErrDuplicate", err)
	}
	if err := b.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{invoked("f"), unreadable("g")}); err == nil {
		t.Errorf("a batch with an event that would not read back succeeded")
	}
	if err := b.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{invoked("h"), invoked("h2"), {}}); err == nil {
		t.Errorf("a batch with an event without an id succeeded")
	}
	evs := allEvents(t, st)
	if got := ids(evs); !sameStrings(got, want) {
		t.Errorf("the trail holds %s, want %s: a refused batch writes none of its events", q(got), q(want))
	}
	for _, ev := range evs {
		if ev.ID == "b" && ev.Outcome != kernel.OutcomeSucceeded {
			t.Errorf("event b was replaced by another event under its id: %+v", ev)
		}
	}
}

// testAuditQuery: every field of AuditFilter, applied by the query before its limit.
func testAuditQuery(t T, c Config) {
	st := open(t, c)
	mk := func(id string, typ kernel.AuditEventType, outcome kernel.AuditOutcome, at, tool, op, trace, world string, owner, actor kernel.Address) kernel.AuditEvent {
		ev := event(id, typ, outcome, at)
		ev.Tool, ev.OperationID, ev.TraceID, ev.NamespaceID, ev.Owner, ev.Authority, ev.Actor = tool, op, trace, world, owner, owner, actor
		return ev
	}
	// Recorded in this order; e4's instant is earlier than e3's.
	first := []kernel.AuditEvent{
		mk("e1", kernel.EventAuthorityResolved, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z", "", "", "t1", world1, alice, helper),
		mk("e2", kernel.EventAuthorizationChecked, kernel.OutcomeDenied, "2026-01-01T00:00:01Z", "files.read", "c1", "t1", world1, alice, helper),
		mk("e3", kernel.EventToolInvoked, kernel.OutcomeDenied, "2026-01-01T00:00:02.500Z", "files.read", "c1", "t1", world1, bob, helper),
	}
	rest := []kernel.AuditEvent{
		mk("e4", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T02:00:01.500+02:00", "files.list", "c2", "t2", world1, alice, helper),
		mk("e5", kernel.EventToolInvoked, kernel.OutcomeFailed, "2026-01-02T00:00:00Z", "repo.log", "c3", "t3", world2, aliceAgent, alice),
		mk("e6", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-03T00:00:00Z", "files.list", "c4", "t4", world1, bob, bob),
		mk("e7", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-03T00:00:01Z", "files.list", "c5", "t5", world1, bob, bob),
	}
	for _, ev := range first {
		if err := st.Append(ctx, ev); err != nil {
			t.Fatalf("Append(%s): %v", ev.ID, err)
		}
	}
	mid, err := st.LastAuditSeq(ctx)
	if err != nil {
		t.Fatalf("LastAuditSeq: %v", err)
	}
	for _, ev := range rest {
		if err := st.Append(ctx, ev); err != nil {
			t.Fatalf("Append(%s): %v", ev.ID, err)
		}
	}
	since := func(at string) int64 {
		ms, err := kernel.ParseTimestamp(at)
		if err != nil {
			t.Fatalf("ParseTimestamp(%s): %v", at, err)
		}
		return ms
	}
	cases := []struct {
		name string
		f    store.AuditFilter
		want []string
	}{
		{"everything, newest first", store.AuditFilter{}, []string{"e7", "e6", "e5", "e4", "e3", "e2", "e1"}},
		{"everything, oldest first", store.AuditFilter{Oldest: true}, []string{"e1", "e2", "e3", "e4", "e5", "e6", "e7"}},
		{"one type", store.AuditFilter{Types: []string{"tool.invoked"}, Oldest: true}, []string{"e3", "e4", "e5", "e6", "e7"}},
		{"two types", store.AuditFilter{Types: []string{"authority.resolved", "authorization.checked"}, Oldest: true}, []string{"e1", "e2"}},
		{"outcomes", store.AuditFilter{Outcomes: []string{"denied", "failed"}, Oldest: true}, []string{"e2", "e3", "e5"}},
		{"tool", store.AuditFilter{Tool: "files.read", Oldest: true}, []string{"e2", "e3"}},
		{"operation", store.AuditFilter{OperationID: "c1", Oldest: true}, []string{"e2", "e3"}},
		{"trace", store.AuditFilter{TraceID: "t1", Oldest: true}, []string{"e1", "e2", "e3"}},
		{"world", store.AuditFilter{World: world2, Oldest: true}, []string{"e5"}},
		{"owner", store.AuditFilter{Owner: alice, Oldest: true}, []string{"e1", "e2", "e4"}},
		{"owner of another kind, same id", store.AuditFilter{Owner: aliceAgent, Oldest: true}, []string{"e5"}},
		{"actor", store.AuditFilter{Actor: alice, Oldest: true}, []string{"e5"}},
		{"owner and actor", store.AuditFilter{Owner: bob, Actor: helper, Oldest: true}, []string{"e3"}},
		{"owner before the limit", store.AuditFilter{Owner: alice, Limit: 1}, []string{"e4"}},
		{"actor before the limit", store.AuditFilter{Actor: helper, Limit: 2}, []string{"e4", "e3"}},
		{"owner before the limit, by instant", store.AuditFilter{Owner: alice, Limit: 2, ByInstant: true}, []string{"e4", "e2"}},
		{"since", store.AuditFilter{SinceMillis: since("2026-01-01T00:00:01.500Z"), Oldest: true}, []string{"e3", "e4", "e5", "e6", "e7"}},
		{"after a sequence number", store.AuditFilter{AfterSeq: mid, Oldest: true}, []string{"e4", "e5", "e6", "e7"}},
		{"limit, newest first", store.AuditFilter{Limit: 2}, []string{"e7", "e6"}},
		{"limit, oldest first", store.AuditFilter{Limit: 2, Oldest: true}, []string{"e1", "e2"}},
		{"by instant", store.AuditFilter{ByInstant: true}, []string{"e7", "e6", "e5", "e3", "e4", "e2", "e1"}},
		{"by instant, limit", store.AuditFilter{ByInstant: true, Limit: 4, Oldest: true}, []string{"e7", "e6", "e5", "e3"}},
		{"fields together", store.AuditFilter{Types: []string{"tool.invoked"}, Outcomes: []string{"succeeded"}, World: world1, Owner: bob, Oldest: true}, []string{"e6", "e7"}},
		{"nothing matches", store.AuditFilter{Owner: alice, World: world2}, nil},
	}
	for _, tc := range cases {
		evs, err := st.ListAudit(ctx, tc.f)
		if err != nil {
			t.Errorf("ListAudit(%s): %v", tc.name, err)
			continue
		}
		if got := ids(evs); !sameStrings(got, tc.want) {
			t.Errorf("ListAudit(%s) = %s, want %s", tc.name, q(got), q(tc.want))
		}
	}
	// An address is matched by what it decodes to, whatever its JSON needs escaped.
	odd := kernel.Address{Kind: kernel.KindService, ID: `zoë's "q" <x>&\ %_` + "\u2028"}
	e8 := mk("e8", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-04T00:00:00Z", "files.list", "c6", "t6", world1, odd, odd)
	if err := st.Append(ctx, e8); err != nil {
		t.Fatalf("Append(e8): %v", err)
	}
	for _, f := range []store.AuditFilter{{Owner: odd}, {Actor: odd}, {Owner: odd, Actor: odd, Limit: 1}} {
		if got, err := st.ListAudit(ctx, f); err != nil || !sameStrings(ids(got), []string{"e8"}) {
			t.Errorf("ListAudit(owner %q, actor %q) = %s, %v; want [e8]", f.Owner, f.Actor, q(ids(got)), err)
		}
	}
	if got, err := st.ListAudit(ctx, store.AuditFilter{Owner: kernel.Address{Kind: kernel.KindService, ID: "zoë"}}); err != nil || len(got) != 0 {
		t.Errorf("ListAudit(an owner whose id is a prefix of a recorded one) = %s, %v; want none", q(ids(got)), err)
	}
}

// checkCursor checks a cursor read (AfterSeq with WithSeq) of a trail that holds evs,
// recorded with the sequence numbers seqs: each event carries its own Seq, and a read
// after one event's Seq returns exactly the events recorded after it.
func checkCursor(t T, st store.State, evs []kernel.AuditEvent, seqs []int64) {
	t.Helper()
	for i := -1; i < len(evs); i++ {
		after := int64(0)
		if i >= 0 {
			after = seqs[i]
		}
		got, err := st.ListAudit(ctx, store.AuditFilter{Oldest: true, AfterSeq: after, WithSeq: true})
		if err != nil {
			t.Fatalf("ListAudit(AfterSeq %d, WithSeq): %v", after, err)
		}
		var want []kernel.AuditEvent
		for j := i + 1; j < len(evs); j++ {
			ev := evs[j]
			ev.Seq = seqs[j]
			want = append(want, ev)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ListAudit(AfterSeq %d, WithSeq) = %+v, want %+v", after, got, want)
		}
	}
}
