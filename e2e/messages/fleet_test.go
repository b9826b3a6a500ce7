// Package messages_test runs the durability proofs of issue 24 on PostgreSQL with real
// processes: `sharedos serve` replicas over one database (internal/pgtest's cluster,
// loopback only), a requester waiting on 100 messages.request calls to a `wait`
// recipient, the waiting replica killed with SIGKILL and started again, a recipient
// answering through another replica, the database restarted under the waiters, a reply
// sent to two replicas at once, and one message sent 1,000 times through 4 replicas. The
// package also holds run.sh, the TypeScript MCP client's end to end test of messages
// (run by .ci/run on its own).
//
//	go test ./e2e/messages -count=1 -v
package messages_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	efleet "github.com/sharedos/sharedos/e2e/internal/fleet"
	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/tokens"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The world's people and agents: agent:writer asks agent:reviewer (a wait recipient,
// answering through the operator's routes) and may send it without bound (maxUses
// given by the test, 0: none); the reviewer may answer the writer.
const writerGrants = `version: 1
grants:
  - id: g-ask-reviewer
    subject: agent:writer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, reviewer]}
        actions: [send]
        scope: exact
`

const reviewerGrants = `version: 1
grants:
  - id: g-answer-writer
    subject: agent:reviewer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, writer]}
        actions: [send]
        scope: exact
`

// fleet is n serve processes over one database (e2e/internal/fleet), with one tokens
// file, one root and one configuration (the messages: and agents: sections).
type fleet struct {
	*efleet.Fleet
	t      *testing.T
	work   string
	config string
	tok    map[string]string // token by id: writer, reviewer
	hc     *http.Client
}

// newFleet writes the files and starts n replicas over dsn (migrated here), with
// writerMaxUses bounding the writer's send grant (0: no bound).
func newFleet(t *testing.T, dsn string, n int, writerMaxUses int) *fleet {
	t.Helper()
	fl := &fleet{t: t, work: t.TempDir(), tok: map[string]string{},
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	fl.Fleet = &efleet.Fleet{T: t, Bin: efleet.Bin(t), State: dsn, Root: filepath.Join(fl.work, "root"), Env: fl.env}
	must(t, os.MkdirAll(fl.Root, 0o755))
	etc := filepath.Join(fl.work, "etc")
	must(t, os.MkdirAll(etc, 0o755))
	fl.config = filepath.Join(etc, "config.yaml")
	// a reply timeout far beyond the test: a request is resolved failed only when its
	// requester gives up (its wait cancelled), never because the machine is slow
	must(t, os.WriteFile(fl.config, []byte(`messages:
  replyTimeout: 1h
  maxInFlight: 1000
agents:
  agent:reviewer: {mode: wait}
  agent:writer: {mode: wait}
`), 0o644))
	wg := writerGrants
	if writerMaxUses > 0 {
		wg += "    constraints: {maxUses: " + strconv.Itoa(writerMaxUses) + "}\n"
	}
	must(t, os.WriteFile(filepath.Join(etc, "writer.yaml"), []byte(wg), 0o600))
	must(t, os.WriteFile(filepath.Join(etc, "reviewer.yaml"), []byte(reviewerGrants), 0o600))
	fl.TokensPath = filepath.Join(etc, "tokens.yaml")
	owner, _ := kernel.ParseAddress("human:alice")
	for _, id := range []string{"writer", "reviewer"} {
		tok, err := tokens.New()
		must(t, err)
		fl.tok[id] = tok
		actor, _ := kernel.ParseAddress("agent:" + id)
		role := ""
		if id == "reviewer" {
			role = tokens.RoleOperator // it reads its inbox and answers through the operator's routes
		}
		must(t, tokens.Append(fl.TokensPath, tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok), Role: role,
			Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "review"}, Grants: []string{id + ".yaml"}}))
	}
	fl.Sos(-1, "store", "migrate")
	fl.Sos(-1, "--owner", "human:alice", "namespaces", "enable", "messages")
	t.Cleanup(fl.hc.CloseIdleConnections)
	fl.Add(n)
	for i := range n {
		fl.waitReady(i)
	}
	return fl
}

// env is the environment of every process of the fleet (one home for all).
func (fl *fleet) env(int) []string {
	home := filepath.Join(fl.work, "home")
	return append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_STATE_HOME="+filepath.Join(home, "state"), "SHAREDOS_STATE=", "SHAREDOS_TOKENS=",
		"SHAREDOS_GRANTS=", "SHAREDOS_CONFIG="+fl.config)
}

// waitReady waits for replica i to be ready (200 from /readyz).
func (fl *fleet) waitReady(i int) {
	fl.t.Helper()
	fl.WaitReady(i, 200)
}

// reply is one HTTP answer: its status and body (status 0: no answer, err says why).
type reply struct {
	status int
	body   []byte
	err    error
}

// do sends one request to replica i as token who, with headers (name, value pairs).
func (fl *fleet) do(ctx context.Context, i int, method, path, who, body string, headers ...string) reply {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, fl.URL(i)+path, rd)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+fl.tok[who])
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for j := 0; j+1 < len(headers); j += 2 {
		req.Header.Set(headers[j], headers[j+1])
	}
	resp, err := fl.hc.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b, err: err}
}

// message is the body of GET /v1/admin/messages/{id} and POST /v1/messages/{id}/wait.
type message struct {
	Envelope   kernel.MessageEnvelope  `json:"envelope"`
	Status     string                  `json:"status"`
	Reply      *kernel.MessageEnvelope `json:"reply"`
	FailedCode kernel.ErrorCode        `json:"failedCode"`
}

// sent is the body of POST /v1/messages and POST /v1/admin/messages/{id}/reply.
type sent struct {
	Envelope kernel.MessageEnvelope       `json:"envelope"`
	Receipt  kernel.MessageDeliveryResult `json:"receipt"`
}

// answer sends the reviewer's reply to message id with payload through replica i.
func (fl *fleet) answer(i int, id, payload string) (sent, error) {
	r := fl.do(context.Background(), i, "POST", "/v1/admin/messages/"+id+"/reply", "reviewer", `{"payload":`+payload+`}`)
	if r.err != nil || r.status != 200 {
		return sent{}, fmt.Errorf("reply to %s through replica %d: %d %s %v", id, i, r.status, r.body, r.err)
	}
	var s sent
	if err := json.Unmarshal(r.body, &s); err != nil {
		return sent{}, fmt.Errorf("reply to %s: %v: %s", id, err, r.body)
	}
	return s, nil
}

func must(t testing.TB, err error) {
	t.Helper()
	efleet.Must(t, err)
}
