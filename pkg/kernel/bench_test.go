package kernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

var fileActions = []string{"list", "stat", "read", "search", "grep", "create", "replace", "append", "delete",
	"snapshot:create", "snapshot:list", "snapshot:restore"}

// benchGrants builds n grants: most for the files namespace on distinct project paths
// with a few actions each, one in ten for other resource namespaces.
func benchGrants(n int) []kernel.CapabilityGrant {
	out := make([]kernel.CapabilityGrant, 0, n)
	for i := 0; i < n; i++ {
		ns := "files"
		if i%10 == 9 {
			ns = fmt.Sprintf("ns%d", i%50)
		}
		g := grant(fmt.Sprintf("g-%d", i), []string{fileActions[i%12], fileActions[(i+5)%12], "a" + fmt.Sprint(i%20)}, kernel.ScopeDescendants, "projects", fmt.Sprintf("p%d", i))
		g.Capabilities[0].Resource.Namespace = ns
		out = append(out, g)
	}
	return out
}

func BenchmarkAuthorize(b *testing.B) {
	for _, n := range []int{10, 1000, 10000} {
		b.Run(fmt.Sprintf("grants=%d", n), func(b *testing.B) {
			actx := testContext()
			auth := kernel.NewAuthority(benchGrants(n), actx, 0)
			var z kernel.Authorizer
			target := fmt.Sprintf("p%d", (n/2)/12*12) // a files grant with "list"
			r := req("list", "projects", target, "notes.md")
			ctx := context.Background()
			if d, _ := z.Authorize(ctx, auth, actx, r, kernel.AuthorizeOptions{}); !d.Allowed {
				b.Fatalf("setup: %+v", d)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				z.Authorize(ctx, auth, actx, r, kernel.AuthorizeOptions{Consume: true})
			}
		})
	}
}

func noopTool(name, ns, resNS, action string) kernel.ToolHandler {
	return kernel.ToolHandler{
		Definition: kernel.ToolDefinition{Name: name, Description: "bench tool", Namespace: ns, Source: "native",
			ReadWrite: kernel.ClassRead, InputSchema: map[string]any{"type": "object"},
			RequiredCapability: kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: resNS, Path: []string{}}, Action: action}},
		Invoke: func(_ context.Context, actx kernel.AccessContext, c kernel.ParsedToolCall) (kernel.ToolResult, error) {
			return kernel.ToolResult{CallID: c.ID, Tool: c.Tool, Status: kernel.StatusSucceeded, Output: nil, CompletedAt: actx.Now}, nil
		},
	}
}

func benchKernel(b *testing.B, extraTools int, audit kernel.AuditSink) (*kernel.Kernel, kernel.AccessContext) {
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: benchGrants(1000)}, Usage: newMemUsage(), Audit: audit})
	for _, a := range fileActions {
		h := echoTool("files."+strings.ReplaceAll(a, ":", "."), a)
		if err := k.RegisterTool(h); err != nil {
			b.Fatal(err)
		}
	}
	enabled := []string{"files"}
	for i := 0; i < extraTools; i++ {
		ns := fmt.Sprintf("ns%d", i%50)
		if i < 50 {
			enabled = append(enabled, ns)
		}
		if err := k.RegisterTool(noopTool(fmt.Sprintf("%s.t%d", ns, i), ns, ns, "a"+fmt.Sprint(i%40))); err != nil {
			b.Fatal(err)
		}
	}
	actx := testContext()
	actx.EnabledToolNamespaces = enabled
	return k, actx
}

func BenchmarkListTools(b *testing.B) {
	for _, extra := range []int{0, 1000} {
		b.Run(fmt.Sprintf("tools=%d/grants=1000/turn", 12+extra), func(b *testing.B) {
			k, actx := benchKernel(b, extra, nil)
			turn := mustTurn(b, k, actx)
			ctx := context.Background()
			tools, err := turn.ListTools(ctx)
			if err != nil || len(tools) == 0 {
				b.Fatalf("setup: %d tools, %v", len(tools), err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := turn.ListTools(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("tools=%d/grants=1000/first-call", 12+extra), func(b *testing.B) {
			k, actx := benchKernel(b, extra, nil)
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := k.ListTools(ctx, actx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// discardAudit accepts and drops events (the cost of building them is still measured).
type discardAudit struct{}

func (discardAudit) Append(context.Context, kernel.AuditEvent) error { return nil }

func BenchmarkInvokeTool(b *testing.B) {
	for _, n := range []int{10, 1000} {
		for _, audited := range []bool{false, true} {
			b.Run(fmt.Sprintf("grants=%d/audit=%v", n, audited), func(b *testing.B) {
				var sink kernel.AuditSink
				if audited {
					sink = discardAudit{}
				}
				k := kernel.New(kernel.Config{Grants: &grantStore{grants: benchGrants(n)}, Usage: newMemUsage(), Audit: sink})
				if err := k.RegisterTool(echoTool("files.read", "read")); err != nil {
					b.Fatal(err)
				}
				actx := testContext()
				turn := mustTurn(b, k, actx)
				target := fmt.Sprintf("p%d", (n/2)/12*12+2) // a files grant with "read"
				c := kernel.ToolCall{ID: "c1", Tool: "files.read", TraceID: actx.TraceID, RequestedAt: actx.Now,
					Arguments: json.RawMessage(`{"path":["projects","` + target + `","notes.md"]}`)}
				ctx := context.Background()
				if res := turn.InvokeTool(ctx, c); res.Status != kernel.StatusSucceeded {
					b.Fatalf("setup: %+v", res.Error)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					turn.InvokeTool(ctx, c)
				}
			})
		}
	}
}

func BenchmarkDecodeGrant(b *testing.B) {
	data := []byte(seedGrant)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var g kernel.CapabilityGrant
		if err := json.Unmarshal(data, &g); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuthorityHash is the first-call cost of a turn's authority identity (1,000 grants).
func BenchmarkAuthorityHash(b *testing.B) {
	grants := benchGrants(1000)
	actx := testContext()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		auth := kernel.NewAuthority(grants, actx, 0)
		_ = auth.Hash()
	}
}

func BenchmarkNewAuthority(b *testing.B) {
	grants := benchGrants(1000)
	actx := testContext()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		kernel.NewAuthority(grants, actx, 0)
	}
}

// BenchmarkFirstCallSnapshot is the first call of a new turn over a grant-file-like
// snapshot source (an MCP session begins a turn per call), 1,000 grants, with an audit
// sink: the turn's authority.resolved and the operation's own events included.
func BenchmarkFirstCallSnapshot(b *testing.B) {
	grants := benchGrants(1000)
	src := &countingSnapshots{snap: kernel.GrantSnapshot{Grants: grants, Hash: kernel.HashGrants(grants)}}
	k := kernel.New(kernel.Config{Grants: src, Usage: newMemUsage(), Audit: discardAudit{}})
	if err := k.RegisterTool(echoTool("files.read", "read")); err != nil {
		b.Fatal(err)
	}
	for _, a := range fileActions {
		if a == "read" {
			continue
		}
		if err := k.RegisterTool(echoTool("files."+strings.ReplaceAll(a, ":", "."), a)); err != nil {
			b.Fatal(err)
		}
	}
	actx := testContext()
	ctx := context.Background()
	target := fmt.Sprintf("p%d", (1000/2)/12*12+2)
	c := kernel.ToolCall{ID: "c1", Tool: "files.read", TraceID: actx.TraceID, RequestedAt: actx.Now,
		Arguments: json.RawMessage(`{"path":["projects","` + target + `","notes.md"]}`)}
	b.Run("ListTools", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			turn, _ := k.BeginTurn(actx)
			if tools, err := turn.ListTools(ctx); err != nil || len(tools) == 0 {
				b.Fatal(tools, err)
			}
		}
	})
	b.Run("InvokeTool", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			turn, _ := k.BeginTurn(actx)
			if res := turn.InvokeTool(ctx, c); res.Status != kernel.StatusSucceeded {
				b.Fatal(res.Error)
			}
		}
	})
}
