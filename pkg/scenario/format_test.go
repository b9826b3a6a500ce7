package scenario

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const validHead = `version: 1
files: {"a.md": "hi"}
grants:
  - id: g1
    subject: agent:a
    issuer: human:o
    capabilities:
      - resource: {namespace: files, path: [], owner: human:o}
        actions: [read]
        scope: descendants
context: {as: agent:a, owner: human:o, now: 2026-06-01T09:00:00Z}
`

// TestParseErrors: every kind of bad input is refused as a whole with file:line and a
// message naming what is wrong.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src, want string
	}{
		{"unknown top key", "version: 1\nbogus: 1\ntests: []\n", "s.yaml:2: scenario: unknown key \"bogus\""},
		{"suggests a key", "version: 1\ntest: []\n", "did you mean tests?"},
		{"missing version", "tests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:1: scenario: missing version"},
		{"wrong version", "version: 2\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:1: version: want 1"},
		{"missing tests", "version: 1\n", "missing tests"},
		{"empty tests", "version: 1\ntests: []\n", "s.yaml:2: tests: want a non-empty list"},
		{"bad address", "version: 1\ncontext: {as: robot:x}\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:2: context.as: bad address \"robot:x\""},
		{"bad instant", "version: 1\ncontext: {now: yesterday}\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:2: context.now: bad instant \"yesterday\""},
		{"bad instant per step", validHead + "tests:\n  - name: x\n    steps:\n      - list: {}\n        now: 2026-13-01T00:00:00Z\n", "s.yaml:16: tests[0].steps[0].now: bad instant"},
		{"unknown step key", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        argz: {}\n", "s.yaml:16: tests[0].steps[0]: unknown key \"argz\" (did you mean args?)"},
		{"two kinds", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        list: {}\n", "s.yaml:16: tests[0].steps[0]: one step is one of"},
		{"no kind", validHead + "tests:\n  - name: x\n    steps:\n      - args: {}\n", "s.yaml:15: tests[0].steps[0]: missing the step kind"},
		{"unknown expect key", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        expect: {statu: denied}\n", "s.yaml:16: tests[0].steps[0].expect: unknown key \"statu\" (did you mean status?)"},
		{"expect key of another kind", validHead + "tests:\n  - name: x\n    steps:\n      - list: {}\n        expect: {status: denied}\n", "unknown key \"status\""},
		{"bad status", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        expect: {status: refused}\n", "s.yaml:16: tests[0].steps[0].expect.status: \"refused\" is not one of succeeded, denied, failed"},
		{"bad gate", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        expect: {gate: door}\n", "expect.gate: \"door\" is not one of"},
		{"exit out of range", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        expect: {exit: 9}\n", "expect.exit: the CLI's exit codes are 0 to 5"},
		{"exit not an integer", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        expect: {exit: three}\n", "expect.exit: want an integer"},
		{"args not a mapping", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        args: [a]\n", "s.yaml:16: tests[0].steps[0].args: want a mapping"},
		{"args on list", validHead + "tests:\n  - name: x\n    steps:\n      - list: {}\n        args: {}\n", "args belongs to a call or explain step"},
		{"list options", validHead + "tests:\n  - name: x\n    steps:\n      - list: {all: true}\n", "tests[0].steps[0].list: unknown key \"all\""},
		{"empty patch", validHead + "tests:\n  - name: x\n    steps:\n      - namespaces: {}\n", "an empty patch"},
		{"bad namespace", validHead + "tests:\n  - name: x\n    steps:\n      - namespaces: {enable: [files, files]}\n", "tests[0].steps[0].namespaces.enable: " + `1: namespace "files" is listed twice`},
		{"duplicate key", "version: 1\nversion: 1\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:2: scenario: duplicate key \"version\""},
		{"duplicate test", validHead + "tests:\n  - {name: x, steps: [{list: {}}]}\n  - {name: x, steps: [{list: {}}]}\n", "s.yaml:14: tests[1]: duplicate test name \"x\""},
		{"missing name", validHead + "tests:\n  - {steps: [{list: {}}]}\n", "s.yaml:13: tests[0]: missing name"},
		{"missing steps", validHead + "tests:\n  - {name: x}\n", "missing steps"},
		{"alias", "version: 1\ncontext: &c {as: agent:a}\ntests: [{name: x, steps: [{list: {}}]}]\n", "anchors (&c) are not supported"},
		{"yaml syntax", "version: 1\ntests: [\n", "s.yaml:"},
		{"two documents", "version: 1\ntests: [{name: x, steps: [{list: {}}]}]\n---\nversion: 1\n", "more than one YAML document"},
		{"control character", "version: 1\nname: a\x7fb\n", "s.yaml:2: control character U+007F is not allowed"},
		{"invalid utf8", "version: 1\nname: \xff\n", "s.yaml:2: invalid UTF-8"},
		{"inline grant refused", "version: 1\ngrants:\n  - id: g1\n    subject: agent:a\n    issuer: human:o\n    capabilities: []\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:3: inline grant: grant \"g1\""},
		{"inline grant without id", "version: 1\ngrants:\n  - subject: agent:a\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:3: grants[0]: an inline grant needs an id"},
		{"missing grant file", "version: 1\ngrants: [nowhere.yaml]\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:2: grants[0]: grant file nowhere.yaml"},
		{"missing root", "version: 1\nroot: nowhere\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:2: root: nowhere is not a directory"},
		{"escaping file path", "version: 1\nfiles: {\"../x\": a}\ntests: [{name: x, steps: [{list: {}}]}]\n", "s.yaml:2: files[\"../x\"]: not a relative slash-separated path"},
		{"git dir in files", "version: 1\nfiles: {\"a/.git/config\": a}\ntests: [{name: x, steps: [{list: {}}]}]\n", "not a relative slash-separated path"},
		{"bad jsonpath", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        expect: {output: {jsonpath: {\"content\": hi}}}\n", "jsonpath: \"content\": a path starts with $"},
		{"bad fix kind", validHead + "tests:\n  - name: x\n    steps:\n      - explain: files.read\n        expect: {fixes: [pray]}\n", "\"pray\" is not one of"},
		{"bad audit key", validHead + "tests:\n  - name: x\n    steps:\n      - audit: {}\n        expect: {contains: [{kind: x}]}\n", "expect.contains[0]: unknown key \"kind\""},
		{"empty audit match", validHead + "tests:\n  - name: x\n    steps:\n      - audit: {}\n        expect: {contains: [{}]}\n", "an empty record matches anything"},
		{"json unknown key", "{\"version\": 1,\n \"tset\": []}\n", "s.yaml:2: scenario: unknown key \"tset\""},
		{"binary value", validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        args: {path: !!binary aGk=}\n", "binary values are not supported"},
		{"custom tag", validHead + "tests:\n  - name: x\n    steps:\n      - call: !shell files.read\n", "custom tag !shell is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			p := filepath.Join(dir, "s.yaml")
			if err := os.WriteFile(p, []byte(c.src), 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := ParseFile(p)
			if err == nil {
				t.Fatalf("parsed; want an error containing %q", c.want)
			}
			if f != nil {
				t.Fatalf("a partial file beside the error %v", err)
			}
			msg := strings.ReplaceAll(err.Error(), p, "s.yaml")
			if !strings.Contains(msg, c.want) {
				t.Fatalf("error %q\nwant it to contain %q", msg, c.want)
			}
			if strings.Contains(msg, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
		})
	}
}

// TestParseValid: a complete file parses into what it says.
func TestParseValid(t *testing.T) {
	t.Parallel()
	f, err := ParseFile("testdata/triage.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if f.Name != "triage agent" || len(f.Tests) != 2 || len(f.GrantFiles) != 1 || f.InlineGrants == nil ||
		f.Context.As != "agent:helper" || f.Context.Now != "2026-06-01T09:00:00Z" || len(f.Files) != 4 {
		t.Fatalf("parsed %+v", f)
	}
	st := f.Tests[0].Steps[1]
	if st.Kind != KindCall || st.Tool != "files.read" || string(st.Args) != `{"path":["Finance","q3.md"]}` ||
		*st.Expect.Code != "no_matching_grant" || st.Expect.Rejected["g-read-workspace"] != "capability" {
		t.Fatalf("step %+v", st)
	}
	if f.Tests[1].Context.Now != "2026-06-01T10:00:00Z" {
		t.Fatalf("per-test now: %+v", f.Tests[1].Context)
	}
	if g := f.InlineGrantLines["g-draft-once"]; g != 6 {
		t.Fatalf("inline grant line %d, want 6", g)
	}
}

// FuzzParse: no panic, and never a partial file beside an error.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/triage.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(validHead + "tests:\n  - name: x\n    steps:\n      - call: files.read\n        args: {path: [a.md]}\n        expect: {status: succeeded, output: {jsonpath: {\"$.content\": hi}}}\n"))
	f.Add([]byte("{\"version\": 1, \"tests\": [{\"name\": \"x\", \"steps\": [{\"list\": {}}]}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(filepath.Join("testdata", "fuzz.yaml"), data)
		if (file == nil) == (err == nil) {
			t.Fatalf("file %v and error %v", file != nil, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("multi-line error %q", err)
		}
	})
}

// TestJSONPath: the supported subset and its refusals.
func TestJSONPath(t *testing.T) {
	t.Parallel()
	v := map[string]any{"entries": []any{map[string]any{"name": "a.md", "size": 3}}, "odd key": true}
	for _, c := range []struct {
		path string
		want any
		ok   bool
	}{
		{"$", nil, true}, {"$.entries[0].name", "a.md", true}, {"$['odd key']", true, true}, {`$["entries"][0]["size"]`, 3, true},
		{"$.entries[1]", nil, false}, {"$.nope", nil, false}, {"$.entries.name", nil, false},
	} {
		got, ok := lookupPath(v, c.path)
		if ok != c.ok || ok && c.want != nil && !jsonEqual(got, c.want) {
			t.Errorf("%s: got %v %v, want %v %v", c.path, got, ok, c.want, c.ok)
		}
	}
	for _, bad := range []string{"entries", "$.*", "$[", "$[-1]", "$..x", "$.a[?(@.b)]"} {
		if _, err := parseJSONPath(bad); err == nil {
			t.Errorf("%s: parsed", bad)
		}
	}
}

// TestExpand: files, directories, globs with **, the default, and the errors.
func TestExpand(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"sharedos-tests/a.yaml", "sharedos-tests/deep/b.yaml", "sharedos-tests/deep/c.json", "sharedos-tests/notes.txt", "other/x.yml"} {
		p = filepath.Join(dir, p)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		_ = os.WriteFile(p, []byte("x"), 0o644)
	}
	t.Chdir(dir)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "sharedos-tests/a.yaml sharedos-tests/deep/b.yaml"},
		{[]string{"sharedos-tests"}, "sharedos-tests/a.yaml sharedos-tests/deep/b.yaml sharedos-tests/deep/c.json"},
		{[]string{"**/*.yml"}, "other/x.yml"},
		{[]string{"sharedos-tests/*.yaml", "sharedos-tests/a.yaml"}, "sharedos-tests/a.yaml"},
		{[]string{"other/x.yml"}, "other/x.yml"},
	} {
		got, err := Expand(c.args)
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("%q: %q %v, want %q", c.args, got, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nope.yaml"}, "scenario file nope.yaml does not exist"},
		{[]string{"*.nothing"}, "no scenario file matches *.nothing"},
		{[]string{"[bad"}, "bad glob"},
		{[]string{""}, "empty argument"},
	} {
		if _, err := Expand(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.args, err, c.want)
		}
	}
	_ = os.MkdirAll("empty", 0o755)
	if _, err := Expand([]string{"empty"}); err == nil || !strings.Contains(err.Error(), "holds no .yaml") {
		t.Errorf("empty dir: %v", err)
	}
}
