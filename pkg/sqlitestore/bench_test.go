package sqlitestore

import (
	"context"
	"math"
	"strconv"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func BenchmarkTryConsume(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ok, err := s.TryConsume(ctx, uk("w", "g"), math.MaxInt64)
		if err != nil || !ok {
			b.Fatalf("TryConsume = %v, %v", ok, err)
		}
	}
}

// BenchmarkAppendAudit is one audit record: durable (Append, fsynced) and write-ahead
// (AppendWriteAhead, no fsync; see Store).
func BenchmarkAppendAudit(b *testing.B) {
	for _, c := range []struct {
		name  string
		write func(*Store, context.Context, kernel.AuditEvent) error
	}{{"durable", (*Store).Append}, {"write-ahead", (*Store).AppendWriteAhead},
		{"write-ahead-batch-of-2", func(s *Store, ctx context.Context, ev kernel.AuditEvent) error {
			ev2 := ev
			ev2.ID += "-b"
			return s.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{ev, ev2})
		}}} {
		b.Run(c.name, func(b *testing.B) {
			s := openTest(b, Options{})
			ctx := context.Background()
			ev := fullEvent()
			ev.RequestedAuthority = nil // as most records: only escalations and some refusals carry one
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ev.ID = "ev-" + strconv.Itoa(i)
				if err := c.write(s, ctx, ev); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkListAudit(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	batch := make([]kernel.AuditEvent, 1000)
	for i := range batch {
		batch[i] = fullEvent()
		batch[i].ID = "ev-" + strconv.Itoa(i)
	}
	if err := s.AppendBatch(ctx, batch); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if evs, err := s.ListAudit(ctx, AuditFilter{Limit: 50}); err != nil || len(evs) != 50 {
			b.Fatalf("ListAudit = %d, %v", len(evs), err)
		}
	}
}
