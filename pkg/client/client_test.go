package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/client"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/tokens"
)

const grants = `version: 1
grants:
  - id: g-read
    subject: agent:bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list, stat, read]
        scope: descendants
`

// start serves a root with notes/todo.md to an agent token and an operator token.
func start(t *testing.T) (srv *servetest.Server, agent, operator *client.Client, root string) {
	t.Helper()
	dir := t.TempDir()
	root = filepath.Join(dir, "root")
	must(t, os.MkdirAll(filepath.Join(root, "notes"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "notes", "todo.md"), []byte("buy milk\n"), 0o644))
	etc := filepath.Join(dir, "etc")
	must(t, os.MkdirAll(etc, 0o755))
	must(t, os.WriteFile(filepath.Join(etc, "g.yaml"), []byte(grants), 0o600))
	tokPath := filepath.Join(etc, "tokens.yaml")
	owner, _ := kernel.ParseAddress("human:alice")
	actor, _ := kernel.ParseAddress("agent:bot")
	toks := map[string]string{}
	for _, id := range []string{"agent", "op"} {
		tok, err := tokens.New()
		must(t, err)
		toks[id] = tok
		e := tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok), Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "test"}, Grants: []string{"g.yaml"}}
		if id == "op" {
			e.Role = tokens.RoleOperator
		}
		must(t, tokens.Append(tokPath, e))
	}
	srv, err := servetest.Start(context.Background(), host.Settings{Root: root, State: filepath.Join(dir, "state", "state.db"),
		DefaultNamespaces: []string{"files", "sharedos"}}, tokPath, nil, nil)
	must(t, err)
	t.Cleanup(srv.Close)
	agent, err = client.New(srv.URL, toks["agent"], client.Options{})
	must(t, err)
	operator, err = client.New(srv.URL, toks["op"], client.Options{})
	must(t, err)
	return srv, agent, operator, root
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestClientService(t *testing.T) {
	srv, agent, operator, root := start(t)
	ctx := context.Background()
	l, err := agent.ListTools(ctx)
	must(t, err)
	if len(l.Tools) == 0 || l.Context.Actor.String() != "agent:bot" {
		t.Fatalf("ListTools: %d tools, context %+v", len(l.Tools), l.Context)
	}
	res, err := agent.Invoke(ctx, api.InvokeRequest{Tool: "files.read", Arguments: json.RawMessage(`{"path":["notes","todo.md"]}`)})
	must(t, err)
	if res.Result.Status != kernel.StatusSucceeded || res.Definition == nil || res.Definition.Name != "files.read" {
		t.Fatalf("allowed Invoke: %+v", res)
	}
	res, err = agent.Invoke(ctx, api.InvokeRequest{Tool: "files.delete", Arguments: json.RawMessage(`{"path":["notes","todo.md"]}`)})
	must(t, err)
	if res.Result.Status != kernel.StatusDenied || res.Result.Gate == "" || res.Result.Cause == "" {
		t.Fatalf("denied Invoke (gate and cause from the headers): %+v", res.Result)
	}
	if b, _ := os.ReadFile(filepath.Join(root, "notes", "todo.md")); string(b) != "buy milk\n" {
		t.Fatalf("the denied delete changed the file")
	}
	ex, err := agent.Explain(ctx, api.InvokeRequest{Tool: "files.delete", Arguments: json.RawMessage(`{"path":["notes","todo.md"]}`)})
	must(t, err)
	if ex.Allowed || ex.Refusal == nil || len(ex.Fixes) == 0 {
		t.Fatalf("Explain: %+v", ex)
	}
	if d, err := agent.Definition(ctx, "nope.nothing", false); err != nil || d != nil {
		t.Fatalf("Definition of an unknown tool: %v %v", d, err)
	}
	all, err := agent.ListAllTools(ctx)
	must(t, err)
	if len(all) == 0 || all[0].Definition.Name != all[0].Tool {
		t.Fatalf("ListAllTools: %+v", all)
	}
	up, err := agent.UpdateNamespaces(ctx, kernel.ToolNamespaceUpdate{Disable: []string{"repo"}})
	must(t, err)
	if up.SelectionSource != "stored" {
		t.Fatalf("UpdateNamespaces: %+v", up)
	}
	d, err := agent.Authorize(ctx, kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"notes"}}, Action: "read"}, "")
	must(t, err)
	if !d.Allowed {
		t.Fatalf("Authorize: %+v", d)
	}
	evs, err := operator.QueryAudit(ctx, api.AuditQuery{Types: []string{"tool.invoked"}})
	must(t, err)
	if len(evs) != 2 {
		t.Fatalf("QueryAudit: %d events", len(evs))
	}
	_ = srv
}

// TestClientErrors: a refused request is an *api.Error whose cause is a *client.Error
// with the status, the envelope's code and the request id.
func TestClientErrors(t *testing.T) {
	srv, agent, _, _ := start(t)
	ctx := context.Background()
	_, err := agent.QueryAudit(ctx, api.AuditQuery{})
	var ce *client.Error
	var ae *api.Error
	if !errors.As(err, &ce) || !errors.As(err, &ae) || ce.Status != 403 || ce.Code != "permission_denied" || ce.RequestID == "" {
		t.Fatalf("an agent's admin request: %#v", err)
	}
	bad, _ := client.New(srv.URL, "sharedos_wrong", client.Options{})
	_, err = bad.ListTools(ctx)
	if !errors.As(err, &ce) || ce.Status != 401 || ce.Code != "unauthorized" || !strings.Contains(err.Error(), "refused the token") {
		t.Fatalf("a wrong token: %#v", err)
	}
	if _, err := client.New("ftp://x", "", client.Options{}); err == nil {
		t.Fatalf("an ftp URL was accepted")
	}
}

// TestClientAuditCursor: api.AuditQuery.AfterSeq goes over HTTP (afterSeq): a cursor
// read returns the events recorded after it, oldest first, each with its Seq, and a
// read after the last one's Seq returns what was recorded since and nothing before; a
// query without a cursor shows no Seq.
func TestClientAuditCursor(t *testing.T) {
	_, agent, operator, _ := start(t)
	ctx := context.Background()
	call := func() {
		t.Helper()
		_, err := agent.Invoke(ctx, api.InvokeRequest{Tool: "files.read", Arguments: json.RawMessage(`{"path":["notes","todo.md"]}`)})
		must(t, err)
	}
	call()
	zero := int64(0)
	first, err := operator.QueryAudit(ctx, api.AuditQuery{AfterSeq: &zero})
	must(t, err)
	if len(first) == 0 {
		t.Fatal("a cursor read from 0 returned nothing")
	}
	for i, ev := range first {
		if ev.Seq <= 0 || i > 0 && ev.Seq <= first[i-1].Seq {
			t.Fatalf("cursor read: event %d has Seq %d after %d; want positive and increasing", i, ev.Seq, first[max(i-1, 0)].Seq)
		}
	}
	last := first[len(first)-1].Seq
	if none, err := operator.QueryAudit(ctx, api.AuditQuery{AfterSeq: &last}); err != nil || len(none) != 0 {
		t.Fatalf("a cursor read after the last event = %d events, %v; want none", len(none), err)
	}
	call()
	next, err := operator.QueryAudit(ctx, api.AuditQuery{AfterSeq: &last})
	must(t, err)
	if len(next) == 0 || next[0].Seq <= last {
		t.Fatalf("a cursor read after %d returned %+v; want the second call's events only", last, next)
	}
	var invoked int
	for _, ev := range next {
		if ev.Type == kernel.EventToolInvoked {
			invoked++
		}
	}
	if invoked != 1 {
		t.Fatalf("a cursor read after the first call holds %d tool.invoked events, want 1", invoked)
	}
	all, err := operator.QueryAudit(ctx, api.AuditQuery{})
	must(t, err)
	if len(all) != len(first)+len(next) {
		t.Fatalf("the whole trail holds %d events, the cursor reads %d+%d", len(all), len(first), len(next))
	}
	for _, ev := range all {
		if ev.Seq != 0 {
			t.Fatalf("a query without a cursor shows Seq %d", ev.Seq)
		}
	}
}

// TestClientMessaging: the client is the remote api.Messaging — a send accepted, the
// same Idempotency-Key replayed (the same envelope, nothing sent again), a refused send
// a receipt and not an error, the operator's inbox, and the typed errors: an agent's
// inbox is 403 permission_denied, an unknown message 404 not_found (api.CodeNotFound).
func TestClientMessaging(t *testing.T) {
	dir := t.TempDir()
	etc := filepath.Join(dir, "etc")
	must(t, os.MkdirAll(filepath.Join(dir, "root"), 0o755))
	must(t, os.MkdirAll(etc, 0o755))
	owner, _ := kernel.ParseAddress("human:alice")
	bot, _ := kernel.ParseAddress("agent:bot")
	must(t, os.WriteFile(filepath.Join(etc, "bot.yaml"), []byte(`version: 1
grants:
  - id: g-send
    subject: agent:bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [human, alice]}
        actions: [send]
        scope: exact
`), 0o600))
	tokPath := filepath.Join(etc, "tokens.yaml")
	toks := map[string]string{}
	for id, actor := range map[string]kernel.Address{"bot": bot, "alice": owner} {
		tok, err := tokens.New()
		must(t, err)
		toks[id] = tok
		e := tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok), Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "test"}, Grants: []string{"bot.yaml"}}
		if id == "alice" {
			e.Role = tokens.RoleOperator
		}
		must(t, tokens.Append(tokPath, e))
	}
	routes := map[kernel.Address]mailbox.Route{owner: {Mode: mailbox.ModeWait}, bot: {Mode: mailbox.ModeWait}}
	srv, err := servetest.Start(context.Background(), host.Settings{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state", "state.db"),
		Messaging: &mailbox.Config{Routes: routes}}, tokPath, nil, nil)
	must(t, err)
	t.Cleanup(srv.Close)
	agent, err := client.New(srv.URL, toks["bot"], client.Options{})
	must(t, err)
	person, err := client.New(srv.URL, toks["alice"], client.Options{})
	must(t, err)
	ctx := context.Background()
	var _ api.Messaging = agent

	first, err := agent.SendMessageIdempotent(ctx, api.SendMessageRequest{To: owner, Payload: json.RawMessage(`{"ask":"deploy?"}`)}, "k-1")
	must(t, err)
	again, err := agent.SendMessageIdempotent(ctx, api.SendMessageRequest{To: owner, Payload: json.RawMessage(`{"ask":"deploy?"}`)}, "k-1")
	must(t, err)
	if first.Receipt.Status != kernel.DeliveryAccepted || again.Envelope.ID != first.Envelope.ID {
		t.Fatalf("send %+v, replay %+v: want accepted, then the same envelope", first, again)
	}
	denied, err := agent.SendMessage(ctx, api.SendMessageRequest{To: bot, Payload: json.RawMessage(`1`)})
	if err != nil || denied.Receipt.Status != kernel.DeliveryDenied || denied.Receipt.Error == nil {
		t.Fatalf("a refused send: %+v, %v (want a denied receipt, no error)", denied, err)
	}
	inbox, err := person.Inbox(ctx, api.InboxQuery{Status: "pending"})
	must(t, err)
	if len(inbox) != 1 || inbox[0].Envelope.ID != first.Envelope.ID {
		t.Fatalf("the person's inbox: %+v (want the one message, sent once)", inbox)
	}
	var ce *client.Error
	var ae *api.Error
	if _, err := agent.Inbox(ctx, api.InboxQuery{}); !errors.As(err, &ce) || ce.Status != 403 || ce.Code != "permission_denied" {
		t.Fatalf("an agent's inbox: %#v", err)
	}
	if _, err := person.ShowMessage(ctx, "no-such"); !errors.As(err, &ae) || ae.Code != api.CodeNotFound || !errors.As(err, &ce) || ce.Status != 404 {
		t.Fatalf("an unknown message: %#v", err)
	}
	if _, err := agent.WaitReply(ctx, "no-such"); !errors.As(err, &ae) || ae.Code != api.CodeNotFound {
		t.Fatalf("waiting on an unknown message: %#v", err)
	}
	reply, err := person.ReplyMessage(ctx, api.ReplyMessageRequest{ID: first.Envelope.ID, Payload: json.RawMessage(`"yes"`)})
	if err != nil || reply.Receipt.Status != kernel.DeliveryDenied {
		// alice holds no grant to answer agent:bot: the answer is a refused send back
		t.Fatalf("an answer without a grant to send back: %+v, %v", reply, err)
	}
	msg, err := person.ShowMessage(ctx, first.Envelope.ID)
	must(t, err)
	if msg.Status != "pending" {
		t.Fatalf("after a refused answer the message is %s; want pending (nothing changed)", msg.Status)
	}
}
