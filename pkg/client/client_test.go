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
