package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// nsTool is a provider tool in tool namespace ns, gated on files:[] read (which the
// test's grant gives), so that it is listed when its namespace is enabled.
func nsTool(ns, name string) kernel.ToolHandler {
	return kernel.ToolHandler{Definition: kernel.ToolDefinition{Name: name, Description: "d", Namespace: ns, Source: "mcp",
		ReadWrite: kernel.ClassRead, InputSchema: map[string]any{"type": "object"},
		RequiredCapability: kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{}}, Action: "read"}},
		Invoke: func(_ context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
			return kernel.ToolResult{CallID: call.ID, Tool: call.Tool, Status: kernel.StatusSucceeded, Output: "ok", CompletedAt: actx.Now}, nil
		}}
}

// A provider that confines its failure (ProviderUnavailableError) makes only its own
// namespace unavailable: the listing has every other tool and audits the namespace with
// its cause, a call into the namespace fails tool_catalog_unavailable naming the
// provider (never tool_unavailable), a call of another tool runs, and `tools list --all`
// shows the namespace. A plain provider error, a collision, or a confinement to a
// namespace another tool uses still fails the whole catalogue.
func TestProviderUnavailableConfined(t *testing.T) {
	cause := errors.New("no answer within 300ms")
	slow := func(ns ...string) *listProvider {
		return &listProvider{id: "slow", err: &kernel.ProviderUnavailableError{Namespaces: ns, Cause: cause}}
	}
	healthy := &listProvider{id: "healthy", tools: []kernel.ToolHandler{nsTool("kb", "kb.search")}}
	cases := []struct {
		name      string
		providers []*listProvider
		whole     string // the whole catalogue's error, "" when it resolves
	}{
		{"confined", []*listProvider{slow("gh"), healthy}, ""},
		{"plain error fails the whole", []*listProvider{{id: "slow", err: cause}, healthy}, `context tool provider "slow" failed to resolve its catalog`},
		{"collision still fails the whole", []*listProvider{slow("gh"), healthy,
			{id: "other", tools: []kernel.ToolHandler{nsTool("kb", "kb.search")}}}, `tool "kb.search" is offered by both provider "healthy" and provider "other"`},
		{"no namespace named", []*listProvider{slow(), healthy}, `context tool provider "slow" failed to resolve its catalog`},
		{"namespace of another tool", []*listProvider{slow("kb"), healthy}, `its tool namespace "kb" is also used by tool "kb.search"`},
		{"same namespace twice", []*listProvider{slow("gh"), {id: "slow2", err: &kernel.ProviderUnavailableError{Namespaces: []string{"gh"}}}, healthy},
			`tool namespace "gh" is reported unavailable by both`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			audit := &memAudit{}
			k := newKernel(t, []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants)}, audit)
			for _, p := range tc.providers {
				if err := k.RegisterToolProvider(p); err != nil {
					t.Fatal(err)
				}
			}
			actx := testContext()
			actx.EnabledToolNamespaces = []string{"files", "kb", "gh"}
			defs, err := k.ListTools(context.Background(), actx)
			ghCall := kernel.ToolCall{ID: "c1", Tool: "gh.get_file", Arguments: json.RawMessage(`{}`), TraceID: "trace-1", RequestedAt: admitted}
			kbCall := kernel.ToolCall{ID: "c2", Tool: "kb.search", Arguments: json.RawMessage(`{}`), TraceID: "trace-1", RequestedAt: admitted}
			if tc.whole != "" {
				if !errors.Is(err, kernel.ErrToolCatalogUnavailable) || !strings.Contains(err.Error(), tc.whole) {
					t.Fatalf("ListTools = %v, want the whole catalogue to fail with %q", err, tc.whole)
				}
				if r := k.InvokeTool(context.Background(), actx, kbCall); r.Error == nil || r.Error.Code != kernel.CodeToolCatalogUnavailable {
					t.Errorf("kb.search = %+v, want tool_catalog_unavailable", r.Error)
				}
				return
			}
			if err != nil || len(defs) != 1 || defs[0].Name != "kb.search" {
				t.Fatalf("ListTools = %v, %v; want kb.search alone", defs, err)
			}
			listed := audit.events[len(audit.events)-1]
			un, _ := listed.Metadata["unavailableNamespaces"].(map[string]any)
			if listed.Type != kernel.EventToolCatalogListed || listed.Outcome != kernel.OutcomeSucceeded ||
				!strings.Contains(un["gh"].(string), `provider "slow"`) || !strings.Contains(un["gh"].(string), "no answer within 300ms") {
				t.Errorf("listing's audit record = %+v", listed)
			}
			r := k.InvokeTool(context.Background(), actx, ghCall)
			if r.Status != kernel.StatusFailed || r.Error == nil || r.Error.Code != kernel.CodeToolCatalogUnavailable ||
				!strings.Contains(r.Error.Message, `provider "slow"`) || !strings.Contains(r.Error.Message, `"gh"`) ||
				strings.Contains(r.Error.Message, "300ms") {
				t.Errorf("gh.get_file = %s %+v, want failed tool_catalog_unavailable naming the provider", r.Status, r.Error)
			}
			invoked := audit.events[len(audit.events)-1]
			if c, _ := invoked.Metadata["catalogError"].(string); !strings.Contains(c, "no answer within 300ms") {
				t.Errorf("the call's audit record = %+v, want the cause", invoked)
			}
			if r := k.InvokeTool(context.Background(), actx, kbCall); r.Status != kernel.StatusSucceeded {
				t.Errorf("kb.search = %s %+v, want it to run", r.Status, r.Error)
			}
			// a name outside every namespace is still not_registered
			other := ghCall
			other.Tool = "ghx.tool"
			if r := k.InvokeTool(context.Background(), actx, other); r.Error == nil || r.Error.Code != kernel.CodeToolUnavailable {
				t.Errorf("ghx.tool = %+v, want tool_unavailable", r.Error)
			}
			turn, err := k.BeginTurn(actx)
			if err != nil {
				t.Fatal(err)
			}
			all, err := turn.AllTools(context.Background())
			if err != nil || len(all) != 2 || all[0].Definition.Name != "gh.*" || all[0].Usable ||
				all[0].Gate != kernel.GateRegistration || all[0].Cause != kernel.Cause(kernel.CodeToolCatalogUnavailable) ||
				!strings.Contains(all[0].Definition.Description, "no answer within 300ms") || all[1].Definition.Name != "kb.search" {
				t.Errorf("AllTools = %+v, %v", all, err)
			}
		})
	}
}
