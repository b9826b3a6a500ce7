package fsplane

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// env is one test world: a root, an outside directory holding sentinels, a snapshot
// store, a provider and its tools.
type env struct {
	t       *testing.T
	root    string
	outside string
	snaps   string
	p       *Provider
	tools   map[string]kernel.ToolHandler
	actx    kernel.AccessContext
	calls   int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{t: t, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside"),
		snaps: filepath.Join(base, "state", "snapshots")}
	for _, d := range []string{e.root, e.outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.writeOutside("secret.txt", "TOP-SECRET outside content")
	if err := os.MkdirAll(filepath.Join(e.outside, "dir"), 0o755); err != nil {
		t.Fatal(err)
	}
	e.writeOutside("dir/inner.txt", "TOP-SECRET inner")
	p, err := NewProvider(e.root, ProviderOptions{SnapshotDir: e.snaps,
		Now: func() time.Time { return time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	e.p = p
	hs, err := Tools(p)
	if err != nil {
		t.Fatal(err)
	}
	e.tools = map[string]kernel.ToolHandler{}
	for _, h := range hs {
		e.tools[h.Definition.Name] = h
	}
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	e.actx = kernel.AccessContext{World: "world", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "bob"},
		Authority: alice, Owner: alice, Purpose: "test", TraceID: "trace-1",
		EnabledToolNamespaces: []string{"files"}, Now: "2026-09-01T12:00:00.000Z"}
	return e
}

func (e *env) writeOutside(rel, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.outside, filepath.FromSlash(rel)), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

// write creates a file under the root (test setup, not through the provider).
func (e *env) write(rel, content string) {
	e.t.Helper()
	full := filepath.Join(e.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) mkdir(rel string) {
	e.t.Helper()
	if err := os.MkdirAll(filepath.Join(e.root, filepath.FromSlash(rel)), 0o755); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) symlink(target, rel string) {
	e.t.Helper()
	full := filepath.Join(e.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) readFile(rel string) (string, bool) {
	b, err := os.ReadFile(filepath.Join(e.root, filepath.FromSlash(rel)))
	if err != nil {
		return "", false
	}
	return string(b), true
}

// call runs a tool the way the kernel does: parse, resolve, invoke.
func (e *env) call(tool string, args any) kernel.ToolResult {
	e.t.Helper()
	res, err := e.tryCall(tool, args)
	if err != nil {
		e.t.Fatalf("%s: %v", tool, err)
	}
	return res
}

type parseError struct{ err error }

func (p parseError) Error() string { return "invalid_tool_arguments: " + p.err.Error() }

func (e *env) tryCall(tool string, args any) (kernel.ToolResult, error) {
	h, ok := e.tools[tool]
	if !ok {
		e.t.Fatalf("no tool %s", tool)
	}
	var raw []byte
	switch a := args.(type) {
	case string:
		raw = []byte(a)
	default:
		b, err := json.Marshal(a)
		if err != nil {
			e.t.Fatal(err)
		}
		raw = b
	}
	parsed, err := h.ParseArguments(raw)
	if err != nil {
		return kernel.ToolResult{}, parseError{err}
	}
	e.calls++
	call := kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "call-" + strings.ReplaceAll(tool, ".", "-"),
		Tool: tool, Arguments: raw, TraceID: "trace-1", RequestedAt: e.actx.Now}, Parsed: parsed}
	req, err := h.ResolveRequirement(e.actx, call)
	if err != nil {
		return kernel.ToolResult{}, err
	}
	if err := req.Validate(); err != nil {
		e.t.Fatalf("%s: requirement invalid: %v", tool, err)
	}
	res, err := h.Invoke(context.Background(), e.actx, call)
	if err != nil {
		return res, err
	}
	if err := res.Check(); err != nil {
		e.t.Fatalf("%s: result breaks the contract: %v", tool, err)
	}
	if res.Status == kernel.StatusSucceeded {
		checkOutputSchema(e.t, h.Definition, res.Output)
	}
	return res, nil
}

// ok calls and requires success; it returns the output as generic JSON.
func (e *env) ok(tool string, args any) map[string]any {
	e.t.Helper()
	res := e.call(tool, args)
	if res.Status != kernel.StatusSucceeded {
		e.t.Fatalf("%s %v: %s %s: %s", tool, args, res.Status, res.Error.Code, res.Error.Message)
	}
	return asJSON(e.t, res.Output)
}

// fail calls and requires the given status and code.
func (e *env) fail(tool string, args any, status kernel.ToolStatus, code kernel.ErrorCode) string {
	e.t.Helper()
	res := e.call(tool, args)
	if res.Status != status || res.Error == nil || res.Error.Code != code {
		got := ""
		if res.Error != nil {
			got = string(res.Error.Code) + ": " + res.Error.Message
		} else {
			b, _ := json.Marshal(res.Output)
			got = string(b)
		}
		e.t.Fatalf("%s %v: want %s %s, got %s %s", tool, args, status, code, res.Status, got)
	}
	if res.Error.Message == "" {
		e.t.Fatalf("%s: empty message", tool)
	}
	return res.Error.Message
}

func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

var (
	schemaMu    sync.Mutex
	schemaCache = map[string]*jsonschema.Schema{}
)

// checkOutputSchema validates an output against the tool's published outputSchema.
func checkOutputSchema(t *testing.T, def kernel.ToolDefinition, out any) {
	t.Helper()
	schemaMu.Lock()
	s, ok := schemaCache[def.Name]
	if !ok {
		c := jsonschema.NewCompiler()
		c.AssertFormat()
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSON(t, def.OutputSchema)))
		if err != nil {
			schemaMu.Unlock()
			t.Fatal(err)
		}
		url := "mem://" + def.Name + ".json"
		if err := c.AddResource(url, doc); err != nil {
			schemaMu.Unlock()
			t.Fatal(err)
		}
		s, err = c.Compile(url)
		if err != nil {
			schemaMu.Unlock()
			t.Fatalf("%s: output schema does not compile: %v", def.Name, err)
		}
		schemaCache[def.Name] = s
	}
	schemaMu.Unlock()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(mustJSON(t, out)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Fatalf("%s: output %s does not match its outputSchema: %v", def.Name, mustJSON(t, out), err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// op invokes the provider directly (a non-tool caller).
func (e *env) op(action string, path []string, input any) kernel.ResourceResult {
	e.t.Helper()
	rr, err := e.p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "op-1", Context: e.actx,
		Resource: kernel.ResourceRef{Namespace: "files", Path: path}, Action: action, Input: input})
	if err != nil {
		e.t.Fatalf("%s %q: unexpected provider error: %v", action, path, err)
	}
	return rr
}

// snapshotOutside hashes every file outside the root, to prove nothing changed.
func (e *env) snapshotOutside() map[string]string {
	e.t.Helper()
	m := map[string]string{}
	filepath.Walk(e.outside, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			m[p] = string(b)
		} else {
			m[p] = info.Mode().Type().String()
		}
		return nil
	})
	return m
}

func pth(segs ...string) []string {
	if segs == nil {
		return []string{}
	}
	return segs
}
