package httpapi_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/pgstore"
)

// TestReplicasSeeADisableAtOnce: a namespace disabled through replica A is refused by
// replica B on B's very next call, 1,000 times out of 1,000 (and enabled again through
// A, allowed by B's next call): a pgstore replica reads the selection from the database
// at every call, so there is no cache to go stale and nothing (LISTEN/NOTIFY) to wake.
// The delay from A's answer to B's refusal is logged (p50, p99), not asserted.
func TestReplicasSeeADisableAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("4,000 requests over 2 replicas and a private PostgreSQL cluster")
	}
	const trials = 1000
	pg := pgtest.StartPrivate(t)
	dsn := pg.DSN(t)
	_, err := pgstore.Migrate(context.Background(), dsn)
	must(t, err)
	start := pgReplicas(t, dsn, aliceGrants)
	_, a := start()
	_, b := start()
	a.validate, b.validate = nil, nil
	stat := call("fresh", "files.stat", `{"path":["drafts"]}`)
	var delays []time.Duration
	for i := range trials {
		if r := a.do("PUT", "/v1/tools/namespaces", "alice", `{"disable":["files"]}`); r.status != 200 {
			t.Fatalf("trial %d: disable through A: %d %s", i, r.status, r.body)
		}
		t0 := time.Now()
		r := b.do("POST", "/v1/tools/invoke", "alice", stat)
		delays = append(delays, time.Since(t0))
		if r.status != 200 || !strings.Contains(string(r.body), `"status":"denied"`) {
			t.Fatalf("trial %d: B's next call after the disable through A: %d %s; want denied", i, r.status, r.body)
		}
		if r := a.do("PUT", "/v1/tools/namespaces", "alice", `{"enable":["files"]}`); r.status != 200 {
			t.Fatalf("trial %d: enable through A: %d %s", i, r.status, r.body)
		}
		if r := b.do("POST", "/v1/tools/invoke", "alice", stat); r.status != 200 || !strings.Contains(string(r.body), `"status":"succeeded"`) {
			t.Fatalf("trial %d: B's next call after the enable through A: %d %s; want succeeded", i, r.status, r.body)
		}
	}
	slices.Sort(delays)
	t.Logf("disable through A → refused by B, %d trials: p50 %v, p99 %v, max %v", trials,
		delays[trials/2], delays[trials*99/100], delays[trials-1])
}
