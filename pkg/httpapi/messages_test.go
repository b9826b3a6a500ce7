package httpapi_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// messageGrants: the writer may send to human:alice twice; alice (a person, an operator
// token) may answer the writer.
const writerMessageGrants = `version: 1
grants:
  - id: g-writer-send
    subject: agent:writer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [human, alice]}
        actions: [send]
        scope: exact
    constraints: {maxUses: 2}
`

const aliceMessageGrants = `version: 1
grants:
  - id: g-alice-answer
    subject: human:alice
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, writer]}
        actions: [send]
        scope: exact
`

// newMessageFixture serves a tokens file of writer (agent:writer, role agent) and alice
// (human:alice, role operator) with messaging configured: both are wait recipients.
func newMessageFixture(t *testing.T, state string) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), tok: map[string]string{}, validate: validateResponse}
	f.root = filepath.Join(f.dir, "root")
	must(t, os.MkdirAll(f.root, 0o755))
	cfgDir := filepath.Join(f.dir, "etc")
	must(t, os.MkdirAll(filepath.Join(cfgDir, "grants"), 0o755))
	must(t, os.WriteFile(filepath.Join(cfgDir, "grants", "writer.yaml"), []byte(writerMessageGrants), 0o600))
	must(t, os.WriteFile(filepath.Join(cfgDir, "grants", "alice.yaml"), []byte(aliceMessageGrants), 0o600))
	f.tokensPath = filepath.Join(cfgDir, "tokens.yaml")
	owner, _ := kernel.ParseAddress("human:alice")
	for _, id := range []string{"writer", "alice"} {
		tok, err := tokens.New()
		must(t, err)
		f.tok[id] = tok
		actor, _ := kernel.ParseAddress(map[string]string{"writer": "agent:writer", "alice": "human:alice"}[id])
		e := tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok),
			Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "review"}, Grants: []string{"grants/" + id + ".yaml"}}
		if id == "alice" {
			e.Role = tokens.RoleOperator
		}
		must(t, tokens.Append(f.tokensPath, e))
	}
	if state == "" {
		state = filepath.Join(f.dir, "state", "state.db")
	}
	f.state = state
	routes := map[kernel.Address]mailbox.Route{}
	for _, a := range []string{"agent:writer", "human:alice"} {
		addr, _ := kernel.ParseAddress(a)
		routes[addr] = mailbox.Route{Mode: mailbox.ModeWait}
	}
	srv, err := servetest.Start(context.Background(), host.Settings{Root: f.root, State: state, StateDir: filepath.Join(f.dir, "local"),
		DefaultNamespaces: []string{"files", "sharedos"}, Messaging: &mailbox.Config{Routes: routes}},
		f.tokensPath, nil, func(hc *httpapi.Config) { hc.Logger = slog.New(slog.DiscardHandler) })
	must(t, err)
	f.srv, f.url = srv.Tokens, srv.URL
	t.Cleanup(srv.Close)
	return f
}

type sentWire struct {
	Envelope kernel.MessageEnvelope       `json:"envelope"`
	Receipt  kernel.MessageDeliveryResult `json:"receipt"`
}

func (r response) sent(t *testing.T) sentWire {
	t.Helper()
	var s sentWire
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	return s
}

func (r response) messages(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("%d %s: %v", r.status, r.body, err)
	}
	return out
}

// TestMessagesOverHTTP: POST /v1/messages is 202 when accepted and honours
// Idempotency-Key (a replay is the first response verbatim and spends nothing: the
// two-use grant still allows one more send after three replays); a refusal is a 200
// result; the operator's inbox lists, filters, shows and answers; the requester
// re-attaches with /wait; every response matches the document.
func TestMessagesOverHTTP(t *testing.T) {
	f := newMessageFixture(t, "")
	ask := `{"to":"human:alice","payload":{"ask":"may I deploy?"}}`
	first := f.do("POST", "/v1/messages", "writer", ask, "Idempotency-Key", "k1")
	s := first.sent(t)
	if first.status != 202 || s.Receipt.Status != kernel.DeliveryAccepted || s.Envelope.Sender.String() != "agent:writer" || s.Envelope.Purpose != "review" {
		t.Fatalf("first send: %d %s", first.status, first.body)
	}
	id := s.Envelope.ID
	for i := 0; i < 3; i++ {
		r := f.do("POST", "/v1/messages", "writer", ask, "Idempotency-Key", "k1")
		if r.status != 202 || string(r.body) != string(first.body) || r.header.Get("Idempotency-Replayed") != "true" {
			t.Fatalf("replay #%d: %d %s (want the first %s)", i, r.status, r.body, first.body)
		}
	}
	if r := f.do("POST", "/v1/messages", "writer", `{"to":"human:alice","payload":2}`, "Idempotency-Key", "k1"); r.status != 409 || r.errCode(t) != "replay_conflict" {
		t.Fatalf("same key, other payload: %d %s", r.status, r.body)
	}
	// the contract is strict: no sender, no purpose from the caller
	for _, bad := range []string{`{"to":"human:alice"}`, `{"to":"nobody","payload":1}`, `{"to":"human:alice","payload":1,"sender":"agent:x"}`} {
		if r := f.do("POST", "/v1/messages", "writer", bad); r.status != 400 || r.errCode(t) != "invalid_request" {
			t.Fatalf("%s: %d %s", bad, r.status, r.body)
		}
	}
	// no grant to send to agent:other: denied, a 200 result (not a request error)
	if r := f.do("POST", "/v1/messages", "writer", `{"to":"agent:other","payload":1}`); r.status != 200 || r.sent(t).Receipt.Status != kernel.DeliveryDenied ||
		string(r.sent(t).Receipt.Error.Code) != string(kernel.ReasonNoMatchingGrant) {
		t.Fatalf("ungranted send: %d %s", r.status, r.body)
	}

	// the inbox is the operator's
	if r := f.doRaw("GET", "/v1/admin/messages", "writer"); r.status != 403 || r.errCode(t) != "permission_denied" {
		t.Fatalf("agent token on the inbox: %d %s", r.status, r.body)
	}
	if r := f.doRaw("GET", "/v1/admin/messages?status=maybe", "alice"); r.status != 400 {
		t.Fatalf("bad status filter: %d %s", r.status, r.body)
	}
	inbox := f.doRaw("GET", "/v1/admin/messages?status=pending", "alice").messages(t)
	if len(inbox) != 1 || inbox[0]["envelope"].(map[string]any)["id"] != id {
		t.Fatalf("pending inbox: %v", inbox)
	}
	if got := f.doRaw("GET", "/v1/admin/messages?status=answered", "alice").messages(t); len(got) != 0 {
		t.Fatalf("answered inbox before the answer: %v", got)
	}
	if r := f.doRaw("GET", "/v1/admin/messages/"+id, "alice"); r.status != 200 || r.json(t)["status"] != "pending" {
		t.Fatalf("show: %d %s", r.status, r.body)
	}
	if r := f.doRaw("GET", "/v1/admin/messages/no-such", "alice"); r.status != 404 || r.errCode(t) != "not_found" {
		t.Fatalf("show unknown: %d %s", r.status, r.body)
	}

	// only the requester re-attaches
	if r := f.doRaw("POST", "/v1/messages/"+id+"/wait", "alice"); r.status != 400 || r.errCode(t) != "invalid_request" {
		t.Fatalf("wait by the receiver: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/v1/admin/messages/"+id+"/reply", "alice", `{"payload":"yes","extra":1}`); r.status != 400 {
		t.Fatalf("reply with an extra field: %d %s", r.status, r.body)
	}
	reply := f.do("POST", "/v1/admin/messages/"+id+"/reply", "alice", `{"payload":{"answer":"yes"}}`)
	if rs := reply.sent(t); reply.status != 200 || rs.Receipt.Status != kernel.DeliveryDelivered || rs.Envelope.ReplyTo != id || rs.Envelope.Purpose != "review" {
		t.Fatalf("reply: %d %s", reply.status, reply.body)
	}
	if r := f.do("POST", "/v1/admin/messages/"+id+"/reply", "alice", `{"payload":"no"}`); r.status != 200 || r.sent(t).Receipt.Error == nil ||
		r.sent(t).Receipt.Error.Code != mailbox.CodeMessageAlreadyResolved {
		t.Fatalf("second reply: %d %s", r.status, r.body)
	}
	w := f.doRaw("POST", "/v1/messages/"+id+"/wait", "writer")
	if m := w.json(t); w.status != 200 || m["status"] != "answered" || m["reply"].(map[string]any)["payload"].(map[string]any)["answer"] != "yes" {
		t.Fatalf("wait: %d %s", w.status, w.body)
	}
	if r := f.doRaw("POST", "/v1/messages/nope/wait", "writer"); r.status != 404 {
		t.Fatalf("wait unknown: %d %s", r.status, r.body)
	}

	// the replays spent nothing: the two-use grant allows exactly one more send
	if r := f.do("POST", "/v1/messages", "writer", `{"to":"human:alice","payload":"second"}`); r.status != 202 {
		t.Fatalf("second send: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/v1/messages", "writer", `{"to":"human:alice","payload":"third"}`); r.status != 200 || r.sent(t).Receipt.Status != kernel.DeliveryDenied {
		t.Fatalf("third send (the grant's uses are spent): %d %s", r.status, r.body)
	}
	if got := f.doRaw("GET", "/v1/admin/messages", "alice").messages(t); len(got) != 2 {
		t.Fatalf("the inbox holds %d messages, want 2 (the refused sends stored nothing)", len(got))
	}
}
