package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// The kernel benchmarks of issue 16 with the real audit sink: this store.

var benchActions = []string{"list", "stat", "read", "search", "grep", "create", "replace", "append", "delete",
	"snapshot:create", "snapshot:list", "snapshot:restore"}

var benchAgent = kernel.Address{Kind: kernel.KindAgent, ID: "bench"}

// snapshotSource is a grant-file-like source: one parsed snapshot with its hash.
type snapshotSource struct{ snap kernel.GrantSnapshot }

func (s *snapshotSource) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return s.snap.Grants, nil
}

func (s *snapshotSource) LoadGrantSnapshot(context.Context, kernel.AccessContext) (kernel.GrantSnapshot, error) {
	return s.snap, nil
}

// benchGrants is n grants over distinct project paths, a few actions each.
func benchGrants(n int) []kernel.CapabilityGrant {
	out := make([]kernel.CapabilityGrant, 0, n)
	for i := range n {
		ns := "files"
		if i%10 == 9 {
			ns = fmt.Sprintf("ns%d", i%50)
		}
		out = append(out, kernel.CapabilityGrant{ID: fmt.Sprintf("g-%d", i), NamespaceID: "world", Subject: benchAgent, Issuer: alice,
			IssuedAt: "2026-08-03T08:00:00.000Z",
			Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: ns, Path: []string{"projects", fmt.Sprintf("p%d", i)}},
				Actions: []string{benchActions[i%12], benchActions[(i+5)%12], "a" + fmt.Sprint(i%20)}, Scope: kernel.ScopeDescendants}}})
	}
	return out
}

// benchTool is a files tool over a path argument (read class unless write).
func benchTool(name, ns, action string, write bool) kernel.ToolHandler {
	class := kernel.ClassRead
	if write {
		class = kernel.ClassWrite
	}
	return kernel.ToolHandler{
		Definition: kernel.ToolDefinition{Name: name, Description: "bench", Namespace: ns, Source: "native", ReadWrite: class,
			InputSchema:        map[string]any{"type": "object"},
			RequiredCapability: kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: ns, Path: []string{}}, Action: action}},
		ParseArguments: func(raw json.RawMessage) (any, error) {
			var a struct {
				Path []string `json:"path"`
			}
			err := json.Unmarshal(raw, &a)
			return a.Path, err
		},
		ResolveRequirement: func(_ kernel.AccessContext, c kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
			p, _ := c.Parsed.([]string)
			return kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: ns, Path: p}, Action: action}, nil
		},
		Invoke: func(_ context.Context, actx kernel.AccessContext, c kernel.ParsedToolCall) (kernel.ToolResult, error) {
			return kernel.ToolResult{CallID: c.ID, Tool: c.Tool, Status: kernel.StatusSucceeded, Output: map[string]any{"ok": true}, CompletedAt: actx.Now}, nil
		},
	}
}

// benchKernel is a kernel over 1,000 grants, the 12 files tools and extra tools in 50
// other namespaces, auditing to s.
func benchKernel(b *testing.B, s *Store, extra int) (*kernel.Kernel, kernel.AccessContext) {
	grants := benchGrants(1000)
	k := kernel.New(kernel.Config{Grants: &snapshotSource{snap: kernel.GrantSnapshot{Grants: grants, Hash: kernel.HashGrants(grants)}},
		Usage: s, Settings: s, Audit: s})
	for _, a := range benchActions {
		write := a != "list" && a != "stat" && a != "read" && a != "search" && a != "grep" && a != "snapshot:list"
		if err := k.RegisterTool(benchTool("files."+strings.ReplaceAll(a, ":", "."), "files", a, write)); err != nil {
			b.Fatal(err)
		}
	}
	enabled := []string{"files"}
	for i := range extra {
		ns := fmt.Sprintf("ns%d", i%50)
		if i < 50 {
			enabled = append(enabled, ns)
		}
		if err := k.RegisterTool(benchTool(fmt.Sprintf("%s.t%d", ns, i), ns, "a"+fmt.Sprint(i%40), false)); err != nil {
			b.Fatal(err)
		}
	}
	actx := kernel.AccessContext{World: "world", Actor: benchAgent, Authority: alice, Owner: alice, Purpose: "bench",
		TraceID: "trace-1", EnabledToolNamespaces: enabled, Now: "2026-08-03T09:00:00.000Z"}
	return k, actx
}

// BenchmarkFirstCall is the first call of a new turn (a CLI process, or one MCP
// operation without the session memo) at 1,000 grants with this store as the audit sink:
// the turn's authority.resolved record and the operation's own records included
// (issue 16: <= 0.3 ms).
func BenchmarkFirstCall(b *testing.B) {
	s := openTest(b, Options{})
	k, actx := benchKernel(b, s, 0)
	ctx := context.Background()
	target := fmt.Sprintf("p%d", 1000/2/12*12+2) // a files grant with "read"
	call := kernel.ToolCall{ID: "c", Tool: "files.read", TraceID: actx.TraceID, RequestedAt: actx.Now,
		Arguments: json.RawMessage(`{"path":["projects","` + target + `","notes.md"]}`)}
	b.Run("ListTools", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			turn, err := k.BeginTurn(actx)
			if err != nil {
				b.Fatal(err)
			}
			if tools, err := turn.ListTools(ctx); err != nil || len(tools) == 0 {
				b.Fatal(tools, err)
			}
		}
	})
	b.Run("InvokeTool", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			turn, err := k.BeginTurn(actx)
			if err != nil {
				b.Fatal(err)
			}
			if res := turn.InvokeTool(ctx, call); res.Status != kernel.StatusSucceeded {
				b.Fatal(res.Error)
			}
		}
	})
}

// BenchmarkUpdateToolNamespaces is a namespace update with 1,012 tools registered: the
// kernel's part (memory: a settings store that keeps the selection in memory, no audit
// sink) and the whole update on this store (its transaction: the selection and its
// record, fsynced).
func BenchmarkUpdateToolNamespaces(b *testing.B) {
	ctx := context.Background()
	updates := []kernel.ToolNamespaceUpdate{{Disable: []string{"ns7"}}, {Enable: []string{"ns7"}}}
	b.Run("kernel", func(b *testing.B) {
		_, actx := benchKernel(b, openTest(b, Options{}), 1000)
		k := kernel.New(kernel.Config{Grants: &snapshotSource{}, Settings: &memSettings{sel: actx.EnabledToolNamespaces}})
		for _, h := range benchKernelTools(1000) {
			if err := k.RegisterTool(h); err != nil {
				b.Fatal(err)
			}
		}
		turn, err := k.BeginTurn(actx)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, err := turn.UpdateToolNamespaces(ctx, updates[i%2]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("sqlitestore", func(b *testing.B) {
		s := openTest(b, Options{})
		k, actx := benchKernel(b, s, 1000)
		turn, err := k.BeginTurn(actx)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, _, err := turn.UpdateToolNamespaces(ctx, updates[i%2]); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}

// benchKernelTools is the tool set of benchKernel with extra tools.
func benchKernelTools(extra int) []kernel.ToolHandler {
	var out []kernel.ToolHandler
	for _, a := range benchActions {
		out = append(out, benchTool("files."+strings.ReplaceAll(a, ":", "."), "files", a, false))
	}
	for i := range extra {
		ns := fmt.Sprintf("ns%d", i%50)
		out = append(out, benchTool(fmt.Sprintf("%s.t%d", ns, i), ns, "a"+fmt.Sprint(i%40), false))
	}
	return out
}

// memSettings keeps one selection in memory.
type memSettings struct{ sel []string }

func (m *memSettings) ApplyUpdate(_ context.Context, _ kernel.AccessContext, u kernel.ToolNamespaceUpdate) ([]string, error) {
	next, err := kernel.ApplyToolNamespaceUpdate(m.sel, u)
	if err == nil {
		m.sel = next
	}
	return next, err
}
