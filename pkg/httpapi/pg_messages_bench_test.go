package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/pgstore"
)

// TestBenchMessagesPostgres prints bench/messages.sh's PostgreSQL rows (run only with
// SHAREDOS_BENCH_MESSAGES=1; it asserts nothing about speed): the mailbox's throughput,
// send + deliver unbatched (mailbox.Transport.Deliver, one transaction per message, from
// 16 concurrent senders), and the messages.request round trip through serve replicas on
// PostgreSQL with a wait recipient answering through another replica (its inbox polled,
// its reply posted there), p50/p95 — with NOTIFY waking the waiter, and with NOTIFY
// dropped (mailbox.Config.NoStoreHints: the waiter's 1 s fallback poll alone). The
// cluster is pgtest's (fsync off): indicative.
func TestBenchMessagesPostgres(t *testing.T) {
	if os.Getenv("SHAREDOS_BENCH_MESSAGES") != "1" {
		t.Skip("a benchmark: bench/messages.sh runs it (SHAREDOS_BENCH_MESSAGES=1)")
	}
	pg := pgtest.StartPrivate(t)
	ctx := context.Background()

	// 1. throughput: send + deliver, unbatched
	dsn := pg.DSN(t)
	_, err := pgstore.Migrate(ctx, dsn)
	must(t, err)
	st, err := pgstore.Open(ctx, dsn, pgstore.Options{})
	must(t, err)
	defer st.Close()
	const senders, perSender = 16, 250
	to := kernel.Address{Kind: kernel.KindAgent, ID: "inbox"}
	cfg := &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{to: {Mode: mailbox.ModeWait}}, MaxInFlight: 1 << 30}
	tr := &mailbox.Transport{Box: st, Config: cfg}
	var failed atomic.Int64
	cpu0, t0 := cpuTime(), time.Now()
	var wg sync.WaitGroup
	for s := range senders {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			from := kernel.Address{Kind: kernel.KindAgent, ID: fmt.Sprintf("s%02d", s)}
			actx := kernel.AccessContext{World: "default", Actor: from}
			for i := range perSender {
				env := kernel.MessageEnvelope{Version: "1", ID: fmt.Sprintf("m-%02d-%04d", s, i), Sender: from, Receiver: to, Purpose: "bench",
					Payload: json.RawMessage(`{"n":1}`), TraceID: "trace-bench", CreatedAt: "2026-01-01T00:00:00.000Z"}
				if res, err := tr.Deliver(ctx, actx, env); err != nil || res.Status != kernel.DeliveryAccepted {
					failed.Add(1)
				}
			}
		}(s)
	}
	wg.Wait()
	wall, cpu := time.Since(t0), cpuTime()-cpu0
	n := senders * perSender
	fmt.Printf("ROW mailbox throughput on PostgreSQL, send+deliver unbatched (%d senders): %d messages in %v = %.0f messages/s (target >= 1000), client CPU %v (%.0f us/message), %d failed\n",
		senders, n, wall.Round(time.Millisecond), float64(n)/wall.Seconds(), cpu.Round(time.Millisecond), float64(cpu.Microseconds())/float64(n), failed.Load())

	// 2. round trip through replicas: the writer on replica 0, r00 answering on replica
	// 1; the waiter woken by NOTIFY, then with NOTIFY dropped (its 1 s poll alone)
	for _, mode := range []struct {
		name     string
		noHints  bool
		trips    int
		waitsFor string
	}{
		{"with NOTIFY", false, 40, "woken by NOTIFY, polling every " + mailbox.FallbackPoll.String() + " as the fallback"},
		{"NOTIFY dropped", true, 20, "polling every " + mailbox.FallbackPoll.String() + ", no NOTIFY"},
	} {
		roundTrips(t, pg.DSN(t), mode.name, mode.waitsFor, mode.noHints, mode.trips)
	}
}

// roundTrips prints the round-trip row of messages.request through two serve replicas on
// a fresh database dsn: the writer calls on replica 0, r00 answers through replica 1.
func roundTrips(t *testing.T, dsn, name, waitsFor string, noHints bool, trips int) {
	const warm = 3
	_, err := pgstore.Migrate(context.Background(), dsn)
	must(t, err)
	reps := messageReplicas(t, dsn, 2, false, noHints)
	for _, r := range reps {
		r.validate = nil
	}
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() { // the recipient: polls its inbox on replica 1 every 5 ms and answers there
		defer rwg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r := reps[1].doRaw("GET", "/v1/admin/messages?status=pending", "r00")
			var inbox []struct {
				Envelope kernel.MessageEnvelope `json:"envelope"`
			}
			if r.status == 200 && json.Unmarshal(r.body, &inbox) == nil {
				for _, m := range inbox {
					reps[1].do("POST", "/v1/admin/messages/"+m.Envelope.ID+"/reply", "r00", `{"payload":{"ok":true}}`)
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var lat []time.Duration
	cpu0 := cpuTime()
	for i := range trips + warm {
		body := fmt.Sprintf(`{"id":"trip-%d","tool":"messages.request","arguments":{"recipient":{"kind":"agent","agentId":"r00"},"payload":{"n":%d}},"traceId":"trace-trip","requestedAt":"2026-01-01T00:00:00Z"}`, i, i)
		t0 := time.Now()
		r := reps[0].do("POST", "/v1/tools/invoke", "writer", body)
		d := time.Since(t0)
		var res kernel.ToolResult
		if r.status != 200 || json.Unmarshal(r.body, &res) != nil || res.Status != kernel.StatusSucceeded {
			t.Fatalf("%s: trip %d: %d %s", name, i, r.status, r.body)
		}
		if i >= warm {
			lat = append(lat, d)
		}
	}
	cpu := cpuTime() - cpu0
	close(stop)
	rwg.Wait()
	slices.Sort(lat)
	fmt.Printf("ROW messages.request round trip, serve on PostgreSQL, %s: wait recipient answering through another replica (its inbox polled every 5 ms; the waiter %s): p50 %v, p95 %v over %d trips (target p95 <= 100 ms with NOTIFY, <= 1.1 s without), CPU of both replicas and the recipient %v per trip\n",
		name, waitsFor, lat[len(lat)/2].Round(100*time.Microsecond), lat[len(lat)*95/100].Round(100*time.Microsecond), trips, (cpu / time.Duration(trips)).Round(10*time.Microsecond))
}
