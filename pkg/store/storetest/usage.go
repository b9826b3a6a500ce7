package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// testUsage: TryConsume spends at most max uses of one grant identity (world, issuer,
// subject, id); GetUsage reads the count; an invalid key or a max below 1 spends nothing.
func testUsage(t T, c Config) {
	st := open(t, c)
	k := usageKey("g1")
	if n := usage(t, st, k); n != 0 {
		t.Errorf("GetUsage of a fresh grant = %d, want 0", n)
	}
	for i := range 4 {
		ok, err := st.TryConsume(ctx, k, 3)
		if err != nil {
			t.Fatalf("TryConsume #%d: %v", i+1, err)
		}
		if ok != (i < 3) {
			t.Errorf("TryConsume #%d of max 3 = %v, want %v", i+1, ok, i < 3)
		}
	}
	if n := usage(t, st, k); n != 3 {
		t.Errorf("GetUsage after spending a max of 3 = %d, want 3", n)
	}
	// max is the caller's bound on the count, not stored with it.
	if ok, err := st.TryConsume(ctx, k, 4); err != nil || !ok {
		t.Errorf("TryConsume with max 4 after 3 uses = %v, %v; want true", ok, err)
	}
	for _, max := range []int64{0, -1} {
		if ok, err := st.TryConsume(ctx, usageKey("g-zero"), max); err != nil || ok {
			t.Errorf("TryConsume with max %d = %v, %v; want false, nil", max, ok, err)
		}
	}
	if n := usage(t, st, usageKey("g-zero")); n != 0 {
		t.Errorf("a max below 1 spent %d uses", n)
	}

	// Each part of the identity is its own counter.
	others := map[string]kernel.UsageKey{
		"another world":   {World: world2, Issuer: alice, Subject: helper, GrantID: "g1"},
		"another issuer":  {World: world1, Issuer: bob, Subject: helper, GrantID: "g1"},
		"another subject": {World: world1, Issuer: alice, Subject: bob, GrantID: "g1"},
		"another kind":    {World: world1, Issuer: alice, Subject: kernel.Address{Kind: kernel.KindHuman, ID: "helper"}, GrantID: "g1"},
		"another id":      {World: world1, Issuer: alice, Subject: helper, GrantID: "g2"},
	}
	for what, o := range others {
		if n := usage(t, st, o); n != 0 {
			t.Errorf("%s: GetUsage = %d, want 0 (uses of another grant)", what, n)
		}
		if ok, err := st.TryConsume(ctx, o, 1); err != nil || !ok {
			t.Errorf("%s: TryConsume = %v, %v; want true", what, ok, err)
		}
	}
	if n := usage(t, st, k); n != 4 {
		t.Errorf("GetUsage = %d after other grants were spent, want 4", n)
	}

	// Invalid keys are errors and spend nothing.
	bad := map[string]kernel.UsageKey{
		"an empty world":     {Issuer: alice, Subject: helper, GrantID: "g9"},
		"an empty grant id":  {World: world1, Issuer: alice, Subject: helper},
		"an invalid issuer":  {World: world1, Subject: helper, GrantID: "g9"},
		"an invalid subject": {World: world1, Issuer: alice, GrantID: "g9"},
	}
	for what, b := range bad {
		if ok, err := st.TryConsume(ctx, b, 5); err == nil {
			t.Errorf("TryConsume with %s = %v, nil; want an error", what, ok)
		}
		if _, err := st.GetUsage(ctx, b); err == nil {
			t.Errorf("GetUsage with %s succeeded", what)
		}
		if rs, ok := st.(kernel.ReservingUsageStore); ok {
			if r, _, err := rs.ReserveUse(ctx, b, 5); err == nil {
				if r != nil {
					_ = r.Release()
				}
				t.Errorf("ReserveUse with %s succeeded", what)
			}
		}
	}
	if n := usage(t, st, usageKey("g9")); n != 0 {
		t.Errorf("refused calls spent %d uses", n)
	}
}

// testReservingUsage: a reserved use is spent with its record on Commit (both or
// neither), given back on Release, and refused when every use is spent
// (kernel.ReservingUsageStore).
func testReservingUsage(t T, c Config) {
	st := open(t, c)
	rs, ok := st.(kernel.ReservingUsageStore)
	if !ok {
		t.Logf("the store is not a kernel.ReservingUsageStore: nothing to check")
		return
	}
	k := usageKey("g1")
	reserve := func(max int64) kernel.UsageReservation {
		t.Helper()
		r, ok, err := rs.ReserveUse(ctx, k, max)
		if err != nil || !ok || r == nil {
			t.Fatalf("ReserveUse(max %d) = %v, %v, %v; want a reservation", max, r, ok, err)
		}
		return r
	}
	if err := reserve(2).Release(); err != nil {
		t.Errorf("Release: %v", err)
	}
	if n := usage(t, st, k); n != 0 {
		t.Errorf("a released reservation spent %d uses", n)
	}
	ev := event("use-1", kernel.EventAuthorizationChecked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
	if err := reserve(2).Commit(ctx, &ev); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if n := usage(t, st, k); n != 1 {
		t.Errorf("GetUsage after a commit = %d, want 1", n)
	}
	if got := ids(allEvents(t, st)); !sameStrings(got, []string{"use-1"}) {
		t.Errorf("the trail after a commit holds %s, want [use-1]", q(got))
	}
	if err := reserve(2).Commit(ctx, nil); err != nil {
		t.Fatalf("Commit(nil): %v", err)
	}
	if n := usage(t, st, k); n != 2 {
		t.Errorf("GetUsage after a commit without a record = %d, want 2", n)
	}
	if r, ok, err := rs.ReserveUse(ctx, k, 2); err != nil || ok || r != nil {
		t.Errorf("ReserveUse of a spent grant = %v, %v, %v; want nil, false, nil", r, ok, err)
		if r != nil {
			_ = r.Release()
		}
	}
	if r, ok, err := rs.ReserveUse(ctx, usageKey("g-zero"), 0); err != nil || ok || r != nil {
		t.Errorf("ReserveUse with max 0 = %v, %v, %v; want nil, false, nil", r, ok, err)
	}
	// A record that cannot be written spends nothing and records nothing.
	k = usageKey("g2")
	bad := unreadable("use-2")
	if err := reserve(5).Commit(ctx, &bad); err == nil {
		t.Errorf("Commit with a record that cannot be written succeeded")
	}
	clash := ev
	clash.Outcome = kernel.OutcomeDenied
	if err := reserve(5).Commit(ctx, &clash); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("Commit with another event under a recorded id = %v, want store.ErrDuplicate", err)
	}
	if n := usage(t, st, k); n != 0 {
		t.Errorf("failed commits spent %d uses", n)
	}
	if got := ids(allEvents(t, st)); !sameStrings(got, []string{"use-1"}) {
		t.Errorf("failed commits left the trail %s, want [use-1]", q(got))
	}
}

// spenders is how many goroutines race for one grant's uses.
const spenders = 16

// raceMax is the maxUses of the raced grant.
const raceMax = 5

// race runs spend on spenders goroutines released together and returns how many of
// them reported a spent use.
func race(t T, spend func(i int) (bool, error)) int {
	var start sync.WaitGroup
	start.Add(1)
	var done sync.WaitGroup
	var won atomic.Int64
	errs := make([]error, spenders)
	for i := range spenders {
		done.Add(1)
		go func() {
			defer done.Done()
			start.Wait()
			ok, err := spend(i)
			errs[i] = err
			if ok {
				won.Add(1)
			}
		}()
	}
	start.Done()
	done.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Errorf("spenders failed: %v", err)
	}
	return int(won.Load())
}

// testConcurrentTryConsume: 16 goroutines spending one grant of maxUses 5 with
// TryConsume at once: exactly 5 succeed.
func testConcurrentTryConsume(t T, c Config) {
	st := open(t, c)
	k := usageKey("raced")
	won := race(t, func(int) (bool, error) { return st.TryConsume(ctx, k, raceMax) })
	if won != raceMax {
		t.Errorf("%d of %d concurrent TryConsume calls spent a use of a grant of maxUses %d, want exactly %d",
			won, spenders, raceMax, raceMax)
	}
	if n := usage(t, st, k); n != raceMax {
		t.Errorf("GetUsage after the race = %d, want %d", n, raceMax)
	}
}

// testConcurrentReserveUse: 16 goroutines reserving and committing (with a record) one
// grant of maxUses 5 at once: exactly 5 succeed, with exactly their 5 records.
func testConcurrentReserveUse(t T, c Config) {
	st := open(t, c)
	rs, ok := st.(kernel.ReservingUsageStore)
	if !ok {
		t.Logf("the store is not a kernel.ReservingUsageStore: nothing to check")
		return
	}
	k := usageKey("raced")
	won := race(t, func(i int) (bool, error) {
		r, ok, err := rs.ReserveUse(ctx, k, raceMax)
		if err != nil || !ok {
			return false, err
		}
		ev := event(fmt.Sprintf("race-%d", i), kernel.EventAuthorizationChecked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
		if err := r.Commit(ctx, &ev); err != nil {
			return false, err
		}
		return true, nil
	})
	if won != raceMax {
		t.Errorf("%d of %d concurrent reservations were committed for a grant of maxUses %d, want exactly %d",
			won, spenders, raceMax, raceMax)
	}
	if n := usage(t, st, k); n != raceMax {
		t.Errorf("GetUsage after the race = %d, want %d", n, raceMax)
	}
	if evs := allEvents(t, st); len(evs) != raceMax {
		t.Errorf("the trail holds %d records after the race, want %d (one per spent use)", len(evs), raceMax)
	}
}
