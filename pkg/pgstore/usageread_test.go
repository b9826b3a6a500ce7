package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/pgstore"
)

// spendN spends n uses of grant id.
func spendN(t *testing.T, st *pgstore.Store, id string, n int) {
	t.Helper()
	for range n {
		if ok, err := st.TryConsume(context.Background(), key(id), 1000); err != nil || !ok {
			t.Fatalf("spend %s: %v %v", id, ok, err)
		}
	}
}

// TestConcurrentUsageReadsShareOneStatement: reads of grant usage that come while one is
// in flight are answered by one statement for all of them, each with its own grant's
// count (0 for a grant never spent, the same count twice for a grant read twice), and
// that statement sees a spend committed before the read was called (a round is joined
// only before it is sent).
func TestConcurrentUsageReadsShareOneStatement(t *testing.T) {
	st, _ := openFresh(t)
	ctx := context.Background()
	const n = 10
	for i := range n {
		spendN(t, st, fmt.Sprintf("g%d", i), i) // g0 has no counter row
	}
	spendN(t, st, "lead", 3)
	release := pgstore.HoldUsageReads(st, nil)
	defer release()
	var wg sync.WaitGroup
	var leadUses int64
	var leadErr error
	wg.Add(1)
	go func() { // sends the first round, held until release
		defer wg.Done()
		leadUses, leadErr = st.GetUsage(ctx, key("lead"))
	}()
	if !until(30*time.Second, func() bool { _, inFlight := pgstore.UsageReadsWaiting(st); return inFlight }) {
		t.Fatal("the first read did not start its round")
	}
	spendN(t, st, "g4", 1) // committed before its reads are called: they must see it
	want := map[string]int64{"g4": 5}
	got := make([]int64, n+1)
	errs := make([]error, n+1)
	ids := make([]string, n+1)
	for i := range n + 1 {
		ids[i] = fmt.Sprintf("g%d", i%n) // g0 twice
		if _, ok := want[ids[i]]; !ok {
			want[ids[i]] = int64(i % n)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = st.GetUsage(ctx, key(ids[i]))
		}()
	}
	if !until(30*time.Second, func() bool { w, _ := pgstore.UsageReadsWaiting(st); return w == n+1 }) {
		w, _ := pgstore.UsageReadsWaiting(st)
		t.Fatalf("%d reads joined the waiting round, want %d", w, n+1)
	}
	release()
	wg.Wait()
	if leadErr != nil || leadUses != 3 {
		t.Errorf("the first read: %d, %v; want 3", leadUses, leadErr)
	}
	for i := range n + 1 {
		if errs[i] != nil || got[i] != want[ids[i]] {
			t.Errorf("read of %s: %d, %v; want %d", ids[i], got[i], errs[i], want[ids[i]])
		}
	}
	if r := pgstore.UsageReadRounds(st); r != 2 {
		t.Errorf("%d rounds sent, want 2 (the first read's, then one for the %d that joined)", r, n+1)
	}
}

// TestFailedUsageRoundReadsEachAlone: when the round several reads joined fails (here:
// the context of the read that sends it is cancelled), that read gets its error and every
// other read of the round is tried alone and gets its own count.
func TestFailedUsageRoundReadsEachAlone(t *testing.T) {
	st, _ := openFresh(t)
	ctx := context.Background()
	for i := range 4 {
		spendN(t, st, fmt.Sprintf("g%d", i), i+1)
	}
	senderCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	release := pgstore.HoldUsageReads(st, cancel) // the second round's sender is cancelled before it sends
	defer release()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = st.GetUsage(ctx, key("g0"))
	}()
	if !until(30*time.Second, func() bool { _, inFlight := pgstore.UsageReadsWaiting(st); return inFlight }) {
		t.Fatal("the first read did not start its round")
	}
	var senderErr error
	wg.Add(1)
	go func() { // the first to wait: it sends the second round
		defer wg.Done()
		_, senderErr = st.GetUsage(senderCtx, key("g1"))
	}()
	if !until(30*time.Second, func() bool { w, _ := pgstore.UsageReadsWaiting(st); return w == 1 }) {
		t.Fatal("the second read did not wait for the first round")
	}
	got := make([]int64, 4)
	errs := make([]error, 4)
	for i := 2; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = st.GetUsage(ctx, key(fmt.Sprintf("g%d", i)))
		}()
	}
	if !until(30*time.Second, func() bool { w, _ := pgstore.UsageReadsWaiting(st); return w == 3 }) {
		t.Fatal("the other reads did not join the waiting round")
	}
	release()
	wg.Wait()
	if !errors.Is(senderErr, context.Canceled) {
		t.Errorf("the cancelled read: %v, want context.Canceled", senderErr)
	}
	for i := 2; i < 4; i++ {
		if errs[i] != nil || got[i] != int64(i+1) {
			t.Errorf("read of g%d: %d, %v; want %d", i, got[i], errs[i], i+1)
		}
	}
}
