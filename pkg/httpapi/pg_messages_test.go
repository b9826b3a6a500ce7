package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/tokens"
)

const raceRecipients = 25

// messageReplicas writes the tokens and grant files of the 25-recipient race — writer
// (agent:writer, role agent) holding one single-use ticket to send to each agent:rNN,
// and rNN (agent:rNN, role operator: it reads its inbox and answers through the admin
// routes) allowed to answer the writer — and starts n in-process serve replicas over dsn
// with the 25 recipients configured as wait recipients (singleUse false: the tickets
// have no bound, for the benchmark; noStoreHints: the replicas ignore the store's
// NOTIFY and find replies by the fallback poll alone).
func messageReplicas(t *testing.T, dsn string, n int, singleUse, noStoreHints bool) []*fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), tok: map[string]string{}, validate: validateResponse, state: dsn}
	f.root = filepath.Join(f.dir, "root")
	must(t, os.MkdirAll(f.root, 0o755))
	cfgDir := filepath.Join(f.dir, "etc")
	must(t, os.MkdirAll(filepath.Join(cfgDir, "grants"), 0o755))
	f.tokensPath = filepath.Join(cfgDir, "tokens.yaml")
	owner, _ := kernel.ParseAddress("human:alice")
	var tickets strings.Builder
	tickets.WriteString("version: 1\ngrants:\n")
	routes := map[kernel.Address]mailbox.Route{}
	addToken := func(id, actor, role, grants string) {
		tok, err := tokens.New()
		must(t, err)
		f.tok[id] = tok
		a, _ := kernel.ParseAddress(actor)
		must(t, os.WriteFile(filepath.Join(cfgDir, "grants", id+".yaml"), []byte(grants), 0o600))
		must(t, tokens.Append(f.tokensPath, tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok), Role: role,
			Context: tokens.Context{Actor: a, Owner: &owner, Purpose: "race"}, Grants: []string{"grants/" + id + ".yaml"}}))
	}
	for i := range raceRecipients {
		r := fmt.Sprintf("r%02d", i)
		routes[kernel.Address{Kind: kernel.KindAgent, ID: r}] = mailbox.Route{Mode: mailbox.ModeWait}
		fmt.Fprintf(&tickets, `  - id: ticket-%s
    subject: agent:writer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, %s]}
        actions: [send]
        scope: exact
`, r, r)
		if singleUse {
			tickets.WriteString("    constraints: {maxUses: 1}\n")
		}
		addToken(r, "agent:"+r, tokens.RoleOperator, `version: 1
grants:
  - id: answer-`+r+`
    subject: agent:`+r+`
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, writer]}
        actions: [send]
        scope: exact
`)
	}
	addToken("writer", "agent:writer", "", tickets.String())
	routes[kernel.Address{Kind: kernel.KindAgent, ID: "writer"}] = mailbox.Route{Mode: mailbox.ModeWait}
	var out []*fixture
	for i := range n {
		srv, err := servetest.Start(context.Background(), host.Settings{Root: f.root, State: dsn,
			StateDir: filepath.Join(f.dir, "local", fmt.Sprint(i)), DefaultNamespaces: []string{"messages", "sharedos"},
			Messaging: &mailbox.Config{Routes: routes, MaxInFlight: raceRecipients, NoStoreHints: noStoreHints}},
			f.tokensPath, nil, func(hc *httpapi.Config) { hc.Logger = slog.New(slog.DiscardHandler) })
		must(t, err)
		t.Cleanup(srv.Close)
		g := *f
		g.srv, g.url = srv.Tokens, srv.URL
		out = append(out, &g)
	}
	return out
}

// TestTwentyFiveRecipientRaceThroughReplicas is the reference's race through 4 serve
// replicas on PostgreSQL: 25 concurrent messages.request calls (round robin over the
// replicas) to 25 wait recipients on single-use tickets, each recipient answering
// through another replica (its inbox, its reply: the admin routes) ⇒ every call
// succeeds with its own recipient's answer, each ticket is spent exactly once (one
// allowed decision per ticket in the trail, 25 rows, each answered once); the 25 replays
// are refused tool_unavailable with grant_exhausted on their records and store nothing.
// Bounded: each responder polls its inbox at most 2 minutes.
func TestTwentyFiveRecipientRaceThroughReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("4 replicas and a private PostgreSQL cluster")
	}
	pg := pgtest.StartPrivate(t)
	dsn := pg.DSN(t)
	_, err := pgstore.Migrate(context.Background(), dsn)
	must(t, err)
	reps := messageReplicas(t, dsn, 4, true, false)
	for _, r := range reps {
		r.validate = nil // concurrent: the document is checked by TestMessagesOverHTTP
	}
	call := func(prefix string, i int) response {
		body := `{"id":"` + fmt.Sprintf("%s-%02d", prefix, i) + `","tool":"messages.request","arguments":{"recipient":{"kind":"agent","agentId":"` +
			fmt.Sprintf("r%02d", i) + `"},"payload":{"n":` + fmt.Sprint(i) + `}},"traceId":"trace-race","requestedAt":"2026-01-01T00:00:00Z"}`
		return reps[i%len(reps)].do("POST", "/v1/tools/invoke", "writer", body)
	}
	// the responders: agent:rNN reads its inbox on replica i+1 and answers there
	answered := make([]string, raceRecipients)
	var rwg sync.WaitGroup
	for i := range raceRecipients {
		rwg.Add(1)
		go func(i int) {
			defer rwg.Done()
			rep, who := reps[(i+1)%len(reps)], fmt.Sprintf("r%02d", i)
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				r := rep.doRaw("GET", "/v1/admin/messages?status=pending", who)
				if r.status != 200 {
					t.Errorf("%s's inbox: %d %s", who, r.status, r.body)
					return
				}
				var inbox []struct {
					Envelope kernel.MessageEnvelope `json:"envelope"`
				}
				must(t, json.Unmarshal(r.body, &inbox))
				if len(inbox) == 0 {
					continue
				}
				id := inbox[0].Envelope.ID
				rr := rep.do("POST", "/v1/admin/messages/"+id+"/reply", who, `{"payload":{"by":"`+who+`"}}`)
				var sent sentWire
				if rr.status != 200 || json.Unmarshal(rr.body, &sent) != nil || sent.Receipt.Status != kernel.DeliveryDelivered {
					t.Errorf("%s's reply: %d %s", who, rr.status, rr.body)
				}
				answered[i] = id
				return
			}
			t.Errorf("%s got no message within 2 minutes", who)
		}(i)
	}
	results := make([]response, raceRecipients)
	var cwg sync.WaitGroup
	for i := range raceRecipients {
		cwg.Add(1)
		go func(i int) { defer cwg.Done(); results[i] = call("first", i) }(i)
	}
	cwg.Wait()
	rwg.Wait()
	for i, r := range results {
		var res struct {
			Status string          `json:"status"`
			Output json.RawMessage `json:"output"`
		}
		if r.status != 200 || json.Unmarshal(r.body, &res) != nil || res.Status != "succeeded" || string(res.Output) != fmt.Sprintf(`{"by":"r%02d"}`, i) {
			t.Fatalf("call %d: %d %s", i, r.status, r.body)
		}
	}
	var replays sync.WaitGroup
	for i := range raceRecipients {
		replays.Add(1)
		go func(i int) { defer replays.Done(); results[i] = call("replay", i) }(i)
	}
	replays.Wait()
	for i, r := range results {
		var res kernel.ToolResult
		if r.status != 200 || json.Unmarshal(r.body, &res) != nil || res.Status != kernel.StatusDenied || res.Error.Code != kernel.CodeToolUnavailable {
			t.Fatalf("replay %d: %d %s", i, r.status, r.body)
		}
	}
	conn, err := pgx.Connect(context.Background(), dsn)
	must(t, err)
	defer conn.Close(context.Background())
	var rows, answeredRows, allowed, allowedTickets, exhausted int
	must(t, conn.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE status = 'answered') FROM messages`).Scan(&rows, &answeredRows))
	// the answers' own sends are allowed on answer-rNN: only the tickets count
	must(t, conn.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE outcome = 'allowed' AND event::jsonb->>'grantId' LIKE 'ticket-%'),
		count(DISTINCT event::jsonb->>'grantId') FILTER (WHERE outcome = 'allowed' AND event::jsonb->>'grantId' LIKE 'ticket-%'),
		count(*) FILTER (WHERE outcome = 'denied' AND event LIKE '%grant_exhausted%')
		FROM audit_events WHERE type = 'authorization.checked' AND tool = 'messages.request'`).Scan(&allowed, &allowedTickets, &exhausted))
	if rows != raceRecipients || answeredRows != raceRecipients {
		t.Errorf("%d message rows, %d answered; want %d, all answered once", rows, answeredRows, raceRecipients)
	}
	if allowed != raceRecipients || allowedTickets != raceRecipients {
		t.Errorf("%d allowed decisions on %d tickets; want each of the %d tickets spent exactly once", allowed, allowedTickets, raceRecipients)
	}
	if exhausted != raceRecipients {
		t.Errorf("%d refusals recorded grant_exhausted; want the %d replays", exhausted, raceRecipients)
	}
}
