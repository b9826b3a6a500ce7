package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func def(name string) kernel.ToolDefinition {
	return kernel.ToolDefinition{Name: name, Description: "d " + name, Namespace: "t", Source: "test", ReadWrite: kernel.ClassRead,
		InputSchema: map[string]any{"type": "object"}}
}

// TestPublishBound: over 512 tools the sorted list is cut deterministically (the first
// 512 by name, whatever the input order) and a warning is logged.
func TestPublishBound(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	s := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	mk := func(reverse bool) []kernel.ToolDefinition {
		defs := make([]kernel.ToolDefinition, 600)
		for i := range defs {
			n := i
			if reverse {
				n = 599 - i
			}
			defs[i] = def(fmt.Sprintf("t.tool%03d", n))
		}
		return defs
	}
	a, ha, err := s.publish(mk(false))
	must(t, err)
	b, hb, err := s.publish(mk(true))
	must(t, err)
	if len(a) != MaxPublishedTools || len(b) != MaxPublishedTools || ha != hb || a[511].Name != "t.tool511" {
		t.Fatalf("cut: %d/%d tools, last %s, hashes equal %v", len(a), len(b), a[len(a)-1].Name, ha == hb)
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("no warning logged: %q", logs.String())
	}
}

// TestPublishHash: the hash covers what is published (a description change changes it),
// and readOnlyHint is always present, destructive and idempotent only when declared.
func TestPublishHash(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	p1, h1, err := s.publish([]kernel.ToolDefinition{def("t.a"), def("t.b")})
	must(t, err)
	changed := def("t.b")
	changed.Description = "other"
	_, h2, err := s.publish([]kernel.ToolDefinition{def("t.a"), changed})
	must(t, err)
	if h1 == h2 {
		t.Fatal("a changed description kept the catalogue hash")
	}
	w := def("t.w")
	w.ReadWrite = kernel.ClassWrite
	w.Annotations = &kernel.ToolAnnotations{Destructive: kernel.BoolPtr(true), Idempotent: kernel.BoolPtr(true)}
	pw, _, err := s.publish([]kernel.ToolDefinition{w})
	must(t, err)
	raw, _ := json.Marshal(pw[0].Annotations)
	if string(raw) != `{"readOnlyHint":false,"destructiveHint":true,"idempotentHint":true}` {
		t.Fatalf("hints %s", raw)
	}
	raw, _ = json.Marshal(p1[0].Annotations)
	if string(raw) != `{"readOnlyHint":true}` {
		t.Fatalf("undeclared hints %s", raw)
	}
	if wt := wireTool(&pw[0]); !wt.Annotations.IdempotentHint || wt.Annotations.ReadOnlyHint || *wt.Annotations.DestructiveHint != true {
		t.Fatalf("wire hints %+v", wt.Annotations)
	}
}

// TestStructuredContent: structuredContent only for a declared outputSchema and an object
// output; the text is a string output itself, else its JSON.
func TestStructuredContent(t *testing.T) {
	t.Parallel()
	withSchema := def("t.s")
	withSchema.OutputSchema = map[string]any{"type": "object"}
	plain := def("t.p")
	for _, c := range []struct {
		def        *kernel.ToolDefinition
		out        any
		text       string
		structured bool
	}{
		{&withSchema, map[string]any{"a": 1}, `{"a":1}`, true},
		{&withSchema, []any{1}, `[1]`, false},
		{&withSchema, "hello", "hello", false},
		{&plain, map[string]any{"a": 1}, `{"a":1}`, false},
		{nil, map[string]any{"a": 1}, `{"a":1}`, false},
	} {
		r := success(c.def, c.out, nil)
		if got := r.Content[0].(*mcp.TextContent).Text; got != c.text || (r.StructuredContent != nil) != c.structured || r.IsError {
			t.Errorf("%v: text %q structured %v", c.out, got, r.StructuredContent)
		}
	}
	// On the wire, structuredContent is the text's very bytes, whatever the output's Go
	// type and whatever its strings need escaped.
	type out struct {
		Path    []string `json:"path"`
		Content string   `json:"content"`
	}
	for _, o := range []any{
		out{Path: []string{"a <b>", "é"}, Content: "x & y \u2028 \"q\" \n\x00 \xff"},
		map[string]any{"z": 1, "a": []any{"<", 2.5}, "m": map[string]any{"k": nil}},
		json.RawMessage(`{"k": "v <w>",  "n": 1}`),
	} {
		wire, err := json.Marshal(success(&withSchema, o, nil))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		if err := json.Unmarshal(wire, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Content) != 1 || string(got.StructuredContent) != got.Content[0].Text {
			t.Errorf("%v: structuredContent %s, text %s", o, got.StructuredContent, got.Content[0].Text)
		}
	}
}

// TestConcurrentCallsMaxUses: concurrent calls of one session under a maxUses grant are
// each decided by the kernel: exactly maxUses succeed, the rest are denied in band
// (grant_exhausted, or tool_unavailable with that cause once discovery sees it spent).
func TestConcurrentCallsMaxUses(t *testing.T) {
	e := newEnv(t, envOptions{grants: `version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-five
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [read]
        scope: descendants
    constraints: {maxUses: 5}
`})
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok, denied := 0, 0
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.read",
				Arguments: map[string]any{"path": []string{"notes", "todo.md"}}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case r.IsError && (r.Meta[MetaCode] == string(kernel.ReasonGrantExhausted) || r.Meta[MetaCause] == string(kernel.ReasonGrantExhausted)):
				// exhausted at execution, or already at discovery (the tool is then hidden)
				denied++
			case !r.IsError:
				ok++
			default:
				t.Errorf("unexpected result %v", r.Meta)
			}
		}()
	}
	wg.Wait()
	if ok != 5 || denied != 7 {
		t.Fatalf("%d succeeded, %d denied grant_exhausted; want 5 and 7", ok, denied)
	}
}
