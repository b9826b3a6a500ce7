package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestServiceKernelErrors: a failed kernel listing is translated by what failed — the
// catalogue (its provider's cause in the hint), the context (a usage problem), else the
// state (the state database's hint).
func TestServiceKernelErrors(t *testing.T) {
	t.Parallel()
	s := NewService(Backend{StatePath: "/srv/state.db"})
	cause := errors.New("server gh: connection refused")
	for _, tc := range []struct {
		err        error
		code, hint string
	}{
		{kernel.ErrToolCatalogUnavailable, api.CodeToolCatalogUnavailable, "a tool provider failed or two tools share a name; no partial catalogue is served"},
		{&kernel.CatalogError{Provider: "gh", Cause: cause}, api.CodeToolCatalogUnavailable, cause.Error() + "; no partial catalogue is served"},
		{fmt.Errorf("begin: %w", kernel.ErrInvalidContext), api.CodeInvalidRequest, "check --as, --owner, --authority, --world and --purpose"},
		{errors.New("disk I/O error"), api.CodeStateUnavailable, StateHint("/srv/state.db")},
	} {
		err := s.kernelErr(tc.err)
		var ae *api.Error
		if !errors.As(err, &ae) || ae.Code != tc.code || ae.Hint != tc.hint || !errors.Is(err, tc.err) {
			t.Errorf("%v: %#v, want code %s hint %q", tc.err, err, tc.code, tc.hint)
		}
	}
}

// TestHostService: the service over an opened host serves every operation from that
// host: its turn, and its store for the audit and escalations (what ListTools recorded
// is what QueryAudit reads).
func TestHostService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := openedFixture(t)
	svc := h.Service()
	reg, err := svc.Registry(ctx)
	if err != nil || !registryHas(reg, "files.read") || reg.Context.Actor.String() != "agent:helper" {
		t.Fatalf("registry: %v %+v", err, reg.Context)
	}
	list, err := svc.ListTools(ctx)
	if err != nil || list.SelectionSource != "default" {
		t.Fatalf("list: %v %+v", err, list)
	}
	evs, err := svc.QueryAudit(ctx, api.AuditQuery{Types: []string{string(kernel.EventToolCatalogListed)}})
	if err != nil || len(evs) != 1 || evs[0].TraceID != h.Prepared.Context.TraceID {
		t.Fatalf("audit of the host's store: %v %+v", err, evs)
	}
	recs, err := svc.ListEscalations(ctx, api.EscalationQuery{All: true})
	if err != nil || recs == nil || len(recs) != 0 {
		t.Fatalf("escalations: %v %#v (want an empty list, not nil)", err, recs)
	}
	if _, err := svc.ResolveEscalation(ctx, api.ResolveRequest{ID: 1, Status: "maybe"}); apiCode(err) != api.CodeInvalidRequest ||
		!strings.Contains(err.Error(), `invalid decision "maybe"`) {
		t.Fatalf("an invalid decision: %v", err)
	}
	if _, err := svc.ResolveEscalation(ctx, api.ResolveRequest{ID: 7, Status: api.EscalationDenied}); apiCode(err) != api.CodeNotFound {
		t.Fatalf("an unknown escalation: %v", err)
	}
}

// openedFixture is the opened host of a service fixture over the session grants.
func openedFixture(t *testing.T) *Host {
	t.Helper()
	h, err := newServiceFixture(t, sessionGrants).p.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestCatalogueError: EscalateIfOffered's catalogue failure is matched as the kernel's
// ErrCatalogueUnavailable and keeps its cause.
func TestCatalogueError(t *testing.T) {
	t.Parallel()
	cause := errors.New("provider down")
	var err error = &CatalogueError{Err: cause}
	if !errors.Is(err, kernel.ErrCatalogueUnavailable) || !errors.Is(err, cause) ||
		err.Error() != "the tool catalogue is unavailable: provider down" {
		t.Fatalf("%v", err)
	}
}

// TestIndexRefs: the files plane's snapshot index and digest cache refuse until the state
// database is open (the kernel runs no tool before), and then are the store's.
func TestIndexRefs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, _ := kernel.ParseAddress("human:alice")
	scope := kernel.SnapshotScope{World: "w", Owner: owner, Root: "/srv/root", Path: []string{"docs"}}
	rec := kernel.SnapshotRecord{SnapshotScope: scope, ID: "s1", Kind: "file", CreatedAt: 1,
		Entries: []kernel.SnapshotEntry{{Path: []string{}, Blob: strings.Repeat("cd", 32)}}}
	dg := kernel.FileDigest{Stamp: kernel.FileStamp{Dev: 1, Ino: 2, Size: 3}, RecordedNs: time.Now().UnixNano()}
	ref := &snapshotIndexRef{}
	dc := (*digestCacheRef)(ref)
	_, _, lookupErr := dc.LookupDigest(ctx, 1, 2)
	_, listErr := ref.ListSnapshots(ctx, scope, 0)
	_, getErr := ref.GetSnapshot(ctx, scope, "s1")
	for name, err := range map[string]error{"put": ref.PutSnapshot(ctx, rec), "list": listErr, "get": getErr,
		"lookup": lookupErr, "store digest": dc.StoreDigest(ctx, dg)} {
		if !errors.Is(err, errIndexNotOpen) {
			t.Errorf("%s before open: %v", name, err)
		}
	}
	st, err := OpenState(ctx, &Settings{State: filepath.Join(t.TempDir(), "s.db")}, WorkloadEach)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ref.st = st
	if err := ref.PutSnapshot(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got, err := ref.GetSnapshot(ctx, scope, "s1"); err != nil || got == nil || got.ID != "s1" {
		t.Fatalf("get: %v %+v", err, got)
	}
	if got, err := ref.ListSnapshots(ctx, scope, 0); err != nil || len(got) != 1 {
		t.Fatalf("list: %v %+v", err, got)
	}
	if err := dc.StoreDigest(ctx, dg); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := dc.LookupDigest(ctx, 1, 2); err != nil || !ok || got.Stamp != dg.Stamp {
		t.Fatalf("lookup: %v %v %+v", err, ok, got)
	}
}

// TestSessionDefinition: a session names the definitions of its host's tools.
func TestSessionDefinition(t *testing.T) {
	t.Parallel()
	sess, _ := openSession(t, time.Now, "")
	if d := sess.Definition("files.read"); d == nil || d.Namespace != "files" {
		t.Fatalf("files.read: %+v", d)
	}
	if d := sess.Definition("gh.search"); d != nil {
		t.Fatalf("an unknown tool: %+v", d)
	}
}

// TestUnauditedHostRecordsNothing: an unaudited host (shell completion) lists the
// catalogue without writing a record, where an audited one records the listing; without
// grant files the context has no grants (nothing usable) either way.
func TestUnauditedHostRecordsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, unaudited := range []bool{true, false} {
		dir := t.TempDir()
		s := &Settings{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state.db"), As: "agent:helper",
			Owner: "human:alice", DefaultNamespaces: []string{"files"}}
		p, err := Prepare(s, time.Now, Needs{Actor: true, Unaudited: unaudited})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		h, err := p.Open(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defs, err := h.Turn.ListTools(ctx)
		if err != nil || len(defs) != 0 {
			t.Fatalf("unaudited %v: %v, tools %v without a grant", unaudited, err, defs)
		}
		evs, err := h.Service().QueryAudit(ctx, api.AuditQuery{})
		if err != nil || (len(evs) == 0) != unaudited {
			t.Fatalf("unaudited %v: %v, %d records", unaudited, err, len(evs))
		}
	}
}

// TestTurnService: a service over a turn its driver began runs every operation in that
// turn — its context, its trace — and gives a call the id it was made with; the host's
// own turn records nothing.
func TestTurnService(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	h := openedFixture(t)
	actx := h.Prepared.Context
	actx.TraceID = "trace-step-2"
	turn, err := h.Kernel.BeginTurnWith(actx, kernel.TurnOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc := h.TurnService(turn, "call-step-2")
	list, err := svc.ListTools(ctx)
	if err != nil || list.Context.TraceID != "trace-step-2" {
		t.Fatalf("list: %v %+v", err, list.Context)
	}
	out, err := svc.Invoke(ctx, api.InvokeRequest{Tool: "files.read", Arguments: args(t, map[string]any{"path": []string{"docs", "a.md"}})})
	if err != nil || out.Result.Status != kernel.StatusSucceeded || out.Result.CallID != "call-step-2" {
		t.Fatalf("invoke: %v %+v", err, out.Result)
	}
	ex, err := svc.Explain(ctx, api.InvokeRequest{Tool: "files.list", Arguments: args(t, map[string]any{"path": []string{"docs"}})})
	if err != nil || ex.Allowed || ex.Context.TraceID != "trace-step-2" || len(ex.Findings) == 0 {
		t.Fatalf("explain: %v %+v", err, ex)
	}
	evs, err := svc.QueryAudit(ctx, api.AuditQuery{Types: []string{string(kernel.EventToolInvoked)}})
	if err != nil || len(evs) != 1 || evs[0].TraceID != "trace-step-2" || evs[0].OperationID != "call-step-2" {
		t.Fatalf("the call's record: %v %+v", err, evs)
	}
	if evs, _ := svc.QueryAudit(ctx, api.AuditQuery{TraceID: h.Prepared.Context.TraceID}); len(evs) != 0 {
		t.Fatalf("the host's own turn recorded %d events", len(evs))
	}
}
