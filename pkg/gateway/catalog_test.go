package gateway

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func TestBuildCatalog(t *testing.T) {
	s := &Server{ID: "gh", Namespace: "gh", Unmapped: UnmappedHide, Tools: map[string]*ToolMap{
		"read":    {Name: "read", Action: "read", Namespace: "gh", Path: []Elem{{Arg: ptrOf("/repo")}}},
		"absent":  {Name: "absent", Action: "read", Namespace: "gh"},
		"badref":  {Name: "badref", Action: "read", Namespace: "gh"},
		"x.y":     {Name: "x.y", Action: "read", Namespace: "gh"},
		"bad one": {Name: "bad one", Action: "read", Namespace: "gh"},
		"destroy": {Name: "destroy", Action: "delete", Namespace: "gh"},
	}}
	yes := true
	tools := []*mcp.Tool{
		{Name: "read", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"repo": map[string]any{"type": "string"}}},
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}, Meta: mcp.Meta{"k": "v"},
			OutputSchema: map[string]any{"type": "array"}},
		{Name: "badref", Description: "remote ref", InputSchema: map[string]any{"type": "object", "$ref": "https://example.invalid/s.json"}},
		{Name: "x.y", InputSchema: map[string]any{"type": "string"}},
		{Name: "bad one", InputSchema: map[string]any{"type": "object"}},
		{Name: "destroy", InputSchema: map[string]any{"type": "object"},
			Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}},
		{Name: "other", InputSchema: map[string]any{"type": "object"}},
	}
	status := func(c *catalog) map[string]string {
		m := map[string]string{}
		for _, e := range c.entries {
			m[e.Upstream] = e.Status
		}
		return m
	}
	lazy := buildCatalog(s, tools, false)
	eager := buildCatalog(s, tools, true)
	want := map[string]string{"read": StatusMapped, "absent": StatusMissing, "badref": StatusMapped, "x.y": StatusSkipped,
		"bad one": StatusSkipped, "destroy": StatusMapped, "other": StatusHidden}
	for k, v := range want {
		if status(lazy)[k] != v {
			t.Errorf("lazy %s = %s, want %s", k, status(lazy)[k], v)
		}
	}
	// a schema that does not compile (a remote $ref is never fetched): skipped when
	// compiled, and an invalid_tool_arguments call when compiled on first use
	if status(eager)["badref"] != StatusSkipped || status(lazy.compiled(s))["badref"] != StatusSkipped || status(lazy)["badref"] != StatusMapped {
		t.Errorf("badref: eager %s, compiled %s", status(eager)["badref"], status(lazy.compiled(s))["badref"])
	}
	if _, err := lazy.byName["gh.badref"].parse(json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "cannot be compiled") {
		t.Errorf("badref parse: %v", err)
	}
	r := lazy.byName["gh.read"]
	d := r.def
	if d.ReadWrite != kernel.ClassRead || d.Annotations == nil || *d.Annotations.ReadOnly != true || *d.Annotations.Idempotent != true ||
		d.OutputSchema != nil || d.Metadata["upstream"].(map[string]any)["k"] != "v" || d.Description != "Tool read of the MCP server gh." ||
		d.RequiredCapability.Action != "read" || len(d.RequiredCapability.Resource.Path) != 0 {
		t.Errorf("read definition = %+v", d)
	}
	if dd := lazy.byName["gh.destroy"].def; dd.ReadWrite != kernel.ClassWrite || dd.Annotations.ReadOnly != nil || !*dd.Annotations.Destructive {
		t.Errorf("readOnly and destructive: %+v", dd)
	}
	pc, err := r.parse(json.RawMessage(`{"repo":"app"}`))
	if err != nil || strings.Join(pc.(*parsedCall).path, "/") != "app" || string(pc.(*parsedCall).raw) != `{"repo":"app"}` {
		t.Errorf("parse = %+v, %v", pc, err)
	}
	for _, bad := range []string{`{"repo":1}`, `{}`, `[]`, `{"repo":"a/b"}`} {
		if _, err := r.parse(json.RawMessage(bad)); err == nil {
			t.Errorf("parse(%s) accepted", bad)
		}
	}
}

func TestMapResult(t *testing.T) {
	call := kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c", Tool: "gh.t"}}
	now := "2026-01-01T00:00:00Z"
	cases := []struct {
		r    *mcp.CallToolResult
		want any
		code kernel.ErrorCode
	}{
		{&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, "a\nb", ""},
		{&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, StructuredContent: map[string]any{"n": 1.0}}, map[string]any{"n": 1.0}, ""},
		{&mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{MIMEType: "image/png", Data: []byte{1}}}}, nil, ""},
		{&mcp.CallToolResult{IsError: true}, nil, CodeUpstreamToolError},
		{&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("y", MaxResultBytes)}}}, nil, kernel.CodeInvalidToolResult},
	}
	for i, c := range cases {
		res := mapResult(call, now, "gh", c.r)
		if c.code != "" {
			if res.Error == nil || res.Error.Code != c.code || res.Check() != nil {
				t.Errorf("%d: %+v", i, res)
			}
			continue
		}
		if res.Status != kernel.StatusSucceeded || res.Check() != nil {
			t.Errorf("%d: %+v", i, res)
			continue
		}
		if c.want != nil {
			a, _ := json.Marshal(res.Output)
			b, _ := json.Marshal(c.want)
			if string(a) != string(b) {
				t.Errorf("%d: output %s, want %s", i, a, b)
			}
		} else if list, ok := res.Output.([]any); !ok || len(list) != 1 {
			t.Errorf("%d: non-text content should be the content list: %#v", i, res.Output)
		}
	}
	// an upstream error text over the contract's message bound: the message is cut, the
	// text is kept (capped) in details
	long := strings.Repeat("é", 5000)
	res := mapResult(call, now, "gh", &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: long}}})
	if res.Check() != nil || res.Error.Details["upstreamText"] != long {
		t.Errorf("long error: %v", res.Check())
	}
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcode": "plain text, ünïcode",
		"a\x1b[31mred":        `a\u001b[31mred`,
		"bad\xffbyte":         `bad\xffbyte`,
		"line\u2028sep\u0085": `line\u2028sep\u0085`,
		"keep \ufffd":         "keep \ufffd",
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}
