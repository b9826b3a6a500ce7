package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/pgstore"
)

const hotGrants = `version: 1
grants:
  - id: g-hot
    subject: agent:alice-bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [load]}
        actions: [read]
        scope: descendants
    constraints: {maxUses: 1000}
`

// fleet is N in-process serve replicas over one PostgreSQL database; one of them may be
// stopped and started again (another port) while clients run.
type fleet struct {
	start func() (*servetest.Server, *fixture)
	mu    sync.Mutex
	srvs  []*servetest.Server
	urls  []string
	tok   string
	root  string
}

func newFleet(t *testing.T, dsn string, n int) *fleet {
	fl := &fleet{start: pgReplicas(t, dsn, hotGrants)}
	for range n {
		s, f := fl.start()
		fl.srvs, fl.urls, fl.tok, fl.root = append(fl.srvs, s), append(fl.urls, s.URL), f.tok["alice"], f.root
	}
	must(t, os.MkdirAll(filepath.Join(fl.root, "load"), 0o755))
	must(t, os.WriteFile(filepath.Join(fl.root, "load", "x.md"), []byte("x"), 0o644))
	return fl
}

func (fl *fleet) url(i int) string {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.urls[i%len(fl.urls)]
}

// bounce stops replica i abruptly (its client connections cut, its listener and its
// store's pool closed) and starts it again on a new port.
func (fl *fleet) bounce(i int) {
	fl.mu.Lock()
	old := fl.srvs[i]
	fl.urls[i] = "http://127.0.0.1:1" // nothing listens there: a client's request fails and is retried
	fl.mu.Unlock()
	old.Close()
	s, _ := fl.start()
	fl.mu.Lock()
	fl.srvs[i], fl.urls[i] = s, s.URL
	fl.mu.Unlock()
}

// hammerResult is what the clients saw: one final answer per Idempotency-Key.
type hammerResult struct {
	allowed, denied, failed, retries atomic.Int64
}

// hammer sends attempts calls of files.read on the hot grant from clients goroutines,
// round robin over the replicas, each call with its own Idempotency-Key; a call that
// fails (no answer, a 5xx, 409 replay_pending) is sent again, with the same key and
// body, to the next replica — at most 50 times.
func hammer(t *testing.T, fl *fleet, clients, attempts int, chaos bool) *hammerResult {
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer hc.CloseIdleConnections()
	var res hammerResult
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n := int(next.Add(1)) - 1
				if n >= attempts {
					return
				}
				body := call(fmt.Sprintf("hot-%d", n), "files.read", `{"path":["load","x.md"]}`)
				var b []byte
				var last string
				for try := 0; ; try++ {
					if try == 50 {
						t.Errorf("call %d: no answer after 50 tries: %s", n, last)
						return
					}
					if try > 0 {
						res.retries.Add(1)
					}
					req, _ := http.NewRequest("POST", fl.url(c+n+try)+"/v1/tools/invoke", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+fl.tok)
					req.Header.Set("Idempotency-Key", fmt.Sprintf("key-%d", n))
					resp, err := hc.Do(req)
					if err != nil {
						last = err.Error()
						time.Sleep(10 * time.Millisecond) // back-off before the next replica
						continue
					}
					b, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						break
					}
					last = fmt.Sprintf("%d %s", resp.StatusCode, b)
					if resp.StatusCode >= 500 || resp.StatusCode == 409 && strings.Contains(string(b), "replay_pending") {
						time.Sleep(10 * time.Millisecond)
						continue
					}
					t.Errorf("call %d: %d %s", n, resp.StatusCode, b)
					return
				}
				switch {
				case strings.Contains(string(b), `"status":"succeeded"`):
					res.allowed.Add(1)
				case strings.Contains(string(b), `"status":"denied"`):
					res.denied.Add(1)
				case chaos && strings.Contains(string(b), `"status":"failed"`):
					// a replica stopped under the call: its context was cancelled and the
					// call refused without a decision (audit_unavailable), and that
					// answer is the key's — replayed, never run again
					res.failed.Add(1)
				default:
					t.Errorf("call %d: unexpected result %s", n, b)
				}
			}
		}()
	}
	wg.Wait()
	return &res
}

// auditCounts counts the decision records of the hot grant's calls in dsn's trail:
// allowed, allowed distinct calls, denied, and denied naming grant_exhausted.
func auditCounts(t *testing.T, dsn string) (allowed, allowedCalls, denied, exhausted int) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	must(t, err)
	defer conn.Close(context.Background())
	must(t, conn.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE outcome = 'allowed'),
		count(DISTINCT operation_id) FILTER (WHERE outcome = 'allowed'),
		count(*) FILTER (WHERE outcome = 'denied'),
		count(*) FILTER (WHERE outcome = 'denied' AND event LIKE '%grant_exhausted%')
		FROM audit_events WHERE type = 'authorization.checked' AND tool = 'files.read'`).Scan(&allowed, &allowedCalls, &denied, &exhausted))
	return
}

// TestReplicasSpendExactlyOverHTTP: 4 serve replicas — in process, each with its own
// host and its own pgstore pool, as separate processes have — over one PostgreSQL
// database; 64 clients make 10,000 attempts on one grant with maxUses 1000: exactly
// 1,000 are allowed and 9,000 refused, the trail holds exactly 1,000 allowed decision
// records (of 1,000 distinct calls) and 9,000 refusals naming grant_exhausted. Then the
// same on a fresh database while replica 0 is stopped abruptly and started again every
// ~2 s, clients retrying a failed call on another replica with the same Idempotency-Key:
// still exactly 1,000 allowed, and no call (no key) has two allowed records.
//
// In process rather than `sharedos serve` processes: no binary to build in the test's
// budget, and the same handler, host and store code; what a kill -9 adds — a backend
// gone mid-transaction — is pkg/pgstore's TestKilledBackendsNeverSplitUseAndRecord.
// Bounded: 20,000 calls, each retried at most 50 times, each request 20 s at most.
func TestReplicasSpendExactlyOverHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 calls over 4 replicas and a private PostgreSQL cluster")
	}
	const replicas, clients, attempts, maxUses = 4, 64, 10000, 1000
	pg := pgtest.StartPrivate(t)
	for _, chaos := range []bool{false, true} {
		t.Run(map[bool]string{false: "steady", true: "replica bounced every 2s"}[chaos], func(t *testing.T) {
			dsn := pg.DSN(t)
			_, err := pgstore.Migrate(context.Background(), dsn)
			must(t, err)
			fl := newFleet(t, dsn, replicas)
			stop := make(chan struct{})
			var bounces atomic.Int64
			var bwg sync.WaitGroup
			if chaos {
				bwg.Add(1)
				go func() {
					defer bwg.Done()
					tick := time.NewTicker(2 * time.Second)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							fl.bounce(0)
							bounces.Add(1)
						}
					}
				}()
			}
			began := time.Now()
			res := hammer(t, fl, clients, attempts, chaos)
			close(stop)
			bwg.Wait()
			t.Logf("%d attempts in %v: %d allowed, %d denied, %d failed, %d retries, %d bounces",
				attempts, time.Since(began).Round(time.Millisecond), res.allowed.Load(), res.denied.Load(), res.failed.Load(), res.retries.Load(), bounces.Load())
			allowed, calls, denied, exhausted := auditCounts(t, dsn)
			if allowed != maxUses || calls != maxUses {
				t.Errorf("allowed decision records: %d of %d calls; want %d of %d (each use spent once, with its record)", allowed, calls, maxUses, maxUses)
			}
			if exhausted != denied {
				t.Errorf("denied decision records: %d, %d of them grant_exhausted; want all", denied, exhausted)
			}
			if !chaos && (res.allowed.Load() != maxUses || res.denied.Load() != attempts-maxUses || denied != attempts-maxUses) {
				t.Errorf("clients saw %d allowed, %d denied; %d denied records; want %d, %d, %d",
					res.allowed.Load(), res.denied.Load(), denied, maxUses, attempts-maxUses, attempts-maxUses)
			}
			// Stopped under a call, a replica answers it failed (its context cancelled
			// after the decision, possibly after the use was spent and recorded): such a
			// call counts among the 1,000 records but not among the allowed answers.
			if chaos && (res.allowed.Load() > maxUses || res.allowed.Load()+res.failed.Load() < maxUses) {
				t.Errorf("clients saw %d allowed and %d failed; want at most %d allowed, and at least %d allowed or failed", res.allowed.Load(), res.failed.Load(), maxUses, maxUses)
			}
			if chaos {
				t.Logf("denied: %d answers, %d records", res.denied.Load(), denied)
			}
			if chaos && bounces.Load() == 0 {
				t.Log("the run ended before the first bounce")
			}
		})
	}
}
