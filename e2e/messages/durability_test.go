package messages_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// pendingRequests is how many messages.request calls wait when the waiter is killed.
const pendingRequests = 100

// requestBody is the messages.request call n of the writer to the reviewer.
func requestBody(n int) string {
	return fmt.Sprintf(`{"id":"call-%d","tool":"messages.request","arguments":{"recipient":{"kind":"agent","agentId":"reviewer"},"payload":{"n":%d}},"traceId":"trace-kill","requestedAt":"2026-01-01T00:00:00Z"}`, n, n)
}

// calls are the in-flight messages.request calls of the writer, one goroutine each.
type calls struct {
	res  []reply
	done []chan struct{}
}

// startCalls sends n messages.request calls at once to replica i.
func startCalls(fl *fleet, i, n int) *calls {
	c := &calls{res: make([]reply, n), done: make([]chan struct{}, n)}
	for k := range n {
		c.done[k] = make(chan struct{})
		go func() {
			defer close(c.done[k])
			c.res[k] = fl.do(context.Background(), i, "POST", "/v1/tools/invoke", "writer", requestBody(k))
		}()
	}
	return c
}

// wait waits for call k's answer (at most 2 minutes) and reports whether it came.
func (c *calls) wait(k int) bool {
	select {
	case <-c.done[k]:
		return true
	case <-time.After(2 * time.Minute): // a bound for a loaded machine
		return false
	}
}

// row is one mailbox row of the writer's requests, with what the trail says of it.
type row struct {
	id, status, failedCode string
	n                      int
	reply                  *kernel.MessageEnvelope
}

// writerRows reads the writer's requests from the mailbox, by the n of their payload.
func writerRows(t *testing.T, db *pgx.Conn) map[int]row {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT id, envelope, status, coalesce(reply, ''), coalesce(failed_code, '')
		FROM messages WHERE sender = 'agent:writer' ORDER BY seq`)
	must(t, err)
	defer rows.Close()
	out := map[int]row{}
	for rows.Next() {
		var r row
		var env, rep string
		must(t, rows.Scan(&r.id, &env, &r.status, &rep, &r.failedCode))
		var e kernel.MessageEnvelope
		must(t, json.Unmarshal([]byte(env), &e))
		var p struct{ N int }
		must(t, json.Unmarshal(e.Payload, &p))
		r.n = p.N
		if rep != "" {
			r.reply = &kernel.MessageEnvelope{}
			must(t, json.Unmarshal([]byte(rep), r.reply))
		}
		if _, dup := out[r.n]; dup {
			t.Fatalf("two requests carry payload n=%d", r.n)
		}
		out[r.n] = r
	}
	must(t, rows.Err())
	return out
}

// sentRecords counts the message.sent records of the trail: of each request by its
// message id (the writer's, outcome succeeded), and of the replies to it by outcome and
// reason ("succeeded", "denied message_already_resolved", …).
func sentRecords(t *testing.T, db *pgx.Conn) (requests map[string]int, replies map[string]map[string]int) {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT outcome, coalesce(event::jsonb->>'reason', ''),
		coalesce(event::jsonb->'metadata'->>'messageId', ''), coalesce(event::jsonb->'metadata'->>'replyTo', '')
		FROM audit_events WHERE type = 'message.sent'`)
	must(t, err)
	defer rows.Close()
	requests, replies = map[string]int{}, map[string]map[string]int{}
	for rows.Next() {
		var outcome, reason, id, replyTo string
		must(t, rows.Scan(&outcome, &reason, &id, &replyTo))
		if replyTo == "" {
			if outcome == "succeeded" {
				requests[id]++
			}
			continue
		}
		if replies[replyTo] == nil {
			replies[replyTo] = map[string]int{}
		}
		replies[replyTo][strings.TrimSpace(outcome+" "+reason)]++
	}
	must(t, rows.Err())
	return requests, replies
}

// waitRows polls the mailbox until the writer has n requests, each with its message.sent
// record (at most 2 minutes), and returns them.
func waitRows(t *testing.T, db *pgx.Conn, n int) map[int]row {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		rows := writerRows(t, db)
		reqs, _ := sentRecords(t, db)
		recorded := 0
		for _, r := range rows {
			recorded += min(reqs[r.id], 1)
		}
		if len(rows) == n && recorded == n {
			return rows
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter stored %d of %d requests (%d with their message.sent record)", len(rows), n, recorded)
		}
	}
}

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	db, err := pgx.Connect(context.Background(), dsn)
	must(t, err)
	t.Cleanup(func() { _ = db.Close(context.Background()) })
	return db
}

// reattach is the writer re-attaching to request id on replica i (POST
// /v1/messages/{id}/wait) until its reply or failure, or until ctx ends (no answer).
func (fl *fleet) reattach(ctx context.Context, i int, id string) (message, error) {
	r := fl.do(ctx, i, "POST", "/v1/messages/"+id+"/wait", "writer", "")
	if r.err != nil {
		return message{}, r.err
	}
	if r.status != 200 {
		return message{}, fmt.Errorf("wait %s: %d %s", id, r.status, r.body)
	}
	var m message
	err := json.Unmarshal(r.body, &m)
	return m, err
}

// giveUp is the writer re-attaching to request id on replica i and giving up on it: each
// wait is cancelled after a moment, which the replica answers by resolving the request
// failed once it has read it (a wait cancelled before the replica read the request leaves
// it pending: the writer tries again, a little longer each time, at most 100 times). It
// returns the request as the writer last saw it, which must be failed.
func (fl *fleet) giveUp(t *testing.T, i int, id string) message {
	t.Helper()
	for try := 0; try < 100; try++ {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond+time.Duration(try)*100*time.Millisecond)
		m, err := fl.reattach(ctx, i, id)
		cancel()
		if err == nil {
			return m // settled: answered (wrong, the caller checks) or failed
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("re-attaching to %s: %v", id, err)
		}
	}
	t.Fatalf("the writer gave up on %s 100 times; it is still pending", id)
	return message{}
}

// checkOnce checks the mailbox and the trail after the test: every request of the writer
// is answered (want[n] == "answered", the reply the one delivered reply record names) or
// failed message_reply_resolution_failed (want "failed"), has exactly one message.sent
// record as a request, exactly one delivered reply when answered and none when failed,
// and every other reply to it was refused message_already_resolved (lateReplies[n] of
// them). It returns the rows.
func checkOnce(t *testing.T, db *pgx.Conn, want map[int]string, lateReplies map[int]int) map[int]row {
	t.Helper()
	rows := writerRows(t, db)
	if len(rows) != len(want) {
		t.Fatalf("%d requests in the mailbox, want %d (lost or extra)", len(rows), len(want))
	}
	reqs, replies := sentRecords(t, db)
	var bad []string
	ns := make([]int, 0, len(rows))
	for n := range rows {
		ns = append(ns, n)
	}
	sort.Ints(ns)
	for _, n := range ns {
		r := rows[n]
		rep := replies[r.id]
		wantDelivered := 0
		switch {
		case want[n] == "answered" && r.status == "answered" && r.reply != nil:
			wantDelivered = 1
		case want[n] == "failed" && r.status == "failed" && r.failedCode == string(kernel.CodeMessageReplyResolutionFailed):
		default:
			bad = append(bad, fmt.Sprintf("request n=%d (%s) is %s %s, want %s", n, r.id, r.status, r.failedCode, want[n]))
			continue
		}
		if reqs[r.id] != 1 {
			bad = append(bad, fmt.Sprintf("request n=%d has %d message.sent records, want 1", n, reqs[r.id]))
		}
		others := 0
		for k, v := range rep {
			if k != "succeeded" && k != "denied message_already_resolved" {
				others += v
			}
		}
		if rep["succeeded"] != wantDelivered || rep["denied message_already_resolved"] != lateReplies[n] || others != 0 {
			bad = append(bad, fmt.Sprintf("request n=%d (%s): reply records %v, want %d delivered and %d refused message_already_resolved",
				n, r.status, rep, wantDelivered, lateReplies[n]))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d problems; the first:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	return rows
}

// toolOutput is the output of a succeeded messages.request result (the reply's payload).
func toolOutput(t *testing.T, r reply) string {
	t.Helper()
	if r.err != nil || r.status != 200 {
		t.Fatalf("messages.request: %d %s %v", r.status, r.body, r.err)
	}
	var res struct {
		Status string          `json:"status"`
		Output json.RawMessage `json:"output"`
	}
	must(t, json.Unmarshal(r.body, &res))
	if res.Status != "succeeded" {
		t.Fatalf("messages.request: %s", r.body)
	}
	return string(res.Output)
}

// TestKillWaitingServe is issue 24's durability proof on PostgreSQL, with the process
// that waits a `serve` replica: replica A holds 100 pending messages.request calls of
// agent:writer to agent:reviewer (a wait recipient; reply timeout 1 h); the reviewer
// answers 10 of them through replica B (A's calls return their replies); A is killed
// with SIGKILL (its other 90 calls get no answer); the reviewer answers 30 more through
// B while A is down; A is started again, and the writer re-attaches to every one of its
// 100 requests on A by id (POST /v1/messages/{id}/wait; 5 of them through a CLI
// process too, `sharedos messages wait ID`): the 40 answered return their reply at once, 30 more are answered through B while the writer waits on A and return
// theirs, and the writer gives up on the last 30 (its waits cancelled), which A resolves
// failed message_reply_resolution_failed. Then the reviewer answers the 30 failed ones
// and 30 answered ones again: refused message_already_resolved. In the mailbox and the
// trail: 100 requests, 0 lost, 0 pending, 70 answered each by exactly one delivered
// reply (the one every view of the writer got), 30 failed with no delivered reply.
func TestKillWaitingServe(t *testing.T) {
	if testing.Short() {
		t.Skip("serve processes killed and restarted over PostgreSQL")
	}
	dsn := pgtest.DSN(t)
	began := time.Now()
	fl := newFleet(t, dsn, 2, 0)
	db := connect(t, dsn)
	t.Logf("fleet ready after %v", time.Since(began).Round(time.Millisecond))
	const a, b = 0, 1
	c := startCalls(fl, a, pendingRequests)
	rows := waitRows(t, db, pendingRequests)
	t.Logf("%d requests pending after %v", pendingRequests, time.Since(began).Round(time.Millisecond))

	// group 0 (n < 10): answered before the kill; A's calls return the replies
	for n := 0; n < 10; n++ {
		if _, err := fl.answer(b, rows[n].id, fmt.Sprintf(`{"answer":%d}`, n)); err != nil {
			t.Fatal(err)
		}
	}
	for n := 0; n < 10; n++ {
		if !c.wait(n) {
			t.Fatalf("call %d: no answer after its reply was recorded", n)
		}
		if out := toolOutput(t, c.res[n]); out != fmt.Sprintf(`{"answer":%d}`, n) {
			t.Fatalf("call %d returned %s", n, out)
		}
	}
	fl.Kill(a)
	for n := 10; n < pendingRequests; n++ {
		if !c.wait(n) {
			t.Fatalf("call %d still running after its replica was killed", n)
		}
		if c.res[n].err == nil {
			t.Fatalf("call %d was answered by a killed replica: %d %s", n, c.res[n].status, c.res[n].body)
		}
	}
	// group 1 (10 ≤ n < 40): answered while the waiter is down
	for n := 10; n < 40; n++ {
		if _, err := fl.answer(b, rows[n].id, fmt.Sprintf(`{"answer":%d}`, n)); err != nil {
			t.Fatal(err)
		}
	}
	fl.Start(a)
	fl.waitReady(a)
	t.Logf("the waiter killed and ready again after %v", time.Since(began).Round(time.Millisecond))

	// the writer finds its requests by their message.sent records and re-attaches on A
	reqs, _ := sentRecords(t, db)
	if len(reqs) != pendingRequests {
		t.Fatalf("%d requests have a message.sent record, want %d", len(reqs), pendingRequests)
	}
	views := make([]message, pendingRequests)
	errs := make([]error, pendingRequests)
	// a restarted CLI re-attaches as well: `sharedos messages wait ID` over the same
	// database, for 5 of the requests answered while A was down
	for n := 10; n < 15; n++ {
		out, code := fl.SosOut(-1, "--as", "agent:writer", "--owner", "human:alice", "messages", "wait", rows[n].id, "-o", "json")
		var m message
		if code != 0 || json.Unmarshal(out, &m) != nil || m.Status != "answered" || m.Reply == nil ||
			string(m.Reply.Payload) != fmt.Sprintf(`{"answer":%d}`, n) {
			t.Fatalf("sharedos messages wait %s: exit %d: %s", rows[n].id, code, out)
		}
	}
	var wg sync.WaitGroup
	for n := 0; n < 70; n++ { // groups 0, 1 and 2: they wait for their reply
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			views[n], errs[n] = fl.reattach(ctx, a, rows[n].id)
		}()
	}
	// group 2 (40 ≤ n < 70): answered through B while the writer waits on A
	for n := 40; n < 70; n++ {
		if _, err := fl.answer(b, rows[n].id, fmt.Sprintf(`{"answer":%d}`, n)); err != nil {
			t.Fatal(err)
		}
	}
	// group 3 (n ≥ 70): the writer gives up on them
	for n := 70; n < pendingRequests; n++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			views[n] = fl.giveUp(t, a, rows[n].id)
		}()
	}
	wg.Wait()
	t.Logf("re-attached to every request after %v", time.Since(began).Round(time.Millisecond))
	want, late := map[int]string{}, map[int]int{}
	for n := 0; n < pendingRequests; n++ {
		v := views[n]
		if n < 70 {
			want[n] = "answered"
			if errs[n] != nil || v.Status != "answered" || v.Reply == nil || string(v.Reply.Payload) != fmt.Sprintf(`{"answer":%d}`, n) {
				t.Fatalf("re-attaching to request %d: %+v %v", n, v, errs[n])
			}
			continue
		}
		want[n] = "failed"
		if v.Status != "failed" || v.FailedCode != kernel.CodeMessageReplyResolutionFailed {
			t.Fatalf("request %d after the writer gave up: %+v", n, v)
		}
	}
	// late answers, through either replica: refused, nothing changes
	for n := 40; n < pendingRequests; n++ {
		s, err := fl.answer(n%2, rows[n].id, `"too late"`)
		if err != nil {
			t.Fatal(err)
		}
		if s.Receipt.Status != kernel.DeliveryDenied || s.Receipt.Error == nil || s.Receipt.Error.Code != "message_already_resolved" {
			t.Fatalf("a late answer to request %d: %+v", n, s.Receipt)
		}
		late[n] = 1
	}
	final := checkOnce(t, db, want, late)
	for n := 0; n < 70; n++ {
		if !reflectEqual(final[n].reply, views[n].Reply) {
			t.Fatalf("request %d: the mailbox's reply %+v is not the one the writer got %+v", n, final[n].reply, views[n].Reply)
		}
	}
}

func reflectEqual(x, y *kernel.MessageEnvelope) bool {
	a, _ := json.Marshal(x)
	b, _ := json.Marshal(y)
	return string(a) == string(b)
}

// toolResult is a messages.request result: its status, output and error code.
type toolResult struct {
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Error  *struct {
		Code string `json:"code"`
	} `json:"error"`
}

// checkCallsAgainstRows checks each answered call against its request's row: a call that
// succeeded returned the reply the mailbox holds; one that failed belongs to a request
// the mailbox resolved failed (never one answered after its requester was told it
// failed). It returns how many succeeded and failed.
func checkCallsAgainstRows(t *testing.T, c *calls, rows map[int]row) (succeeded, failed int) {
	t.Helper()
	var bad []string
	for n := range c.res {
		r := c.res[n]
		if r.err != nil || r.status != 200 {
			bad = append(bad, fmt.Sprintf("call %d: %d %s %v", n, r.status, r.body, r.err))
			continue
		}
		var res toolResult
		must(t, json.Unmarshal(r.body, &res))
		row := rows[n]
		switch {
		case res.Status == "succeeded" && row.status == "answered" && string(res.Output) == string(row.reply.Payload):
			succeeded++
		case res.Status == "failed" && row.status == "failed":
			failed++
		default:
			bad = append(bad, fmt.Sprintf("call %d returned %s; its request %s is %s (reply %v)", n, r.body, row.id, row.status, row.reply))
		}
	}
	if len(bad) > 0 {
		t.Fatalf("%d calls disagree with the mailbox; the first:\n%s", len(bad), strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	return succeeded, failed
}

// TestDatabaseRestartUnderWaiters: replica A holds 100 pending messages.request calls
// when the database is stopped (an immediate shutdown: every connection dropped) and
// started again; then the reviewer answers all 100 through replica B. Every call gets
// its reply: a waiter outlives the outage (a read that fails is tried again until the
// reply timeout, an hour here, or the caller's cancellation). And every call's answer
// agrees with the mailbox: a call that succeeded got the reply recorded, one that failed
// belongs to a request resolved failed — never a request answered after its requester
// was told it failed — and each request has at most one delivered reply.
// Event-driven: the database is started again once A's /readyz reports it down.
func TestDatabaseRestartUnderWaiters(t *testing.T) {
	if testing.Short() {
		t.Skip("serve processes and a private PostgreSQL cluster stopped under waiters")
	}
	pg := pgtest.StartPrivate(t)
	dsn := pg.DSN(t)
	fl := newFleet(t, dsn, 2, 0)
	const a, b = 0, 1
	c := startCalls(fl, a, pendingRequests)
	rows := waitRows(t, connect(t, dsn), pendingRequests)
	pg.Stop(t)
	if got := fl.ReadyWithin(a, 503, 2*time.Minute); got != 503 {
		t.Fatalf("replica A: /readyz %d with the database stopped; want 503", got)
	}
	pg.Restart(t)
	fl.waitReady(a)
	fl.waitReady(b)
	for n := 0; n < pendingRequests; n++ {
		s, err := fl.answer(b, rows[n].id, fmt.Sprintf(`{"answer":%d}`, n))
		if err != nil {
			t.Fatal(err)
		}
		if !s.Receipt.Ok() && (s.Receipt.Error == nil || s.Receipt.Error.Code != "message_already_resolved") {
			t.Fatalf("answering request %d: %+v", n, s.Receipt)
		}
	}
	for n := range pendingRequests {
		if !c.wait(n) {
			t.Fatalf("call %d: no answer 2 minutes after its request was resolved", n)
		}
	}
	db := connect(t, dsn)
	final := writerRows(t, db)
	ok, failed := checkCallsAgainstRows(t, c, final)
	t.Logf("after the database restart: %d calls got their reply, %d failed", ok, failed)
	if ok != pendingRequests {
		// the reply timeout is an hour and nobody gave up: a waiter outlives the outage
		t.Errorf("%d of %d calls got their reply; the others failed though nobody gave up", ok, pendingRequests)
	}
	want := map[int]string{}
	for n, r := range final {
		want[n] = r.status
	}
	late := map[int]int{}
	for n, r := range final {
		if r.status == "failed" {
			late[n] = 1
		}
	}
	checkOnce(t, db, want, late)
}

// answerAll has the reviewer answer request n of rows with {"answer":n} through replica
// i, from 8 goroutines; each answered n is sent on answered (buffered by the caller).
func answerAll(t *testing.T, fl *fleet, i int, rows map[int]row, answered chan<- int) {
	t.Helper()
	next := make(chan int, len(rows))
	for n := range len(rows) {
		next <- n
	}
	close(next)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				s, err := fl.answer(i, rows[n].id, fmt.Sprintf(`{"answer":%d}`, n))
				if err != nil || !s.Receipt.Ok() {
					t.Errorf("answering request %d: %+v %v", n, s.Receipt, err)
					continue
				}
				answered <- n
			}
		}()
	}
	wg.Wait()
}

// TestKillDuringReplyDelivery: replica A holds 100 pending messages.request calls; the
// reviewer answers all 100 through replica B, and A is killed with SIGKILL once half of
// the answers are recorded — between the replies and the wake-ups of their waiters —
// while B goes on answering the rest. A is started again and the writer re-attaches to
// every request on it: each returns the one reply the mailbox recorded, each call that
// A answered before it died returned that same reply, and each request has exactly one
// delivered reply (0 lost, 0 answered twice).
func TestKillDuringReplyDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("serve processes killed and restarted over PostgreSQL")
	}
	dsn := pgtest.DSN(t)
	fl := newFleet(t, dsn, 2, 0)
	db := connect(t, dsn)
	const a, b = 0, 1
	c := startCalls(fl, a, pendingRequests)
	rows := waitRows(t, db, pendingRequests)
	answered := make(chan int, pendingRequests)
	done := make(chan struct{})
	go func() {
		defer close(done)
		answerAll(t, fl, b, rows, answered)
	}()
	for range pendingRequests / 2 {
		<-answered
	}
	fl.Kill(a)
	<-done
	before := 0
	for n := range pendingRequests {
		if !c.wait(n) {
			t.Fatalf("call %d still running after its replica was killed", n)
		}
		if c.res[n].err == nil {
			before++
		}
	}
	fl.Start(a)
	fl.waitReady(a)
	views := make([]message, pendingRequests)
	errs := make([]error, pendingRequests)
	var wg sync.WaitGroup
	for n := range pendingRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			views[n], errs[n] = fl.reattach(ctx, a, rows[n].id)
		}()
	}
	wg.Wait()
	want := map[int]string{}
	for n := range pendingRequests {
		want[n] = "answered"
	}
	final := checkOnce(t, db, want, nil)
	for n := range pendingRequests {
		v := views[n]
		if errs[n] != nil || v.Status != "answered" || !reflectEqual(v.Reply, final[n].reply) {
			t.Fatalf("re-attaching to request %d: %+v %v; the mailbox holds %+v", n, v, errs[n], final[n].reply)
		}
		if c.res[n].err == nil {
			if out := toolOutput(t, c.res[n]); out != string(final[n].reply.Payload) {
				t.Fatalf("call %d returned %s before the kill; the mailbox holds %s", n, out, final[n].reply.Payload)
			}
		}
	}
	t.Logf("%d calls were answered before the kill, %d re-attached after it", before, pendingRequests-before)
}

// TestReplyAtTwoReplicasAtOnce: replica A holds 100 pending messages.request calls; the
// reviewer answers each request twice at once, with different payloads, through
// replicas B and C. Of each pair exactly one is delivered and the other refused
// message_already_resolved; A's call returns the delivered one, which the mailbox holds
// as the request's only answer.
func TestReplyAtTwoReplicasAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("serve processes over PostgreSQL")
	}
	dsn := pgtest.DSN(t)
	fl := newFleet(t, dsn, 3, 0)
	db := connect(t, dsn)
	const a = 0
	c := startCalls(fl, a, pendingRequests)
	rows := waitRows(t, db, pendingRequests)
	receipts := make([][2]sent, pendingRequests)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8) // 8 pairs at a time, the two answers of a pair together
	for n := range pendingRequests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := make(chan struct{})
			var pair sync.WaitGroup
			for k := range 2 {
				pair.Add(1)
				go func() {
					defer pair.Done()
					<-start
					s, err := fl.answer(1+k, rows[n].id, fmt.Sprintf(`{"answer":%d,"via":%d}`, n, 1+k))
					if err != nil {
						t.Error(err)
					}
					receipts[n][k] = s
				}()
			}
			close(start)
			pair.Wait()
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	want, late := map[int]string{}, map[int]int{}
	for n := range pendingRequests {
		want[n], late[n] = "answered", 1
	}
	final := checkOnce(t, db, want, late)
	won := [3]int{}
	for n := range pendingRequests {
		r := receipts[n]
		ok0, ok1 := r[0].Receipt.Ok(), r[1].Receipt.Ok()
		if ok0 == ok1 {
			t.Fatalf("request %d: both answers %v / %v", n, r[0].Receipt, r[1].Receipt)
		}
		winner := r[0]
		if ok1 {
			winner = r[1]
			won[2]++
		} else {
			won[1]++
		}
		if !reflectEqual(&winner.Envelope, final[n].reply) {
			t.Fatalf("request %d: the delivered answer %+v is not the mailbox's %+v", n, winner.Envelope, final[n].reply)
		}
		if !c.wait(n) {
			t.Fatalf("call %d: no answer after its reply was recorded", n)
		}
		if out := toolOutput(t, c.res[n]); out != string(final[n].reply.Payload) {
			t.Fatalf("call %d returned %s; the mailbox holds %s", n, out, final[n].reply.Payload)
		}
	}
	t.Logf("answers won: %d through B, %d through C", won[1], won[2])
}

// TestKillDuringRequestDelivery: replica A is killed with SIGKILL while the writer's 100
// messages.request calls are being delivered (once 30 are in the mailbox). Every request
// the mailbox holds is pending and can be found after the restart — by the recipient's
// inbox (GET /v1/admin/messages) and in the requester's trail: a delivery and its
// message.sent record are one transaction (store.RecordedMailbox), so a request
// delivered just before the kill has its record too, and a requester whose call was
// never answered finds its id there — and the writer re-attaches to each on the
// restarted A: half are answered through B and return their reply, the writer gives up
// on the other half, resolved failed. 0 lost, 0 answered twice. A call killed between
// its spent use and its delivery leaves a use spent and no message: the trail says so —
// its decision record (authorization.checked, operationId the call's id) has no
// message.sent record of that operation, and every message.sent record has its
// decision (the count is logged).
func TestKillDuringRequestDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("serve processes killed and restarted over PostgreSQL")
	}
	dsn := pgtest.DSN(t)
	fl := newFleet(t, dsn, 2, 0)
	db := connect(t, dsn)
	const a, b = 0, 1
	c := startCalls(fl, a, pendingRequests)
	for deadline := time.Now().Add(2 * time.Minute); len(writerRows(t, db)) < 30; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("30 requests were not delivered within 2 minutes")
		}
	}
	fl.Kill(a)
	for n := range pendingRequests {
		if !c.wait(n) {
			t.Fatalf("call %d still running after its replica was killed", n)
		}
	}
	rows := writerRows(t, db)
	reqs, _ := sentRecords(t, db)
	fl.Start(a)
	fl.waitReady(a)
	// the recipient's inbox lists every one of them
	r := fl.do(context.Background(), b, "GET", "/v1/admin/messages?status=pending", "reviewer", "")
	if r.status != 200 {
		t.Fatalf("the reviewer's inbox: %d %s", r.status, r.body)
	}
	var inbox []message
	must(t, json.Unmarshal(r.body, &inbox))
	listed := map[string]bool{}
	for _, m := range inbox {
		listed[m.Envelope.ID] = true
	}
	for _, row := range rows {
		if row.status != "pending" || !listed[row.id] {
			t.Fatalf("request %d (%s) is %s, listed %v; want pending and in the recipient's inbox", row.n, row.id, row.status, listed[row.id])
		}
		if reqs[row.id] != 1 {
			t.Fatalf("request %d (%s) was delivered with %d message.sent records in the requester's trail, want 1", row.n, row.id, reqs[row.id])
		}
	}
	if len(inbox) != len(rows) || len(reqs) != len(rows) {
		t.Fatalf("the inbox lists %d messages, the trail records %d, the mailbox holds %d", len(inbox), len(reqs), len(rows))
	}
	// the uses spent: each with its decision record; those without a message.sent record
	// of their operation bought no message
	decided := map[string]bool{}
	dr, err := db.Query(context.Background(), `SELECT coalesce(event::jsonb->>'operationId', '') FROM audit_events
		WHERE type = 'authorization.checked' AND outcome = 'allowed' AND event::jsonb->>'tool' = 'messages.request'`)
	must(t, err)
	for dr.Next() {
		var op string
		must(t, dr.Scan(&op))
		decided[op] = true
	}
	must(t, dr.Err())
	dr.Close()
	sentOps := map[string]bool{}
	sr, err := db.Query(context.Background(), `SELECT coalesce(event::jsonb->>'operationId', '') FROM audit_events
		WHERE type = 'message.sent' AND outcome = 'succeeded' AND event::jsonb->>'tool' = 'messages.request'`)
	must(t, err)
	for sr.Next() {
		var op string
		must(t, sr.Scan(&op))
		if !decided[op] {
			t.Fatalf("a message.sent record of operation %q has no decision record", op)
		}
		sentOps[op] = true
	}
	must(t, sr.Err())
	sr.Close()
	if len(sentOps) != len(rows) {
		t.Fatalf("%d operations have a message.sent record, %d requests were delivered", len(sentOps), len(rows))
	}
	var allowed int
	must(t, db.QueryRow(context.Background(), `SELECT count(*) FROM audit_events WHERE type = 'authorization.checked' AND outcome = 'allowed'`).Scan(&allowed))
	t.Logf("killed with %d requests delivered, each with its message.sent record; %d uses spent, %d of them (a decision without a message.sent record) before a delivery the kill prevented",
		len(rows), allowed, len(decided)-len(sentOps))
	want := map[int]string{}
	views := map[int]message{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	half := 0
	for n, row := range rows {
		wg.Add(1)
		if half%2 == 0 {
			want[n] = "answered"
			go func() {
				defer wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				m, err := fl.reattach(ctx, a, row.id)
				if err != nil {
					t.Errorf("re-attaching to request %d: %v", n, err)
				}
				mu.Lock()
				views[n] = m
				mu.Unlock()
			}()
			if _, err := fl.answer(b, row.id, fmt.Sprintf(`{"answer":%d}`, n)); err != nil {
				t.Fatal(err)
			}
		} else {
			want[n] = "failed"
			go func() {
				defer wg.Done()
				m := fl.giveUp(t, a, row.id)
				mu.Lock()
				views[n] = m
				mu.Unlock()
			}()
		}
		half++
	}
	wg.Wait()
	final := checkOnce(t, db, want, nil)
	for n, v := range views {
		switch want[n] {
		case "answered":
			if v.Status != "answered" || !reflectEqual(v.Reply, final[n].reply) {
				t.Fatalf("request %d: the writer saw %+v; the mailbox holds %+v", n, v, final[n].reply)
			}
		default:
			if v.Status != "failed" || v.FailedCode != kernel.CodeMessageReplyResolutionFailed {
				t.Fatalf("request %d after the writer gave up: %+v", n, v)
			}
		}
	}
}

// TestKillReplierDuringReplies: replica A holds 100 pending messages.request calls; the
// reviewer answers all 100 through replica B, which is killed with SIGKILL once half of
// the answers came back. B is started again and the reviewer sends again every answer
// that got no response: each is delivered, or refused message_already_resolved when
// its first try had landed before the kill. Every call on A returns the one reply the
// mailbox recorded; no request has two delivered replies, and every delivered reply has
// its message.sent record (one transaction with the delivery, even just before the kill).
func TestKillReplierDuringReplies(t *testing.T) {
	if testing.Short() {
		t.Skip("serve processes killed and restarted over PostgreSQL")
	}
	dsn := pgtest.DSN(t)
	fl := newFleet(t, dsn, 2, 0)
	db := connect(t, dsn)
	const a, b = 0, 1
	c := startCalls(fl, a, pendingRequests)
	rows := waitRows(t, db, pendingRequests)
	results := make([]error, pendingRequests)
	var got atomic.Int64
	var wg sync.WaitGroup
	next := make(chan int, pendingRequests)
	for n := range pendingRequests {
		next <- n
	}
	close(next)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				s, err := fl.answer(b, rows[n].id, fmt.Sprintf(`{"answer":%d}`, n))
				if err == nil && !s.Receipt.Ok() {
					err = fmt.Errorf("refused: %+v", s.Receipt)
					t.Errorf("answer %d: %v", n, err)
				}
				results[n] = err
				got.Add(1)
			}
		}()
	}
	for got.Load() < pendingRequests/2 {
		time.Sleep(time.Millisecond) // polling for progress
	}
	fl.Kill(b)
	wg.Wait()
	fl.Start(b)
	fl.waitReady(b)
	retried, refused := 0, 0
	for n := range pendingRequests {
		if results[n] == nil {
			continue
		}
		retried++
		s, err := fl.answer(b, rows[n].id, fmt.Sprintf(`{"answer":%d}`, n))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case s.Receipt.Ok():
		case s.Receipt.Error != nil && s.Receipt.Error.Code == "message_already_resolved":
			refused++
		default:
			t.Fatalf("answering request %d again: %+v", n, s.Receipt)
		}
	}
	for n := range pendingRequests {
		if !c.wait(n) {
			t.Fatalf("call %d: no answer after its reply was recorded", n)
		}
	}
	final := writerRows(t, db)
	_, replies := sentRecords(t, db)
	for n := range pendingRequests {
		r := final[n]
		if r.status != "answered" || r.reply == nil || string(r.reply.Payload) != fmt.Sprintf(`{"answer":%d}`, n) {
			t.Fatalf("request %d is %s with %+v", n, r.status, r.reply)
		}
		if out := toolOutput(t, c.res[n]); out != string(r.reply.Payload) {
			t.Fatalf("call %d returned %s; the mailbox holds %s", n, out, r.reply.Payload)
		}
		rep := replies[r.id]
		switch {
		case rep["succeeded"] > 1:
			t.Fatalf("request %d has %d delivered replies", n, rep["succeeded"])
		case rep["succeeded"] == 0:
			t.Fatalf("request %d: its answer was delivered, but has no message.sent record", n)
		}
	}
	t.Logf("%d answers got no response (B killed), sent again: %d delivered then, %d refused message_already_resolved",
		retried, retried-refused, refused)
}
