package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// classAudit records which write each event got: durable (Append) or write-ahead.
type classAudit struct {
	mu      sync.Mutex
	events  []kernel.AuditEvent
	durable []bool
	failWA  bool // AppendWriteAhead fails
}

func (a *classAudit) Append(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events, a.durable = append(a.events, ev), append(a.durable, true)
	return nil
}

func (a *classAudit) AppendWriteAhead(_ context.Context, ev kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failWA {
		return errors.New("audit down")
	}
	a.events, a.durable = append(a.events, ev), append(a.durable, false)
	return nil
}

// classes is "type/outcome:durable|write-ahead" per event, in order.
func (a *classAudit) classes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, len(a.events))
	for i, ev := range a.events {
		c := "write-ahead"
		if a.durable[i] {
			c = "durable"
		}
		out[i] = fmt.Sprintf("%s/%s:%s", ev.Type, ev.Outcome, c)
	}
	return out
}

func writeTool(name, action string, ran *int) kernel.ToolHandler {
	h := echoTool(name, action)
	h.Definition.ReadWrite = kernel.ClassWrite
	inner := h.Invoke
	h.Invoke = func(ctx context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
		*ran++
		return inner(ctx, actx, call)
	}
	return h
}

// TestAuditDurabilityClasses: records of work that changed nothing go to the
// write-ahead path; a spent use, and the record of a write-class tool that ran, are
// durable (see kernel.WriteAheadAuditSink).
func TestAuditDurabilityClasses(t *testing.T) {
	ctx := context.Background()
	read := grant("g-read", []string{"read", "list"}, kernel.ScopeDescendants)
	write := grant("g-write", []string{"create"}, kernel.ScopeDescendants)
	limited := grant("g-limited", []string{"append"}, kernel.ScopeDescendants)
	limited.Constraints = kernel.CapabilityConstraints{MaxUses: i64(1)}
	call := func(tool string) kernel.ToolCall {
		actx := testContext()
		return kernel.ToolCall{ID: "c-" + tool, Tool: tool, TraceID: actx.TraceID, RequestedAt: actx.Now,
			Arguments: json.RawMessage(`{"path":["a.md"]}`)}
	}
	for _, c := range []struct {
		name string
		run  func(t *testing.T, turn *kernel.Turn)
		want []string
	}{
		{"listing", func(t *testing.T, turn *kernel.Turn) {
			if _, err := turn.ListTools(ctx); err != nil {
				t.Fatal(err)
			}
		}, []string{"authority.resolved/succeeded:write-ahead", "tool.catalog.listed/succeeded:write-ahead"}},
		{"read tool", func(t *testing.T, turn *kernel.Turn) {
			if res := turn.InvokeTool(ctx, call("files.read")); res.Status != kernel.StatusSucceeded {
				t.Fatal(res.Error)
			}
		}, []string{"authority.resolved/succeeded:write-ahead", "authorization.checked/allowed:write-ahead",
			"tool.invoked/succeeded:write-ahead"}},
		{"write tool", func(t *testing.T, turn *kernel.Turn) {
			if res := turn.InvokeTool(ctx, call("files.create")); res.Status != kernel.StatusSucceeded {
				t.Fatal(res.Error)
			}
		}, []string{"authority.resolved/succeeded:write-ahead", "authorization.checked/allowed:write-ahead",
			"tool.invoked/succeeded:durable"}},
		{"spent use", func(t *testing.T, turn *kernel.Turn) {
			if res := turn.InvokeTool(ctx, call("files.append")); res.Status != kernel.StatusSucceeded {
				t.Fatal(res.Error)
			}
		}, []string{"authority.resolved/succeeded:write-ahead", "authorization.checked/allowed:durable",
			"tool.invoked/succeeded:durable"}},
		{"refused write", func(t *testing.T, turn *kernel.Turn) {
			if res := turn.InvokeTool(ctx, call("files.delete")); res.Status != kernel.StatusDenied {
				t.Fatalf("%+v", res)
			}
		}, []string{"authority.resolved/succeeded:write-ahead", "authorization.checked/denied:write-ahead",
			"tool.invoked/denied:write-ahead"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			audit := &classAudit{}
			ran := 0
			k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{read, write, limited}},
				Usage: newMemUsage(), Audit: audit})
			for _, h := range []kernel.ToolHandler{echoTool("files.read", "read"), writeTool("files.create", "create", &ran),
				writeTool("files.append", "append", &ran), writeTool("files.delete", "delete", &ran)} {
				if err := k.RegisterTool(h); err != nil {
					t.Fatal(err)
				}
			}
			c.run(t, mustTurn(t, k, testContext()))
			got := audit.classes()
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("events\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestWriteAheadFailureRefuses: a write-ahead record that cannot be written refuses the
// operation like a durable one (the tool never runs, the listing fails).
func TestWriteAheadFailureRefuses(t *testing.T) {
	ctx := context.Background()
	audit := &classAudit{failWA: true}
	ran := 0
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{grant("g", []string{"create", "list"}, kernel.ScopeDescendants)}},
		Usage: newMemUsage(), Audit: audit})
	if err := k.RegisterTool(writeTool("files.create", "create", &ran)); err != nil {
		t.Fatal(err)
	}
	if _, err := mustTurn(t, k, testContext()).ListTools(ctx); err == nil {
		t.Error("a listing whose record failed succeeded")
	}
	actx := testContext()
	res := mustTurn(t, k, actx).InvokeTool(ctx, kernel.ToolCall{ID: "c1", Tool: "files.create", TraceID: actx.TraceID,
		RequestedAt: actx.Now, Arguments: json.RawMessage(`{"path":["a.md"]}`)})
	if res.Status == kernel.StatusSucceeded || res.Error == nil || res.Error.Code != kernel.CodeAuditUnavailable {
		t.Errorf("result = %+v, want failed audit_unavailable", res)
	}
	if ran != 0 {
		t.Errorf("the tool ran %d times without its records", ran)
	}
}

// TestAuthorityResolvedOnce: with TurnOptions.AuthorityResolvedOnce a kernel writes one
// authority.resolved per authority, identity and metadata; without it, one per turn.
func TestAuthorityResolvedOnce(t *testing.T) {
	ctx := context.Background()
	count := func(a *memAudit) int {
		n := 0
		for _, ev := range a.all() {
			if ev.Type == kernel.EventAuthorityResolved {
				n++
			}
		}
		return n
	}
	grants := &grantStore{grants: []kernel.CapabilityGrant{grant("g", []string{"read", "list"}, kernel.ScopeDescendants)}}
	newKernel := func(audit kernel.AuditSink) *kernel.Kernel {
		k := kernel.New(kernel.Config{Grants: grants, Usage: newMemUsage(), Audit: audit})
		if err := k.RegisterTool(echoTool("files.read", "read")); err != nil {
			t.Fatal(err)
		}
		return k
	}
	list := func(k *kernel.Kernel, actx kernel.AccessContext, opts kernel.TurnOptions) {
		t.Helper()
		turn, err := k.BeginTurnWith(actx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := turn.ListTools(ctx); err != nil {
			t.Fatal(err)
		}
	}
	session := map[string]any{"surface": "mcp", "session": "s1"}
	other := map[string]any{"surface": "mcp", "session": "s2"}

	audit := &memAudit{}
	k := newKernel(audit)
	for range 3 {
		list(k, testContext(), kernel.TurnOptions{AuditMetadata: session, AuthorityResolvedOnce: true})
	}
	if n := count(audit); n != 1 {
		t.Errorf("three turns of one session wrote %d authority.resolved records, want 1", n)
	}
	list(k, testContext(), kernel.TurnOptions{AuditMetadata: other, AuthorityResolvedOnce: true})
	if n := count(audit); n != 2 {
		t.Errorf("another session's metadata: %d records, want 2", n)
	}
	otherTrace := testContext()
	otherTrace.TraceID = "trace-2"
	list(k, otherTrace, kernel.TurnOptions{AuditMetadata: session, AuthorityResolvedOnce: true})
	if n := count(audit); n != 3 {
		t.Errorf("another trace: %d records, want 3", n)
	}
	// A changed grant set is a new authority hash.
	grants.grants = append(grants.grants, grant("g2", []string{"read"}, kernel.ScopeExact, "x"))
	list(k, testContext(), kernel.TurnOptions{AuditMetadata: session, AuthorityResolvedOnce: true})
	if n := count(audit); n != 4 {
		t.Errorf("changed grants: %d records, want 4", n)
	}
	// Every later record names the hash the first authority.resolved record describes.
	evs := audit.all()
	last := evs[len(evs)-1]
	var resolved kernel.AuditEvent
	for _, ev := range evs {
		if ev.Type == kernel.EventAuthorityResolved {
			resolved = ev
		}
	}
	if last.Type != kernel.EventToolCatalogListed || last.AuthorityHash == "" || last.AuthorityHash != resolved.AuthorityHash {
		t.Errorf("listing names authority %q, the last authority.resolved %q", last.AuthorityHash, resolved.AuthorityHash)
	}

	// A session key: neither the per-request metadata nor the trace makes a new record;
	// another session key or another authority does.
	keyed := &memAudit{}
	k = newKernel(keyed)
	for i := range 3 {
		actx := testContext()
		actx.TraceID = fmt.Sprintf("trace-req-%d", i)
		list(k, actx, kernel.TurnOptions{AuditMetadata: map[string]any{"requestId": fmt.Sprint(i)}, AuthorityResolvedOnce: true, SessionKey: "http alice"})
	}
	if n := count(keyed); n != 1 {
		t.Errorf("three requests of one keyed session wrote %d authority.resolved records, want 1", n)
	}
	if evs := keyed.all(); evs[0].TraceID != "trace-req-0" || evs[0].Metadata["requestId"] != "0" || evs[len(evs)-1].Metadata["requestId"] != "2" {
		t.Errorf("the records do not carry their requests' trace and metadata: first %+v, last %+v", evs[0], evs[len(evs)-1])
	}
	list(k, testContext(), kernel.TurnOptions{AuditMetadata: map[string]any{"requestId": "x"}, AuthorityResolvedOnce: true, SessionKey: "http bob"})
	if n := count(keyed); n != 2 {
		t.Errorf("another session key: %d records, want 2", n)
	}
	grants.grants = append(grants.grants, grant("g3", []string{"read"}, kernel.ScopeExact, "y"))
	list(k, testContext(), kernel.TurnOptions{AuditMetadata: map[string]any{"requestId": "y"}, AuthorityResolvedOnce: true, SessionKey: "http alice"})
	if n := count(keyed); n != 3 {
		t.Errorf("a keyed session's changed grants: %d records, want 3", n)
	}

	// Without the option: one per turn.
	plain := &memAudit{}
	k = newKernel(plain)
	for range 3 {
		list(k, testContext(), kernel.TurnOptions{AuditMetadata: session})
	}
	if n := count(plain); n != 3 {
		t.Errorf("three turns without the option wrote %d records, want 3", n)
	}

	// A record that could not be written is tried again by the next turn.
	flaky := &failingAudit{failType: kernel.EventAuthorityResolved}
	k = newKernel(flaky)
	turn, err := k.BeginTurnWith(testContext(), kernel.TurnOptions{AuditMetadata: session, AuthorityResolvedOnce: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.ListTools(ctx); err == nil {
		t.Fatal("a listing without its authority record succeeded")
	}
	flaky.failType = ""
	list(k, testContext(), kernel.TurnOptions{AuditMetadata: session, AuthorityResolvedOnce: true})
	if n := count(&flaky.memAudit); n != 1 {
		t.Errorf("after a failed record the next turn wrote %d authority.resolved records, want 1", n)
	}
}

// batchAudit is a classAudit that can batch write-ahead records.
type batchAudit struct {
	classAudit
	batches   [][]kernel.AuditEventType
	failBatch bool
}

func (a *batchAudit) AppendWriteAheadBatch(_ context.Context, evs []kernel.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failBatch {
		return errors.New("audit down")
	}
	var types []kernel.AuditEventType
	for _, ev := range evs {
		a.events, a.durable = append(a.events, ev), append(a.durable, false)
		types = append(types, ev.Type)
	}
	a.batches = append(a.batches, types)
	return nil
}

// TestReadRecordsBatched: with a batching sink, a read-class call's decision record and
// its tool.invoked record are written in one batch after the read; when the batch fails
// the output is withheld (audit_unavailable). A write-class call is not batched.
func TestReadRecordsBatched(t *testing.T) {
	ctx := context.Background()
	newKernel := func(audit kernel.AuditSink, reads, writes *int) *kernel.Kernel {
		k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{grant("g", []string{"read", "create"}, kernel.ScopeDescendants)}},
			Usage: newMemUsage(), Audit: audit})
		read := echoTool("files.read", "read")
		inner := read.Invoke
		read.Invoke = func(ctx context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
			*reads++
			return inner(ctx, actx, call)
		}
		for _, h := range []kernel.ToolHandler{read, writeTool("files.create", "create", writes)} {
			if err := k.RegisterTool(h); err != nil {
				t.Fatal(err)
			}
		}
		return k
	}
	call := func(tool string) kernel.ToolCall {
		actx := testContext()
		return kernel.ToolCall{ID: "c-" + tool, Tool: tool, TraceID: actx.TraceID, RequestedAt: actx.Now,
			Arguments: json.RawMessage(`{"path":["a.md"]}`)}
	}

	audit := &batchAudit{}
	reads, writes := 0, 0
	k := newKernel(audit, &reads, &writes)
	turn := mustTurn(t, k, testContext())
	if res := turn.InvokeTool(ctx, call("files.read")); res.Status != kernel.StatusSucceeded {
		t.Fatal(res.Error)
	}
	if res := turn.InvokeTool(ctx, call("files.create")); res.Status != kernel.StatusSucceeded {
		t.Fatal(res.Error)
	}
	want := "[[authorization.checked tool.invoked]]"
	if got := fmt.Sprint(audit.batches); got != want {
		t.Errorf("batches = %s, want %s", got, want)
	}
	wantClasses := []string{"authority.resolved/succeeded:write-ahead", "authorization.checked/allowed:write-ahead",
		"tool.invoked/succeeded:write-ahead", "authorization.checked/allowed:write-ahead", "tool.invoked/succeeded:durable"}
	if got := audit.classes(); fmt.Sprint(got) != fmt.Sprint(wantClasses) {
		t.Errorf("events\n got %q\nwant %q", got, wantClasses)
	}

	failing := &batchAudit{failBatch: true}
	k = newKernel(failing, &reads, &writes)
	turn = mustTurn(t, k, testContext())
	res := turn.InvokeTool(ctx, call("files.read"))
	if res.Status != kernel.StatusFailed || res.Error == nil || res.Error.Code != kernel.CodeAuditUnavailable || res.Output != nil {
		t.Errorf("a read whose records failed = %+v, want failed audit_unavailable without output", res)
	}
	if res.Gate != kernel.GateInfrastructure {
		t.Errorf("gate = %q, want infrastructure", res.Gate)
	}
	for _, ev := range failing.events {
		if ev.Type != kernel.EventAuthorityResolved {
			t.Errorf("a record of the failed call was written: %s", ev.Type)
		}
	}
}

// TestAuditEventSizeIndependentOfGrants: the audit records of a turn's listing and call
// are the same size with 10 grants as with 1,000 (a grant set is named by its hash and
// counted, never listed), but for the digits of the count.
func TestAuditEventSizeIndependentOfGrants(t *testing.T) {
	sizes := func(n int) map[kernel.AuditEventType]int {
		grants := append(benchGrants(n-1), grant("g-read", []string{"read", "list"}, kernel.ScopeDescendants))
		audit := &memAudit{}
		k := kernel.New(kernel.Config{Grants: &grantStore{grants: grants}, Usage: newMemUsage(), Audit: audit})
		if err := k.RegisterTool(echoTool("files.read", "read")); err != nil {
			t.Fatal(err)
		}
		turn := mustTurn(t, k, testContext())
		if _, err := turn.ListTools(context.Background()); err != nil {
			t.Fatal(err)
		}
		if res := turn.InvokeTool(context.Background(), call("files.read", `{"path":["a"]}`)); res.Status != kernel.StatusSucceeded {
			t.Fatalf("call: %s %+v", res.Status, res.Error)
		}
		out := map[kernel.AuditEventType]int{}
		for _, ev := range audit.all() {
			ev.ID, ev.At, ev.RecordedAt, ev.AuthorityHash = "", "", "", "" // fixed-size or instant
			b, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			out[ev.Type] += len(b)
		}
		return out
	}
	small, large := sizes(10), sizes(1000)
	if len(small) < 3 {
		t.Fatalf("too few record types to compare: %v", small)
	}
	for typ, n := range small {
		if d := large[typ] - n; d < 0 || d > 2 {
			t.Errorf("%s: %d bytes with 10 grants, %d with 1,000", typ, n, large[typ])
		}
	}
}
