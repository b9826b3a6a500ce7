package storetest

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// testIdempotencyLease (a store.LeasedIdempotency that is also a
// kernel.ClaimedUsageStore): a claim holds its key while its lease runs and is renewed;
// once the lease has run out the same request takes the key over with the next epoch
// (of 16 concurrent takeovers exactly one wins); the stale claimant's spend is refused
// with ErrSpendClaimLost and spends and records nothing, its renewal and completion are
// ErrNotFound and its abandonment leaves the key; the new claimant spends, completes, and
// its response is what the key replays. A claim that spent a use is never taken over: once
// its lease runs out the key is Interrupted (and stays so after an abandonment), the use
// spent once; a released reservation undoes the mark; a takeover that meets a
// reservation in flight waits for it and finds it spent. Time comes from the test (an
// injected clock): nothing sleeps.
func testIdempotencyLease(t T, c Config) {
	st := open(t, c)
	li, ok := st.(store.LeasedIdempotency)
	if !ok {
		t.Logf("the store is not a store.LeasedIdempotency: nothing to check")
		return
	}
	us, ok := st.(kernel.ClaimedUsageStore)
	if !ok {
		t.Errorf("a store.LeasedIdempotency must fence its spends (kernel.ClaimedUsageStore)")
		return
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const window, lease = time.Hour, 30 * time.Second
	claim := func(what string, k store.IdempotencyKey, fp string, now time.Time, want store.IdempotencyState) store.IdempotencyRecord {
		t.Helper()
		got, rec, err := li.ClaimIdempotent(ctx, k, fp, now, window, lease)
		if err != nil {
			t.Fatalf("%s: ClaimIdempotent: %v", what, err)
		}
		if got != want {
			t.Errorf("%s: ClaimIdempotent = %d, want %d (record %+v)", what, got, want, rec)
		}
		return rec
	}
	held := func(k store.IdempotencyKey, fp string, rec store.IdempotencyRecord) store.IdempotencyClaim {
		return store.IdempotencyClaim{Key: k, Fingerprint: fp, Epoch: rec.Epoch}
	}
	// release gives back a reservation the test did not expect (so that a failing check
	// never leaves a transaction holding the rows the next checks need)
	release := func(r kernel.UsageReservation) {
		if r != nil {
			_ = r.Release()
		}
	}
	spendClaim := func(c store.IdempotencyClaim) kernel.SpendClaim {
		return kernel.SpendClaim{Scope: c.Key.Scope, Key: c.Key.Key, Fingerprint: c.Fingerprint, Epoch: c.Epoch}
	}

	k := store.IdempotencyKey{Scope: "ctx-a", Key: "lease-1"}
	first := held(k, "fp-1", claim("a free key", k, "fp-1", t0, store.IdempotencyClaimed))
	claim("within the lease", k, "fp-1", t0.Add(lease-time.Second), store.IdempotencyPending)
	if err := li.RenewIdempotent(ctx, first, t0.Add(20*time.Second)); err != nil {
		t.Fatalf("RenewIdempotent: %v", err)
	}
	claim("within the renewed lease", k, "fp-1", t0.Add(40*time.Second), store.IdempotencyPending)
	claim("another request, the lease run out", k, "fp-2", t0.Add(time.Minute), store.IdempotencyConflict)

	// 16 replicas' retries of the request once the lease has run out: one takes it over
	at := t0.Add(20*time.Second + lease + time.Second)
	var won atomic.Int32
	var second store.IdempotencyClaim
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, rec, err := li.ClaimIdempotent(ctx, k, "fp-1", at, window, lease)
			switch {
			case err != nil:
				t.Errorf("concurrent takeover: %v", err)
			case got == store.IdempotencyClaimed:
				won.Add(1)
				second = held(k, "fp-1", rec)
			case got != store.IdempotencyPending:
				t.Errorf("concurrent takeover = %d, want claimed or pending", got)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("16 concurrent takeovers: %d won, want 1", won.Load())
	}
	if second.Epoch != first.Epoch+1 {
		t.Errorf("takeover epoch %d, want %d", second.Epoch, first.Epoch+1)
	}

	// the first claimant was paused, not dead: it resumes and tries to spend
	g := usageKey("g-lease")
	if r, ok, err := us.ReserveClaimedUse(ctx, g, 10, spendClaim(first)); !errors.Is(err, kernel.ErrSpendClaimLost) || ok || r != nil {
		t.Errorf("the stale claimant's spend = %v, %v, %v; want ErrSpendClaimLost", r, ok, err)
		release(r)
	}
	if n := usage(t, st, g); n != 0 {
		t.Errorf("the stale claimant's refused spend spent %d uses", n)
	}
	if got := ids(allEvents(t, st)); len(got) != 0 {
		t.Errorf("the stale claimant's refused spend recorded %s", q(got))
	}
	if err := li.RenewIdempotent(ctx, first, at); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the stale claimant's renewal = %v, want ErrNotFound", err)
	}
	if err := li.CompleteClaim(ctx, first, 200, []byte("stale")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the stale claimant's completion = %v, want ErrNotFound", err)
	}
	if err := li.AbandonClaim(ctx, first); err != nil {
		t.Fatalf("the stale claimant's AbandonClaim: %v", err)
	}
	claim("the new claim, after the stale claimant's abandonment", k, "fp-1", at.Add(time.Second), store.IdempotencyPending)

	// the new claimant spends, records and completes: its response is what replays
	r, ok, err := us.ReserveClaimedUse(ctx, g, 10, spendClaim(second))
	if err != nil || !ok {
		t.Fatalf("the new claimant's spend = %v, %v, %v; want a reservation", r, ok, err)
	}
	ev := event("lease-use", kernel.EventAuthorizationChecked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
	if err := r.Commit(ctx, &ev); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if r, ok, err := us.ReserveClaimedUse(ctx, g, 10, spendClaim(first)); !errors.Is(err, kernel.ErrSpendClaimLost) || ok || r != nil {
		t.Errorf("the stale claimant's spend after the new one's = %v, %v, %v; want ErrSpendClaimLost", r, ok, err)
		release(r)
	}
	if n := usage(t, st, g); n != 1 {
		t.Errorf("uses after the new claimant's spend: %d, want 1", n)
	}
	if got := ids(allEvents(t, st)); !sameStrings(got, []string{"lease-use"}) {
		t.Errorf("the trail holds %s, want [lease-use]", q(got))
	}
	body := []byte("{\"status\":\"succeeded\"}\n")
	if err := li.CompleteClaim(ctx, second, 200, body); err != nil {
		t.Fatalf("the new claimant's CompleteClaim: %v", err)
	}
	if rec := claim("the request once the new claimant completed", k, "fp-1", at.Add(time.Hour/2), store.IdempotencyDone); rec.Status != 200 || !bytes.Equal(rec.Body, body) {
		t.Errorf("replayed %d %q, want the new claimant's 200 %q", rec.Status, rec.Body, body)
	}

	// a claimant that spent and then died: its key is interrupted, never run again
	k2 := store.IdempotencyKey{Scope: "ctx-a", Key: "lease-2"}
	dead := held(k2, "fp-1", claim("a free key", k2, "fp-1", t0, store.IdempotencyClaimed))
	g2 := usageKey("g-lease-2")
	if r, ok, err := us.ReserveClaimedUse(ctx, g2, 10, spendClaim(dead)); err != nil || !ok {
		t.Fatalf("spend = %v, %v, %v", r, ok, err)
	} else if err := r.Commit(ctx, nil); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	claim("a spent claim within its lease", k2, "fp-1", t0.Add(lease-time.Second), store.IdempotencyPending)
	if rec := claim("a spent claim whose lease ran out", k2, "fp-1", t0.Add(lease+time.Second), store.IdempotencyInterrupted); !rec.Spent || rec.Epoch != dead.Epoch {
		t.Errorf("interrupted record = %+v, want spent, epoch %d", rec, dead.Epoch)
	}
	if err := li.AbandonClaim(ctx, dead); err != nil {
		t.Fatalf("AbandonClaim of a spent claim: %v", err)
	}
	claim("a spent claim, abandoned", k2, "fp-1", t0.Add(lease+2*time.Second), store.IdempotencyInterrupted)
	claim("another request on an interrupted key", k2, "fp-2", t0.Add(lease+2*time.Second), store.IdempotencyConflict)
	if n := usage(t, st, g2); n != 1 {
		t.Errorf("uses of an interrupted key: %d, want 1", n)
	}

	// a released reservation gives the claim back unspent: it is taken over
	k3 := store.IdempotencyKey{Scope: "ctx-a", Key: "lease-3"}
	c3 := held(k3, "fp-1", claim("a free key", k3, "fp-1", t0, store.IdempotencyClaimed))
	g3 := usageKey("g-lease-3")
	if r, ok, err := us.ReserveClaimedUse(ctx, g3, 10, spendClaim(c3)); err != nil || !ok {
		t.Fatalf("spend = %v, %v, %v", r, ok, err)
	} else if err := r.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	claim("a released claim whose lease ran out", k3, "fp-1", t0.Add(lease+time.Second), store.IdempotencyClaimed)
	if n := usage(t, st, g3); n != 0 {
		t.Errorf("uses after a release: %d, want 0", n)
	}

	// a takeover that meets a spend in flight waits for it, then finds the claim spent
	k4 := store.IdempotencyKey{Scope: "ctx-a", Key: "lease-4"}
	c4 := held(k4, "fp-1", claim("a free key", k4, "fp-1", t0, store.IdempotencyClaimed))
	g4 := usageKey("g-lease-4")
	r4, ok, err := us.ReserveClaimedUse(ctx, g4, 10, spendClaim(c4))
	if err != nil || !ok {
		t.Fatalf("spend = %v, %v, %v", r4, ok, err)
	}
	took := make(chan store.IdempotencyState, 1)
	go func() {
		got, _, err := li.ClaimIdempotent(ctx, k4, "fp-1", t0.Add(lease+time.Second), window, lease)
		if err != nil {
			t.Errorf("takeover during a spend: %v", err)
		}
		took <- got
	}()
	if err := r4.Commit(ctx, nil); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if got := <-took; got != store.IdempotencyInterrupted {
		t.Errorf("takeover during a spend = %d, want interrupted (%d)", got, store.IdempotencyInterrupted)
	}
	if n := usage(t, st, g4); n != 1 {
		t.Errorf("uses: %d, want 1", n)
	}
}
