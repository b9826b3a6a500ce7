package repoplane

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// stubProvider records the operations it receives and answers with a fixed result.
type stubProvider struct {
	ns     string
	ops    []kernel.ResourceOperation
	result kernel.ResourceResult
	err    error
}

func (s *stubProvider) Namespace() string { return s.ns }
func (s *stubProvider) Invoke(_ context.Context, op kernel.ResourceOperation) (kernel.ResourceResult, error) {
	s.ops = append(s.ops, op)
	r := s.result
	if r.OperationID == "" {
		r.OperationID = op.OperationID
	}
	return r, s.err
}

func toolsByName(t *testing.T, p kernel.ResourceProvider) map[string]kernel.ToolHandler {
	t.Helper()
	hs, err := Tools(p)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]kernel.ToolHandler{}
	for _, h := range hs {
		m[h.Definition.Name] = h
	}
	return m
}

func TestToolsRequiresRepoNamespace(t *testing.T) {
	if _, err := Tools(&stubProvider{ns: "files"}); err == nil {
		t.Fatal("a files provider was accepted")
	}
	if _, err := Tools(nil); err == nil {
		t.Fatal("a nil provider was accepted")
	}
}

func TestToolDefinitions(t *testing.T) {
	hs, err := Tools(&stubProvider{ns: "repo"})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name, action string
		rw           kernel.ReadWrite
		required     []any
		props        []string
	}{
		{"repo.status", "status", kernel.ClassRead, []any{"path"}, []string{"path"}},
		{"repo.diff", "diff", kernel.ClassRead, []any{"path"}, []string{"path", "pathspec", "staged"}},
		{"repo.log", "log", kernel.ClassRead, []any{"path"}, []string{"maxCount", "path"}},
		{"repo.stage", "stage", kernel.ClassWrite, []any{"path", "pathspec"}, []string{"path", "pathspec"}},
		{"repo.commit", "commit", kernel.ClassWrite, []any{"path", "message"}, []string{"message", "path"}},
	}
	if len(hs) != len(want) {
		t.Fatalf("%d tools", len(hs))
	}
	for i, w := range want {
		d := hs[i].Definition
		if err := d.Validate(); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
		if d.Name != w.name || d.Namespace != "repo" || d.Source != "sharedos" || d.ReadWrite != w.rw {
			t.Fatalf("%s: %+v", w.name, d)
		}
		ro := d.Annotations != nil && d.Annotations.ReadOnly != nil && *d.Annotations.ReadOnly
		if ro != (w.rw == kernel.ClassRead) {
			t.Fatalf("%s: readOnly annotation %v", w.name, ro)
		}
		rc := d.RequiredCapability
		if rc.Action != w.action || rc.Resource.Namespace != "repo" || len(rc.Resource.Path) != 0 || rc.Resource.Owner != nil {
			t.Fatalf("%s: ceiling %+v", w.name, rc)
		}
		in := d.InputSchema
		if in["type"] != "object" || in["additionalProperties"] != false || !reflect.DeepEqual(in["required"], w.required) {
			t.Fatalf("%s: input schema %v", w.name, in)
		}
		var props []string
		for k := range in["properties"].(map[string]any) {
			props = append(props, k)
		}
		sortStrings(props)
		if !reflect.DeepEqual(props, w.props) {
			t.Fatalf("%s: properties %v", w.name, props)
		}
		if d.OutputSchema["type"] != "object" || d.OutputSchema["additionalProperties"] != false {
			t.Fatalf("%s: output schema %v", w.name, d.OutputSchema)
		}
		if _, err := json.Marshal(d); err != nil {
			t.Fatalf("%s: %v", w.name, err)
		}
	}
	// the exact JSON Schemas of spec 10 §5
	path := `{"items":{"type":"string"},"maxItems":64,"minItems":0,"type":"array"}`
	pathspec := `{"items":{"items":{"type":"string"},"maxItems":64,"minItems":1,"type":"array"},"maxItems":64,"minItems":1,"type":"array"}`
	// The validation keywords are spec 10's; the description (for a model) is beside them.
	schemaJSON := func(v any) string {
		m := maps.Clone(v.(map[string]any))
		if d, _ := m["description"].(string); d == "" {
			return "no description"
		}
		delete(m, "description")
		b, _ := json.Marshal(m)
		return string(b)
	}
	props := func(i int) map[string]any { return hs[i].Definition.InputSchema["properties"].(map[string]any) }
	for i := range hs {
		if got := schemaJSON(props(i)["path"]); got != path {
			t.Fatalf("%s path schema %s", hs[i].Definition.Name, got)
		}
	}
	for _, c := range []struct {
		i          int
		prop, want string
	}{
		{1, "pathspec", pathspec}, {3, "pathspec", pathspec}, {1, "staged", `{"type":"boolean"}`},
		{2, "maxCount", `{"maximum":100,"minimum":1,"type":"integer"}`},
		{4, "message", `{"maxLength":500,"minLength":1,"type":"string"}`},
	} {
		if got := schemaJSON(props(c.i)[c.prop]); got != c.want {
			t.Fatalf("%s %s schema %s", hs[c.i].Definition.Name, c.prop, got)
		}
	}
	// two calls give independent schema maps
	hs2, _ := Tools(&stubProvider{ns: "repo"})
	hs2[0].Definition.InputSchema["type"] = "mutated"
	if hs[0].Definition.InputSchema["type"] != "object" {
		t.Fatal("schemas are shared between calls")
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
	tools := toolsByName(t, &stubProvider{ns: "repo"})
	long := strings.Repeat("x", 500)
	cases := []struct {
		tool, args string
		want       any // nil: must fail
	}{
		{"repo.status", `{"path":[]}`, StatusArgs{Path: []string{}}},
		{"repo.status", `{"path":["a","b"]}`, StatusArgs{Path: []string{"a", "b"}}},
		{"repo.status", `{}`, nil},
		{"repo.status", `{"path":null}`, nil},
		{"repo.status", `{"path":[],"x":1}`, nil},
		{"repo.status", `{"Path":[]}`, nil},
		{"repo.status", `{"path":[".."]}`, nil},
		{"repo.status", `{"path":[" a"]}`, nil},
		{"repo.status", `{"path":["a/b"]}`, nil},
		{"repo.status", `{"path":[""]}`, nil},
		{"repo.status", `{"path":"a"}`, nil},
		{"repo.status", `[]`, nil},
		{"repo.status", `{"path":[` + strings.TrimSuffix(strings.Repeat(`"a",`, 65), ",") + `]}`, nil},
		{"repo.diff", `{"path":[]}`, DiffArgs{Path: []string{}}},
		{"repo.diff", `{"path":[],"staged":true,"pathspec":[["src"],["a","b.go"]]}`,
			DiffArgs{Path: []string{}, Staged: true, Pathspec: [][]string{{"src"}, {"a", "b.go"}}}},
		{"repo.diff", `{"path":[],"staged":"true"}`, nil},
		{"repo.diff", `{"path":[],"staged":null}`, nil},
		{"repo.diff", `{"path":[],"pathspec":[]}`, nil},
		{"repo.diff", `{"path":[],"pathspec":[[]]}`, nil},
		{"repo.diff", `{"path":[],"pathspec":null}`, nil},
		{"repo.diff", `{"path":[],"pathspec":[["a","."]]}`, nil},
		{"repo.diff", `{"path":[],"pathspec":[` + strings.TrimSuffix(strings.Repeat(`["a"],`, 65), ",") + `]}`, nil},
		{"repo.log", `{"path":[]}`, LogArgs{Path: []string{}}},
		{"repo.log", `{"path":[],"maxCount":5}`, LogArgs{Path: []string{}, MaxCount: intPtr(5)}},
		{"repo.log", `{"path":[],"maxCount":100.0}`, LogArgs{Path: []string{}, MaxCount: intPtr(100)}},
		{"repo.log", `{"path":[],"maxCount":0}`, nil},
		{"repo.log", `{"path":[],"maxCount":101}`, nil},
		{"repo.log", `{"path":[],"maxCount":1.5}`, nil},
		{"repo.log", `{"path":[],"maxCount":"3"}`, nil},
		{"repo.log", `{"path":[],"maxCount":null}`, nil},
		{"repo.stage", `{"path":[],"pathspec":[["a"]]}`, StageArgs{Path: []string{}, Pathspec: [][]string{{"a"}}}},
		{"repo.stage", `{"path":[]}`, nil},
		{"repo.stage", `{"path":[],"pathspec":[["a"]],"staged":true}`, nil},
		{"repo.commit", `{"path":["r"],"message":"  fix: a bug\t(x)  "}`, CommitArgs{Path: []string{"r"}, Message: "fix: a bug\t(x)"}},
		{"repo.commit", `{"path":[],"message":"\n msg \n"}`, CommitArgs{Path: []string{}, Message: "msg"}},
		{"repo.commit", `{"path":[],"message":"` + long + `"}`, CommitArgs{Path: []string{}, Message: long}},
		{"repo.commit", `{"path":[],"message":"` + long + `x"}`, nil},
		{"repo.commit", `{"path":[],"message":"   "}`, nil},
		{"repo.commit", `{"path":[],"message":"two\nlines"}`, nil},
		{"repo.commit", `{"path":[],"message":"bell\u0007"}`, nil},
		{"repo.commit", `{"path":[],"message":"del\u007f"}`, nil},
		{"repo.commit", `{"path":[],"message":5}`, nil},
		{"repo.commit", `{"path":[]}`, nil},
	}
	for _, c := range cases {
		t.Run(c.tool+" "+c.args[:min(len(c.args), 60)], func(t *testing.T) {
			got, err := tools[c.tool].ParseArguments(json.RawMessage(c.args))
			if c.want == nil {
				if err == nil || got != nil {
					t.Fatalf("accepted: %#v", got)
				}
				if !errors.Is(err, kernel.ErrContract) {
					t.Fatalf("error %v is not a contract error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %#v, want %#v", got, c.want)
			}
			b, err := json.Marshal(got)
			if err != nil || b[0] != '{' {
				t.Fatalf("parsed arguments are not a JSON object: %s %v", b, err)
			}
		})
	}
}

func intPtr(n int) *int { return &n }

func TestResolveAndInvoke(t *testing.T) {
	stub := &stubProvider{ns: "repo", result: kernel.ResourceResult{Status: kernel.StatusSucceeded,
		Output: map[string]any{"ok": true}, CompletedAt: "2025-01-01T00:00:00.000Z"}}
	tools := toolsByName(t, stub)
	actx := kernel.AccessContext{World: "w", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "a"},
		Authority: kernel.Address{Kind: kernel.KindHuman, ID: "h"}, Owner: kernel.Address{Kind: kernel.KindHuman, ID: "o"},
		Now: "2025-01-01T00:00:00.000Z"}
	cases := []struct {
		tool, args string
		input      any
	}{
		{"repo.status", `{"path":["r"]}`, nil},
		{"repo.diff", `{"path":["r"]}`, DiffInput{}},
		{"repo.diff", `{"path":["r"],"staged":true,"pathspec":[["a"]]}`, DiffInput{Staged: true, Pathspec: [][]string{{"a"}}}},
		{"repo.log", `{"path":["r"]}`, nil},
		{"repo.log", `{"path":["r"],"maxCount":7}`, LogInput{MaxCount: 7}},
		{"repo.stage", `{"path":["r"],"pathspec":[["a","b"]]}`, StageInput{Pathspec: [][]string{{"a", "b"}}}},
		{"repo.commit", `{"path":["r"],"message":" m "}`, CommitInput{Message: "m"}},
	}
	for _, c := range cases {
		h := tools[c.tool]
		parsed, err := h.ParseArguments(json.RawMessage(c.args))
		if err != nil {
			t.Fatal(err)
		}
		call := kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "call-1", Tool: c.tool, Arguments: json.RawMessage(c.args),
			TraceID: "t", RequestedAt: actx.Now}, Parsed: parsed}
		req, err := h.ResolveRequirement(actx, call)
		if err != nil {
			t.Fatal(err)
		}
		if req.Action != h.Definition.RequiredCapability.Action || req.Resource.Namespace != "repo" ||
			!reflect.DeepEqual(req.Resource.Path, []string{"r"}) || req.Resource.Owner == nil || *req.Resource.Owner != actx.Owner {
			t.Fatalf("%s: requirement %+v", c.tool, req)
		}
		stub.ops = nil
		res, err := h.Invoke(context.Background(), actx, call)
		if err != nil {
			t.Fatal(err)
		}
		if res.CallID != "call-1" || res.Tool != c.tool || res.Status != kernel.StatusSucceeded || res.Check() != nil {
			t.Fatalf("%s: result %+v", c.tool, res)
		}
		op := stub.ops[0]
		if op.OperationID != "call-1" || op.Action != req.Action || !reflect.DeepEqual(op.Resource, req.Resource) ||
			op.Context.Actor != actx.Actor {
			t.Fatalf("%s: operation %+v", c.tool, op)
		}
		if !reflect.DeepEqual(op.Input, c.input) {
			t.Fatalf("%s: input %#v, want %#v", c.tool, op.Input, c.input)
		}
	}
	// the provider-input JSON of spec 10 §5
	for _, c := range []struct {
		in   any
		want string
	}{
		{DiffInput{}, `{"staged":false}`},
		{DiffInput{Staged: true, Pathspec: [][]string{{"a"}}}, `{"staged":true,"pathspec":[["a"]]}`},
		{LogInput{MaxCount: 3}, `{"maxCount":3}`},
		{StageInput{Pathspec: [][]string{{"a"}}}, `{"pathspec":[["a"]]}`},
		{CommitInput{Message: "m"}, `{"message":"m"}`},
	} {
		if b, _ := json.Marshal(c.in); string(b) != c.want {
			t.Fatalf("%T marshals to %s, want %s", c.in, b, c.want)
		}
	}
	// a provider failure result is mapped; a provider Go error is returned as an error
	stub.result = kernel.ResourceResult{Status: kernel.StatusFailed, Error: &kernel.ProtocolError{Code: "repo_busy",
		Message: "busy", Retryable: kernel.BoolPtr(true)}, CompletedAt: "2025-01-01T00:00:00.000Z"}
	h := tools["repo.status"]
	parsed, _ := h.ParseArguments(json.RawMessage(`{"path":[]}`))
	call := kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c2", Tool: "repo.status"}, Parsed: parsed}
	res, err := h.Invoke(context.Background(), actx, call)
	if err != nil || res.Status != kernel.StatusFailed || res.Error.Code != "repo_busy" || !*res.Error.Retryable {
		t.Fatalf("failure mapping: %+v %v", res, err)
	}
	stub.err = errors.New("boom")
	if _, err := h.Invoke(context.Background(), actx, call); err == nil {
		t.Fatal("provider error swallowed")
	}
	// parsed arguments cloned through JSON are re-validated, never trusted
	if req, err := h.ResolveRequirement(actx, kernel.ParsedToolCall{Parsed: map[string]any{"path": []any{"r"}}}); err != nil ||
		!reflect.DeepEqual(req.Resource.Path, []string{"r"}) {
		t.Fatalf("JSON-shaped parsed arguments: %+v %v", req, err)
	}
	for _, bad := range []any{map[string]any{"path": []any{".."}}, map[string]any{"path": []any{}, "x": 1}, "str", nil} {
		if _, err := h.ResolveRequirement(actx, kernel.ParsedToolCall{Parsed: bad}); err == nil {
			t.Fatalf("parsed arguments %#v accepted", bad)
		}
		if _, err := h.Invoke(context.Background(), actx, kernel.ParsedToolCall{Parsed: bad}); err == nil {
			t.Fatalf("parsed arguments %#v invoked", bad)
		}
	}
}
