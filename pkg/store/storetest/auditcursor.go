package storetest

import (
	"context"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// pageCounter wraps a store's AuditCursor and records the limit of each page asked.
type pageCounter struct {
	store.State
	c      store.AuditCursor
	limits []int
}

func (p *pageCounter) ListAuditAfter(ctx context.Context, f store.AuditFilter) ([]kernel.AuditEvent, int64, error) {
	p.limits = append(p.limits, f.Limit)
	return p.c.ListAuditAfter(ctx, f)
}

// testAuditCursor (a store that implements store.AuditCursor): store.EachAudit over 25
// events with pages of 7 reads them all, in the order of recording, each once, in 4
// queries of at most 7 events each (memory bounded by a page, not by the trail); with a
// filter it pages over the events it selects; with a limit it stops there; an error of
// fn stops the walk and is returned.
func testAuditCursor(t T, c Config) {
	st := open(t, c)
	cur, ok := st.(store.AuditCursor)
	if !ok {
		return
	}
	var want []string
	for i := range 25 {
		ev := invoked(fmt.Sprintf("c%02d", i))
		if i%2 == 0 {
			ev = event(ev.ID, kernel.EventToolCatalogListed, kernel.OutcomeSucceeded, ev.At)
		}
		if err := st.Append(ctx, ev); err != nil {
			t.Fatalf("Append: %v", err)
		}
		want = append(want, ev.ID)
	}
	walk := func(f store.AuditFilter) ([]string, []int) {
		t.Helper()
		pc := &pageCounter{State: st, c: cur}
		var got []string
		if err := store.EachAudit(ctx, pc, f, 7, func(ev kernel.AuditEvent) error {
			got = append(got, ev.ID)
			return nil
		}); err != nil {
			t.Fatalf("EachAudit: %v", err)
		}
		return got, pc.limits
	}
	got, limits := walk(store.AuditFilter{})
	if q(got) != q(want) {
		t.Errorf("EachAudit of the trail = %v, want %v (recording order, each once)", got, want)
	}
	if q2(limits) != "[7 7 7 7]" {
		t.Errorf("EachAudit of 25 events by 7 asked pages of %v, want [7 7 7 7]", limits)
	}
	got, limits = walk(store.AuditFilter{Types: []string{string(kernel.EventToolCatalogListed)}})
	var even []string
	for i, id := range want {
		if i%2 == 0 {
			even = append(even, id)
		}
	}
	if q(got) != q(even) || len(limits) != 2 {
		t.Errorf("EachAudit of one type = %v in %d pages, want %v in 2", got, len(limits), even)
	}
	if got, limits = walk(store.AuditFilter{Limit: 10}); q(got) != q(want[:10]) || q2(limits) != "[7 3]" {
		t.Errorf("EachAudit with limit 10 = %v by pages %v, want %v by [7 3]", got, limits, want[:10])
	}
	stop := fmt.Errorf("stop")
	n := 0
	if err := store.EachAudit(ctx, st, store.AuditFilter{}, 7, func(kernel.AuditEvent) error {
		n++
		if n == 9 {
			return stop
		}
		return nil
	}); err != stop || n != 9 {
		t.Errorf("EachAudit stopped by fn after 9 events = %v after %d", err, n)
	}
}

func q2(v []int) string { return fmt.Sprint(v) }
