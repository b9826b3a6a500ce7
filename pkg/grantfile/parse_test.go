package grantfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// grantYAML is a valid grant body (under "  - id: …") used to build error cases.
const okGrantYAML = `    subject: agent:a
    issuer: human:b
    capabilities:
      - resource: {namespace: files, path: [a]}
        actions: [read]
        scope: exact
`

func yamlFile(grants ...string) string {
	return "version: 1\ngrants:\n" + strings.Join(grants, "")
}

func mustParse(t *testing.T, name, data string) *File {
	t.Helper()
	f, err := Parse(name, []byte(data))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return f
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	big := make([]byte, MaxFileSize+1)
	tests := []struct {
		name, file, data string
		want             Error // Message is matched as a substring
	}{
		{"yaml syntax", "g.yaml", "version: 1\ngrants:\n  - id: [unclosed\n", Error{Line: 3, Message: "YAML syntax"}},
		{"yaml scanner error", "g.yaml", "version: 1\ngrants:\n  - id: a: b\n", Error{Line: 3, Message: "mapping values are not allowed"}},
		{"json syntax", "g.json", "{\"version\": 1,\n\"grants\": [\n}", Error{Field: "grants.0", Line: 3, Message: "JSON syntax: unexpected '}', want a value"}},
		{"json trailing data", "g.json", "{\"version\": 1, \"grants\": []}\n{}", Error{Line: 2, Message: "after the top-level object"}},
		{"json truncated", "g.json", "{\"version\": 1,\n\"grants\": [", Error{Field: "grants.0", Line: 2, Message: "unexpected end of input"}},
		{"json bad escape", "g.json", "{\"version\": 1,\n\"grants\": [\"\\x\"]}", Error{Field: "grants.0", Line: 2, Message: `invalid escape "\\x"`}},
		{"json raw control character", "g.json", "{\"version\": 1, \"grants\": [\"a\tb\"]}", Error{Field: "grants.0", Line: 1, Message: "control character"}},
		{"json leading zero", "g.json", "{\"version\": 01, \"grants\": []}", Error{Line: 1, Message: "unexpected '1', want ',' or '}'"}},
		{"empty yaml", "g.yaml", "# nothing\n", Error{Message: "the file is empty"}},
		{"empty json", "g.json", "  ", Error{Message: "the file is empty"}},
		{"two documents", "g.yaml", "version: 1\ngrants: []\n---\nversion: 1\n", Error{Line: 3, Message: "exactly one YAML document"}},
		{"root is a list", "g.yaml", "- a\n", Error{Line: 1, Message: "must be a mapping"}},
		{"unknown top-level key", "g.yaml", "version: 1\ngrants: []\nextra: 1\n", Error{Field: "extra", Line: 3, Message: `unknown key "extra"`}},
		{"missing version", "g.yaml", "grants: []\n", Error{Field: "version", Line: 1, Message: "is required"}},
		{"version as string", "g.yaml", "version: \"1\"\ngrants: []\n", Error{Field: "version", Line: 1, Message: "must be the number 1, not a string"}},
		{"version 2", "g.json", `{"version": 2, "grants": []}`, Error{Field: "version", Line: 1, Message: "unsupported version 2"}},
		{"missing grants", "g.yaml", "version: 1\n", Error{Field: "grants", Line: 1, Message: "is required"}},
		{"grants not a list", "g.yaml", "version: 1\ngrants: {}\n", Error{Field: "grants", Line: 2, Message: "must be a list"}},
		{"context unknown key", "g.yaml", "version: 1\ncontext:\n  world: w\n  tenant: x\ngrants: []\n", Error{Field: "context.tenant", Line: 4, Message: `unknown key "tenant"`}},
		{"context bad actor", "g.yaml", "version: 1\ncontext:\n  actor: robot:x\ngrants: []\n", Error{Field: "context.actor", Line: 3, Message: `unknown kind "robot"`}},
		{"context actor object", "g.yaml", "version: 1\ncontext:\n  actor: {kind: agent}\ngrants: []\n", Error{Field: "context.actor", Line: 3, Message: "agentId"}},
		{"context world not a string", "g.yaml", "version: 1\ncontext:\n  world: 7\ngrants: []\n", Error{Field: "context.world", Line: 3, Message: "must be a string"}},
		{"context blank purpose", "g.yaml", "version: 1\ncontext:\n  purpose: \"  \"\ngrants: []\n", Error{Field: "context.purpose", Line: 3, Message: "1 to 512"}},
		{"context null", "g.yaml", "version: 1\ncontext:\ngrants: []\n", Error{Field: "context", Line: 2, Message: "must be a mapping"}},
		{"grant not a mapping", "g.yaml", yamlFile("  - just-a-string\n"), Error{Field: "grants.0", Line: 3, Message: "a grant must be a mapping"}},
		{"unknown grant key", "g.yaml", yamlFile("  - id: g1\n    activeFrom: 2026-01-01T00:00:00Z\n" + okGrantYAML), Error{Grant: "g1", Field: "activeFrom", Line: 4, Message: `unknown key "activeFrom"`}},
		{"traversal segment", "grants.yaml", yamlFile("  - id: g-read\n" + okGrantYAML + "  - id: g-bad\n    subject: agent:a\n    issuer: human:b\n    capabilities:\n      - resource:\n          namespace: files\n          path:\n            - a\n            - ..\n        actions: [read]\n        scope: exact\n"),
			Error{Grant: "g-bad", Field: "capabilities.0.resource.path.1", Line: 18, Message: `path segment ".." is a traversal marker`}},
		{"traversal segment json", "g.json", "{\"version\": 1, \"grants\": [\n {\"id\": \"g\",\n  \"subject\": \"agent:a\", \"issuer\": \"human:b\",\n  \"capabilities\": [\n   {\"resource\": {\"namespace\": \"files\",\n     \"path\": [\"a\",\n       \"..\"]}, \"actions\": [\"read\"], \"scope\": \"exact\"}]}]}",
			Error{Grant: "g", Field: "capabilities.0.resource.path.1", Line: 7, Message: "traversal marker"}},
		{"bad subject shorthand", "g.yaml", yamlFile("  - id: g1\n    subject: robot:r2\n    issuer: human:b\n    capabilities: []\n"), Error{Grant: "g1", Field: "subject", Line: 4, Message: `unknown kind "robot"`}},
		{"shorthand without colon", "g.yaml", yamlFile("  - id: g1\n    subject: alice\n    issuer: human:b\n    capabilities: []\n"), Error{Grant: "g1", Field: "subject", Line: 4, Message: "must be kind:id"}},
		{"bad owner shorthand", "g.yaml", yamlFile("  - id: g1\n    subject: agent:a\n    issuer: human:b\n    capabilities:\n      - resource: {namespace: files, path: [], owner: \"human:\"}\n        actions: [read]\n        scope: exact\n"),
			Error{Grant: "g1", Field: "capabilities.0.resource.owner", Line: 7, Message: "id must be 1 to 256"}},
		{"empty capabilities", "g.yaml", yamlFile("  - id: g1\n    subject: agent:a\n    issuer: human:b\n    capabilities: []\n"), Error{Grant: "g1", Field: "capabilities", Line: 6, Message: "1 to 64 capabilities"}},
		{"missing subject", "g.yaml", yamlFile("  - id: g1\n    issuer: human:b\n"), Error{Grant: "g1", Field: "subject", Line: 3, Message: "is required"}},
		{"missing id", "g.yaml", yamlFile("  - subject: agent:a\n    issuer: human:b\n"), Error{Field: "grants.0.id", Line: 3, Message: "is required"}},
		{"numeric id", "g.yaml", yamlFile("  - id: 42\n" + okGrantYAML), Error{Field: "grants.0.id", Line: 3, Message: "must be a string"}},
		{"date-only issuedAt", "g.yaml", yamlFile("  - id: g1\n    issuedAt: 2026-01-01\n" + okGrantYAML), Error{Grant: "g1", Field: "issuedAt", Line: 4, Message: "RFC 3339"}},
		{"maxUses as string", "g.yaml", yamlFile("  - id: g1\n    constraints:\n      maxUses: \"3\"\n" + okGrantYAML), Error{Grant: "g1", Field: "constraints.maxUses", Line: 5, Message: "must be an integer, not a string"}},
		{"infinite number", "g.yaml", yamlFile("  - id: g1\n    constraints: {maxUses: .inf}\n" + okGrantYAML), Error{Grant: "g1", Field: "constraints.maxUses", Line: 4, Message: `".inf" is not a plain decimal number`}},
		{"null constraints", "g.yaml", yamlFile("  - id: g1\n    constraints: null\n" + okGrantYAML), Error{Grant: "g1", Field: "constraints", Line: 4, Message: "must be a JSON object"}},
		{"parent is self", "g.yaml", yamlFile("  - id: g1\n    parentGrantId: g1\n" + okGrantYAML), Error{Grant: "g1", Field: "parentGrantId", Line: 4, Message: "must differ from id"}},
		{"duplicate grant id", "g.yaml", yamlFile("  - id: g1\n"+okGrantYAML, "  - id: g1\n"+okGrantYAML), Error{Grant: "g1", Field: "id", Line: 10, Message: `duplicate grant id "g1" (first at line 3)`}},
		{"duplicate grant id after trimming", "g.json", "{\"version\": 1, \"grants\": [\n" + jsonGrant1("g1") + ",\n" + jsonGrant1(" g1 ") + "]}", Error{Grant: "g1", Field: "id", Line: 3, Message: "duplicate grant id"}},
		{"duplicate yaml key", "g.yaml", yamlFile("  - id: g1\n    subject: agent:a\n    subject: agent:b\n"), Error{Grant: "g1", Field: "subject", Line: 5, Message: `duplicate key "subject" (first at line 4)`}},
		{"duplicate json key", "g.json", "{\"version\": 1,\n \"version\": 1, \"grants\": []}", Error{Field: "version", Line: 2, Message: `duplicate key "version" (first at line 1)`}},
		{"yaml anchor", "g.yaml", yamlFile("  - id: g1\n    subject: &who agent:a\n    issuer: *who\n"), Error{Grant: "g1", Field: "subject", Line: 4, Message: "anchors (&who) are not allowed"}},
		{"yaml alias", "g.yaml", "version: 1\ngrants: *x\n", Error{Message: "unknown anchor"}},
		{"yaml merge key", "g.yaml", yamlFile("  - id: g1\n    <<: {subject: agent:a}\n"), Error{Grant: "g1", Line: 4, Message: "merge keys (<<) are not allowed"}},
		{"yaml custom tag", "g.yaml", yamlFile("  - id: g1\n    subject: !addr agent:a\n"), Error{Grant: "g1", Field: "subject", Line: 4, Message: "unsupported YAML tag !addr"}},
		{"yaml binary tag", "g.yaml", yamlFile("  - id: g1\n    metadata: {x: !!binary aGk=}\n"), Error{Grant: "g1", Field: "metadata.x", Line: 4, Message: "unsupported YAML tag !!binary"}},
		{"yaml non-string key", "g.yaml", yamlFile("  - id: g1\n    metadata: {1: x}\n"), Error{Grant: "g1", Field: "metadata", Line: 4, Message: `mapping key "1" must be a string`}},
		{"invalid utf-8", "g.yaml", "version: 1\ngrants:\n  - id: \"\xff\"\n", Error{Line: 3, Message: "not valid UTF-8"}},
		{"too large", "g.yaml", string(big), Error{Message: "larger than 64 MiB"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := Parse(tc.file, []byte(tc.data))
			if f != nil {
				t.Fatalf("Parse returned a File beside an error")
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse error = %v (%T), want *Error", err, err)
			}
			got := Error{File: e.File, Grant: e.Grant, Field: e.Field, Line: e.Line}
			want := tc.want
			want.File, want.Message = tc.file, ""
			if got != want || !strings.Contains(e.Message, tc.want.Message) {
				t.Errorf("Parse error = %#v\n  (%v)\nwant %#v with message containing %q", got, err, want, tc.want.Message)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error spans several lines: %q", err)
			}
		})
	}
}

func jsonGrant1(id string) string {
	return `{"id": "` + id + `", "subject": "agent:a", "issuer": "human:b", "capabilities": [{"resource": {"namespace": "files", "path": []}, "actions": ["read"], "scope": "exact"}]}`
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "grants.yaml", Grant: "g-read", Field: "capabilities.0.resource.path.1", Line: 12, Message: `path segment ".." is a traversal marker`},
			`grants.yaml:12: grant "g-read": capabilities.0.resource.path.1: path segment ".." is a traversal marker`},
		{Error{File: "g.json", Message: "the file is empty"}, "g.json: the file is empty"},
		{Error{Field: "version", Line: 2, Message: "is required"}, "line 2: version: is required"},
		{Error{Message: "m"}, "m"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
	}
}

func TestErrorUnwrap(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist inside", err)
	}
	_, err = Parse("g.yaml", []byte(yamlFile("  - id: g1\n    subject: agent:a\n")))
	if !errors.Is(err, kernel.ErrContract) {
		t.Errorf("Parse(contract violation) = %v, want kernel.ErrContract inside", err)
	}
}

func TestParseDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data     string
		wantWorld      string
		wantIssuedAt   string
		wantDerived    bool
		wantConstraint kernel.CapabilityConstraints
	}{
		{"no context", yamlFile("  - id: g1\n" + okGrantYAML), "default", EpochIssuedAt, false, kernel.CapabilityConstraints{}},
		{"context world", "version: 1\ncontext: {world: lab}\n" + "grants:\n  - id: g1\n" + okGrantYAML, "lab", EpochIssuedAt, false, kernel.CapabilityConstraints{}},
		{"explicit namespaceId wins", "version: 1\ncontext: {world: lab}\n" + "grants:\n  - id: g1\n    namespaceId: other\n" + okGrantYAML, "other", EpochIssuedAt, false, kernel.CapabilityConstraints{}},
		{"explicit issuedAt kept literally", yamlFile("  - id: g1\n    issuedAt: 2026-01-01T01:00:00+01:00\n" + okGrantYAML), "default", "2026-01-01T01:00:00+01:00", false, kernel.CapabilityConstraints{}},
		{"derived without issuedAt", yamlFile("  - id: g1\n    parentGrantId: g0\n" + okGrantYAML), "default", EpochIssuedAt, true, kernel.CapabilityConstraints{}},
		{"derived with issuedAt", yamlFile("  - id: g1\n    parentGrantId: g0\n    issuedAt: 2026-01-01T00:00:00Z\n" + okGrantYAML), "default", "2026-01-01T00:00:00Z", false, kernel.CapabilityConstraints{}},
		{"constraints kept", yamlFile("  - id: g1\n    constraints: {purposes: [ops]}\n" + okGrantYAML), "default", EpochIssuedAt, false, kernel.CapabilityConstraints{Purposes: []string{"ops"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := mustParse(t, "g.yaml", tc.data)
			g := f.Grants[0]
			if g.NamespaceID != tc.wantWorld || g.IssuedAt != tc.wantIssuedAt || f.Derived["g1"] != tc.wantDerived ||
				!reflect.DeepEqual(g.Constraints, tc.wantConstraint) {
				t.Errorf("got namespaceId %q issuedAt %q derived %v constraints %+v", g.NamespaceID, g.IssuedAt, f.Derived["g1"], g.Constraints)
			}
			if f.Derived == nil {
				t.Error("Derived is nil")
			}
		})
	}
}

func TestShorthandExpansion(t *testing.T) {
	t.Parallel()
	f := mustParse(t, "full.yaml", string(readFixture(t, "full.yaml")))
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	helper := kernel.Address{Kind: kernel.KindAgent, ID: "helper"}
	wantCtx := Context{World: "w1", Actor: &helper, Owner: &alice, Authority: &alice, Purpose: "triage"}
	if !reflect.DeepEqual(f.Context, wantCtx) {
		t.Errorf("Context = %+v, want %+v", f.Context, wantCtx)
	}
	checks := []struct {
		name      string
		got, want kernel.Address
	}{
		{"g-root subject", f.Grants[0].Subject, alice},
		{"g-root issuer", f.Grants[0].Issuer, kernel.Address{Kind: kernel.KindService, ID: "admin"}},
		{"g-root owner", *f.Grants[0].Capabilities[0].Resource.Owner, alice},
		{"g-child subject", f.Grants[1].Subject, helper},
		{"g-bounded subject (object form)", f.Grants[2].Subject, helper},
		{"g-bounded issuer (object form)", f.Grants[2].Issuer, kernel.Address{Kind: kernel.KindGroup, ID: "c-1"}},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if f.Grants[2].Capabilities[0].Resource.Owner != nil {
		t.Error("an omitted owner was filled in")
	}
	for _, s := range []string{"agent: helper", " agent:helper ", "agent:  helper"} {
		f := mustParse(t, "g.json", `{"version":1,"grants":[{"id":"g","subject":"`+s+`","issuer":"human:b","capabilities":[{"resource":{"namespace":"n","path":[]},"actions":["a"],"scope":"exact"}]}]}`)
		if f.Grants[0].Subject != helper {
			t.Errorf("shorthand %q = %v, want %v (ids are trimmed)", s, f.Grants[0].Subject, helper)
		}
	}
}

func TestJSONYAMLEquivalence(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]string{{"full.yaml", "full.json"}, {"example.yaml", "example.json"}} {
		y := mustParse(t, pair[0], string(readFixture(t, pair[0])))
		j := mustParse(t, pair[1], string(readFixture(t, pair[1])))
		y.Path, j.Path = "", ""
		if !reflect.DeepEqual(y, j) {
			t.Errorf("%s and %s differ:\n%s\n%s", pair[0], pair[1], FormatGrantJSON(y.Grants[len(y.Grants)-1]), FormatGrantJSON(j.Grants[len(j.Grants)-1]))
		}
	}
	// Format detection by content when the extension says nothing.
	for _, name := range []string{"full.yaml", "full.json"} {
		byExt := mustParse(t, name, string(readFixture(t, name)))
		byContent := mustParse(t, "grants", string(readFixture(t, name)))
		byContent.Path = byExt.Path
		if !reflect.DeepEqual(byExt, byContent) {
			t.Errorf("%s parsed differently without its extension", name)
		}
	}
}

func TestYAMLTags(t *testing.T) {
	t.Parallel()
	grant := func(extra string) string { return yamlFile("  - id: g1\n" + extra + okGrantYAML) }
	t.Run("quoted and unquoted timestamps are the same literal", func(t *testing.T) {
		t.Parallel()
		a := mustParse(t, "a.yaml", grant("    issuedAt: 2026-01-01T00:00:00Z\n    constraints: {expiresAt: 2027-01-01T00:00:00.500+02:00}\n"))
		b := mustParse(t, "b.yaml", grant("    issuedAt: \"2026-01-01T00:00:00Z\"\n    constraints: {expiresAt: '2027-01-01T00:00:00.500+02:00'}\n"))
		a.Path = b.Path
		if !reflect.DeepEqual(a, b) {
			t.Errorf("quoted and unquoted timestamps differ: %+v vs %+v", a.Grants[0], b.Grants[0])
		}
		if got := a.Grants[0].Constraints.ExpiresAt; got != "2027-01-01T00:00:00.500+02:00" {
			t.Errorf("expiresAt = %q: the literal was rewritten", got)
		}
	})
	t.Run("numbers keep their JSON literal", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, "g.yaml", grant("    constraints: {maxUses: 3, delegationDepth: 10}\n    metadata: {a: 1.50, c: -0, d: 12345678901234567890123, e: !!str 7, f: ~, g: yes, h: True, i: !!float 1e400, j: 1e3}\n"))
		g := f.Grants[0]
		if *g.Constraints.MaxUses != 3 || *g.Constraints.DelegationDepth != 10 {
			t.Errorf("constraints = %+v", g.Constraints)
		}
		want := map[string]any{"a": jsonNum("1.50"), "c": jsonNum("-0"), "d": jsonNum("12345678901234567890123"),
			"e": "7", "f": nil, "g": "yes", "h": true, "i": jsonNum("1e400"), "j": jsonNum("1e3")}
		if !reflect.DeepEqual(g.Metadata, want) {
			t.Errorf("metadata = %#v\nwant %#v", g.Metadata, want)
		}
	})
	t.Run("a number where a string is required is an error", func(t *testing.T) {
		t.Parallel()
		_, err := Parse("g.yaml", []byte(yamlFile("  - id: g1\n"+strings.Replace(okGrantYAML, "actions: [read]", "actions: [1]", 1))))
		var e *Error
		if !errors.As(err, &e) || e.Field != "capabilities.0.actions" {
			t.Errorf("err = %v, want an error on capabilities.0.actions", err)
		}
	})
	t.Run("explicit !!str makes a string", func(t *testing.T) {
		t.Parallel()
		f := mustParse(t, "g.yaml", yamlFile("  - id: !!str 42\n"+okGrantYAML))
		if f.Grants[0].ID != "42" {
			t.Errorf("id = %q", f.Grants[0].ID)
		}
	})
}

func TestLoad(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "full.yaml")
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != path || len(f.Grants) != 3 {
		t.Errorf("Load = %s with %d grants", f.Path, len(f.Grants))
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\ngrants:\n  - id: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = Load(bad)
	var e *Error
	if f != nil || !errors.As(err, &e) || e.File != bad || e.Grant != "x" || e.Line != 3 {
		t.Errorf("Load(bad) = %v, %v", f, err)
	}
}

func jsonNum(s string) any { return json.Number(s) }

// TestStrictNumbers: YAML 1.1 and other library number forms are refused wherever they
// appear, and integer fields take only plain decimal integers (in JSON files too), each
// with a one-line file:line error naming the field.
func TestStrictNumbers(t *testing.T) {
	t.Parallel()
	yamlForms := []string{"010", "0x10", "0o10", "0b1", "1_000", "+5", ".5", "-.5", "1.", ".inf", "-.Inf", ".nan", "00"}
	for _, form := range yamlForms {
		for _, field := range []string{"maxUses", "delegationDepth"} {
			data := yamlFile("  - id: g1\n" + okGrantYAML + "    constraints:\n      purposes: [x]\n      " + field + ": " + form + "\n")
			want := `g.yaml:12: grant "g1": constraints.` + field + `: "` + form + `" is not a plain decimal number`
			checkRefused(t, "g.yaml", data, want)
		}
		checkRefused(t, "g.yaml", "version: "+form+"\ngrants: []\n", `g.yaml:1: version: "`+form+`" is not a plain decimal number`)
		checkRefused(t, "g.yaml", yamlFile("  - id: g1\n"+okGrantYAML+"    metadata:\n      n: "+form+"\n"),
			`g.yaml:11: grant "g1": metadata.n: "`+form+`" is not a plain decimal number`)
	}
	// Integers written as JSON fractions or exponents are numbers, but not integers a
	// reader would recognise.
	for _, form := range []string{"1e3", "1.0", "1E0", "3.0e0"} {
		checkRefused(t, "g.yaml", yamlFile("  - id: g1\n"+okGrantYAML+"    constraints: {maxUses: "+form+"}\n"),
			`g.yaml:10: grant "g1": constraints.maxUses: must be a plain decimal integer, not `+form)
		checkRefused(t, "g.json", `{"version": 1, "grants": [{"id": "g1", "subject": "agent:a", "issuer": "human:b",`+"\n"+
			` "capabilities": [{"resource": {"namespace": "files", "path": []}, "actions": ["read"], "scope": "exact"}],`+"\n"+
			` "constraints": {"delegationDepth": `+form+`}}]}`,
			`g.json:3: grant "g1": constraints.delegationDepth: must be a plain decimal integer, not `+form)
		checkRefused(t, "g.yaml", "version: "+form+"\ngrants: []\n", `g.yaml:1: version: unsupported version `+form)
	}
	// Plain decimal integers still work, including in metadata.
	f := mustParse(t, "g.yaml", yamlFile("  - id: g1\n"+okGrantYAML+"    constraints: {maxUses: 10, delegationDepth: 0}\n    metadata: {n: -12, f: 0.5, e: 2e-3}\n"))
	if *f.Grants[0].Constraints.MaxUses != 10 || *f.Grants[0].Constraints.DelegationDepth != 0 {
		t.Errorf("constraints = %+v", f.Grants[0].Constraints)
	}
}

// checkRefused asserts that Parse refuses data with a one-line error starting with want.
func checkRefused(t *testing.T, name, data, want string) {
	t.Helper()
	f, err := Parse(name, []byte(data))
	if f != nil || err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("Parse(%q) = %v\nwant an error starting with %s", data, err, want)
	}
}

// TestYAMLTabLine: a tab in the indentation is reported on its own line.
func TestYAMLTabLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		data string
		line int
	}{
		{"version: 1\ngrants:\n\t- id: x\n", 3},
		{"version: 1\ngrants:\n  - id: x\n\tsubject: agent:a\n", 4},
		{"version: 1\ngrants:\n  - id: x\n    subject: agent:a\n\t\n", 5},
		{"version: 1\ngrants:\n  - id: x\n    subject: agent:a\n    issuer: human:b\n  \t  capabilities: []\n", 6},
		{"version: 1\ngrants:\n  - id: x\n    capabilities:\n      - resource: {namespace: files}\n\t  actions: [read]\n", 6},
		{"version: 1\ncontext:\n  world: w\n\tactor: agent:a\ngrants: []\n", 4},
	}
	for _, tc := range tests {
		_, err := Parse("g.yaml", []byte(tc.data))
		var e *Error
		if !errors.As(err, &e) || e.Line != tc.line || !strings.Contains(e.Message, "YAML syntax") {
			t.Errorf("Parse(%q) = %v, want a YAML syntax error on line %d", tc.data, err, tc.line)
		}
	}
}

// TestBuildHalves: a file built by two builders gives what one builder gives — the same
// file (grants in order, derived flags) or the same first error, whether the problem is a
// bad grant or a duplicate id, in either half or across them.
func TestBuildHalves(t *testing.T) {
	t.Parallel()
	item := func(i int) string { return grantFor(fmt.Sprintf("g%03d", i), "agent:a", "human:h") }
	derived := "  - id: d1\n    subject: agent:a\n    issuer: agent:b\n    parentGrantId: g001\n" +
		"    capabilities:\n      - resource: {namespace: files, path: [x]}\n        actions: [read]\n        scope: exact\n"
	bad := "  - id: bad\n    subject: agent:a\n    issuer: human:h\n    capabilities: []\n"
	doc := func(at map[int]string) []byte {
		var b strings.Builder
		b.WriteString("version: 1\ngrants:\n")
		for i := range 40 {
			if s, ok := at[i]; ok {
				b.WriteString(s)
				continue
			}
			b.WriteString(item(i))
		}
		return []byte(b.String())
	}
	cases := map[string][]byte{
		"clean":                       doc(map[int]string{30: derived}),
		"bad in the first half":       doc(map[int]string{3: bad, 30: bad}),
		"bad in the second half":      doc(map[int]string{30: bad}),
		"duplicate across the halves": doc(map[int]string{30: item(2)}),
		"duplicate before a bad":      doc(map[int]string{25: item(21), 30: bad}),
		"bad before a duplicate":      doc(map[int]string{25: bad, 30: item(2)}),
		"duplicate in the first half": doc(map[int]string{5: item(2), 30: bad}),
	}
	for name, data := range cases {
		root, terr := yamlTree(data)
		if terr != nil {
			t.Fatalf("%s: %s", name, terr.msg)
		}
		one, err1 := buildWith("f.yaml", root, 1<<30)
		root, _ = yamlTree(data) // build may add members to the tree: a fresh one
		two, err2 := buildWith("f.yaml", root, 2)
		if !reflect.DeepEqual(err1, err2) {
			t.Errorf("%s: one builder: %v; two: %v", name, err1, err2)
			continue
		}
		if err1 == nil && !reflect.DeepEqual(one.file, two.file) {
			t.Errorf("%s: the files differ", name)
		}
		if name == "clean" && (err1 != nil || !two.file.Derived["d1"]) {
			t.Errorf("clean: %v, derived %v", err1, two.file.Derived)
		}
	}
}
