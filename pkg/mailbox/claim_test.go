package mailbox_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

const claimIDs = 40

// claimKernel is a kernel over its own handle of the state database at db, as another
// process has: its own per-id lock, its own connections.
func claimKernel(st *sqlitestore.Store, g kernel.CapabilityGrant) *kernel.Kernel {
	cfg := config()
	cfg.MaxInFlight = 10 * claimIDs
	return kernel.New(kernel.Config{Grants: grants{g}, Usage: st, Audit: st,
		MessageTransport: &mailbox.Transport{Box: st, Config: cfg, Claims: st}})
}

func claimGrant() kernel.CapabilityGrant { return sendGrant("g-send", asker, reviewer, 100*claimIDs) }

// sendClaimed sends message i until it is accepted (a busy id is retried, as its code
// says), and returns the receipt.
func sendClaimed(k *kernel.Kernel, i int) (kernel.MessageDeliveryResult, error) {
	env := request("same-"+strconv.Itoa(i), reviewer)
	env.TraceID = "trace-1"
	for {
		turn, err := k.BeginTurn(actxOf(asker, "review", "trace-1"))
		if err != nil {
			return kernel.MessageDeliveryResult{}, err
		}
		r, err := turn.SendMessage(context.Background(), env)
		if err != nil || r.Error == nil || r.Error.Code != kernel.CodeMessageSendInProgress {
			return r, err
		}
		time.Sleep(time.Millisecond)
	}
}

func checkOneSpendPerID(t *testing.T, st *sqlitestore.Store) {
	t.Helper()
	if u := used(t, st, claimGrant()); u != claimIDs {
		t.Fatalf("%d uses spent for %d messages: some id was spent twice", u, claimIDs)
	}
	rows, err := st.ListMessages(context.Background(), store.MessageFilter{World: world})
	if err != nil || len(rows) != claimIDs {
		t.Fatalf("%d rows (%v), want %d", len(rows), err, claimIDs)
	}
}

// TestSameIDTwoStoreHandles (issue 24): the same messages sent at once through two
// kernels over two handles of one state database (two processes' worth of locks and
// connections) spend one use per message id, store one row each, and both senders get
// the same accepted receipt.
func TestSameIDTwoStoreHandles(t *testing.T) {
	db := filepath.Join(t.TempDir(), "state.db")
	st1, st2 := openStore(t, db), openStore(t, db)
	k1, k2 := claimKernel(st1, claimGrant()), claimKernel(st2, claimGrant())
	var wg sync.WaitGroup
	got := make([][2]kernel.MessageDeliveryResult, claimIDs)
	for i := 0; i < claimIDs; i++ {
		for j, k := range []*kernel.Kernel{k1, k2} {
			wg.Add(1)
			go func(i, j int, k *kernel.Kernel) {
				defer wg.Done()
				r, err := sendClaimed(k, i)
				if err != nil {
					t.Error(err)
				}
				got[i][j] = r
			}(i, j, k)
		}
	}
	wg.Wait()
	for i, g := range got {
		if g[0].Status != kernel.DeliveryAccepted || g[1].Status != kernel.DeliveryAccepted || g[0].Timestamp != g[1].Timestamp {
			t.Fatalf("message %d: receipts %+v and %+v", i, g[0], g[1])
		}
	}
	checkOneSpendPerID(t, st1)
}

// senderMain is a re-executed sender of TestSameIDTwoProcesses: it opens db, says
// "ready", waits for a line on its standard input, then sends every message.
func senderMain(db string) int {
	st, err := sqlitestore.Open(context.Background(), db, sqlitestore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	k := claimKernel(st, claimGrant())
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := 0; i < claimIDs; i++ {
		if r, err := sendClaimed(k, i); err != nil || r.Status != kernel.DeliveryAccepted {
			fmt.Fprintln(os.Stderr, "send", i, r, err)
			return 1
		}
	}
	return 0
}

// TestSameIDTwoProcesses (issue 24): two processes (this test binary re-executed) send the
// same messages at once over one state database: one use per id, one row each.
func TestSameIDTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("re-executes the test binary")
	}
	db := filepath.Join(t.TempDir(), "state.db")
	st := openStore(t, db)
	type child struct {
		cmd *exec.Cmd
		go_ io.WriteCloser
	}
	var kids []child
	for n := 0; n < 2; n++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "MAILBOX_SENDER="+db)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("sender %d: %q %v", n, line, err)
		}
		kids = append(kids, child{cmd: cmd, go_: in})
	}
	for _, c := range kids {
		if _, err := io.WriteString(c.go_, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	for n, c := range kids {
		if err := c.cmd.Wait(); err != nil {
			t.Fatalf("sender %d: %v", n, err)
		}
	}
	checkOneSpendPerID(t, st)
}

// countingClaims counts the claims begun on the store (store.Idempotency).
type countingClaims struct {
	store.Idempotency
	mu    sync.Mutex
	begun int
}

func (c *countingClaims) BeginIdempotent(ctx context.Context, key store.IdempotencyKey, fp string, now time.Time, lease time.Duration) (store.IdempotencyState, store.IdempotencyRecord, error) {
	c.mu.Lock()
	c.begun++
	c.mu.Unlock()
	return c.Idempotency.BeginIdempotent(ctx, key, fp, now, lease)
}

// TestRecordedReplyClaimsNothing (issue 24, the exec round trip's speed): a reply over a
// recording transport claims its id without writing a claim (no BeginIdempotent: two
// write transactions fewer in a `messages reply` process); a request, and a reply over a
// transport that does not record, still claim theirs.
func TestRecordedReplyClaimsNothing(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "state.db"))
	req := request("q1", reviewer)
	reply := answerOf(req, `"yes"`)
	for _, c := range []struct {
		name     string
		env      kernel.MessageEnvelope
		recorded bool
		claims   int
	}{
		{"reply, recorded", reply, true, 0},
		{"request, recorded", req, true, 1},
		{"reply, not recorded", reply, false, 1},
	} {
		claims := &countingClaims{Idempotency: st}
		tr := &mailbox.Transport{Box: st, Config: config(), Claims: claims, Recorded: c.recorded}
		state, release, err := tr.ClaimMessageID(ctx, actxOf(c.env.Sender, "review", c.env.TraceID), c.env)
		if err != nil || state != kernel.MessageIDClaimed {
			t.Fatalf("%s: claim %v, %v", c.name, state, err)
		}
		if release != nil {
			release()
		}
		if claims.begun != c.claims {
			t.Errorf("%s: %d claims written, want %d", c.name, claims.begun, c.claims)
		}
	}
}

// TestConcurrentRepliesOneSpend (issue 24): the same replies sent at once through two
// kernels over two handles of one state database (two processes' worth), over recording
// transports with claims on: each request is answered once, by one of them; the other
// is denied message_already_resolved (or, while a claim is held, retried); one use of
// the replier's grant is spent per request, never two.
func TestConcurrentRepliesOneSpend(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "state.db")
	st1, st2 := openStore(t, db), openStore(t, db)
	const n = 20
	for i := 0; i < n; i++ {
		if _, _, err := st1.DeliverMessage(ctx, world, request("r"+strconv.Itoa(i), reviewer), "2026-08-03T09:00:00.000Z", 0); err != nil {
			t.Fatal(err)
		}
	}
	g := sendGrant("g-answer", reviewer, asker, 10*n)
	kernels := []*kernel.Kernel{}
	for _, st := range []*sqlitestore.Store{st1, st2} {
		kernels = append(kernels, kernel.New(kernel.Config{Grants: grants{g}, Usage: st, Audit: st,
			MessageTransport: &mailbox.Transport{Box: st, Config: config(), Claims: st, Recorded: true}}))
	}
	got := make([][2]kernel.MessageDeliveryResult, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		for j, k := range kernels {
			wg.Add(1)
			go func(i, j int, k *kernel.Kernel) {
				defer wg.Done()
				req := request("r"+strconv.Itoa(i), reviewer)
				for try := 0; try < 1000; try++ {
					turn, err := k.BeginTurn(actxOf(reviewer, "review", req.TraceID))
					if err != nil {
						t.Error(err)
						return
					}
					r, err := turn.SendMessage(ctx, answerOf(req, `"yes"`))
					if err != nil {
						t.Error(err)
						return
					}
					got[i][j] = r
					if r.Error == nil || r.Error.Code != kernel.CodeMessageSendInProgress {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}(i, j, k)
		}
	}
	wg.Wait()
	for i, g := range got {
		var delivered, resolved int
		for _, r := range g {
			switch {
			case r.Status == kernel.DeliveryDelivered:
				delivered++
			case r.Status == kernel.DeliveryDenied && r.Error != nil && r.Error.Code == mailbox.CodeMessageAlreadyResolved:
				resolved++
			}
		}
		if delivered != 1 || resolved != 1 {
			t.Fatalf("request %d: receipts %+v and %+v, want one delivered and one message_already_resolved", i, g[0], g[1])
		}
	}
	if u := used(t, st1, g); u != n {
		t.Fatalf("%d uses spent for %d answers", u, n)
	}
	for i := 0; i < n; i++ {
		rec, err := st1.GetMessage(ctx, world, "r"+strconv.Itoa(i))
		if err != nil || rec.Status != store.MessageAnswered {
			t.Fatalf("request %d: %+v, %v", i, rec, err)
		}
	}
}
