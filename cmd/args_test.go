package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// testDef is a tool definition whose input schema has one property of each kind the
// coercion of -a key=value knows.
func testDef() *kernel.ToolDefinition {
	return &kernel.ToolDefinition{Name: "t.x", InputSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"path":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
			"pathspec": map[string]any{"type": "array", "items": map[string]any{"type": "array", "items": map[string]any{"type": "string"}}},
			"query":    map[string]any{"type": "string"},
			"limit":    map[string]any{"type": "integer"},
			"ratio":    map[string]any{"type": "number"},
			"staged":   map[string]any{"type": "boolean"},
			"content":  map[string]any{"description": "untyped"},
			"meta":     map[string]any{"type": "object"},
			"nullable": map[string]any{"type": []any{"null", "string"}},
		},
	}}
}

func TestCoerceArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		pairs []string
		want  string
	}{
		{[]string{"path=a/b/c"}, `{"path":["a","b","c"]}`},
		{[]string{"path="}, `{"path":[]}`},
		{[]string{"pathspec=a/b,c"}, `{"pathspec":[["a","b"],["c"]]}`},
		{[]string{"pathspec="}, `{"pathspec":[]}`},
		{[]string{"query=42"}, `{"query":"42"}`},
		{[]string{"content=true"}, `{"content":"true"}`},
		{[]string{"limit=5"}, `{"limit":5}`},
		{[]string{"ratio=0.5"}, `{"ratio":0.5}`},
		{[]string{"staged=true"}, `{"staged":true}`},
		{[]string{"meta={\"a\":1}"}, `{"meta":{"a":1}}`},
		{[]string{"nullable=7"}, `{"nullable":"7"}`},
		{[]string{"unknown=1"}, `{"unknown":"1"}`},
		{[]string{"query=a=b"}, `{"query":"a=b"}`},
		{nil, `{}`},
	} {
		a := &ArgsOptions{Pairs: tc.pairs}
		got, err := a.build(nil, testDef())
		if err != nil {
			t.Errorf("%v: %v", tc.pairs, err)
			continue
		}
		if string(got) != tc.want {
			t.Errorf("%v: got %s, want %s", tc.pairs, got, tc.want)
		}
	}
}

func TestArgsErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts ArgsOptions
		kind string
		text string
	}{
		{"bad integer", ArgsOptions{Pairs: []string{"limit=five"}}, CodeInvalidRequest, "limit"},
		{"bad boolean", ArgsOptions{Pairs: []string{"staged=yes"}}, CodeInvalidRequest, "staged"},
		{"bad number", ArgsOptions{Pairs: []string{"ratio=NaN"}}, CodeInvalidRequest, "ratio"},
		{"bad object", ArgsOptions{Pairs: []string{"meta={"}}, CodeInvalidRequest, "meta"},
		{"no equals", ArgsOptions{Pairs: []string{"path"}}, CodeInvalidRequest, "key=value"},
		{"twice", ArgsOptions{Pairs: []string{"path=a", "path=b"}}, CodeInvalidRequest, "twice"},
		{"not json", ArgsOptions{JSON: "{", jsonSet: true}, CodeInvalidArguments, "not valid JSON"},
		{"array", ArgsOptions{JSON: "[]", jsonSet: true}, CodeInvalidArguments, "not an array"},
		{"empty", ArgsOptions{JSON: "", jsonSet: true}, CodeInvalidArguments, "not valid JSON"},
		{"two values", ArgsOptions{JSON: "{} 1", jsonSet: true}, CodeInvalidArguments, "more than one"},
		{"too large", ArgsOptions{JSON: `{"a":"` + strings.Repeat("x", MaxArgumentBytes) + `"}`, jsonSet: true}, CodeInvalidArguments, "4 MiB"},
		{"both sources", ArgsOptions{JSON: "{}", jsonSet: true, File: "-"}, CodeInvalidRequest, "together"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.opts.build(strings.NewReader("{}"), testDef())
			var ee *ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("got %v, want an *ExitError", err)
			}
			if ee.ExitCode != ExitUsage || ee.ErrorCode != tc.kind || !strings.Contains(ee.Message, tc.text) {
				t.Fatalf("got exit %d %s %q, want exit 2 %s containing %q", ee.ExitCode, ee.ErrorCode, ee.Message, tc.kind, tc.text)
			}
		})
	}
}

func TestArgsFileLimit(t *testing.T) {
	t.Parallel()
	big := `{"a":"` + strings.Repeat("x", MaxArgumentBytes) + `"}`
	a := &ArgsOptions{File: "-"}
	if _, err := a.build(strings.NewReader(big), nil); err == nil || !strings.Contains(err.Error(), "4 MiB") {
		t.Fatalf("4 MiB+ stdin accepted: %v", err)
	}
	ok := `{"a":"` + strings.Repeat("x", MaxArgumentBytes-16) + `"}`
	if _, err := a.build(strings.NewReader(ok), nil); err != nil {
		t.Fatalf("arguments under 4 MiB refused: %v", err)
	}
}

func TestArgsMergePairsOverJSON(t *testing.T) {
	t.Parallel()
	a := &ArgsOptions{JSON: `{"path":["x"],"limit":1}`, jsonSet: true, Pairs: []string{"limit=2"}}
	got, err := a.build(nil, testDef())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, map[string]any{"path": []any{"x"}, "limit": 2.0}) {
		t.Fatalf("got %v", m)
	}
}

// FuzzArgs: building arguments never panics, and succeeds only with one JSON object.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{`{"path":["a"]}`, `[]`, `null`, `{"a":1} {}`, "", `{"a":`, `"s"`} {
		f.Add(s, "path=a/b")
	}
	f.Add(`{}`, "limit=1e3")
	f.Add(`{}`, "pathspec=a,,b/")
	f.Fuzz(func(t *testing.T, raw, pair string) {
		a := &ArgsOptions{JSON: raw, jsonSet: true, Pairs: []string{pair}}
		got, err := a.build(nil, testDef())
		if err != nil {
			if got != nil {
				t.Fatalf("result beside an error: %s", got)
			}
			return
		}
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(got))
		if err := d.Decode(&m); err != nil || m == nil {
			t.Fatalf("result is not a JSON object: %s (%v)", got, err)
		}
	})
}
