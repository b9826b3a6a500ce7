package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestIdempotentLeaseTakeover: a key claimed by another process that stopped (another
// handle on the state database, which claims and then never renews) is 409
// replay_pending while the claim's lease runs, and once it has run out a retry takes
// the key over and runs the call once; the stopped claimant, were it only paused, can
// neither spend for the request nor store its response, and replays return the new
// claimant's response. A claimant that spent a use before it stopped leaves the key
// 409 replay_interrupted once its lease ran out: the call is not run again. The clock is
// the test's: nothing waits for time to pass.
func TestIdempotentLeaseTakeover(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	const lease = 30 * time.Second
	f := newFixtureWith(t, func(c *httpapi.Config) {
		c.ReplayWait, c.Clock, c.IdempotencyLease = -1, clock, lease
	})
	f.do("GET", "/v1/tools", "alice", "") // open the principal
	owner, _ := kernel.ParseAddress("human:alice")
	actor, _ := kernel.ParseAddress("agent:alice-bot")
	scope := httpapi.ContextScope(kernel.AccessContext{World: "default", Actor: actor, Owner: owner, Authority: owner, Purpose: "test"})
	other, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(t, err)
	defer other.Close()
	ctx := context.Background()
	claimOther := func(raw, key string) store.IdempotencyClaim {
		t.Helper()
		var c kernel.ToolCall
		must(t, json.Unmarshal([]byte(raw), &c))
		k := store.IdempotencyKey{Scope: scope, Key: key}
		fp := httpapi.Fingerprint(c, c.TraceID)
		state, rec, err := other.ClaimIdempotent(ctx, k, fp, clock(), time.Hour, lease)
		if err != nil || state != store.IdempotencyClaimed {
			t.Fatalf("claim from the other handle: %v %v", state, err)
		}
		return store.IdempotencyClaim{Key: k, Fingerprint: fp, Epoch: rec.Epoch}
	}

	raw := call("call-l", "files.create", `{"path":["drafts","l.md"],"content":"x"}`)
	stale := claimOther(raw, "key-l")
	advance(lease - time.Second)
	if r := f.do("POST", "/v1/tools/invoke", "alice", raw, "Idempotency-Key", "key-l"); r.status != 409 || r.errCode(t) != "replay_pending" {
		t.Fatalf("within the other claimant's lease: %d %s", r.status, r.body)
	}
	if n := f.invoked(t, "call-l"); n != 0 {
		t.Fatalf("a key within its lease ran the call here")
	}
	advance(2 * time.Second)
	first := f.do("POST", "/v1/tools/invoke", "alice", raw, "Idempotency-Key", "key-l")
	if m := first.json(t); first.status != 200 || m["status"] != "succeeded" || first.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("the retry once the lease ran out: %d %s", first.status, first.body)
	}
	// the other claimant was only paused: it resumes, and can neither spend nor answer
	g := kernel.UsageKey{World: "default", Issuer: owner, Subject: actor, GrantID: "any"}
	if r, ok, err := other.ReserveClaimedUse(ctx, g, 10, kernel.SpendClaim{Scope: scope, Key: "key-l", Fingerprint: stale.Fingerprint, Epoch: stale.Epoch}); !errors.Is(err, kernel.ErrSpendClaimLost) || ok {
		if r != nil {
			_ = r.Release()
		}
		t.Errorf("the stale claimant's spend = %v, %v; want ErrSpendClaimLost", ok, err)
	}
	if err := other.CompleteClaim(ctx, stale, 200, []byte("stale\n")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the stale claimant's completion = %v, want ErrNotFound", err)
	}
	if r := f.do("POST", "/v1/tools/invoke", "alice", raw, "Idempotency-Key", "key-l"); r.status != 200 || string(r.body) != string(first.body) || r.header.Get("Idempotency-Replayed") != "true" {
		t.Fatalf("replay: %d %s, want the new claimant's %s", r.status, r.body, first.body)
	}
	if n := f.invoked(t, "call-l"); n != 1 {
		t.Fatalf("call-l ran %d times, want once", n)
	}
	if n := f.usesLeft(t); n != 1 {
		t.Fatalf("uses left: %d, want 1 (one spent by the taken-over call)", n)
	}

	// a claimant that spent a use and then stopped: the key is interrupted
	raw2 := call("call-i", "files.create", `{"path":["drafts","i.md"],"content":"x"}`)
	spent := claimOther(raw2, "key-i")
	r, ok, err := other.ReserveClaimedUse(ctx, g, 10, kernel.SpendClaim{Scope: scope, Key: "key-i", Fingerprint: spent.Fingerprint, Epoch: spent.Epoch})
	if err != nil || !ok {
		t.Fatalf("the other claimant's spend: %v %v", ok, err)
	}
	must(t, r.Commit(ctx, nil))
	advance(lease + time.Second)
	if r := f.do("POST", "/v1/tools/invoke", "alice", raw2, "Idempotency-Key", "key-i"); r.status != 409 || r.errCode(t) != "replay_interrupted" {
		t.Fatalf("a spent claim whose lease ran out: %d %s", r.status, r.body)
	}
	if n := f.invoked(t, "call-i"); n != 0 {
		t.Fatalf("an interrupted key ran its call again")
	}
}
