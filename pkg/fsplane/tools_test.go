package fsplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// recorder is a files provider that records the operations it receives.
type recorder struct {
	ns  string
	ops []kernel.ResourceOperation
}

func (r *recorder) Namespace() string { return r.ns }
func (r *recorder) Invoke(ctx context.Context, op kernel.ResourceOperation) (kernel.ResourceResult, error) {
	r.ops = append(r.ops, op)
	return kernel.ResourceResult{OperationID: op.OperationID, Status: kernel.StatusSucceeded, Output: map[string]any{"ok": true},
		CompletedAt: "2026-09-01T12:00:00.000Z"}, nil
}

func TestToolsDefinitions(t *testing.T) {
	t.Parallel()
	if _, err := Tools(&recorder{ns: "repo"}); err == nil {
		t.Fatal("a non-files provider was accepted")
	}
	if _, err := Tools(nil); err == nil {
		t.Fatal("nil provider accepted")
	}
	hs, err := Tools(&recorder{ns: "files"})
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		name, action string
		rw           kernel.ReadWrite
		readOnly     bool
		destructive  bool
		minPath      int
		props        []string
		required     []string
	}
	wants := []want{
		{"files.list", "list", kernel.ClassRead, true, false, 0, []string{"path"}, []string{"path"}},
		{"files.stat", "stat", kernel.ClassRead, true, false, 0, []string{"path"}, []string{"path"}},
		{"files.read", "read", kernel.ClassRead, true, false, 0, []string{"path"}, []string{"path"}},
		{"files.search", "search", kernel.ClassRead, true, false, 0, []string{"limit", "path", "query"}, []string{"path", "query"}},
		{"files.grep", "grep", kernel.ClassRead, true, false, 0, []string{"caseSensitive", "contextAfter", "contextBefore", "mode", "path", "pattern"}, []string{"path", "pattern"}},
		{"files.create", "create", kernel.ClassWrite, false, false, 1, []string{"content", "metadata", "path"}, []string{"path", "content"}},
		{"files.replace", "replace", kernel.ClassWrite, false, true, 1, []string{"content", "expectedVersion", "path"}, []string{"path", "content"}},
		{"files.append", "append", kernel.ClassWrite, false, false, 1, []string{"content", "expectedVersion", "metadata", "path"}, []string{"path", "content"}},
		{"files.delete", "delete", kernel.ClassWrite, false, true, 1, []string{"expectedVersion", "path", "recursive"}, []string{"path"}},
		{"files.snapshot.create", "snapshot:create", kernel.ClassWrite, false, false, 0, []string{"label", "path"}, []string{"path"}},
		{"files.snapshot.list", "snapshot:list", kernel.ClassRead, true, false, 0, []string{"limit", "path"}, []string{"path"}},
		{"files.snapshot.restore", "snapshot:restore", kernel.ClassWrite, false, true, 1, []string{"expectedVersion", "path", "snapshotId"}, []string{"path", "snapshotId"}},
	}
	if len(hs) != len(wants) {
		t.Fatalf("%d tools, want %d", len(hs), len(wants))
	}
	for i, w := range wants {
		d := hs[i].Definition
		if err := d.Validate(); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		if d.Name != w.name || d.RequiredCapability.Action != w.action || d.ReadWrite != w.rw ||
			d.Namespace != "files" || d.Source != "sharedos" ||
			d.RequiredCapability.Resource.Namespace != "files" || len(d.RequiredCapability.Resource.Path) != 0 ||
			d.RequiredCapability.Resource.Owner != nil {
			t.Fatalf("tool %d = %+v, want %+v", i, d, w)
		}
		ro := d.Annotations != nil && d.Annotations.ReadOnly != nil && *d.Annotations.ReadOnly
		de := d.Annotations != nil && d.Annotations.Destructive != nil && *d.Annotations.Destructive
		if ro != w.readOnly || de != w.destructive {
			t.Fatalf("%s annotations readOnly=%v destructive=%v", d.Name, ro, de)
		}
		in := d.InputSchema
		if in["type"] != "object" || in["additionalProperties"] != false {
			t.Fatalf("%s input schema %v", d.Name, in)
		}
		var props []string
		for k := range in["properties"].(map[string]any) {
			props = append(props, k)
		}
		sortStrings(props)
		if fmt.Sprint(props) != fmt.Sprint(w.props) || fmt.Sprint(in["required"]) != fmt.Sprint(w.required) {
			t.Fatalf("%s properties %v required %v", d.Name, props, in["required"])
		}
		// The validation keywords are spec 10's; the description is for a model.
		ps := maps.Clone(in["properties"].(map[string]any)["path"].(map[string]any))
		if d, _ := ps["description"].(string); !strings.Contains(d, "e.g.") {
			t.Fatalf("%s path schema has no description with an example: %v", d, ps)
		}
		delete(ps, "description")
		if !reflect.DeepEqual(ps, map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": w.minPath, "maxItems": 64}) {
			t.Fatalf("%s path schema %v", d.Name, ps)
		}
		if ev, ok := in["properties"].(map[string]any)["expectedVersion"].(map[string]any); ok {
			ev = maps.Clone(ev)
			delete(ev, "description")
			if !reflect.DeepEqual(ev, map[string]any{"type": "string", "minLength": 1, "maxLength": 256, "pattern": `^(?!\s)[\s\S]*\S$`}) {
				t.Fatalf("%s expectedVersion schema %v", d.Name, ev)
			}
		}
		if d.OutputSchema["type"] != "object" {
			t.Fatalf("%s output schema not an object", d.Name)
		}
		// The definition and the published projection are JSON.
		if _, err := json.Marshal(d.Publish()); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(hs[4].Definition.Description, "RE2") {
		t.Fatal("grep description must name the regex syntax")
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func TestParseArguments(t *testing.T) {
	t.Parallel()
	hs, _ := Tools(&recorder{ns: "files"})
	byName := map[string]kernel.ToolHandler{}
	for _, h := range hs {
		byName[h.Definition.Name] = h
	}
	long := strings.Repeat("v", 257)
	cases := []struct {
		tool, args string
		ok         bool
		want       string // JSON of the parsed arguments, when ok
	}{
		{"files.read", `{"path":["a","b.md"]}`, true, `{"path":["a","b.md"]}`},
		{"files.read", `{"path":[]}`, true, `{"path":[]}`},
		{"files.read", `{}`, false, ""},
		{"files.read", `{"path":null}`, false, ""},
		{"files.read", `{"path":"a"}`, false, ""},
		{"files.read", `{"path":[1]}`, false, ""},
		{"files.read", `{"path":[null]}`, false, ""},
		{"files.read", `{"path":["a"],"extra":true}`, false, ""},
		{"files.read", `{"path":["a"],"owner":{"kind":"human","userId":"x"}}`, false, ""},
		{"files.read", `{"path":[".."]}`, false, ""},
		{"files.read", `{"path":["."]}`, false, ""},
		{"files.read", `{"path":[""]}`, false, ""},
		{"files.read", `{"path":[" a"]}`, false, ""},
		{"files.read", `{"path":["a "]}`, false, ""},
		{"files.read", `{"path":["a/b"]}`, false, ""},
		{"files.read", `{"path":["a\\b"]}`, false, ""},
		{"files.read", `{"path":["a\u0000b"]}`, false, ""},
		{"files.read", `{"path":["a\u007f"]}`, false, ""},
		{"files.read", `{"path":["` + strings.Repeat("x", 257) + `"]}`, false, ""},
		{"files.read", `[]`, false, ""},
		{"files.read", `null`, false, ""},
		{"files.read", `{"Path":["a"]}`, false, ""},
		{"files.list", `{"path":` + jsonPath(65) + `}`, false, ""},
		{"files.list", `{"path":` + jsonPath(64) + `}`, true, ""},
		{"files.search", `{"path":[],"query":"  Atlas  "}`, true, `{"path":[],"query":"Atlas"}`},
		{"files.search", `{"path":[],"query":"x","limit":100}`, true, `{"path":[],"query":"x","limit":100}`},
		{"files.search", `{"path":[],"query":"x","limit":5.0}`, true, `{"path":[],"query":"x","limit":5}`},
		{"files.search", `{"path":[]}`, false, ""},
		{"files.search", `{"path":[],"query":"   "}`, false, ""},
		{"files.search", `{"path":[],"query":"x","limit":0}`, false, ""},
		{"files.search", `{"path":[],"query":"x","limit":101}`, false, ""},
		{"files.search", `{"path":[],"query":"x","limit":1.5}`, false, ""},
		{"files.search", `{"path":[],"query":"x","limit":"5"}`, false, ""},
		{"files.search", `{"path":[],"query":"` + strings.Repeat("q", 8193) + `"}`, false, ""},
		{"files.grep", `{"path":[],"pattern":" x "}`, true, `{"path":[],"pattern":" x ","mode":"literal","caseSensitive":false,"contextBefore":0,"contextAfter":0}`},
		{"files.grep", `{"path":["a"],"pattern":"s.ips","mode":"regex","caseSensitive":true,"contextBefore":100,"contextAfter":3}`, true,
			`{"path":["a"],"pattern":"s.ips","mode":"regex","caseSensitive":true,"contextBefore":100,"contextAfter":3}`},
		{"files.grep", `{"path":[],"pattern":""}`, false, ""},
		{"files.grep", `{"path":[],"pattern":"x","mode":"glob"}`, false, ""},
		{"files.grep", `{"path":[],"pattern":"x","contextAfter":101}`, false, ""},
		{"files.grep", `{"path":[],"pattern":"x","contextBefore":-1}`, false, ""},
		{"files.grep", `{"path":[],"pattern":"x","caseSensitive":"yes"}`, false, ""},
		{"files.grep", `{"path":[],"pattern":"x","caseSensitive":null}`, false, ""},
		{"files.grep", `{"path":[],"pattern":"x","mode":null}`, false, ""},
		{"files.create", `{"path":["a"],"content":"x"}`, true, `{"path":["a"],"content":"x"}`},
		{"files.create", `{"path":["a"],"content":{"b" : [1, 2.50]},"metadata":{"k":1}}`, true, `{"path":["a"],"content":{"b":[1,2.50]},"metadata":{"k":1}}`},
		{"files.create", `{"path":["a"],"content":null}`, true, `{"path":["a"],"content":null}`},
		{"files.create", `{"path":[],"content":"x"}`, false, ""},
		{"files.create", `{"path":["a"]}`, false, ""},
		{"files.create", `{"path":["a"],"content":1e999}`, false, ""},
		{"files.create", `{"path":["a"],"content":"x","metadata":[]}`, false, ""},
		{"files.create", `{"path":["a"],"content":"x","expectedVersion":"v"}`, false, ""},
		{"files.replace", `{"path":["a"],"content":"x","expectedVersion":"v1"}`, true, `{"path":["a"],"content":"x","expectedVersion":"v1"}`},
		{"files.replace", `{"path":["a"],"content":"x","expectedVersion":" v1"}`, false, ""},
		{"files.replace", `{"path":["a"],"content":"x","expectedVersion":"v1 "}`, false, ""},
		{"files.replace", `{"path":["a"],"content":"x","expectedVersion":""}`, false, ""},
		{"files.replace", `{"path":["a"],"content":"x","expectedVersion":"` + long + `"}`, false, ""},
		{"files.replace", `{"path":["a"],"content":"x","expectedVersion":"` + strings.Repeat("é", 256) + `"}`, true, ""},
		{"files.replace", `{"path":["a"],"content":"x","metadata":{}}`, false, ""},
		{"files.append", `{"path":["a"],"content":"x","expectedVersion":"v","metadata":{}}`, true, `{"path":["a"],"content":"x","expectedVersion":"v","metadata":{}}`},
		{"files.delete", `{"path":["a"]}`, true, `{"path":["a"],"recursive":false}`},
		{"files.delete", `{"path":["a"],"recursive":true,"expectedVersion":"v"}`, true, `{"path":["a"],"expectedVersion":"v","recursive":true}`},
		{"files.delete", `{"path":[]}`, false, ""},
		{"files.delete", `{"path":["a"],"recursive":1}`, false, ""},
		{"files.snapshot.create", `{"path":[],"label":" L "}`, true, `{"path":[],"label":"L"}`},
		{"files.snapshot.create", `{"path":[]}`, true, `{"path":[]}`},
		{"files.snapshot.create", `{"path":[],"label":"  "}`, false, ""},
		{"files.snapshot.create", `{"path":[],"label":"` + strings.Repeat("l", 257) + `"}`, false, ""},
		{"files.snapshot.list", `{"path":[],"limit":1}`, true, `{"path":[],"limit":1}`},
		{"files.snapshot.list", `{"path":[],"limit":0}`, false, ""},
		{"files.snapshot.restore", `{"path":["a"],"snapshotId":" s-1 "}`, true, `{"path":["a"],"snapshotId":"s-1"}`},
		{"files.snapshot.restore", `{"path":[],"snapshotId":"s"}`, false, ""},
		{"files.snapshot.restore", `{"path":["a"]}`, false, ""},
		{"files.snapshot.restore", `{"path":["a"],"snapshotId":"  "}`, false, ""},
	}
	for i, c := range cases {
		t.Run(fmt.Sprintf("%d_%s", i, c.tool), func(t *testing.T) {
			got, err := byName[c.tool].ParseArguments(json.RawMessage(c.args))
			if c.ok != (err == nil) {
				t.Fatalf("%s %s: err = %v", c.tool, c.args, err)
			}
			if err != nil {
				var ce *kernel.ContractError
				if !errors.As(err, &ce) {
					t.Fatalf("parse error is not a ContractError: %T", err)
				}
				if got != nil {
					t.Fatal("partial result beside an error")
				}
				return
			}
			b, _ := json.Marshal(got)
			if c.want != "" && string(b) != c.want {
				t.Fatalf("parsed %s, want %s", b, c.want)
			}
		})
	}
}

func jsonPath(n int) string {
	s := make([]string, n)
	for i := range s {
		s[i] = "d"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// TestToolInvokeBuildsOperation checks the requirement and the provider input of each
// tool against spec 10 §4, over a provider that only records.
func TestToolInvokeBuildsOperation(t *testing.T) {
	t.Parallel()
	rec := &recorder{ns: "files"}
	hs, _ := Tools(rec)
	owner := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	actx := kernel.AccessContext{World: "w", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "bob"}, Authority: owner,
		Owner: owner, Purpose: "p", TraceID: "t", Now: "2026-09-01T12:00:00.000Z"}
	cases := map[string]struct {
		args  string
		input string
	}{
		"files.list":             {`{"path":["a"]}`, `null`},
		"files.stat":             {`{"path":["a"]}`, `null`},
		"files.read":             {`{"path":["a"]}`, `null`},
		"files.search":           {`{"path":["a"],"query":" q "}`, `{"query":"q"}`},
		"files.grep":             {`{"path":["a"],"pattern":"p"}`, `{"pattern":"p","mode":"literal","caseSensitive":false,"contextBefore":0,"contextAfter":0}`},
		"files.create":           {`{"path":["a"],"content":{"x":1},"metadata":{"m":true}}`, `{"content":{"x":1},"metadata":{"m":true}}`},
		"files.replace":          {`{"path":["a"],"content":"c","expectedVersion":"v"}`, `{"content":"c","expectedVersion":"v"}`},
		"files.append":           {`{"path":["a"],"content":"c"}`, `{"content":"c"}`},
		"files.delete":           {`{"path":["a"]}`, `{"recursive":false}`},
		"files.snapshot.create":  {`{"path":["a"]}`, `null`},
		"files.snapshot.list":    {`{"path":["a"],"limit":3}`, `{"limit":3}`},
		"files.snapshot.restore": {`{"path":["a"],"snapshotId":"s"}`, `{"snapshotId":"s"}`},
	}
	for _, h := range hs {
		c := cases[h.Definition.Name]
		parsed, err := h.ParseArguments(json.RawMessage(c.args))
		if err != nil {
			t.Fatal(err)
		}
		call := kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c1", Tool: h.Definition.Name, Arguments: json.RawMessage(c.args)}, Parsed: parsed}
		req, err := h.ResolveRequirement(actx, call)
		if err != nil {
			t.Fatal(err)
		}
		if req.Action != h.Definition.RequiredCapability.Action || fmt.Sprint(req.Resource.Path) != "[a]" ||
			req.Resource.Namespace != "files" || req.Resource.Owner == nil || *req.Resource.Owner != owner {
			t.Fatalf("%s requirement %+v", h.Definition.Name, req)
		}
		// The kernel may hand back the parsed arguments as generic JSON.
		var generic map[string]any
		b, _ := json.Marshal(parsed)
		json.Unmarshal(b, &generic)
		for _, p := range []any{parsed, generic} {
			call.Parsed = p
			res, err := h.Invoke(context.Background(), actx, call)
			if err != nil || res.Status != kernel.StatusSucceeded || res.CallID != "c1" || res.Tool != h.Definition.Name {
				t.Fatalf("%s invoke: %+v %v", h.Definition.Name, res, err)
			}
			op := rec.ops[len(rec.ops)-1]
			in, _ := json.Marshal(op.Input)
			if string(in) != c.input || op.OperationID != "c1" || op.Action != req.Action ||
				fmt.Sprint(op.Resource.Path) != "[a]" || *op.Resource.Owner != owner {
				t.Fatalf("%s operation %+v input %s, want %s", h.Definition.Name, op, in, c.input)
			}
		}
	}
}
