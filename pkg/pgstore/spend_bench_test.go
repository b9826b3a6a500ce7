package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// BenchmarkSpendDistinctGrants is the store's part of a spending tools/invoke, 64 at once
// in process, each on its own grant: a reservation committed with its decision record
// (durable), then the call's write-ahead record — what `serve` asks of PostgreSQL per
// call. It runs against the throwaway cluster of internal/pgtest (fsync off: the flush is
// cheap there) unless SHAREDOS_TEST_POSTGRES names a server (bench/pg.sh's cluster runs
// with fsync on: `SHAREDOS_TEST_POSTGRES=… go test -bench SpendDistinct ./pkg/pgstore/`).
func BenchmarkSpendDistinctGrants(b *testing.B) {
	benchmarkSpend(b, false)
}

// BenchmarkSpendHotGrant is BenchmarkSpendDistinctGrants with every call on one grant:
// the serialized ceiling (the counter's row is locked from reserve to commit).
func BenchmarkSpendHotGrant(b *testing.B) {
	benchmarkSpend(b, true)
}

func benchmarkSpend(b *testing.B, hot bool) {
	st, _ := openFresh(b)
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			grant := "g-hot"
			if !hot {
				grant = fmt.Sprintf("g-%d", i%1000)
			}
			r, ok, err := st.ReserveUse(ctx, key(grant), 1<<40)
			if err != nil || !ok {
				b.Errorf("ReserveUse = %v, %v", ok, err)
				return
			}
			ev := decision(fmt.Sprintf("d-%d", i), grant)
			if err := r.Commit(ctx, &ev); err != nil {
				b.Errorf("Commit: %v", err)
				return
			}
			inv := decision(fmt.Sprintf("i-%d", i), grant)
			inv.Type = kernel.EventToolInvoked
			inv.Outcome = kernel.OutcomeSucceeded
			if err := st.AppendWriteAhead(ctx, inv); err != nil {
				b.Errorf("AppendWriteAhead: %v", err)
				return
			}
		}
	})
}
