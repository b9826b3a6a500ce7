package grantfile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// roundTrip re-parses the YAML and JSON renderings of g and reports any difference.
func roundTrip(t testing.TB, g kernel.CapabilityGrant) {
	t.Helper()
	if err := g.Validate(); err != nil {
		t.Fatalf("test grant is not valid: %v", err)
	}
	y := "version: 1\ngrants:\n" + FormatGrantYAML(g)
	f, err := Parse("rt.yaml", []byte(y))
	if err != nil {
		t.Fatalf("FormatGrantYAML output does not parse: %v\n%s", err, y)
	}
	if len(f.Grants) != 1 || !reflect.DeepEqual(f.Grants[0], g) {
		t.Fatalf("YAML round trip changed the grant:\n%s\ngot  %#v\nwant %#v", y, f.Grants[0], g)
	}
	j := `{"version": 1, "grants": [` + FormatGrantJSON(g) + "]}"
	f, err = Parse("rt.json", []byte(j))
	if err != nil {
		t.Fatalf("FormatGrantJSON output does not parse: %v\n%s", err, j)
	}
	if len(f.Grants) != 1 || !reflect.DeepEqual(f.Grants[0], g) {
		t.Fatalf("JSON round trip changed the grant:\n%s\ngot  %#v\nwant %#v", j, f.Grants[0], g)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"full.yaml", "full.json", "example.yaml"} {
		f := mustParse(t, name, string(readFixture(t, name)))
		for _, g := range f.Grants {
			t.Run(name+"/"+g.ID, func(t *testing.T) { roundTrip(t, g) })
		}
	}
	// Awkward strings: every one must be quoted or escaped so it reads back unchanged.
	odd := []string{"true", "No", "~", "null", "1", "0x1F", "2026-01-01", "a b", "a: b", "#x", "- x", "[x]", "{x}",
		"\"q\"", `back\slash`, "tab\tin", "line\nbreak", "ctl\x01\x7f", "c1\u0085\u0086\u009f", "ls\u2028ps\u2029x",
		"bom\ufeffx", "nonchar\ufffe\uffff", "emoji 😀", "*", "&a", "!t", "%p", "@at", "`tick`", "'single'", "a,b", "é"}
	base := mustParse(t, "e.yaml", string(readFixture(t, "example.yaml"))).Grants[0]
	for _, s := range odd {
		g := CloneGrant(&base)
		g.ID = s
		if kernel.ValidatePathSegment(s) == nil {
			g.Capabilities[0].Resource.Path = []string{s}
		}
		g.Capabilities[0].Actions = []string{s}
		g.Subject = kernel.Address{Kind: kernel.KindAgent, ID: s}
		g.Constraints.Purposes = []string{s}
		g.Metadata = map[string]any{s: []any{s, nil, true}, "long" + strings.Repeat("k", 1100): s}
		t.Run("string "+s, func(t *testing.T) { roundTrip(t, g) })
	}
}

func TestFormatGrantYAMLStyle(t *testing.T) {
	t.Parallel()
	g := mustParse(t, "example.yaml", string(readFixture(t, "example.yaml"))).Grants[0]
	want := `  - id: g-read-workspace
    namespaceId: default
    subject: agent:helper
    issuer: human:alice
    issuedAt: "2026-01-01T00:00:00Z"
    capabilities:
      - resource: {namespace: files, path: [Workspace], owner: human:alice}
        actions: [list, read, search, grep]
        scope: descendants
    constraints: {expiresAt: "2027-01-01T00:00:00Z"}
`
	if got := FormatGrantYAML(g); got != want {
		t.Errorf("FormatGrantYAML =\n%s\nwant\n%s", got, want)
	}
	// Appending the item to a hand-written file yields a file with both grants.
	h := mustParse(t, "full.yaml", string(readFixture(t, "full.yaml")))
	doc := string(readFixture(t, "full.yaml")) + FormatGrantYAML(g)
	f := mustParse(t, "appended.yaml", doc)
	if len(f.Grants) != len(h.Grants)+1 || !reflect.DeepEqual(f.Grants[len(f.Grants)-1], g) {
		t.Errorf("appended grant = %#v, want %#v", f.Grants[len(f.Grants)-1], g)
	}
}
