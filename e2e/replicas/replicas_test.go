// Package replicas_test runs `sharedos serve` as real processes — several replicas over
// one PostgreSQL database (internal/pgtest's cluster, loopback only) — and checks what
// the issue of the PostgreSQL store asks of them: one bounded grant spent exactly across
// replicas, with replicas killed with SIGKILL mid-load, and the database stopped and
// started again under load. e2e/replicas/run.sh runs the scenarios N times and counts
// the passes.
//
//	go test ./e2e/replicas -count=1 -v
package replicas_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	efleet "github.com/sharedos/sharedos/e2e/internal/fleet"
	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/tokens"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

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

// fleet is N serve processes over one database (e2e/internal/fleet), with one tokens
// file and one root.
type fleet struct {
	*efleet.Fleet
	t     *testing.T
	work  string
	token string
	kills atomic.Int64
}

func newFleet(t *testing.T, dsn string, n int) *fleet {
	t.Helper()
	fl := &fleet{t: t, work: t.TempDir()}
	fl.Fleet = &efleet.Fleet{T: t, Bin: efleet.Bin(t), State: dsn, Root: filepath.Join(fl.work, "root"), Env: fl.env,
		ServeArgs: []string{"--idempotency-lease", idempotencyLease.String()}}
	must(t, os.MkdirAll(filepath.Join(fl.Root, "load"), 0o755))
	must(t, os.WriteFile(filepath.Join(fl.Root, "load", "x.md"), []byte("x"), 0o644))
	etc := filepath.Join(fl.work, "etc")
	must(t, os.MkdirAll(etc, 0o755))
	must(t, os.WriteFile(filepath.Join(etc, "alice.yaml"), []byte(hotGrants), 0o600))
	fl.TokensPath = filepath.Join(etc, "tokens.yaml")
	tok, err := tokens.New()
	must(t, err)
	fl.token = tok
	owner, _ := kernel.ParseAddress("human:alice")
	actor, _ := kernel.ParseAddress("agent:alice-bot")
	must(t, tokens.Append(fl.TokensPath, tokens.NewEntry{ID: "alice", SHA256: tokens.Hash(tok),
		Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "test"}, Grants: []string{"alice.yaml"}}))
	fl.Sos(-1, "store", "migrate")
	fl.Sos(-1, "--owner", "human:alice", "namespaces", "enable", "files")
	fl.Add(n)
	for i := range n {
		fl.WaitReady(i, 200)
	}
	return fl
}

// env is the environment of replica i's processes (-1: a command): a home and state
// folder of its own.
func (fl *fleet) env(i int) []string {
	home := filepath.Join(fl.work, "home", strconv.Itoa(i+1))
	return append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_STATE_HOME="+filepath.Join(home, "state"), "SHAREDOS_STATE=", "SHAREDOS_TOKENS=")
}

// killer kills replica 0 with SIGKILL every period and starts it again at once on its
// port, until stop is closed (the others stay up, as the scenario has it: one
// replica killed and restarted).
func (fl *fleet) killer(period time.Duration, stop <-chan struct{}) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				fl.Kill(0)
				fl.kills.Add(1)
				fl.Start(0)
			}
		}
	}()
	return wg.Wait
}

// answers is what the clients saw: the status of each call's final answer.
type answers struct {
	status  []string // "succeeded", "denied", "failed", "interrupted" (409 replay_interrupted), "stuck" (no answer), "error", "" (never sent)
	retries atomic.Int64
	// unavailable counts 503 answers (the state database unreachable), failedN failed
	// results, done the calls answered.
	unavailable, failedN, done atomic.Int64
	// cut marks the calls one of whose attempts the client gave up on (a timeout, a
	// dropped connection): that attempt's request context ended on the server, possibly
	// before it could find out whether its commit had committed (nil: none was).
	cut []atomic.Bool
}

// retry bounds a client's retries of one call: at most tries, backoff between two.
type retry struct {
	tries            int
	backoff, timeout time.Duration
}

// idempotencyLease is the replicas' --idempotency-lease: a key whose replica was killed
// while running its call is taken over by a retry this long after the claim was last
// renewed: shorter than the default (30 s), so that the chaos run's retries take their
// keys over quickly, yet far above a call's latency on a loaded machine — a live claimant
// whose renewal waited longer than the lease (for a pool connection, behind the machine's
// load) would see its spent key answered replay_interrupted to a retry (a 2 s lease did
// that 65 times in a steady run at load 27).
const idempotencyLease = 10 * time.Second

// stuckAfter is how many tries of a key that end without progress — a time-out, a
// connection cut (its replica killed), a 409 replay_pending — make it stuck. A claim held
// by a killed replica is taken over once its lease has run out, which the retries' back-
// off outlasts many times over (a bound for a loaded machine: stuck keys are reported,
// and must be none).
const stuckAfter = 60

// pendingBackoff is a client's pause after a 409 replay_pending before it retries.
const pendingBackoff = 250 * time.Millisecond

// hammer sends attempts calls of files.read on the hot grant from clients goroutines,
// round robin over the replicas, each with its own Idempotency-Key; a call that fails
// (no answer, a 5xx, 409 replay_pending) is sent again, with the same key and body, to
// the next replica. A key whose request times out (or is replay_pending) stuckTimeout
// times in a row is given up as stuck: its claim is held by a replica that was killed
// before it stored the response (an expired claim is taken over only after the
// idempotency window).
func hammer(t *testing.T, fl *fleet, clients int, res *answers, rt retry) {
	hc := &http.Client{Timeout: rt.timeout, Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	defer hc.CloseIdleConnections()
	attempts := len(res.status)
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
				body := fmt.Sprintf(`{"id":"hot-%d","tool":"files.read","arguments":{"path":["load","x.md"]},"traceId":"trace-1","requestedAt":"2026-01-01T00:00:00Z"}`, n)
				var b []byte
				var last string
				pending := 0
				for try := 0; ; try++ {
					if try == rt.tries {
						t.Errorf("call %d: no answer after %d tries: %s", n, rt.tries, last)
						res.status[n] = "error"
						break
					}
					if pending == stuckAfter {
						res.status[n] = "stuck"
						break
					}
					if try > 0 {
						res.retries.Add(1)
					}
					req, _ := http.NewRequest("POST", fl.URL(c+n+try)+"/v1/tools/invoke", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+fl.token)
					req.Header.Set("Idempotency-Key", fmt.Sprintf("key-%d", n))
					resp, err := hc.Do(req)
					if err != nil {
						last = err.Error()
						if isTimeout(err) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
							pending++
							if res.cut != nil {
								res.cut[n].Store(true)
							}
						}
						time.Sleep(rt.backoff) // back-off before the next replica
						continue
					}
					b, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode == 200 {
						break
					}
					last = fmt.Sprintf("%d %s", resp.StatusCode, b)
					if resp.StatusCode == 409 && strings.Contains(string(b), "replay_pending") {
						pending++
						time.Sleep(pendingBackoff) // the claim's lease runs out meanwhile
						continue
					}
					if resp.StatusCode == 409 && strings.Contains(string(b), "replay_interrupted") {
						res.status[n] = "interrupted" // spent by a killed replica: a final answer
						break
					}
					if resp.StatusCode >= 500 {
						if resp.StatusCode == 503 {
							res.unavailable.Add(1)
						}
						pending = 0
						time.Sleep(rt.backoff)
						continue
					}
					t.Errorf("call %d: %d %s", n, resp.StatusCode, b)
					res.status[n] = "error"
					break
				}
				res.done.Add(1)
				if res.status[n] != "" { // stuck, interrupted, or an error reported
					continue
				}
				switch {
				case strings.Contains(string(b), `"status":"succeeded"`):
					res.status[n] = "succeeded"
				case strings.Contains(string(b), `"status":"denied"`):
					res.status[n] = "denied"
				case strings.Contains(string(b), `"status":"failed"`):
					res.status[n] = "failed"
					res.failedN.Add(1)
				default:
					t.Errorf("call %d: unexpected result %s", n, b)
				}
			}
		}()
	}
	wg.Wait()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// count returns how many answers have each status.
func (a *answers) count() map[string]int {
	m := map[string]int{}
	for _, s := range a.status {
		m[s]++
	}
	return m
}

// recs are the decision records of one call.
type recs struct{ allowed, denied, exhausted, other int }

// decisionRecords reads the decision records (authorization.checked) of files.read
// calls in dsn's trail, by call (a record names its call in operation_id).
func decisionRecords(t *testing.T, dsn string) (byCall map[string]recs, total recs) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	must(t, err)
	defer conn.Close(context.Background())
	rows, err := conn.Query(context.Background(), `SELECT operation_id,
		count(*) FILTER (WHERE outcome = 'allowed'),
		count(*) FILTER (WHERE outcome = 'denied'),
		count(*) FILTER (WHERE outcome = 'denied' AND event LIKE '%grant_exhausted%'),
		count(*) FILTER (WHERE outcome NOT IN ('allowed', 'denied'))
		FROM audit_events WHERE type = 'authorization.checked' AND tool = 'files.read' GROUP BY operation_id`)
	must(t, err)
	byCall = map[string]recs{}
	for rows.Next() {
		var id string
		var r recs
		must(t, rows.Scan(&id, &r.allowed, &r.denied, &r.exhausted, &r.other))
		byCall[id] = r
		total.allowed += r.allowed
		total.denied += r.denied
		total.exhausted += r.exhausted
		total.other += r.other
	}
	must(t, rows.Err())
	return byCall, total
}

// checkExact checks the trail against the answers, call by call: exactly maxUses allowed
// decision records, at most one per call (no key spent twice); every refusal recorded
// names grant_exhausted (exhaustedOnly) or the outage refusals allowed; a call answered
// succeeded has exactly one allowed record and no refusal; one answered denied exactly
// one denied record and no allowed one; one answered failed no decision record; a stuck
// call (no answer) at most one decision record. A commit whose connection dropped during
// the outage is looked up by its record once the database answers (pkg/pgstore,
// ambiguous.go) and answered as it ended, so a call answered failed has no record —
// except one whose request's context ended while the database was still unreachable
// (the only request deadline in serve is the client's: an attempt the client gave up on,
// a.cut): its lookup was cut short, and the outcome stayed unknown; such a call may have
// one decision record, allowed or denied (before the lookup, seen once in 11 runs:
// "hot-1031 answered failed with 1 denied"). Never two, never a use without its record.
// Returns the totals.
func checkExact(t *testing.T, dsn string, a *answers, maxUses int, exhaustedOnly, outage bool) recs {
	t.Helper()
	byCall, total := decisionRecords(t, dsn)
	if total.allowed != maxUses {
		t.Errorf("allowed decision records: %d; want exactly %d (each use spent once, with its record)", total.allowed, maxUses)
	}
	if exhaustedOnly && (total.denied != total.exhausted || total.other != 0) {
		t.Errorf("decision records: %d denied, %d of them grant_exhausted, %d neither; want every refusal grant_exhausted", total.denied, total.exhausted, total.other)
	}
	var bad []string
	nbad, seen, redecided, cutShort := 0, 0, 0, 0
	for n, s := range a.status {
		id := fmt.Sprintf("hot-%d", n)
		r, ok := byCall[id]
		if ok {
			seen++
		}
		var good bool
		switch s {
		case "succeeded":
			good = r == recs{allowed: 1}
		case "denied":
			// one refusal per attempt that reached its decision: a replica killed after
			// recording a refusal, before keeping its answer, leaves its claim unspent,
			// and the retry that takes it over decides (and records) it again
			good = r.allowed == 0 && r.denied >= 1 && r.other == 0 && (!exhaustedOnly || r.exhausted == r.denied)
			if r.denied > 1 {
				redecided++
			}
		case "interrupted":
			// spent (with its record) by a replica killed before it kept its answer
			good = r == recs{allowed: 1}
		case "failed":
			good = r == recs{} || outage && a.cut != nil && a.cut[n].Load() && (r == recs{allowed: 1} || r == recs{denied: 1, exhausted: r.exhausted})
			if good && r != (recs{}) {
				cutShort++
			}
		default: // stuck, or never sent (reported by hammer)
			good = r.allowed+r.denied+r.other <= 1
		}
		if !good {
			nbad++
			if len(bad) < 10 {
				bad = append(bad, fmt.Sprintf("%s answered %q with %d allowed, %d denied (%d grant_exhausted), %d other records", id, s, r.allowed, r.denied, r.exhausted, r.other))
			}
		}
	}
	if nbad > 0 {
		t.Errorf("%d calls' answers disagree with their records; the first:\n%s", nbad, strings.Join(bad, "\n"))
	}
	if seen != len(byCall) {
		t.Errorf("%d calls have decision records, only %d of them among the calls sent", len(byCall), seen)
	}
	if cutShort > 0 {
		t.Logf("%d calls answered failed have a decision record: each had an attempt the client gave up on (the lookup of its commit cut short)", cutShort)
	}
	if redecided > 0 {
		t.Logf("%d calls answered denied were refused (and recorded) twice or more: once per attempt that reached its decision", redecided)
	}
	return total
}

// TestServeReplicasSpendExactly: 4 `sharedos serve` processes over one PostgreSQL
// database, 64 concurrent clients, 10,000 attempts on one grant with maxUses 1000:
// exactly 1,000 answered succeeded, 9,000 denied, the trail holding exactly 1,000 allowed
// decision records (one per call) and 9,000 refusals naming grant_exhausted, each the
// record of the call that was answered so. Then the same on a fresh database while one
// replica (replica 0) is killed with SIGKILL every 2 s and started again at once,
// clients retrying a failed request on the next replica with the same Idempotency-Key:
// still exactly 1,000 allowed records, at most one per call (no key spent twice), every
// answer backed by its record (checkExact), and no key stuck: a key whose claim died with
// its replica is taken over by a retry once the claim's lease (idempotencyLease) has run
// out — or, when the killed replica had spent its use, answered 409 replay_interrupted
// (its call has exactly its one allowed record).
//
// Bounded: 20,000 calls, each tried at most 60 times, each request 10 s at most.
func TestServeReplicasSpendExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 calls over 4 serve processes and PostgreSQL")
	}
	const replicas, clients, attempts, maxUses = 4, 64, 10000, 1000
	for _, chaos := range []bool{false, true} {
		t.Run(map[bool]string{false: "steady", true: "kill -9 every 2s"}[chaos], func(t *testing.T) {
			dsn := pgtest.DSN(t)
			fl := newFleet(t, dsn, replicas)
			stop := make(chan struct{})
			wait := func() {}
			if chaos {
				wait = fl.killer(2*time.Second, stop)
			}
			began := time.Now()
			res := &answers{status: make([]string, attempts)}
			hammer(t, fl, clients, res, retry{tries: 200, backoff: 20 * time.Millisecond, timeout: 3 * time.Second})
			close(stop)
			wait()
			cnt := res.count()
			t.Logf("%d attempts in %v: %d succeeded, %d denied, %d failed, %d interrupted, %d stuck; %d retries, %d kills",
				attempts, time.Since(began).Round(time.Millisecond), cnt["succeeded"], cnt["denied"], cnt["failed"], cnt["interrupted"], cnt["stuck"], res.retries.Load(), fl.kills.Load())
			if cnt["stuck"] != 0 {
				t.Errorf("%d keys stuck (no answer after %d tries without progress); want 0: a killed replica's claim is taken over once its lease runs out", cnt["stuck"], stuckAfter)
			}
			total := checkExact(t, dsn, res, maxUses, true, false)
			if !chaos && (cnt["succeeded"] != maxUses || cnt["denied"] != attempts-maxUses || total.denied != attempts-maxUses) {
				t.Errorf("steady: %d succeeded, %d denied answers, %d denied records; want %d, %d, %d",
					cnt["succeeded"], cnt["denied"], total.denied, maxUses, attempts-maxUses, attempts-maxUses)
			}
			if !chaos && cnt["denied"] != total.denied-stuckWith(res, dsn, t) {
				t.Errorf("denied answers %d; denied records %d of which %d of stuck calls; want equal", cnt["denied"], total.denied, stuckWith(res, dsn, t))
			}
			if chaos && fl.kills.Load() == 0 {
				t.Log("the run ended before the first kill")
			}
		})
	}
}

// TestServeSurvivesDatabaseRestart: 2 `sharedos serve` processes over a private
// PostgreSQL cluster, 16 clients making 3,000 attempts on one grant with maxUses 1000;
// meanwhile the server is stopped (an immediate shutdown: every connection dropped) and
// started again on its data. While it is down, every replica's /readyz is 503 and calls
// fail closed (503 state_unavailable, or a failed result), never allowed without a
// record; once it is back, /readyz is 200 again on the same processes (no restart) and
// the calls go on: exactly 1,000 allowed decision records, at most one per call, every
// call answered succeeded has its allowed record (checkExact, outage mode).
//
// Event-driven, not timed: the server is stopped once a third of the calls are
// answered, started again once the clients saw 50 failures, and the test waits for
// states with generous bounds.
func TestServeSurvivesDatabaseRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("serve processes and a private PostgreSQL cluster stopped under load")
	}
	const replicas, clients, attempts, maxUses = 2, 16, 3000, 1000
	pg := pgtest.StartPrivate(t)
	dsn := pg.DSN(t)
	fl := newFleet(t, dsn, replicas)
	res := &answers{status: make([]string, attempts), cut: make([]atomic.Bool, attempts)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// a call is retried for ten minutes at most (6,000 tries, 100 ms apart): longer
		// than the outage, whose bounds (/readyz 503, then 200 again) are 2 minutes each
		hammer(t, fl, clients, res, retry{tries: 6000, backoff: 100 * time.Millisecond, timeout: 10 * time.Second})
	}()
	deadline := time.Now().Add(5 * time.Minute)
	for res.done.Load() < attempts/3 {
		if time.Now().After(deadline) {
			t.Fatal("a third of the calls were not decided within 5 minutes")
		}
		time.Sleep(100 * time.Millisecond) // polling for progress
	}
	pg.Stop(t)
	for i := range replicas {
		if got := fl.ReadyWithin(i, 503, 2*time.Minute); got != 503 {
			t.Errorf("replica %d: /readyz %d with the database stopped; want 503", i, got)
		}
	}
	failures := func() int64 { return res.unavailable.Load() + res.failedN.Load() }
	for failures() < 50 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling for the clients to meet the outage
	}
	t.Logf("database stopped: the clients saw %d failures", failures())
	pg.Restart(t)
	for i := range replicas {
		fl.WaitReady(i, 200)
	}
	<-done
	cnt := res.count()
	t.Logf("%d attempts: %d succeeded, %d denied, %d failed, %d stuck; %d retries, %d answers 503",
		attempts, cnt["succeeded"], cnt["denied"], cnt["failed"], cnt["stuck"], res.retries.Load(), res.unavailable.Load())
	checkExact(t, dsn, res, maxUses, false, true)
	if res.unavailable.Load()+res.failedN.Load() == 0 {
		t.Error("no call met the outage")
	}
}

// stuckWith counts the stuck calls that have a denied decision record.
func stuckWith(a *answers, dsn string, t *testing.T) int {
	byCall, _ := decisionRecords(t, dsn)
	n := 0
	for i, s := range a.status {
		if s == "stuck" && byCall[fmt.Sprintf("hot-%d", i)].denied > 0 {
			n++
		}
	}
	return n
}

func must(t testing.TB, err error) {
	t.Helper()
	efleet.Must(t, err)
}
