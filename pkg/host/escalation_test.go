package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/cmd"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcphttp"
	"github.com/sharedos/sharedos/pkg/mcpserver"
	"github.com/sharedos/sharedos/pkg/scenario"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

// escGrants lets agent:helper (for human:alice) read the root and ask for escalations.
const escGrants = `version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-read
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [read]
        scope: descendants
  - id: g-escalate
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos, path: [escalation]}
        actions: [request]
        scope: exact
`

const escNow = "2026-08-03T09:00:00Z"

var ctx = context.Background()

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// escFixture writes a root (notes/todo.md) and the grant file under a new directory.
func escFixture(t *testing.T) (dir, root, grants string) {
	t.Helper()
	dir = t.TempDir()
	root = filepath.Join(dir, "root")
	must(t, os.MkdirAll(filepath.Join(root, "notes"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "notes", "todo.md"), []byte("buy milk\n"), 0o644))
	grants = filepath.Join(dir, "grants.yaml")
	must(t, os.WriteFile(grants, []byte(escGrants), 0o600))
	return dir, root, grants
}

// openEscHost opens a host over the fixture with files and sharedos enabled, pinned at
// escNow; edit changes its settings first.
func openEscHost(t *testing.T, root, grants, state string, edit func(*host.Settings)) *host.Host {
	t.Helper()
	s := &host.Settings{Root: root, State: state, Grants: []string{grants}, Now: escNow,
		Namespaces: []string{"files", "sharedos"}, NamespacesSet: true}
	if edit != nil {
		edit(s)
	}
	p, err := host.Prepare(s, time.Now, host.Needs{Planes: true, Actor: true})
	must(t, err)
	t.Cleanup(func() { _ = p.Close() })
	h, err := p.Open(ctx)
	must(t, err)
	return h
}

func escalateCall(t kernel.AccessContext, id, reason string) kernel.ToolCall {
	args, _ := json.Marshal(map[string]string{"reason": reason})
	return kernel.ToolCall{ID: id, Tool: kernel.EscalationToolName, Arguments: args, TraceID: t.TraceID, RequestedAt: t.Now}
}

// countingStore is a store's escalations that counts the listings.
type countingStore struct {
	store.Escalations
	lists   int
	resolve func(ctx context.Context, id int64, res store.EscalationResolution, ev kernel.AuditEvent) (store.EscalationRecord, error)
}

func (c *countingStore) ListEscalations(ctx context.Context, f store.EscalationFilter) ([]store.EscalationRecord, error) {
	c.lists++
	return c.Escalations.ListEscalations(ctx, f)
}

func (c *countingStore) ResolveEscalation(ctx context.Context, id int64, res store.EscalationResolution, ev kernel.AuditEvent) (store.EscalationRecord, error) {
	if c.resolve != nil {
		return c.resolve(ctx, id, res, ev)
	}
	return c.Escalations.ResolveEscalation(ctx, id, res, ev)
}

func auditOf(t *testing.T, st store.Audit, types ...string) []kernel.AuditEvent {
	t.Helper()
	evs, err := st.ListAudit(ctx, store.AuditFilter{Oldest: true, Types: types})
	must(t, err)
	return evs
}

// TestEscalationServiceResolve: the service records an offered escalation (kernel record
// + store record), finds it by id without listing, and resolves it once: the kernel's
// escalation.resolved event, in the shape `escalations resolve` always wrote, with the
// store's resolution; a second resolution, another reviewer, an unknown id and a failed
// write change nothing.
func TestEscalationServiceResolve(t *testing.T) {
	_, root, grants := escFixture(t)
	dir := t.TempDir()
	h := openEscHost(t, root, grants, filepath.Join(dir, "state", "state.db"), func(s *host.Settings) { s.Trace = "trace-ask" })
	cs := &countingStore{Escalations: h.Store}
	svc := host.NewEscalations(cs)

	actx := h.Turn.Context()
	esc, escalated, err := svc.EscalateIfOffered(ctx, h.Turn, escalateCall(actx, "call-1", "  may I write drafts?  "))
	if err != nil || !escalated || esc.Reason != "may I write drafts?" || esc.Status != store.EscalationPending {
		t.Fatalf("EscalateIfOffered = %+v, %v, %v", esc, escalated, err)
	}
	// another tool is not the branch: nothing happens
	if _, escalated, err := svc.EscalateIfOffered(ctx, h.Turn, kernel.ToolCall{ID: "x", Tool: "files.read"}); escalated || err != nil {
		t.Fatalf("files.read took the escalation branch: %v, %v", escalated, err)
	}

	rec, err := svc.Get(ctx, 1)
	if err != nil || rec.CallID != "call-1" || rec.TraceID != "trace-ask" || rec.World != "default" || rec.Owner.String() != "human:alice" ||
		!reflect.DeepEqual(rec.Escalation, esc) || rec.Resolution != nil {
		t.Fatalf("Get(1) = %+v, %v", rec, err)
	}
	if cs.lists != 0 {
		t.Fatalf("Get listed the escalations %d times; it reads one by its key", cs.lists)
	}
	if _, err := svc.Get(ctx, 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get(2) = %v, want ErrNotFound", err)
	}
	if r, ok, err := svc.ByCall(ctx, "default", actx.Owner, "call-1"); err != nil || !ok || r.ID != 1 {
		t.Fatalf("ByCall(call-1) = %+v, %v, %v", r, ok, err)
	}
	if _, ok, err := svc.ByCall(ctx, "default", actx.Owner, "call-2"); err != nil || ok {
		t.Fatalf("ByCall(call-2) = %v, %v", ok, err)
	}

	// the reviewer's turn: alice, an hour later, through another trace
	review := actx
	review.Now, review.TraceID = "2026-08-03T10:00:00.000Z", "trace-review"
	turn, err := h.Kernel.BeginTurn(review)
	must(t, err)
	before := len(auditOf(t, h.Store))

	// refusals write nothing
	bob := review
	bob.Owner, _ = kernel.ParseAddress("human:bob")
	bobTurn, err := h.Kernel.BeginTurn(bob)
	must(t, err)
	var notReviewer *host.NotReviewerError
	if _, err := svc.Resolve(ctx, bobTurn, host.Resolution{ID: 1, Decision: store.EscalationApproved}); !errors.As(err, &notReviewer) ||
		err.Error() != "escalation 1 was asked of human:alice in world default, not of human:bob in world default" {
		t.Fatalf("bob resolving alice's escalation: %v", err)
	}
	if _, err := svc.Resolve(ctx, turn, host.Resolution{ID: 7, Decision: store.EscalationApproved}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resolving an unknown id: %v", err)
	}
	if _, err := svc.Resolve(ctx, turn, host.Resolution{ID: 1, Decision: "maybe"}); !errors.Is(err, kernel.ErrInvalidDecision) {
		t.Fatalf("an invalid decision: %v", err)
	}
	// a store that cannot write the resolution: neither the resolution nor the event
	cs.resolve = func(context.Context, int64, store.EscalationResolution, kernel.AuditEvent) (store.EscalationRecord, error) {
		return store.EscalationRecord{}, errors.New("disk full")
	}
	if _, err := svc.Resolve(ctx, turn, host.Resolution{ID: 1, Decision: store.EscalationApproved}); err == nil {
		t.Fatal("a failed write resolved")
	}
	cs.resolve = nil
	if n := len(auditOf(t, h.Store)); n != before {
		t.Fatalf("the refusals wrote %d audit events", n-before)
	}
	if r, _ := svc.Get(ctx, 1); r.Resolution != nil {
		t.Fatalf("a refusal resolved: %+v", r.Resolution)
	}

	done, err := svc.Resolve(ctx, turn, host.Resolution{ID: 1, Decision: store.EscalationApproved, Note: "go ahead", Source: "cli"})
	must(t, err)
	want := &store.EscalationResolution{Status: store.EscalationApproved, ResolvedBy: actx.Owner, ResolvedAt: review.Now, Note: "go ahead"}
	if done.ID != 1 || done.Escalation.Status != store.EscalationApproved || !reflect.DeepEqual(done.Resolution, want) {
		t.Fatalf("resolved record %+v", done)
	}
	evs := auditOf(t, h.Store, string(kernel.EventEscalationResolved))
	if len(evs) != 1 {
		t.Fatalf("%d escalation.resolved events", len(evs))
	}
	ev := evs[0]
	if len(ev.ID) != 32 {
		t.Errorf("event id %q: want 32 hex digits", ev.ID)
	}
	ev.ID = ""
	// the shape `escalations resolve` wrote before the kernel wrote it (cmd/escalations.go)
	wantEv := kernel.AuditEvent{Version: "1", Type: kernel.EventEscalationResolved, Outcome: kernel.OutcomeSucceeded,
		At: review.Now, TraceID: "trace-review", NamespaceID: "default", Actor: actx.Owner, Authority: actx.Owner, Owner: actx.Owner,
		Purpose: "cli", OperationID: "call-1", Tool: kernel.EscalationToolName, Source: "cli",
		Metadata: map[string]any{"escalation": float64(1), "decision": "approved", "note": "go ahead", "requestTraceId": "trace-ask"}}
	if !reflect.DeepEqual(ev, wantEv) {
		a, _ := json.Marshal(ev)
		b, _ := json.Marshal(wantEv)
		t.Fatalf("escalation.resolved:\n got %s\nwant %s", a, b)
	}

	// resolving twice: ErrAlreadyResolved with the record as it is, nothing written
	after := len(auditOf(t, h.Store))
	for _, d := range []string{store.EscalationApproved, store.EscalationDenied} {
		r, err := svc.Resolve(ctx, turn, host.Resolution{ID: 1, Decision: d})
		if !errors.Is(err, store.ErrAlreadyResolved) || !reflect.DeepEqual(r.Resolution, want) {
			t.Fatalf("resolving again (%s) = %+v, %v; want ErrAlreadyResolved with the first resolution", d, r.Resolution, err)
		}
	}
	if n := len(auditOf(t, h.Store)); n != after {
		t.Fatalf("resolving again wrote %d audit events", n-after)
	}
	if cs.lists != 2 {
		t.Fatalf("the service listed %d times; only ByCall lists (twice)", cs.lists)
	}
}

// TestEscalateIfOfferedNotOffered: sharedos.escalate in a turn whose catalogue does not
// offer it (its namespace is off) is not the branch: nothing is recorded.
func TestEscalateIfOfferedNotOffered(t *testing.T) {
	_, root, grants := escFixture(t)
	h := openEscHost(t, root, grants, filepath.Join(t.TempDir(), "state.db"), func(s *host.Settings) { s.Namespaces = []string{"files"} })
	_, escalated, err := h.Escalations().EscalateIfOffered(ctx, h.Turn, escalateCall(h.Turn.Context(), "c", "why"))
	if escalated || err != nil {
		t.Fatalf("not offered, yet escalated=%v, %v", escalated, err)
	}
	if recs, err := h.Escalations().List(ctx, store.EscalationFilter{}); err != nil || len(recs) != 0 {
		t.Fatalf("recorded %d escalations, %v", len(recs), err)
	}
}

// comparable is an audit event without what differs between two runs of the same call
// (ids, traces, the recording instant, the surface's own metadata).
func comparable(evs []kernel.AuditEvent) []kernel.AuditEvent {
	var out []kernel.AuditEvent
	for _, ev := range evs {
		if ev.Type == kernel.EventAuthorityResolved {
			continue
		}
		ev.ID, ev.TraceID, ev.OperationID, ev.RecordedAt, ev.AuthorityHash = "", "", "", "", ""
		if ev.Metadata != nil {
			m := map[string]any{}
			for k, v := range ev.Metadata {
				if !slices.Contains([]string{"surface", "session", "client", "clientVersion"}, k) {
					m[k] = v
				}
			}
			ev.Metadata = m
		}
		out = append(out, ev)
	}
	return out
}

func comparableRecords(recs []store.EscalationRecord) []store.EscalationRecord {
	out := slices.Clone(recs)
	for i := range out {
		out[i].TraceID, out[i].CallID = "", ""
	}
	return out
}

// scenarioRecord is an audit event as the scenario runner observes it.
func scenarioRecord(ev kernel.AuditEvent) scenario.AuditRecord {
	return scenario.AuditRecord{Type: string(ev.Type), Outcome: string(ev.Outcome), Code: string(ev.Reason), Tool: ev.Tool,
		Grant: ev.GrantID, Cause: string(ev.Cause), Action: ev.Action, Consumed: ev.Consumed, FailClosed: ev.FailClosed}
}

// TestEscalationSameOnEverySurface: `tools call sharedos.escalate`, an MCP tools/call
// and a scenario's escalate step go through the one branch
// (host.Escalations.EscalateIfOffered): the same escalation record and the same audit
// events, but for ids, traces and the surface's metadata.
func TestEscalationSameOnEverySurface(t *testing.T) {
	dir, root, grants := escFixture(t)
	const reason = "may I write drafts?"

	// the CLI
	cliState := filepath.Join(dir, "cli", "state.db")
	home := t.TempDir()
	env := map[string]string{"HOME": home, "XDG_STATE_HOME": filepath.Join(home, "state"), "XDG_CONFIG_HOME": filepath.Join(home, "config"),
		"XDG_CACHE_HOME": filepath.Join(home, "cache")}
	ios, _, out, errOut := cmd.Test()
	code := cmd.MainWith([]string{"--root", root, "--grants", grants, "--state", cliState, "--namespaces", "files,sharedos",
		"--now", escNow, "tools", "call", kernel.EscalationToolName, "-a", "reason=" + reason}, ios, func(k string) string { return env[k] })
	if code != 5 {
		t.Fatalf("tools call sharedos.escalate exited %d: %s %s", code, out, errOut)
	}
	cli, err := sqlitestore.Open(ctx, cliState, sqlitestore.Options{})
	must(t, err)
	defer cli.Close()

	// MCP
	h := openEscHost(t, root, grants, filepath.Join(dir, "mcp", "state.db"), nil)
	sess, err := h.NewSession(time.Now)
	must(t, err)
	srv := mcpserver.New(mcpserver.Options{Backend: mcphttp.Backend(sess)})
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st)
	must(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	must(t, err)
	defer cs.Close()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: kernel.EscalationToolName, Arguments: map[string]any{"reason": reason}})
	must(t, err)
	if r.IsError {
		t.Fatalf("MCP escalate refused: %+v", r.Content)
	}

	for _, s := range []struct {
		name string
		st   store.State
	}{{"cli", cli}, {"mcp", h.Store}} {
		recs, err := s.st.ListEscalations(ctx, store.EscalationFilter{})
		if err != nil || len(recs) != 1 {
			t.Fatalf("%s: %d escalations, %v", s.name, len(recs), err)
		}
	}
	cliRecs, _ := cli.ListEscalations(ctx, store.EscalationFilter{})
	mcpRecs, _ := h.Store.ListEscalations(ctx, store.EscalationFilter{})
	if a, b := comparableRecords(cliRecs), comparableRecords(mcpRecs); !reflect.DeepEqual(a, b) {
		t.Errorf("escalation records differ:\n cli %+v\n mcp %+v", a, b)
	}
	cliEvs, mcpEvs := comparable(auditOf(t, cli)), comparable(auditOf(t, h.Store))
	if len(cliEvs) < 2 {
		t.Fatalf("the CLI's escalation wrote %d audit events but authority.resolved", len(cliEvs))
	}
	if !reflect.DeepEqual(cliEvs, mcpEvs) {
		a, _ := json.MarshalIndent(cliEvs, "", " ")
		b, _ := json.MarshalIndent(mcpEvs, "", " ")
		t.Errorf("audit events differ:\ncli %s\nmcp %s", a, b)
	}
	if n := len(auditOf(t, cli, string(kernel.EventEscalationRequested))); n != 1 {
		t.Errorf("cli: %d escalation.requested events", n)
	}

	// the scenario runner
	file := filepath.Join(dir, "esc.yaml")
	must(t, os.WriteFile(file, []byte(`version: 1
name: escalation
files: {"notes/todo.md": "buy milk\n"}
grants: [`+grants+`]
context: {now: `+escNow+`}
namespaces: [files, sharedos]
tests:
  - name: asks
    steps:
      - escalate: `+reason+`
        expect: {status: escalated, exit: 5}
`), 0o644))
	rep := scenario.RunFiles(ctx, []string{file}, scenario.Options{TempDir: t.TempDir(), Explain: true})
	if rep.Failed != 0 || rep.Invalid != 0 || len(rep.Files[0].Tests) != 1 {
		var b []byte
		b, _ = json.Marshal(rep)
		t.Fatalf("scenario: %s", b)
	}
	steps := rep.Files[0].Tests[0].Steps
	got := steps[0].Observed.Audit
	var want []scenario.AuditRecord
	for _, ev := range auditOf(t, cli) {
		if ev.Type != kernel.EventAuthorityResolved {
			want = append(want, scenarioRecord(ev))
		}
	}
	var gotNoAuthority []scenario.AuditRecord
	for _, rec := range got {
		if rec.Type != string(kernel.EventAuthorityResolved) {
			gotNoAuthority = append(gotNoAuthority, rec)
		}
	}
	if !reflect.DeepEqual(gotNoAuthority, want) {
		t.Errorf("scenario audit %+v\nwant (the CLI's) %+v", gotNoAuthority, want)
	}
}
