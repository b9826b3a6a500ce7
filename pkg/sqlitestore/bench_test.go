package sqlitestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"math"
	"strconv"
	"testing"
	"time"

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

// BenchmarkAuditOfACall writes what one read call of an agent session writes: its
// authorization.checked and tool.invoked records in one write-ahead batch, with event ids
// as the kernel mints them, one random operation and trace id per call and
// the clock advancing, into a trail that already holds 20,000 records, so that the pages
// each index touches are as spread as in a real database.
func BenchmarkAuditOfACall(b *testing.B) {
	s := openTest(b, Options{})
	ctx := context.Background()
	rnd := func() string {
		var x [16]byte
		_, _ = rand.Read(x[:])
		return hex.EncodeToString(x[:])
	}
	base := fullEvent()
	base.RequestedAuthority = nil
	at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	pair := func(i int) []kernel.AuditEvent {
		d, inv := base, base
		d.ID, inv.ID = kernel.NewEventID(), kernel.NewEventID()
		d.OperationID, d.TraceID = rnd(), rnd()
		inv.OperationID, inv.TraceID = d.OperationID, d.TraceID
		d.Type, d.Outcome = kernel.EventAuthorizationChecked, kernel.OutcomeAllowed
		inv.Type, inv.Outcome = kernel.EventToolInvoked, kernel.OutcomeSucceeded
		ts := kernel.FormatTimestamp(at.Add(time.Duration(i) * time.Millisecond).UnixMilli())
		d.At, inv.At = ts, ts
		return []kernel.AuditEvent{d, inv}
	}
	for i := 0; i < 10000; i++ {
		if err := s.AppendWriteAheadBatch(ctx, pair(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.AppendWriteAheadBatch(ctx, pair(10000+i)); err != nil {
			b.Fatal(err)
		}
	}
}
