package sqlitestore

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func TestTryConsume(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		max      int64
		attempts int
		wantOK   int
	}{
		{"below the bound", 5, 3, 3},
		{"at the bound", 3, 3, 3},
		{"beyond the bound", 2, 5, 2},
		{"max 1", 1, 4, 1},
		{"max 0 spends nothing", 0, 3, 0},
		{"negative max spends nothing", -1, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openTest(t, Options{})
			ctx := context.Background()
			ok := 0
			for i := 0; i < tt.attempts; i++ {
				got, err := s.TryConsume(ctx, uk("w", "g"), tt.max)
				if err != nil {
					t.Fatal(err)
				}
				if got {
					ok++
				}
			}
			if ok != tt.wantOK {
				t.Errorf("%d uses spent, want %d", ok, tt.wantOK)
			}
			if n, err := s.GetUsage(ctx, uk("w", "g")); err != nil || n != int64(tt.wantOK) {
				t.Errorf("GetUsage = %d, %v; want %d", n, err, tt.wantOK)
			}
		})
	}
}

func TestUsageKeyedByWorldAndGrant(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := context.Background()
	for _, k := range [][2]string{{"w1", "g1"}, {"w1", "g1"}, {"w1", "g2"}, {"w2", "g1"}} {
		if ok, err := s.TryConsume(ctx, uk(k[0], k[1]), 10); !ok || err != nil {
			t.Fatalf("TryConsume(%s, %s) = %v, %v", k[0], k[1], ok, err)
		}
	}
	tests := []struct {
		world, grant string
		want         int64
	}{
		{"w1", "g1", 2}, {"w1", "g2", 1}, {"w2", "g1", 1}, {"w2", "g2", 0}, {"w3", "g1", 0},
	}
	for _, tt := range tests {
		if n, err := s.GetUsage(ctx, uk(tt.world, tt.grant)); err != nil || n != tt.want {
			t.Errorf("GetUsage(%s, %s) = %d, %v; want %d", tt.world, tt.grant, n, err, tt.want)
		}
	}
	// A lower max later does not undo spent uses; it only refuses more.
	if ok, err := s.TryConsume(ctx, uk("w1", "g1"), 1); ok || err != nil {
		t.Errorf("TryConsume with a lower max = %v, %v; want false", ok, err)
	}
}

func TestUsageRejectsEmptyKeys(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := context.Background()
	for _, k := range [][2]string{{"", "g"}, {"w", ""}} {
		if _, err := s.TryConsume(ctx, uk(k[0], k[1]), 1); err == nil {
			t.Errorf("TryConsume(%q, %q) succeeded", k[0], k[1])
		}
		if _, err := s.GetUsage(ctx, uk(k[0], k[1])); err == nil {
			t.Errorf("GetUsage(%q, %q) succeeded", k[0], k[1])
		}
	}
}

// TestTryConsumeGoroutines is the in-process version of TestMultiProcessTryConsume: 8
// goroutines, each with its own Store opened at once on a fresh file (so the migrations
// race too), plus one shared Store, spend at most max uses in total.
func TestTryConsumeGoroutines(t *testing.T) {
	t.Parallel()
	const workers, attempts, max = 8, 50, 100
	path := filepath.Join(t.TempDir(), "state.db")
	ctx := context.Background()
	var spent atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*attempts)
	start := make(chan struct{})
	consume := func(s *Store) {
		for i := 0; i < attempts; i++ {
			ok, err := s.TryConsume(ctx, uk("w", "g"), max)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				spent.Add(1)
			}
		}
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := Open(ctx, path, Options{})
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			consume(s)
		}()
	}
	close(start)
	wg.Wait()
	shared, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer shared.Close()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			consume(shared)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := spent.Load(); got != max {
		t.Errorf("%d uses spent in total, want exactly %d", got, max)
	}
	if n, err := shared.GetUsage(ctx, uk("w", "g")); err != nil || n != max {
		t.Errorf("GetUsage = %d, %v; want %d", n, err, max)
	}
}

// TestStoreOutageFailsClosed: a bounded grant against a closed store is refused
// usage_store_unavailable (fail-closed), never allowed.
func TestStoreOutageFailsClosed(t *testing.T) {
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	k, actx := boundedKernel(s, 5, false)
	s.Close()
	res := k.InvokeTool(context.Background(), actx, kernel.ToolCall{ID: "c1", Tool: "t.use", Arguments: []byte(`{}`), TraceID: actx.TraceID, RequestedAt: actx.Now})
	if res.Status != kernel.StatusDenied {
		t.Fatalf("result %+v: a store outage must never allow", res)
	}
	// The call is hidden (discovery already failed closed); the decision itself names it.
	z := kernel.Authorizer{Usage: s} // the ports boundedKernel configures beside Grants
	auth := kernel.NewAuthority(mustGrants(t, k, actx), actx, 0)
	d, _ := z.Authorize(context.Background(), auth, actx, kernel.CapabilityRequirement{
		Resource: kernel.ResourceRef{Namespace: "t", Path: []string{}}, Action: "use"}, kernel.AuthorizeOptions{Consume: true})
	if d.Allowed || d.ReasonCode != kernel.ReasonUsageStoreUnavailable {
		t.Fatalf("decision %+v, want usage_store_unavailable", d)
	}
}

func mustGrants(t *testing.T, k *kernel.Kernel, actx kernel.AccessContext) []kernel.CapabilityGrant {
	t.Helper()
	var out []kernel.CapabilityGrant
	turn, err := k.BeginTurn(actx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range turn.Authority(context.Background()).Grants() {
		out = append(out, *g)
	}
	return out
}

// uk is the usage key of grant id in world, issued by alice to the helper agent.
func uk(world, id string) kernel.UsageKey {
	return kernel.UsageKey{World: world, Issuer: alice, Subject: helper, GrantID: id}
}

// TestUsageBelongsToTheGrantIdentity: grants that share a world and an id but not a
// subject or an issuer have their own counters; counts recorded before migration 4
// (keyed by world and id) still count against every such grant.
func TestUsageBelongsToTheGrantIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	mine := uk("w", "g")
	other := mine
	other.Subject = kernel.Address{Kind: kernel.KindAgent, ID: "other"}
	byCarol := mine
	byCarol.Issuer = kernel.Address{Kind: kernel.KindHuman, ID: "carol"}
	if ok, err := s.TryConsume(ctx, other, 1); !ok || err != nil {
		t.Fatalf("other subject's first use: %v %v", ok, err)
	}
	for _, k := range []kernel.UsageKey{mine, byCarol} {
		if ok, err := s.TryConsume(ctx, k, 1); !ok || err != nil {
			t.Fatalf("%+v: spent by another grant with the same id (%v %v)", k, ok, err)
		}
		if ok, _ := s.TryConsume(ctx, k, 1); ok {
			t.Fatalf("%+v: a second use of a maxUses:1 grant", k)
		}
	}
	// A count from before the migration is frozen and counts for every identity.
	if _, err := s.db.ExecContext(ctx, `INSERT INTO grant_usage_legacy (world, grant_id, uses) VALUES ('w', 'old', 2)`); err != nil {
		t.Fatal(err)
	}
	legacy := uk("w", "old")
	if n, err := s.GetUsage(ctx, legacy); n != 2 || err != nil {
		t.Fatalf("legacy usage %d %v, want 2", n, err)
	}
	if ok, _ := s.TryConsume(ctx, legacy, 2); ok {
		t.Fatal("a legacy count was ignored: the upgrade gave a use back")
	}
	if ok, err := s.TryConsume(ctx, legacy, 3); !ok || err != nil {
		t.Fatalf("the third of three uses: %v %v", ok, err)
	}
	if ok, _ := s.TryConsume(ctx, legacy, 3); ok {
		t.Fatal("legacy + new uses exceeded the bound")
	}
}

// TestReserveUse: a reserved use is spent only when committed, together with its audit
// record; a commit whose record fails, or a release, spends nothing and records nothing.
func TestReserveUse(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	key := uk("w", "g")
	r, ok, err := s.ReserveUse(ctx, key, 2)
	if !ok || err != nil {
		t.Fatalf("reserve: %v %v", ok, err)
	}
	if err := r.Release(); err != nil {
		t.Fatal(err)
	}
	r, _, _ = s.ReserveUse(ctx, key, 2)
	bad := kernel.AuditEvent{} // no id: the audit table refuses it
	if err := r.Commit(ctx, &bad); err == nil {
		t.Fatal("a commit with an unwritable record succeeded")
	}
	if n, _ := s.GetUsage(ctx, key); n != 0 {
		t.Fatalf("%d uses spent by a released and a failed reservation", n)
	}
	r, _, _ = s.ReserveUse(ctx, key, 2)
	ev := event("ev-use", kernel.EventAuthorizationChecked, kernel.OutcomeAllowed, "2026-08-03T09:00:00Z")
	if err := r.Commit(ctx, &ev); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.GetUsage(ctx, key); n != 1 {
		t.Fatalf("%d uses after one commit", n)
	}
	evs, err := s.ListAudit(ctx, AuditFilter{Types: []string{string(kernel.EventAuthorizationChecked)}})
	if err != nil || len(evs) != 1 || evs[0].ID != "ev-use" {
		t.Fatalf("audit %+v %v: want exactly the committed record", evs, err)
	}
	r, _, _ = s.ReserveUse(ctx, key, 2)
	_ = r.Commit(ctx, nil)
	if _, ok, _ := s.ReserveUse(ctx, key, 2); ok {
		t.Fatal("a third use of a maxUses:2 grant reserved")
	}
}
