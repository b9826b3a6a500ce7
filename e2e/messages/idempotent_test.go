package messages_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos/internal/pgtest"
)

// TestSameMessageThousandTimesThroughReplicas is issue 24's "the same message id sent
// 1,000 times concurrently ⇒ one row, one spent use, identical receipts" on PostgreSQL
// through 4 serve replicas: 1,000 POST /v1/messages of one message (one Idempotency-Key,
// one body) from 32 clients, round robin over the replicas, on a send grant of 5 uses.
// Every copy is answered 202 with the same body (one envelope id, one receipt); the
// mailbox holds one row, the grant one spent use, the trail one message.sent record. A
// copy answered 409 replay_pending (the first still running past the replay wait) is
// sent again, 20 times at most.
func TestSameMessageThousandTimesThroughReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("serve processes over PostgreSQL")
	}
	const replicas, copies, clients = 4, 1000, 32
	dsn := pgtest.DSN(t)
	fl := newFleet(t, dsn, replicas, 5)
	bodies := make([]string, copies)
	var next, retries atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= copies {
					return
				}
				for try := 0; ; try++ {
					r := fl.do(context.Background(), (n+try)%replicas, "POST", "/v1/messages", "writer",
						`{"to":"agent:reviewer","payload":{"ask":"review the release"}}`, "Idempotency-Key", "same-message")
					if r.err == nil && r.status == 409 && strings.Contains(string(r.body), "replay_pending") && try < 20 {
						retries.Add(1)
						continue
					}
					if r.err != nil || r.status != 202 {
						t.Errorf("copy %d: %d %s %v", n, r.status, r.body, r.err)
					}
					bodies[n] = string(r.body)
					break
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for n := range bodies {
		if bodies[n] != bodies[0] {
			t.Fatalf("copy %d was answered\n%s\ncopy 0\n%s", n, bodies[n], bodies[0])
		}
	}
	var first sent
	must(t, json.Unmarshal([]byte(bodies[0]), &first))
	if !first.Receipt.Ok() || first.Receipt.MessageID != first.Envelope.ID {
		t.Fatalf("the receipt: %+v", first)
	}
	db := connect(t, dsn)
	ctx := context.Background()
	var rows, uses, records int
	must(t, db.QueryRow(ctx, `SELECT count(*) FROM messages WHERE sender = 'agent:writer'`).Scan(&rows))
	must(t, db.QueryRow(ctx, `SELECT coalesce(sum(uses), 0) FROM grant_usage WHERE grant_id = 'g-ask-reviewer'`).Scan(&uses))
	must(t, db.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE type = 'message.sent'`).Scan(&records))
	if rows != 1 || uses != 1 || records != 1 {
		t.Fatalf("%d rows, %d uses spent, %d message.sent records; want 1, 1, 1", rows, uses, records)
	}
	t.Logf("%d copies through %d replicas: one message %s; %d copies sent again after 409 replay_pending", copies, replicas, first.Envelope.ID, retries.Load())
}
