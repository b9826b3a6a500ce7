package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// serviceFixture is an embedded Service over a root with docs/a.md, the session grants
// (read on files, one escalation) and files and sharedos enabled by default; opens counts
// the opens of its backend.
type serviceFixture struct {
	svc   *Service
	p     *Prepared
	opens int
	state string
}

func newServiceFixture(t *testing.T, grants string) *serviceFixture {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gf := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(gf, []byte(grants), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Settings{Root: root, State: filepath.Join(dir, "state", "state.db"), Grants: []string{gf},
		DefaultNamespaces: []string{"files", "sharedos"}, Now: "2026-08-03T09:00:00Z"}
	fx := &serviceFixture{state: s.State}
	p, err := Prepare(s, time.Now, Needs{Planes: true, Actor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	fx.p = p
	var h *Host
	fx.svc = NewService(Backend{Prepare: func() (*Prepared, error) { return p, nil },
		Open: func(ctx context.Context) (*Host, error) {
			fx.opens++
			if h == nil {
				h, err = p.Open(ctx)
			}
			return h, err
		}, StatePath: s.State})
	return fx
}

func args(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func apiCode(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// TestServiceOpensLazily: the registry and a known definition need no state database;
// the first operation that does opens the host once.
func TestServiceOpensLazily(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	reg, err := fx.svc.Registry(ctx)
	if err != nil || registryHas(reg, "files.read") == false || len(reg.ProvidedNamespaces) != 0 {
		t.Fatalf("registry: %v %+v", err, reg)
	}
	if d, err := fx.svc.Definition(ctx, "files.read", true); err != nil || d == nil || d.Namespace != "files" {
		t.Fatalf("definition: %v %+v", err, d)
	}
	if d, err := fx.svc.Definition(ctx, "nope.tool", true); err != nil || d != nil {
		t.Fatalf("unknown definition: %v %+v", err, d)
	}
	if fx.opens != 0 {
		t.Fatalf("the registry opened the host %d times", fx.opens)
	}
	if _, err := os.Stat(fx.state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the state database exists before any operation needed it: %v", err)
	}
	if _, err := fx.svc.ListTools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.svc.Namespaces(ctx); err != nil {
		t.Fatal(err)
	}
	if fx.opens != 1 {
		t.Fatalf("opened %d times, want 1", fx.opens)
	}
}

func registryHas(reg api.Registry, name string) bool {
	return slices.ContainsFunc(reg.Tools, func(d kernel.ToolDefinition) bool { return d.Name == name })
}

// TestServiceToolsInvokeExplain: the catalogue, the gates, a call and a dry run, all
// through the kernel of the host's turn.
func TestServiceToolsInvokeExplain(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	list, err := fx.svc.ListTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range list.Tools {
		names = append(names, d.Name)
	}
	if !slices.Contains(names, "files.read") || slices.Contains(names, "files.list") || list.Context.Actor.String() != "agent:helper" {
		t.Fatalf("usable tools %v for %v", names, list.Context.Actor)
	}
	all, err := fx.svc.ListAllTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range all {
		if st.Tool == "files.list" && (st.Usable || st.Gate != kernel.GateGrant || st.Definition.Name != "files.list") {
			t.Fatalf("files.list status %+v", st)
		}
		if st.Tool == "files.read" && (!st.Usable || st.Gate != "") {
			t.Fatalf("files.read status %+v", st)
		}
	}

	out, err := fx.svc.Invoke(ctx, api.InvokeRequest{Tool: "files.read", Arguments: args(t, map[string]any{"path": []string{"docs", "a.md"}})})
	if err != nil || out.Result.Status != kernel.StatusSucceeded || out.Definition == nil || out.Definition.Name != "files.read" {
		t.Fatalf("invoke: %v %+v", err, out)
	}
	if out.Result.CallID != fx.p.CallID {
		t.Fatalf("call id %q, want the run's %q", out.Result.CallID, fx.p.CallID)
	}
	out, err = fx.svc.Invoke(ctx, api.InvokeRequest{Tool: "files.list", Arguments: args(t, map[string]any{"path": []string{"docs"}})})
	if err != nil || out.Result.Status != kernel.StatusDenied {
		t.Fatalf("invoke without grant: %v %+v", err, out.Result)
	}

	ex, err := fx.svc.Explain(ctx, api.InvokeRequest{Tool: "files.read", Arguments: args(t, map[string]any{"path": []string{"docs", "a.md"}})})
	if err != nil || !ex.Allowed || ex.MatchedGrant == nil || ex.MatchedGrant.ID != "g-read" || ex.Context.Actor.String() != "agent:helper" {
		t.Fatalf("explain allowed: %v %+v", err, ex)
	}
	ex, err = fx.svc.Explain(ctx, api.InvokeRequest{Tool: "files.list", Arguments: args(t, map[string]any{"path": []string{"docs"}})})
	if err != nil || ex.Allowed || ex.Refusal == nil || len(ex.Fixes) != 1 || ex.Fixes[0].Kind != api.FixAddGrant ||
		ex.Fixes[0].Grant.Capabilities[0].Actions[0] != "list" || !strings.Contains(ex.Fixes[0].YAML, "list") {
		t.Fatalf("explain refused: %v %+v", err, ex)
	}
	ex, err = fx.svc.Explain(ctx, api.InvokeRequest{Tool: "files.read", Arguments: args(t, map[string]any{"path": 7})})
	if err != nil || ex.Allowed || len(ex.Fixes) == 0 || ex.Fixes[0].Kind != api.FixArguments {
		t.Fatalf("explain bad arguments: %v %+v", err, ex)
	}
}

// TestServiceNamespaces: the catalogue, an update, and a malformed patch that stores
// nothing.
func TestServiceNamespaces(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	ns, err := fx.svc.Namespaces(ctx)
	if err != nil || ns.SelectionSource != "default" || !slices.Equal(ns.EffectiveSelection, []string{"files", "sharedos"}) ||
		ns.World != "default" || ns.Owner.String() != "human:alice" {
		t.Fatalf("namespaces: %v %+v", err, ns)
	}
	up, err := fx.svc.UpdateNamespaces(ctx, kernel.ToolNamespaceUpdate{Enable: []string{"repo"}, Disable: []string{"files"}})
	if err != nil || up.SelectionSource != "stored" || up.RunSelectionKept || !slices.Equal(up.EffectiveSelection, []string{"repo", "sharedos"}) {
		t.Fatalf("update: %v %+v", err, up)
	}
	_, err = fx.svc.UpdateNamespaces(ctx, kernel.ToolNamespaceUpdate{})
	if apiCode(err) != api.CodeInvalidRequest || !strings.HasPrefix(err.Error(), "invalid namespace patch: ") {
		t.Fatalf("empty patch: %v", err)
	}
	h, _ := fx.svc.open(ctx)
	sel, stored, err := h.Store.Selection(ctx, "default", h.Prepared.Context.Owner)
	if err != nil || !stored || !slices.Equal(sel, []string{"repo", "sharedos"}) {
		t.Fatalf("the refused patch changed the stored selection: %v %v %v", sel, stored, err)
	}
}

// TestServiceEscalateIfOffered: the driver's branch records an offered escalation with
// the service's call id and trace (the request names neither) and, once the grant's one
// use is spent (no longer offered), is NotOffered and records nothing.
func TestServiceEscalateIfOffered(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	req := api.EscalateRequest{Call: kernel.ToolCall{Arguments: args(t, map[string]any{"reason": "may I?"})}, IfOffered: true}
	res, err := fx.svc.Escalate(ctx, req)
	if err != nil || res.NotOffered || res.Escalation == nil || res.Escalation.Reason != "may I?" {
		t.Fatalf("offered: %v %+v", err, res)
	}
	h, _ := fx.svc.open(ctx)
	recs, err := fx.svc.ListEscalations(ctx, api.EscalationQuery{})
	if err != nil || len(recs) != 1 || recs[0].CallID != h.CallID || recs[0].TraceID != h.Prepared.Context.TraceID {
		t.Fatalf("recorded: %v %+v", err, recs)
	}
	res, err = fx.svc.Escalate(ctx, req)
	if err != nil || !res.NotOffered || res.Escalation != nil || res.Denied != nil {
		t.Fatalf("no longer offered: %v %+v", err, res)
	}
	if recs, err := fx.svc.ListEscalations(ctx, api.EscalationQuery{All: true}); err != nil || len(recs) != 1 {
		t.Fatalf("the not-offered escalation recorded something: %v %+v", err, recs)
	}
}

// TestServiceEscalations: record, list (the context's and all), resolve once, again
// with the same decision (unchanged), with another (refused), an unknown id.
func TestServiceEscalations(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	h, err := fx.svc.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	call := kernel.ToolCall{ID: h.CallID, Tool: kernel.EscalationToolName, Arguments: args(t, map[string]any{"reason": "need list"}),
		TraceID: h.Prepared.Context.TraceID, RequestedAt: h.Prepared.Context.Now}
	res, err := fx.svc.Escalate(ctx, api.EscalateRequest{Call: call})
	if err != nil || res.Escalation == nil || res.Denied != nil || res.Escalation.Reason != "need list" {
		t.Fatalf("escalate: %v %+v", err, res)
	}
	// the escalation grant allows one use: the second is a denied result, not an error
	res, err = fx.svc.Escalate(ctx, api.EscalateRequest{Call: call})
	if err != nil || res.Denied == nil || res.Denied.Status != kernel.StatusDenied || res.Escalation != nil {
		t.Fatalf("second escalation: %v %+v", err, res)
	}
	recs, err := fx.svc.ListEscalations(ctx, api.EscalationQuery{})
	if err != nil || len(recs) != 1 || recs[0].Status != api.EscalationPending || recs[0].CallID != h.CallID || recs[0].Owner.String() != "human:alice" {
		t.Fatalf("list: %v %+v", err, recs)
	}
	if recs, err := fx.svc.ListEscalations(ctx, api.EscalationQuery{All: true, Status: api.EscalationApproved}); err != nil || len(recs) != 0 {
		t.Fatalf("list approved: %v %+v", err, recs)
	}
	id := recs[0].ID
	done, err := fx.svc.ResolveEscalation(ctx, api.ResolveRequest{ID: id, Status: api.EscalationApproved, Note: "ok"})
	if err != nil || done.Unchanged || done.Record.Status != api.EscalationApproved || done.Record.Resolution == nil ||
		done.Record.Resolution.Note != "ok" || done.Record.Resolution.ResolvedBy.String() != "human:alice" {
		t.Fatalf("resolve: %v %+v", err, done)
	}
	again, err := fx.svc.ResolveEscalation(ctx, api.ResolveRequest{ID: id, Status: api.EscalationApproved})
	if err != nil || !again.Unchanged || again.Record.Resolution.Note != "ok" {
		t.Fatalf("resolve again: %v %+v", err, again)
	}
	if _, err := fx.svc.ResolveEscalation(ctx, api.ResolveRequest{ID: id, Status: api.EscalationDenied}); apiCode(err) != api.CodeInvalidRequest ||
		!strings.Contains(err.Error(), "already approved") {
		t.Fatalf("resolve otherwise: %v", err)
	}
	if _, err := fx.svc.ResolveEscalation(ctx, api.ResolveRequest{ID: 99, Status: api.EscalationDenied}); apiCode(err) != api.CodeNotFound {
		t.Fatalf("unknown id: %v", err)
	}
	if _, err := fx.svc.ResolveEscalation(ctx, api.ResolveRequest{ID: id, Status: "maybe"}); apiCode(err) != api.CodeInvalidRequest {
		t.Fatalf("bad decision: %v", err)
	}
	evs, err := fx.svc.QueryAudit(ctx, api.AuditQuery{Types: []string{string(kernel.EventEscalationResolved)}})
	if err != nil || len(evs) != 1 || evs[0].Source != "cli" || evs[0].OperationID != h.CallID {
		t.Fatalf("resolution records: %v %+v", err, evs)
	}
}

// TestServiceEscalationOfAnotherOwner: a reviewer resolves only what was asked of them.
func TestServiceEscalationOfAnotherOwner(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	h, err := fx.svc.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := h.Store
	bob, _ := kernel.ParseAddress("human:bob")
	if err := st.RecordEscalation(ctx, escalationOf(bob)); err != nil {
		t.Fatal(err)
	}
	_, err = fx.svc.ResolveEscalation(ctx, api.ResolveRequest{ID: 1, Status: api.EscalationApproved})
	if apiCode(err) != api.CodeInvalidRequest || !strings.Contains(err.Error(), "was asked of human:bob") {
		t.Fatalf("another owner's escalation: %v", err)
	}
	recs, err := fx.svc.ListEscalations(ctx, api.EscalationQuery{All: true})
	if err != nil || len(recs) != 1 || recs[0].Resolution != nil {
		t.Fatalf("the refused resolution changed the record: %v %+v", err, recs)
	}
	if mine, err := fx.svc.ListEscalations(ctx, api.EscalationQuery{}); err != nil || len(mine) != 0 {
		t.Fatalf("the context's escalations include bob's: %v %+v", err, mine)
	}
}

// TestServiceAudit: the query resolves an operation prefix (refusing an ambiguous one),
// filters by actor in the query, orders, limits; the export returns calls with their
// authorization records, the newest of them oldest first.
func TestServiceAudit(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	h, err := fx.svc.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"aaaa1111-0000-7000-8000-000000000001", "aaaa2222-0000-7000-8000-000000000002", "bbbb3333-0000-7000-8000-000000000003"}
	for _, id := range ids {
		h.CallID = id
		out, err := fx.svc.Invoke(ctx, api.InvokeRequest{Tool: "files.read", Arguments: args(t, map[string]any{"path": []string{"docs", "a.md"}})})
		if err != nil || out.Result.Status != kernel.StatusSucceeded {
			t.Fatalf("invoke %s: %v %+v", id, err, out.Result)
		}
	}
	calls := []string{string(kernel.EventToolInvoked)}
	evs, err := fx.svc.QueryAudit(ctx, api.AuditQuery{Types: calls, Operation: "bbbb"})
	if err != nil || len(evs) != 1 || evs[0].OperationID != ids[2] {
		t.Fatalf("prefix: %v %+v", err, evs)
	}
	if _, err := fx.svc.QueryAudit(ctx, api.AuditQuery{Types: calls, Operation: "aaaa"}); apiCode(err) != api.CodeInvalidRequest ||
		!strings.Contains(err.Error(), ids[0]+", "+ids[1]) {
		t.Fatalf("ambiguous prefix: %v", err)
	}
	if evs, err := fx.svc.QueryAudit(ctx, api.AuditQuery{Types: calls, Operation: "cccc"}); err != nil || len(evs) != 0 {
		t.Fatalf("no match: %v %+v", err, evs)
	}
	evs, err = fx.svc.QueryAudit(ctx, api.AuditQuery{Types: calls, Limit: 2})
	if err != nil || len(evs) != 2 || evs[0].OperationID != ids[2] || evs[1].OperationID != ids[1] {
		t.Fatalf("newest first, limited: %v %+v", err, evs)
	}
	evs, err = fx.svc.QueryAudit(ctx, api.AuditQuery{Types: calls, Oldest: true, Limit: 1})
	if err != nil || len(evs) != 1 || evs[0].OperationID != ids[0] {
		t.Fatalf("oldest first: %v %+v", err, evs)
	}
	other, _ := kernel.ParseAddress("agent:other")
	if evs, err := fx.svc.QueryAudit(ctx, api.AuditQuery{Types: calls, Actor: other}); err != nil || len(evs) != 0 {
		t.Fatalf("another actor's events: %v %+v", err, evs)
	}
	if evs, err := fx.svc.QueryAudit(ctx, api.AuditQuery{Types: []string{"no.such.type"}}); err != nil || evs == nil || len(evs) != 0 {
		t.Fatalf("nothing matches: %v %#v", err, evs)
	}

	exp, err := fx.svc.ExportAudit(ctx, api.AuditQuery{Limit: 2, Types: []string{"ignored"}})
	if err != nil || len(exp) != 2 || exp[0].Call.OperationID != ids[1] || exp[1].Call.OperationID != ids[2] {
		t.Fatalf("export: %v %+v", err, exp)
	}
	for _, c := range exp {
		if len(c.Checks) == 0 || c.Checks[0].Type != kernel.EventAuthorizationChecked || c.Checks[0].OperationID != c.Call.OperationID {
			t.Fatalf("export checks of %s: %+v", c.Call.OperationID, c.Checks)
		}
	}
	if _, err := fx.svc.ExportAudit(ctx, api.AuditQuery{Operation: "aaaa"}); apiCode(err) != api.CodeInvalidRequest {
		t.Fatalf("export, ambiguous prefix: %v", err)
	}
}

// TestServiceStateFailure: a store that fails is state_unavailable, with the hint that
// names the state database.
func TestServiceStateFailure(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	h, err := fx.svc.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Store.Close(); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{
		"audit":       func() error { _, err := fx.svc.QueryAudit(ctx, api.AuditQuery{}); return err },
		"export":      func() error { _, err := fx.svc.ExportAudit(ctx, api.AuditQuery{}); return err },
		"escalations": func() error { _, err := fx.svc.ListEscalations(ctx, api.EscalationQuery{}); return err },
		"resolve": func() error {
			_, err := fx.svc.ResolveEscalation(ctx, api.ResolveRequest{ID: 1, Status: "denied"})
			return err
		},
	} {
		err := op()
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != api.CodeStateUnavailable || ae.Hint != StateHint(fx.state) {
			t.Errorf("%s on a closed store: %#v", name, err)
		}
	}
}

// TestServiceBackendErrors: an error of the backend's Prepare or Open is returned as it
// is, and nothing is cached on failure.
func TestServiceBackendErrors(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	opens := 0
	svc := NewService(Backend{Prepare: func() (*Prepared, error) { return nil, boom },
		Open: func(context.Context) (*Host, error) { opens++; return nil, boom }})
	ctx := context.Background()
	for name, op := range map[string]func() error{
		"registry":   func() error { _, err := svc.Registry(ctx); return err },
		"definition": func() error { _, err := svc.Definition(ctx, "files.read", false); return err },
		"list":       func() error { _, err := svc.ListTools(ctx); return err },
		"all":        func() error { _, err := svc.ListAllTools(ctx); return err },
		"invoke":     func() error { _, err := svc.Invoke(ctx, api.InvokeRequest{Tool: "x"}); return err },
		"explain":    func() error { _, err := svc.Explain(ctx, api.InvokeRequest{Tool: "x"}); return err },
		"namespaces": func() error { _, err := svc.Namespaces(ctx); return err },
		"update":     func() error { _, err := svc.UpdateNamespaces(ctx, kernel.ToolNamespaceUpdate{}); return err },
		"escalate":   func() error { _, err := svc.Escalate(ctx, api.EscalateRequest{}); return err },
		"escalations": func() error {
			_, err := svc.ListEscalations(ctx, api.EscalationQuery{})
			return err
		},
		"audit": func() error { _, err := svc.QueryAudit(ctx, api.AuditQuery{}); return err },
	} {
		if err := op(); err != boom {
			t.Errorf("%s: %v, want the backend's error", name, err)
		}
	}
	if opens < 2 {
		t.Fatalf("a failed open was cached (%d opens)", opens)
	}
}

// escalationOf is a pending escalation asked of owner in the default world.
func escalationOf(owner kernel.Address) storeEscalation {
	return storeEscalation{World: "default", Owner: owner, TraceID: "t", CallID: "c",
		Escalation: kernel.Escalation{Reason: "r", Reviewer: owner, RequestedAt: "2026-08-03T09:00:00Z", Status: api.EscalationPending}}
}

type storeEscalation = store.EscalationRecord

// limitsState records the limit and order of each ListAudit of the trail's calls.
type limitsState struct {
	ServiceState
	limits []int
}

func (s *limitsState) ListAudit(ctx context.Context, f store.AuditFilter) ([]kernel.AuditEvent, error) {
	if slices.Contains(f.Types, string(kernel.EventToolInvoked)) {
		s.limits = append(s.limits, f.Limit)
	}
	return s.ServiceState.ListAudit(ctx, f)
}

func (s *limitsState) ListAuditAfter(ctx context.Context, f store.AuditFilter) ([]kernel.AuditEvent, int64, error) {
	return s.ServiceState.(store.AuditCursor).ListAuditAfter(ctx, f)
}

// TestExportAuditReadsItsLimit: the export of the newest 2 of 6 calls reads 2 calls from
// the store (one query limited to 2), not the whole trail; the export of all of them
// reads by pages (no unlimited query) and returns all 6, oldest first.
func TestExportAuditReadsItsLimit(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	ctx := context.Background()
	h, err := fx.svc.open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i := range 6 {
		h.CallID = fmt.Sprintf("cccc%04d-0000-7000-8000-000000000001", i)
		ids = append(ids, h.CallID)
		if _, err := fx.svc.Invoke(ctx, api.InvokeRequest{Tool: "files.read", Arguments: args(t, map[string]any{"path": []string{"docs", "a.md"}})}); err != nil {
			t.Fatal(err)
		}
	}
	st := &limitsState{ServiceState: h.Store}
	svc := NewService(Backend{State: func(context.Context) (ServiceState, error) { return st, nil }})
	exp, err := svc.ExportAudit(ctx, api.AuditQuery{Limit: 2})
	if err != nil || len(exp) != 2 || exp[0].Call.OperationID != ids[4] || exp[1].Call.OperationID != ids[5] {
		t.Fatalf("export of 2: %v %+v", err, exp)
	}
	if fmt.Sprint(st.limits) != "[2]" {
		t.Errorf("the export of 2 calls listed the trail with limits %v, want [2]", st.limits)
	}
	st.limits = nil
	all, err := svc.ExportAudit(ctx, api.AuditQuery{})
	if err != nil || len(all) != 6 || all[0].Call.OperationID != ids[0] || all[5].Call.OperationID != ids[5] {
		t.Fatalf("export of all: %v %d calls", err, len(all))
	}
	if len(st.limits) != 0 {
		t.Errorf("the export of all calls listed the trail whole (limits %v), want pages", st.limits)
	}
}
