package storetest

import (
	"context"
	"slices"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// testCancelled: a write whose context is cancelled (what a caller that gave up, or a
// store that lost its connection, looks like) either fails and writes nothing, or
// succeeds whole: never a part of it.
func testCancelled(t T, c Config) {
	st := open(t, c)
	escs := record(t, st, escalation(world1, alice, "c1"))
	def, _ := selection(t, st, world1, alice)
	cctx, cancel := context.WithCancel(ctx)
	cancel()

	type write struct {
		name    string
		do      func() error
		applied func() bool // whether its effect is in the store
	}
	events := func(want ...string) func() bool {
		return func() bool {
			got := ids(allEvents(t, st))
			for _, id := range want {
				if !slices.Contains(got, id) {
					return false
				}
			}
			return true
		}
	}
	writes := []write{
		{"ApplyUpdate", func() error {
			_, err := st.ApplyUpdate(cctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-a"}})
			return err
		}, func() bool { sel, _ := selection(t, st, world1, alice); return !sameStrings(sel, def) }},
		{"TryConsume", func() error { _, err := st.TryConsume(cctx, usageKey("g1"), 3); return err },
			func() bool { return usage(t, st, usageKey("g1")) != 0 }},
		{"Append", func() error { return st.Append(cctx, invoked("x-append")) }, events("x-append")},
		{"RecordEscalation", func() error { return st.RecordEscalation(cctx, escalation(world1, alice, "c2")) },
			func() bool { return len(list(t, st, store.EscalationFilter{})) != 1 }},
		{"ResolveEscalation", func() error {
			_, err := st.ResolveEscalation(cctx, escs[0].ID, store.EscalationResolution{Status: store.EscalationApproved, ResolvedBy: alice}, invoked("x-resolved"))
			return err
		}, func() bool {
			rec, err := st.GetEscalation(ctx, escs[0].ID)
			if err != nil {
				t.Fatalf("GetEscalation: %v", err)
			}
			resolved, recorded := rec.Resolution != nil, events("x-resolved")()
			if resolved != recorded {
				t.Errorf("a cancelled ResolveEscalation left the resolution (%v) without its record (%v)", resolved, recorded)
			}
			return resolved
		}},
		{"PutSnapshot", func() error {
			return st.PutSnapshot(cctx, snapshot(kernel.SnapshotScope{World: world1, Owner: alice, Root: "/srv/root"}, "s1", 1, nil))
		}, func() bool {
			rec, err := st.GetSnapshot(ctx, kernel.SnapshotScope{World: world1, Owner: alice, Root: "/srv/root"}, "s1")
			return err == nil && rec != nil
		}},
	}
	if as, ok := st.(kernel.AuditedSettingsStore); ok {
		writes = append(writes, write{"ApplyUpdateAudited", func() error {
			_, err := as.ApplyUpdateAudited(cctx, actx(world1, bob), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-a"}},
				func([]string) kernel.AuditEvent { return invoked("x-selection") })
			return err
		}, func() bool {
			_, stored := selection(t, st, world1, bob)
			recorded := events("x-selection")()
			if stored != recorded {
				t.Errorf("a cancelled ApplyUpdateAudited left the selection (%v) without its record (%v)", stored, recorded)
			}
			return stored
		}})
	}
	if rs, ok := st.(kernel.ReservingUsageStore); ok {
		writes = append(writes, write{"ReserveUse and Commit", func() error {
			r, ok, err := rs.ReserveUse(cctx, usageKey("g2"), 3)
			if err != nil || !ok {
				return err
			}
			ev := invoked("x-use")
			return r.Commit(cctx, &ev)
		}, func() bool {
			spent, recorded := usage(t, st, usageKey("g2")) != 0, events("x-use")()
			if spent != recorded {
				t.Errorf("a cancelled reservation spent a use (%v) without its record (%v)", spent, recorded)
			}
			return spent
		}})
	}
	if wa, ok := st.(kernel.WriteAheadAuditSink); ok {
		writes = append(writes, write{"AppendWriteAhead", func() error { return wa.AppendWriteAhead(cctx, invoked("x-write-ahead")) },
			events("x-write-ahead")})
	}
	if b, ok := st.(kernel.WriteAheadBatchAuditSink); ok {
		writes = append(writes, write{"AppendWriteAheadBatch", func() error {
			return b.AppendWriteAheadBatch(cctx, []kernel.AuditEvent{invoked("x-batch-1"), invoked("x-batch-2")})
		}, func() bool {
			one, two := events("x-batch-1")(), events("x-batch-2")()
			if one != two {
				t.Errorf("a cancelled batch wrote one of its events (%v, %v)", one, two)
			}
			return one
		}})
	}
	for _, w := range writes {
		err := w.do()
		if applied := w.applied(); err != nil && applied {
			t.Errorf("%s with a cancelled context failed (%v) but wrote", w.name, err)
		}
	}
}
