package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestReplicasClaimIdempotencyKeyOnce: 4 replicas (each its own pool) claiming one free
// key 64 times at once: exactly one claim wins, every other call sees it pending; after
// the winner completes, every replica replays its response.
func TestReplicasClaimIdempotencyKeyOnce(t *testing.T) {
	_, dsn := openFresh(t)
	reps := []*pgstore.Store{openReplica(t, dsn), openReplica(t, dsn), openReplica(t, dsn), openReplica(t, dsn)}
	k := store.IdempotencyKey{Scope: "ctx", Key: "k"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	counts := map[store.IdempotencyState]int{}
	var winner *pgstore.Store
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := reps[i%len(reps)]
			got, _, err := st.BeginIdempotent(context.Background(), k, "fp", now, time.Hour)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("BeginIdempotent: %v", err)
				return
			}
			counts[got]++
			if got == store.IdempotencyClaimed {
				winner = st
			}
		}()
	}
	wg.Wait()
	if counts[store.IdempotencyClaimed] != 1 || counts[store.IdempotencyPending] != 63 {
		t.Fatalf("64 concurrent claims over 4 replicas: %v, want 1 claimed and 63 pending", counts)
	}
	if err := winner.CompleteIdempotent(context.Background(), k, "fp", 200, []byte("ok")); err != nil {
		t.Fatalf("CompleteIdempotent: %v", err)
	}
	for i, st := range reps {
		got, rec, err := st.BeginIdempotent(context.Background(), k, "fp", now, time.Hour)
		if err != nil || got != store.IdempotencyDone || string(rec.Body) != "ok" {
			t.Errorf("replica %d after completion: %d %q %v, want done \"ok\"", i, got, rec.Body, err)
		}
	}
}

// TestReplicasKeepTheInFlightBound: 4 replicas delivering 32 distinct messages of one
// sender at once with maxInFlight 5: exactly 5 are stored, every other delivery is
// refused with ErrInFlightExceeded (the bound is counted and enforced across processes).
func TestReplicasKeepTheInFlightBound(t *testing.T) {
	_, dsn := openFresh(t)
	reps := []*pgstore.Store{openReplica(t, dsn), openReplica(t, dsn), openReplica(t, dsn), openReplica(t, dsn)}
	from := kernel.Address{Kind: kernel.KindAgent, ID: "sender"}
	to := kernel.Address{Kind: kernel.KindAgent, ID: "receiver"}
	var mu sync.Mutex
	created, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := kernel.MessageEnvelope{Version: kernel.MessageProtocolVersion, ID: fmt.Sprintf("m%d", i), Sender: from, Receiver: to,
				Purpose: "test", Payload: json.RawMessage(`{}`), TraceID: fmt.Sprintf("t%d", i), CreatedAt: "2026-01-01T00:00:00Z"}
			_, ok, err := reps[i%len(reps)].DeliverMessage(context.Background(), "w", env, "2026-01-01T00:00:01Z", 5)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, store.ErrInFlightExceeded):
				refused++
			case err != nil:
				t.Errorf("DeliverMessage: %v", err)
			case ok:
				created++
			}
		}()
	}
	wg.Wait()
	recs, err := reps[0].ListMessages(context.Background(), store.MessageFilter{World: "w"})
	if err != nil {
		t.Fatal(err)
	}
	if created != 5 || refused != 27 || len(recs) != 5 {
		t.Errorf("32 deliveries with maxInFlight 5 over 4 replicas: %d created, %d refused, %d stored; want 5, 27, 5", created, refused, len(recs))
	}
}
