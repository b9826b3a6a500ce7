package httpapi_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/pgstore"
)

// revisionOf is a response's x-sharedos-revision (-1 when absent or not a number).
func revisionOf(r response) int64 {
	n, err := strconv.ParseInt(r.header.Get(httpapi.HeaderRevision), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// TestReplicasSeeADisableAtOnce: a namespace disabled through replica A is refused by
// replica B, and enabled again through A, allowed by B — 10,000 trials (200 with
// -short). Each of A's answers names a revision (x-sharedos-revision) that grows with
// every change; B, asked with it, never answers from older state: 0 stale reads, and
// B's answer names at least that revision. B's first call without the revision is timed
// until B refuses: the delay from A's answer to B's refusal is logged (p50, p99, max),
// not asserted (B serves the selection from its cache until its view of the revision
// passes the change: A's notification, else B's listener poll; every 500 ms).
func TestReplicasSeeADisableAtOnce(t *testing.T) {
	trials := 10000
	if testing.Short() {
		trials = 200
	}
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
	var last int64
	stale := 0
	for i := range trials {
		r := a.do("PUT", "/v1/tools/namespaces", "alice", `{"disable":["files"]}`)
		rev := revisionOf(r)
		if r.status != 200 || rev <= last {
			t.Fatalf("trial %d: disable through A: %d %s, revision %d after %d; want 200 and a larger revision", i, r.status, r.body, rev, last)
		}
		last = rev
		t0 := time.Now()
		for { // bounded by a test timeout (not a measure): B's view passes the change within its poll
			r := b.do("POST", "/v1/tools/invoke", "alice", stat)
			if r.status == 200 && strings.Contains(string(r.body), `"status":"denied"`) {
				delays = append(delays, time.Since(t0))
				break
			}
			if time.Since(t0) > time.Minute {
				t.Fatalf("trial %d: B still allows the call a minute after the disable through A: %d %s", i, r.status, r.body)
			}
		}
		r = b.do("POST", "/v1/tools/invoke", "alice", stat, httpapi.HeaderRevision, strconv.FormatInt(rev, 10))
		if r.status != 200 || !strings.Contains(string(r.body), `"status":"denied"`) {
			stale++
			t.Errorf("trial %d: B asked at revision %d after the disable: %d %s; want denied", i, rev, r.status, r.body)
		}
		if got := revisionOf(r); got < rev {
			t.Errorf("trial %d: B asked at revision %d answered at revision %d", i, rev, got)
		}
		r = a.do("PUT", "/v1/tools/namespaces", "alice", `{"enable":["files"]}`)
		if rev = revisionOf(r); r.status != 200 || rev <= last {
			t.Fatalf("trial %d: enable through A: %d %s, revision %d after %d", i, r.status, r.body, rev, last)
		}
		last = rev
		r = b.do("POST", "/v1/tools/invoke?"+httpapi.QueryRevision+"="+strconv.FormatInt(rev, 10), "alice", stat)
		if r.status != 200 || !strings.Contains(string(r.body), `"status":"succeeded"`) {
			stale++
			t.Errorf("trial %d: B asked at revision %d after the enable: %d %s; want succeeded", i, rev, r.status, r.body)
		}
		if stale > 10 {
			t.Fatalf("more than 10 stale reads; stopping")
		}
	}
	slices.Sort(delays)
	t.Logf("disable through A → refused by B, %d trials: p50 %v, p99 %v, max %v; with the revision: %d stale reads of %d", trials,
		delays[trials/2], delays[trials*99/100], delays[trials-1], stale, 2*trials)
}

// countPG is one number a query of dsn returns.
func countPG(t *testing.T, dsn, sql string) int64 {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	must(t, err)
	defer conn.Close(context.Background())
	var n int64
	must(t, conn.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// TestRevisionRequests: every /v1 response of a PostgreSQL replica names its revision
// (errors too); a malformed revision is 400 invalid_request, a revision the database
// never reached is 503 revision_unavailable with retry-after (the call did not run: its
// grant's use is still there, no record), and over SQLite there is no header and a named
// revision is ignored.
func TestRevisionRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL cluster")
	}
	pg := pgtest.StartPrivate(t)
	dsn := pg.DSN(t)
	_, err := pgstore.Migrate(context.Background(), dsn)
	must(t, err)
	_, a := pgReplicas(t, dsn, aliceGrants, func(hc *httpapi.Config) { hc.RevisionWait = 200 * time.Millisecond })()
	for _, r := range []response{a.do("GET", "/v1/tools", "alice", ""), a.do("GET", "/v1/nope", "alice", ""), a.do("GET", "/v1/tools", "", "")} {
		if revisionOf(r) < 0 {
			t.Errorf("a response without x-sharedos-revision: %d %v", r.status, r.header)
		}
	}
	for _, bad := range []string{"-1", "x", "1.5", "99999999999999999999"} {
		r := a.do("GET", "/v1/tools", "alice", "", httpapi.HeaderRevision, bad)
		if r.status != 400 || r.errCode(t) != "invalid_request" {
			t.Errorf("revision %q: %d %s; want 400 invalid_request", bad, r.status, r.body)
		}
		if r := a.do("GET", "/v1/tools?"+httpapi.QueryRevision+"="+bad, "alice", ""); r.status != 400 {
			t.Errorf("atLeastRevision=%q: %d %s; want 400", bad, r.status, r.body)
		}
	}
	before := countPG(t, dsn, "SELECT count(*) FROM audit_events")
	r := a.do("PUT", "/v1/tools/namespaces", "alice", `{"disable":["files"]}`, httpapi.HeaderRevision, "1000000")
	if r.status != 503 || r.errCode(t) != "revision_unavailable" || r.header.Get("Retry-After") != "1" {
		t.Fatalf("a revision the database never reached: %d %v %s; want 503 revision_unavailable, retry-after 1", r.status, r.header, r.body)
	}
	if n := countPG(t, dsn, "SELECT count(*) FROM namespace_settings"); n != 0 {
		t.Errorf("the refused disable stored %d selections", n)
	}
	if rev := countPG(t, dsn, "SELECT rev FROM sharedos_revision"); rev != 0 {
		t.Errorf("the refused disable moved the revision to %d", rev)
	}
	if after := countPG(t, dsn, "SELECT count(*) FROM audit_events"); after != before {
		t.Errorf("the refused request changed the audit trail: %d events, then %d", before, after)
	}

	f := newFixture(t) // SQLite
	r = f.do("GET", "/v1/tools", "alice", "", httpapi.HeaderRevision, "5")
	if r.status != 200 || r.header.Get(httpapi.HeaderRevision) != "" {
		t.Errorf("SQLite with a named revision: %d %v; want 200 and no revision header", r.status, r.header)
	}
}
