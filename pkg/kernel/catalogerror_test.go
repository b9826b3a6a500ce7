package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// listProvider is a ContextToolProvider returning fixed tools, or failing with err.
type listProvider struct {
	id    string
	tools []kernel.ToolHandler
	err   error
}

func (p *listProvider) ID() string { return p.id }
func (p *listProvider) ListTools(context.Context, kernel.AccessContext) ([]kernel.ToolHandler, error) {
	return p.tools, p.err
}

func providerTool(name string) kernel.ToolHandler {
	return kernel.ToolHandler{Definition: kernel.ToolDefinition{Name: name, Description: "d", Namespace: "kb", Source: "mcp",
		ReadWrite: kernel.ClassRead, InputSchema: map[string]any{"type": "object"},
		RequiredCapability: kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "kb", Path: []string{}}, Action: "read"}},
		Invoke: func(context.Context, kernel.AccessContext, kernel.ParsedToolCall) (kernel.ToolResult, error) {
			return kernel.ToolResult{}, nil
		}}
}

// A failing provider's catalogue error names the provider (never its cause) and keeps
// the cause for the audit trail: the listing's and the call's records carry it.
func TestCatalogErrorCauseInAudit(t *testing.T) {
	audit := &memAudit{}
	k := kernel.New(kernel.Config{Grants: &grantStore{}, Audit: audit})
	cause := errors.New("upstream exited: status 3")
	if err := k.RegisterToolProvider(&listProvider{id: "github", err: cause}); err != nil {
		t.Fatal(err)
	}
	_, err := k.ListTools(context.Background(), testContext())
	var ce *kernel.CatalogError
	if !errors.Is(err, kernel.ErrToolCatalogUnavailable) || !errors.As(err, &ce) || ce.Provider != "github" ||
		!errors.Is(err, cause) || strings.Contains(err.Error(), "status 3") || !strings.Contains(err.Error(), `"github"`) {
		t.Fatalf("ListTools error = %v", err)
	}
	res := k.InvokeTool(context.Background(), testContext(), kernel.ToolCall{ID: "c1", Tool: "files.read",
		Arguments: json.RawMessage(`{}`), TraceID: "trace-1", RequestedAt: admitted})
	if res.Error == nil || res.Error.Code != kernel.CodeToolCatalogUnavailable || !strings.Contains(res.Error.Message, `"github"`) ||
		strings.Contains(res.Error.Message, "status 3") {
		t.Fatalf("InvokeTool = %+v", res.Error)
	}
	n := 0
	for _, ev := range audit.events {
		if c, _ := ev.Metadata["catalogError"].(string); strings.Contains(c, "status 3") && strings.Contains(c, "github") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("the cause is in %d audit events, want 2 (listing, call)", n)
	}
}

// A name offered twice fails the catalogue naming both owners of the name.
func TestCatalogErrorDuplicateNamesBoth(t *testing.T) {
	k := kernel.New(kernel.Config{Grants: &grantStore{}})
	for _, p := range []*listProvider{{id: "a", tools: []kernel.ToolHandler{providerTool("kb.search")}},
		{id: "b", tools: []kernel.ToolHandler{providerTool("kb.search")}}} {
		if err := k.RegisterToolProvider(p); err != nil {
			t.Fatal(err)
		}
	}
	_, err := k.ListTools(context.Background(), testContext())
	if !errors.Is(err, kernel.ErrToolCatalogUnavailable) || err.Error() != `tool "kb.search" is offered by both provider "a" and provider "b"` {
		t.Fatalf("error = %v", err)
	}
}
