package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// fencedUsage is a kernel.ClaimedUsageStore in memory: the current epoch of each claim
// (scope/key) and the uses spent; a fenced reservation holds only while its epoch is
// the claim's.
type fencedUsage struct {
	*memUsage
	mu     sync.Mutex
	epochs map[string]int64
	fenced int // fenced reservations made
	// committed are the records committed with a reservation
	committed []kernel.AuditEvent
}

type memReservation struct {
	u   *memUsage
	key kernel.UsageKey
	rec *[]kernel.AuditEvent
}

// Commit spends the use and keeps its record (the store's part of the trail).
func (r memReservation) Commit(_ context.Context, ev *kernel.AuditEvent) error {
	r.u.mu.Lock()
	defer r.u.mu.Unlock()
	r.u.used[usageKey(r.key)]++
	if ev != nil {
		*r.rec = append(*r.rec, *ev)
	}
	return nil
}
func (r memReservation) Release() error { return nil }

func (f *fencedUsage) ReserveUse(ctx context.Context, key kernel.UsageKey, max int64) (kernel.UsageReservation, bool, error) {
	if used, _ := f.GetUsage(ctx, key); used >= max {
		return nil, false, nil
	}
	return memReservation{f.memUsage, key, &f.committed}, true, nil
}

func (f *fencedUsage) ReserveClaimedUse(ctx context.Context, key kernel.UsageKey, max int64, c kernel.SpendClaim) (kernel.UsageReservation, bool, error) {
	f.mu.Lock()
	held := f.epochs[c.Scope+"/"+c.Key] == c.Epoch
	f.mu.Unlock()
	if !held {
		return nil, false, fmt.Errorf("reserve: %w", kernel.ErrSpendClaimLost)
	}
	f.fenced++
	return f.ReserveUse(ctx, key, max)
}

// TestSpendFencedByClaim: a call made under a request's claim (kernel.WithSpendClaim)
// spends its use only through a fenced reservation. When the claim was taken over (the
// store says ErrSpendClaimLost) the call fails spend_claim_lost: the tool does not run,
// nothing is spent and no decision record is written (the attempt that holds the claim
// decides and records the call). The attempt that holds the claim spends and runs. A
// usage store that cannot fence refuses such a spend (usage_store_unavailable) rather
// than spend it unfenced.
func TestSpendFencedByClaim(t *testing.T) {
	limited := grant("g-limited", []string{"append"}, kernel.ScopeDescendants)
	limited.Constraints = kernel.CapabilityConstraints{MaxUses: i64(5)}
	claim := kernel.SpendClaim{Scope: "ctx", Key: "key-1", Fingerprint: "fp", Epoch: 1}
	setup := func(t *testing.T, usage kernel.UsageStore) (*kernel.Kernel, *classAudit, *int) {
		audit := &classAudit{}
		ran := 0
		k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{limited}}, Usage: usage, Audit: audit})
		if err := k.RegisterTool(writeTool("files.append", "append", &ran)); err != nil {
			t.Fatal(err)
		}
		return k, audit, &ran
	}
	invoke := func(t *testing.T, k *kernel.Kernel, ctx context.Context) kernel.ToolResult {
		actx := testContext()
		return mustTurn(t, k, actx).InvokeTool(ctx, kernel.ToolCall{ID: "c1", Tool: "files.append", TraceID: actx.TraceID,
			RequestedAt: actx.Now, Arguments: json.RawMessage(`{"path":["a.md"]}`)})
	}
	decisions := func(a *classAudit, u *fencedUsage) []string {
		a.mu.Lock()
		defer a.mu.Unlock()
		var out []string
		for _, ev := range append(append([]kernel.AuditEvent(nil), a.events...), u.committed...) {
			if ev.Type == kernel.EventAuthorizationChecked {
				out = append(out, string(ev.Outcome))
			}
		}
		return out
	}
	t.Run("taken over", func(t *testing.T) {
		u := &fencedUsage{memUsage: newMemUsage(), epochs: map[string]int64{"ctx/key-1": 2}}
		k, audit, ran := setup(t, u)
		res := invoke(t, k, kernel.WithSpendClaim(context.Background(), claim))
		if res.Status != kernel.StatusFailed || res.Error == nil || res.Error.Code != kernel.CodeSpendClaimLost {
			t.Fatalf("result = %+v, want failed spend_claim_lost", res)
		}
		if *ran != 0 {
			t.Errorf("the tool ran %d times for a lost claim", *ran)
		}
		if n, _ := u.GetUsage(context.Background(), kernel.UsageKeyOf(&limited)); n != 0 {
			t.Errorf("a lost claim spent %d uses", n)
		}
		if got := decisions(audit, u); len(got) != 0 {
			t.Errorf("a lost claim wrote decision records %q", got)
		}
	})
	t.Run("held", func(t *testing.T) {
		u := &fencedUsage{memUsage: newMemUsage(), epochs: map[string]int64{"ctx/key-1": 1}}
		k, audit, ran := setup(t, u)
		res := invoke(t, k, kernel.WithSpendClaim(context.Background(), claim))
		if res.Status != kernel.StatusSucceeded {
			t.Fatalf("result = %+v (%+v), want succeeded", res, res.Error)
		}
		if *ran != 1 || u.fenced != 1 {
			t.Errorf("ran %d times with %d fenced reservations, want 1 and 1", *ran, u.fenced)
		}
		if n, _ := u.GetUsage(context.Background(), kernel.UsageKeyOf(&limited)); n != 1 {
			t.Errorf("uses %d, want 1", n)
		}
		if got := decisions(audit, u); fmt.Sprint(got) != "[allowed]" {
			t.Errorf("decision records %q, want [allowed]", got)
		}
	})
	t.Run("store cannot fence", func(t *testing.T) {
		u := newMemUsage()
		k, _, ran := setup(t, u)
		res := invoke(t, k, kernel.WithSpendClaim(context.Background(), claim))
		if res.Status != kernel.StatusDenied || res.Error == nil || res.Error.Code != kernel.ErrorCode(kernel.ReasonUsageStoreUnavailable) {
			t.Fatalf("result = %+v, want denied usage_store_unavailable", res)
		}
		if *ran != 0 {
			t.Errorf("the tool ran %d times", *ran)
		}
		if n, _ := u.GetUsage(context.Background(), kernel.UsageKeyOf(&limited)); n != 0 {
			t.Errorf("an unfenced spend spent %d uses", n)
		}
	})
}
