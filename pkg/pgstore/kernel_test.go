package pgstore_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
)

// grants is a grant source of fixed grants.
type grants []kernel.CapabilityGrant

func (g grants) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return g, nil
}

// TestKernelFailsClosedWhenUnreachable: a kernel over this store (usage, settings and
// audit) spends a maxUses grant; with the server unreachable the call is refused and the
// tool never runs; when the server is back the next call is allowed, and exactly the
// allowed calls are spent and recorded.
func TestKernelFailsClosedWhenUnreachable(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	if _, err := pgstore.Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	p := newProxy(t, dsn)
	st := openReplica(t, p.dsn)
	max := int64(5)
	g := kernel.CapabilityGrant{ID: "g-bounded", NamespaceID: "w1", Subject: helper, Issuer: alice, IssuedAt: "2026-01-01T00:00:00.000Z",
		Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"notes"}},
			Actions: []string{"write"}, Scope: kernel.ScopeDescendants}},
		Constraints: kernel.CapabilityConstraints{MaxUses: &max}}
	var ran atomic.Int64
	newKernel := func(settings kernel.ToolNamespaceSettingsStore, audit kernel.AuditSink) *kernel.Kernel {
		t.Helper()
		k := kernel.New(kernel.Config{Grants: grants{g}, Usage: st, Settings: settings, Audit: audit})
		if err := k.RegisterTool(tool(&ran)); err != nil {
			t.Fatalf("RegisterTool: %v", err)
		}
		return k
	}
	k := newKernel(st, st)
	// Without an audit sink (and with the context's namespaces) the first use of the
	// store in a call is its spend.
	unaudited := newKernel(nil, nil)
	actx := kernel.AccessContext{World: "w1", Actor: helper, Authority: alice, Owner: alice, Purpose: "test", TraceID: "trace-1",
		EnabledToolNamespaces: []string{"files"}, Now: "2026-01-01T00:00:01.000Z"}
	invokeOn := func(k *kernel.Kernel, id string) kernel.ToolResult {
		t.Helper()
		turn, err := k.BeginTurn(actx)
		if err != nil {
			t.Fatalf("BeginTurn: %v", err)
		}
		return turn.InvokeTool(ctx, kernel.ToolCall{ID: id, Tool: "files.write", TraceID: actx.TraceID, RequestedAt: actx.Now, Arguments: json.RawMessage(`{}`)})
	}
	invoke := func(id string) kernel.ToolResult { t.Helper(); return invokeOn(k, id) }

	if res := invoke("c1"); res.Status != kernel.StatusSucceeded {
		t.Fatalf("the first call = %s %+v; want succeeded", res.Status, res.Error)
	}
	p.stop()
	res := invoke("c2")
	if res.Status == kernel.StatusSucceeded || ran.Load() != 1 {
		t.Errorf("with the server unreachable the call = %s (tool ran %d times); want refused, the tool run once (the first call)", res.Status, ran.Load())
	}
	res = invokeOn(unaudited, "c2b")
	if res.Status == kernel.StatusSucceeded || string(res.Cause) != "usage_store_unavailable" || ran.Load() != 1 {
		t.Errorf("with the server unreachable an unaudited call = %s %+v gate %v cause %v (tool ran %d times); want refused for usage_store_unavailable", res.Status, res.Error, res.Gate, res.Cause, ran.Load())
	}
	p.start()
	if res := invoke("c3"); res.Status != kernel.StatusSucceeded {
		t.Errorf("after the server came back the call = %s %+v; want succeeded", res.Status, res.Error)
	}
	direct := openReplica(t, dsn)
	if n, err := direct.GetUsage(ctx, kernel.UsageKeyOf(&g)); err != nil || n != 2 {
		t.Errorf("uses spent = %d, %v; want 2 (the two allowed calls)", n, err)
	}
	if n := allowedRecords(t, direct, "c1") + allowedRecords(t, direct, "c2") + allowedRecords(t, direct, "c3"); n != 2 {
		t.Errorf("%d allowed decision records, want 2", n)
	}
}

// tool is a files.write tool over notes/a.md that counts its runs in ran.
func tool(ran *atomic.Int64) kernel.ToolHandler {
	return kernel.ToolHandler{
		Definition: kernel.ToolDefinition{Name: "files.write", Description: "write", Namespace: "files", Source: "native", ReadWrite: kernel.ClassWrite,
			InputSchema:        map[string]any{"type": "object"},
			RequiredCapability: kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{}}, Action: "write"}},
		ParseArguments: func(json.RawMessage) (any, error) { return nil, nil },
		ResolveRequirement: func(kernel.AccessContext, kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
			return kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"notes", "a.md"}}, Action: "write"}, nil
		},
		Invoke: func(_ context.Context, actx kernel.AccessContext, c kernel.ParsedToolCall) (kernel.ToolResult, error) {
			ran.Add(1)
			return kernel.ToolResult{CallID: c.ID, Tool: c.Tool, Status: kernel.StatusSucceeded, Output: map[string]any{}, CompletedAt: actx.Now}, nil
		},
	}
}
