package mailbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

// grants is a trusted grant source: the grants whose subject is the context's actor.
type grants []kernel.CapabilityGrant

func (g grants) LoadGrants(_ context.Context, actx kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	var out []kernel.CapabilityGrant
	for _, x := range g {
		if x.Subject == actx.Actor && x.Issuer == actx.Authority && x.NamespaceID == actx.World {
			out = append(out, x)
		}
	}
	return out, nil
}

func sendGrant(id string, from, to kernel.Address, maxUses int64) kernel.CapabilityGrant {
	g := kernel.CapabilityGrant{ID: id, NamespaceID: world, Subject: from, Issuer: owner, IssuedAt: "2026-08-03T08:00:00.000Z",
		Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: kernel.MessagingNamespace, Path: []string{string(to.Kind), to.ID}},
			Actions: []string{"send"}, Scope: kernel.ScopeExact}}}
	if maxUses > 0 {
		g.Constraints.MaxUses = &maxUses
	}
	return g
}

func used(t *testing.T, st *sqlitestore.Store, g kernel.CapabilityGrant) int64 {
	t.Helper()
	n, err := st.GetUsage(context.Background(), kernel.UsageKeyOf(&g))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSameMessageIDThousandTimes: the same message sent 1,000 times concurrently is one
// row in the mailbox, one spent use, and 1,000 identical receipts.
func TestSameMessageIDThousandTimes(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	g := sendGrant("g-send", asker, reviewer, 5)
	k := kernel.New(kernel.Config{Grants: grants{g}, Usage: st, Audit: st,
		MessageTransport: &mailbox.Transport{Box: st, Config: config()}})
	env := request("same-id", reviewer)
	env.Purpose, env.TraceID = "review", "trace-1"
	const n = 1000
	receipts := make([]kernel.MessageDeliveryResult, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			turn, err := k.BeginTurn(actxOf(asker, "review", "trace-1"))
			if err != nil {
				t.Error(err)
				return
			}
			if receipts[i], err = turn.SendMessage(context.Background(), env); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	for i := range receipts {
		if receipts[i].Status != kernel.DeliveryAccepted || !reflect.DeepEqual(receipts[i], receipts[0]) {
			t.Fatalf("receipt %d = %+v, receipt 0 = %+v", i, receipts[i], receipts[0])
		}
	}
	rows, err := st.ListMessages(context.Background(), store.MessageFilter{World: world})
	if err != nil || len(rows) != 1 {
		t.Fatalf("%d rows (%v), want 1", len(rows), err)
	}
	if u := used(t, st, g); u != 1 {
		t.Fatalf("%d uses spent, want 1", u)
	}
	// other content under the same id: refused, nothing spent, the row unchanged
	other := env
	other.Payload = json.RawMessage(`"changed"`)
	turn, _ := k.BeginTurn(actxOf(asker, "review", "trace-1"))
	if r, _ := turn.SendMessage(context.Background(), other); r.Status != kernel.DeliveryFailed || r.Error.Code != kernel.CodeMessageIDConflict {
		t.Fatalf("other content: %+v", r)
	}
	if u := used(t, st, g); u != 1 {
		t.Fatalf("%d uses spent after the conflict, want 1", u)
	}
}

// responder answers every pending request to its recipients until stop is closed.
func responder(t *testing.T, st *sqlitestore.Store, stop chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			recs, err := st.ListMessages(context.Background(), store.MessageFilter{World: world, Status: store.MessagePending})
			if err != nil {
				t.Error(err)
				return
			}
			for _, r := range recs {
				_, _ = st.ReplyMessage(context.Background(), world, answerOf(r.Envelope, `{"by":"`+r.Envelope.Receiver.ID+`"}`), "2026-08-03T09:00:01.000Z")
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return &wg
}

// TestTwentyFiveRecipientRaceOnTheMailbox is the reference's race over the real mailbox:
// 25 concurrent messages.request calls to 25 recipients, each on a single-use ticket ⇒
// each ticket spent exactly once, 25 rows, each answered once; the 25 replays are refused
// tool_unavailable with grant_exhausted on the record, and store nothing.
func TestTwentyFiveRecipientRaceOnTheMailbox(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	cfg := &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{}, MaxInFlight: 25}
	var tickets grants
	var to []kernel.Address
	for i := 0; i < 25; i++ {
		a := kernel.Address{Kind: kernel.KindAgent, ID: fmt.Sprintf("r%02d", i)}
		to = append(to, a)
		cfg.Routes[a] = mailbox.Route{Mode: mailbox.ModeWait}
		tickets = append(tickets, sendGrant(fmt.Sprintf("ticket-%02d", i), asker, a, 1))
	}
	k := kernel.New(kernel.Config{Grants: tickets, Usage: st, Audit: st,
		MessageTransport: &mailbox.Transport{Box: st, Config: cfg}, MessageRouter: &mailbox.Router{Box: st, Config: cfg, Poll: time.Millisecond}})
	stop := make(chan struct{})
	wg := responder(t, st, stop)
	defer func() { close(stop); wg.Wait() }()
	call := func(prefix string, i int) kernel.ToolResult {
		b, _ := json.Marshal(to[i])
		return k.InvokeTool(context.Background(), actxOf(asker, "review", "trace-1"), kernel.ToolCall{ID: fmt.Sprintf("%s-%d", prefix, i),
			Tool: kernel.MessageToolName, Arguments: json.RawMessage(`{"recipient":` + string(b) + `,"payload":{"n":` + strconv.Itoa(i) + `}}`),
			TraceID: "trace-1", RequestedAt: "2026-08-03T09:00:00.000Z"})
	}
	run := func(prefix string) []kernel.ToolResult {
		out := make([]kernel.ToolResult, 25)
		var cw sync.WaitGroup
		for i := range to {
			cw.Add(1)
			go func(i int) { defer cw.Done(); out[i] = call(prefix, i) }(i)
		}
		cw.Wait()
		return out
	}
	for i, res := range run("first") {
		if res.Status != kernel.StatusSucceeded {
			t.Fatalf("call %d: %+v %+v", i, res, res.Error)
		}
		if out := string(res.Output.(json.RawMessage)); out != fmt.Sprintf(`{"by":"r%02d"}`, i) {
			t.Fatalf("call %d got %s", i, out)
		}
	}
	for i, res := range run("replay") {
		if res.Status != kernel.StatusDenied || res.Error.Code != kernel.CodeToolUnavailable {
			t.Fatalf("replay %d: %+v", i, res)
		}
	}
	for _, g := range tickets {
		if u := used(t, st, g); u != 1 {
			t.Fatalf("%s spent %d times", g.ID, u)
		}
	}
	rows, _ := st.ListMessages(context.Background(), store.MessageFilter{World: world})
	if len(rows) != 25 {
		t.Fatalf("%d rows, want 25", len(rows))
	}
	for _, r := range rows {
		if r.Status != store.MessageAnswered {
			t.Fatalf("%s is %s", r.Envelope.ID, r.Status)
		}
	}
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{Types: []string{string(kernel.EventToolInvoked)}})
	if err != nil {
		t.Fatal(err)
	}
	exhausted := 0
	for _, ev := range evs {
		if ev.Reason == kernel.CodeToolUnavailable && ev.Cause == kernel.CauseOf(kernel.ReasonGrantExhausted) {
			exhausted++
		}
	}
	if exhausted != 25 {
		t.Fatalf("%d replays recorded grant_exhausted, want 25", exhausted)
	}
}

// The waiter of TestKillWaiter: this test binary re-executed with MAILBOX_WAITER set runs
// waiterMain instead of the tests.
func TestMain(m *testing.M) {
	if db := os.Getenv("MAILBOX_WAITER"); db != "" {
		os.Exit(waiterMain(db))
	}
	if db := os.Getenv("MAILBOX_SENDER"); db != "" {
		os.Exit(senderMain(db))
	}
	os.Exit(m.Run())
}

const waiterRequests = 100

// waiterMain sends waiterRequests messages.request calls at once to the wait recipient
// and waits for their replies (which never come before it is killed).
func waiterMain(db string) int {
	st, err := sqlitestore.Open(context.Background(), db, sqlitestore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg := &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{reviewer: {Mode: mailbox.ModeWait}}, MaxInFlight: waiterRequests}
	k := kernel.New(kernel.Config{Grants: grants{sendGrant("g", asker, reviewer, 0)}, Usage: st, Audit: st,
		MessageTransport: &mailbox.Transport{Box: st, Config: cfg}, MessageRouter: &mailbox.Router{Box: st, Config: cfg, Poll: 10 * time.Millisecond}})
	var wg sync.WaitGroup
	for i := 0; i < waiterRequests; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k.InvokeTool(context.Background(), actxOf(asker, "review", "trace-1"), kernel.ToolCall{ID: fmt.Sprintf("c%d", i), Tool: kernel.MessageToolName,
				Arguments: json.RawMessage(`{"recipient":{"kind":"agent","agentId":"reviewer"},"payload":` + strconv.Itoa(i) + `}`),
				TraceID:   "trace-1", RequestedAt: "2026-08-03T09:00:00.000Z"})
		}(i)
	}
	wg.Wait()
	return 0
}

// TestKillWaiter: kill -9 of a process waiting on 100 pending requests; a reviewer
// answers half of them afterwards; the restarted waiter re-attaches to each by id: the
// answered ones give their reply, the rest (past their reply timeout, by the injected
// clock) are resolved failed. 0 lost, 0 answered twice, none left pending.
func TestKillWaiter(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	db := filepath.Join(t.TempDir(), "state.db")
	st := openStore(t, db)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "MAILBOX_WAITER="+db)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	ctx := context.Background()
	var pending []store.MessageRecord
	for deadline := time.Now().Add(2 * time.Minute); ; {
		recs, err := st.ListMessages(ctx, store.MessageFilter{World: world, Status: store.MessagePending})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == waiterRequests {
			pending = recs
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the waiter stored %d of %d requests", len(recs), waiterRequests)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// after the crash: the reviewer answers every other request
	answered := map[string]bool{}
	for i, r := range pending {
		if i%2 == 0 {
			if _, err := st.ReplyMessage(ctx, world, answerOf(r.Envelope, `"ok"`), "2026-08-03T09:00:01.000Z"); err != nil {
				t.Fatal(err)
			}
			answered[r.Envelope.ID] = true
		}
	}
	// the restarted waiter re-attaches (a new store handle, a clock past every timeout)
	st2 := openStore(t, db)
	late := time.Now().Add(mailbox.DefaultReplyTimeout + time.Hour)
	r := &mailbox.Router{Box: st2, Config: &mailbox.Config{}, Now: func() time.Time { return late }}
	for _, p := range pending {
		reply, err := r.Reattach(ctx, world, p.Envelope.ID)
		if answered[p.Envelope.ID] {
			if err != nil || !kernel.ReplyMatchesRequest(&reply, &p.Envelope) {
				t.Fatalf("%s was answered; re-attaching gave %+v, %v", p.Envelope.ID, reply, err)
			}
		} else if err == nil {
			t.Fatalf("%s was never answered; re-attaching gave %+v", p.Envelope.ID, reply)
		}
	}
	all, err := st2.ListMessages(ctx, store.MessageFilter{World: world})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != waiterRequests {
		t.Fatalf("%d messages after the restart, want %d (lost some)", len(all), waiterRequests)
	}
	for _, m := range all {
		want := store.MessageFailed
		if answered[m.Envelope.ID] {
			want = store.MessageAnswered
		}
		if m.Status != want {
			t.Fatalf("%s is %s, want %s", m.Envelope.ID, m.Status, want)
		}
		// answered once: a second answer is refused
		if _, err := st2.ReplyMessage(ctx, world, answerOf(m.Envelope, `"again"`), "2026-08-03T09:00:02.000Z"); err == nil {
			t.Fatalf("%s was answered twice", m.Envelope.ID)
		}
	}
}
