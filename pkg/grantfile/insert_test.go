package grantfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// newGrant is the grant the insertion tests add.
func newGrant(id string) kernel.CapabilityGrant {
	return kernel.CapabilityGrant{ID: id, NamespaceID: "default",
		Subject:      kernel.Address{Kind: kernel.KindAgent, ID: "a"},
		Issuer:       kernel.Address{Kind: kernel.KindHuman, ID: "b"},
		Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"x"}}, Actions: []string{"read"}, Scope: kernel.ScopeExact}},
		IssuedAt:     EpochIssuedAt}
}

// newItem is FormatGrantYAML(newGrant("new")) with its dash in column ind.
func newItem(ind int) string {
	lines := []string{
		"- id: new",
		"  namespaceId: default",
		"  subject: agent:a",
		"  issuer: human:b",
		`  issuedAt: "1970-01-01T00:00:00.000Z"`,
		"  capabilities:",
		"    - resource: {namespace: files, path: [x]}",
		"      actions: [read]",
		"      scope: exact",
		"  constraints: {}",
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(strings.Repeat(" ", ind) + l + "\n")
	}
	return b.String()
}

const newJSONCompact = `{"id":"new","namespaceId":"default","subject":{"kind":"agent","agentId":"a"},"issuer":{"kind":"human","userId":"b"},"capabilities":[{"resource":{"namespace":"files","path":["x"]},"actions":["read"],"scope":"exact"}],"constraints":{},"issuedAt":"1970-01-01T00:00:00.000Z"}`

// newJSON is the indented JSON of newGrant("new"), its inner lines prefixed by prefix.
func newJSON(prefix, unit string) string {
	// Re-indent: FormatGrantJSON uses two spaces per level.
	var b strings.Builder
	for i, l := range strings.Split(FormatGrantJSON(newGrant("new")), "\n") {
		if i > 0 {
			b.WriteString("\n" + prefix)
		}
		t := strings.TrimLeft(l, " ")
		b.WriteString(strings.Repeat(unit, (len(l)-len(t))/2) + t)
	}
	return b.String()
}

const itemA = "  - id: a\n" + okGrantYAML

var itemAComment = strings.Replace(itemA, "scope: exact\n", "scope: exact # trailing comment\n", 1)

func TestInsertGrantShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file, in, want string
	}{
		{"block list at the bottom", "g.yaml",
			"# my grants\nversion: 1\ngrants:\n" + itemA,
			"# my grants\nversion: 1\ngrants:\n" + itemA + newItem(2)},
		{"block list at the top, comments kept in place", "g.yaml",
			"# header\ngrants:\n" + itemAComment + "\n  # a comment after the last item\ncontext:\n  world: default # the world\nversion: 1\n",
			"# header\ngrants:\n" + itemAComment + newItem(2) + "\n  # a comment after the last item\ncontext:\n  world: default # the world\nversion: 1\n"},
		{"block list in the middle", "g.yaml",
			"version: 1\ngrants:\n" + itemA + "context:\n  purpose: triage\n",
			"version: 1\ngrants:\n" + itemA + newItem(2) + "context:\n  purpose: triage\n"},
		{"indentless list", "g.yaml",
			"version: 1\ngrants:\n- id: a\n  subject: agent:a\n  issuer: human:b\n  capabilities:\n  - resource: {namespace: files, path: [a]}\n    actions: [read]\n    scope: exact\ncontext: {world: default}\n",
			"version: 1\ngrants:\n- id: a\n  subject: agent:a\n  issuer: human:b\n  capabilities:\n  - resource: {namespace: files, path: [a]}\n    actions: [read]\n    scope: exact\n" + newItem(0) + "context: {world: default}\n"},
		{"four-space list", "g.yaml",
			"version: 1\ngrants:\n    -   id: a\n        subject: agent:a\n        issuer: human:b\n        capabilities: [{resource: {namespace: files, path: [a]}, actions: [read], scope: exact}]\n",
			"version: 1\ngrants:\n    -   id: a\n        subject: agent:a\n        issuer: human:b\n        capabilities: [{resource: {namespace: files, path: [a]}, actions: [read], scope: exact}]\n" + newItem(4)},
		{"no newline at the end", "g.yaml",
			"version: 1\ngrants:\n" + strings.TrimSuffix(itemA, "\n"),
			"version: 1\ngrants:\n" + itemA + newItem(2)},
		{"comments inside the last item", "g.yaml",
			"version: 1\ngrants:\n" + itemA + "    # deeper comment: still the item's\n# end\n",
			"version: 1\ngrants:\n" + itemA + "    # deeper comment: still the item's\n" + newItem(2) + "# end\n"},
		{"block scalar in the last item", "g.yaml",
			"version: 1\ngrants:\n" + itemA + "    metadata:\n      note: |\n        text\n\n        # not a comment\n",
			"version: 1\ngrants:\n" + itemA + "    metadata:\n      note: |\n        text\n\n        # not a comment\n" + newItem(2)},
		{"empty flow list", "g.yaml",
			"version: 1\ngrants: []  # none yet\ncontext: {world: default}\n",
			"version: 1\ngrants:   # none yet\n" + newItem(2) + "context: {world: default}\n"},
		{"empty flow list at the end without newline", "g.yaml",
			"version: 1\ngrants: [ ]",
			"version: 1\ngrants:\n" + newItem(2)},
		{"empty flow list on the next line", "g.yaml",
			"version: 1\ngrants:\n  [] # later\ncontext: {world: default}\n",
			"version: 1\ngrants:\n   # later\n" + newItem(2) + "context: {world: default}\n"},
		{"empty value", "g.yaml",
			"version: 1\ngrants:\ncontext: {world: default}\n",
			"version: 1\ngrants:\n" + newItem(2) + "context: {world: default}\n"},
		{"empty value with a comment", "g.yaml",
			"version: 1\ngrants:   # later\n",
			"version: 1\ngrants:   # later\n" + newItem(2)},
		{"null", "g.yaml",
			"version: 1\ngrants: ~ # nothing\n",
			"version: 1\ngrants:  # nothing\n" + newItem(2)},
		{"absent", "g.yaml",
			"version: 1\ncontext:\n  world: default\n# trailing comment\n",
			"version: 1\ncontext:\n  world: default\n# trailing comment\ngrants:\n" + newItem(2)},
		{"absent, no newline at the end", "g.yaml",
			"version: 1",
			"version: 1\ngrants:\n" + newItem(2)},
		{"non-empty flow list", "g.yaml",
			"version: 1\ngrants: [\n  {id: a, subject: agent:a, issuer: human:b, capabilities: [{resource: {namespace: files, path: [a]}, actions: [read], scope: exact}]}  # a\n]\n",
			"version: 1\ngrants: [\n  {id: a, subject: agent:a, issuer: human:b, capabilities: [{resource: {namespace: files, path: [a]}, actions: [read], scope: exact}]}, " + newJSONCompact + "  # a\n]\n"},
		{"flow list with a trailing comma and quoted brackets", "g.yaml",
			"version: 1\ngrants: [{id: 'a]''', subject: agent:a, issuer: human:b, capabilities: [{resource: {namespace: files, path: [\"]#\"]}, actions: [read], scope: exact}]},]\n",
			"version: 1\ngrants: [{id: 'a]''', subject: agent:a, issuer: human:b, capabilities: [{resource: {namespace: files, path: [\"]#\"]}, actions: [read], scope: exact}]}, " + newJSONCompact + "]\n"},
		{"flow document", "g.yaml",
			"{version: 1, grants: []}\n",
			"{version: 1, grants: [" + newJSONCompact + "]}\n"},
		{"CRLF", "g.yaml",
			"version: 1\r\ngrants:\r\n  - id: a\r\n    subject: agent:a\r\n    issuer: human:b\r\n    capabilities: [{resource: {namespace: files, path: [a]}, actions: [read], scope: exact}]\r\n# end\r\n",
			"version: 1\r\ngrants:\r\n  - id: a\r\n    subject: agent:a\r\n    issuer: human:b\r\n    capabilities: [{resource: {namespace: files, path: [a]}, actions: [read], scope: exact}]\r\n" + strings.ReplaceAll(newItem(2), "\n", "\r\n") + "# end\r\n"},
		{"byte-order mark", "g.yaml",
			"\xef\xbb\xbfversion: 1\ngrants: []\n",
			"\xef\xbb\xbfversion: 1\ngrants:\n" + newItem(2)},
		{"no extension, YAML content", "grants",
			"version: 1\ngrants:\n" + itemA,
			"version: 1\ngrants:\n" + itemA + newItem(2)},

		{"JSON, two-space", "g.json",
			"{\n  \"version\": 1,\n  \"grants\": [\n    " + jsonGrant1("a") + "\n  ]\n}\n",
			"{\n  \"version\": 1,\n  \"grants\": [\n    " + jsonGrant1("a") + ",\n    " + newJSON("    ", "  ") + "\n  ]\n}\n"},
		{"JSON, tabs", "g.json",
			"{\n\t\"grants\": [\n\t\t" + jsonGrant1("a") + "\n\t],\n\t\"version\": 1\n}",
			"{\n\t\"grants\": [\n\t\t" + jsonGrant1("a") + ",\n\t\t" + newJSON("\t\t", "\t") + "\n\t],\n\t\"version\": 1\n}"},
		{"JSON, one line", "g.json",
			`{"version": 1, "grants": [` + jsonGrant1("a") + `]}`,
			`{"version": 1, "grants": [` + jsonGrant1("a") + `,` + newJSONCompact + `]}`},
		{"JSON, one line, empty", "g.json",
			`{"version": 1, "grants": [ ]}`,
			`{"version": 1, "grants": [` + newJSONCompact + `]}`},
		{"JSON, empty array", "g.json",
			"{\n  \"version\": 1,\n  \"grants\": []\n}\n",
			"{\n  \"version\": 1,\n  \"grants\": [\n    " + newJSON("    ", "  ") + "\n  ]\n}\n"},
		{"JSON, null", "g.json",
			"{\n    \"grants\": null,\n    \"version\": 1\n}\n",
			"{\n    \"grants\": [\n        " + newJSON("        ", "    ") + "\n    ],\n    \"version\": 1\n}\n"},
		{"JSON, absent", "g.json",
			"{\n  \"version\": 1,\n  \"context\": {\"world\": \"default\"}\n}\n",
			"{\n  \"version\": 1,\n  \"context\": {\"world\": \"default\"},\n  \"grants\": [\n    " + newJSON("    ", "  ") + "\n  ]\n}\n"},
		{"JSON, CRLF", "g.json",
			"{\r\n  \"version\": 1,\r\n  \"grants\": []\r\n}\r\n",
			"{\r\n  \"version\": 1,\r\n  \"grants\": [\r\n    " + strings.ReplaceAll(newJSON("    ", "  "), "\n", "\r\n") + "\r\n  ]\r\n}\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := insertGrant(tc.file, []byte(tc.in), newGrant("new"))
			if err != nil {
				t.Fatalf("insertGrant: %v", err)
			}
			if string(out) != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", out, tc.want)
			}
			f := mustParse(t, tc.file, string(out))
			if last := f.Grants[len(f.Grants)-1]; !bytes.Equal(kernel.CanonicalGrant(&last), kernel.CanonicalGrant(ptr(newGrant("new")))) {
				t.Errorf("the inserted grant reads back as %+v", last)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestInsertGrantRefusals(t *testing.T) {
	t.Parallel()
	bad := newGrant("bad")
	bad.Capabilities[0].Resource.Path = []string{".."}
	tests := []struct {
		name, file, in string
		g              kernel.CapabilityGrant
		want           string
	}{
		{"duplicate id", "g.yaml", "version: 1\ngrants:\n  - id: new\n" + okGrantYAML, newGrant("new"), `g.yaml:3: grant "new": id: a grant with id "new" already exists in this file`},
		{"duplicate id in JSON", "g.json", `{"version": 1, "grants": [` + jsonGrant1("new") + `]}`, newGrant("new"), `g.json:1: grant "new": id: a grant with id "new" already exists`},
		{"invalid grant", "g.yaml", "version: 1\ngrants: []\n", bad, `g.yaml: grant "bad": capabilities.0.resource.path.0: `},
		{"invalid file", "g.yaml", "version: 1\ngrants:\n  - id: x\n", newGrant("new"), `g.yaml:3: grant "x": subject: is required`},
		{"syntax error", "g.yaml", "version: 1\ngrants: [\n", newGrant("new"), "YAML syntax"},
		{"grants is a mapping", "g.yaml", "version: 1\ngrants: {}\n", newGrant("new"), "grants is not a list"},
		{"grants is a string", "g.json", `{"version": 1, "grants": "x"}`, newGrant("new"), "grants is not a list"},
		{"unknown key", "g.yaml", "version: 1\nextra: 1\n", newGrant("new"), `unknown key "extra"`},
		{"flow document without grants", "g.yaml", "{version: 1}\n", newGrant("new"), "add `grants: []` first"},
		{"control: blanks after the empty list", "g.yaml", "version: 1\ngrants: [] \n", newGrant("new"), ""},
		{"paragraph separator", "g.yaml", "version: 1\ngrants: []\ncontext: {purpose: \"a\u2029b\"}\n", newGrant("new"), "line break"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, tc.file)
			if err := os.WriteFile(path, []byte(tc.in), 0o640); err != nil {
				t.Fatal(err)
			}
			err := InsertGrant(path, tc.g)
			if tc.want == "" {
				// Not a refusal: the control case of its neighbours.
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("InsertGrant = %v, want a one-line *Error containing %q", err, tc.want)
			}
			assertUnchanged(t, dir, tc.file, tc.in)
		})
	}
}

// assertUnchanged checks that dir holds only name, with content want and mode 0640.
func assertUnchanged(t *testing.T, dir, name, want string) {
	t.Helper()
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil || string(got) != want {
		t.Fatalf("file changed: %q, %v", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries (a temporary file left behind?)", len(ents))
	}
	if info, _ := os.Stat(filepath.Join(dir, name)); info.Mode().Perm() != 0o640 {
		t.Fatalf("mode changed to %v", info.Mode())
	}
}

func TestInsertGrantFile(t *testing.T) {
	t.Parallel()
	t.Run("mode kept, nothing left behind, loadable", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, "g.yaml")
		in := "version: 1\ngrants:\n" + itemA
		if err := os.WriteFile(path, []byte(in), 0o604); err != nil {
			t.Fatal(err)
		}
		if err := InsertGrant(path, newGrant("new")); err != nil {
			t.Fatal(err)
		}
		info, _ := os.Stat(path)
		if info.Mode().Perm() != 0o604 {
			t.Errorf("mode = %v, want 0604", info.Mode())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 1 {
			t.Errorf("%d entries in the directory", len(ents))
		}
		s, err := LoadSet([]string{path}, SetOptions{})
		if err != nil || s.Len() != 2 {
			t.Fatalf("LoadSet after insert = %v, %v", s, err)
		}
		// A second insert of the same id is refused; the file stays as the first left it.
		after, _ := os.ReadFile(path)
		if err := InsertGrant(path, newGrant("new")); err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("second insert = %v", err)
		}
		if again, _ := os.ReadFile(path); !bytes.Equal(again, after) {
			t.Fatal("refused insert changed the file")
		}
	})
	t.Run("symlink target rewritten, link kept", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		target := filepath.Join(dir, "real.yaml")
		link := filepath.Join(dir, "link.yaml")
		if err := os.WriteFile(target, []byte("version: 1\ngrants: []\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("real.yaml", link); err != nil {
			t.Fatal(err)
		}
		if err := InsertGrant(link, newGrant("new")); err != nil {
			t.Fatal(err)
		}
		if fi, _ := os.Lstat(link); fi.Mode()&fs.ModeSymlink == 0 {
			t.Error("the link was replaced by a file")
		}
		if data, _ := os.ReadFile(target); !strings.Contains(string(data), "id: new") {
			t.Errorf("target not rewritten: %s", data)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		err := InsertGrant(filepath.Join(dir, "nope.yaml"), newGrant("new"))
		if !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("InsertGrant = %v, want not-exist", err)
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Error("a file was created")
		}
	})
	t.Run("changed meanwhile", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		path := filepath.Join(dir, "g.yaml")
		if err := os.WriteFile(path, []byte("version: 1\ngrants: []\n"), 0o640); err != nil {
			t.Fatal(err)
		}
		err := replaceFile(path, []byte("something else"), []byte("new content"), 0o640)
		if err == nil || !strings.Contains(err.Error(), "changed") {
			t.Fatalf("replaceFile = %v", err)
		}
		assertUnchanged(t, dir, "g.yaml", "version: 1\ngrants: []\n")
	})
}

// FuzzInsertGrant: whatever valid grant file goes in, the result parses and holds the
// old grants, unchanged and in order, followed by the new one; a refusal leaves only
// the documented cases.
func FuzzInsertGrant(f *testing.F) {
	fuzzSeeds(f, ".yaml",
		"version: 1\ngrants:\n"+itemAComment+"  # end\ncontext: {world: default}\n",
		"version: 1\ngrants: []\n",
		"version: 1\ngrants: [{id: a, subject: agent:a, issuer: human:b, capabilities: [{resource: {namespace: files, path: [a]}, actions: [read], scope: exact}]}]\n",
		"{version: 1, grants: []}",
		"version: 1\ngrants:\n- id: a\n  subject: agent:a\n  issuer: human:b\n  capabilities:\n  - resource: {namespace: files, path: [a]}\n    actions: [read]\n    scope: exact\n",
	)
	for _, s := range []string{"example.json", "full.json"} {
		f.Add(readFixture(f, s))
	}
	f.Add([]byte(`{"version": 1, "grants": [` + jsonGrant1("a") + `]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		name := "f.yaml"
		if isJSON("", data) {
			name = "f.json"
		}
		old, err := Parse(name, data)
		if err != nil {
			return
		}
		g := newGrant("fz-new")
		for _, o := range old.Grants {
			if o.ID == g.ID {
				return
			}
		}
		out, ierr := insertGrant(name, data, g)
		if ierr != nil {
			for _, ok := range []string{"line break", "carriage return", "holds a comment", "holds more than"} {
				if strings.Contains(ierr.Message, ok) {
					return
				}
			}
			t.Fatalf("valid file refused: %v\n%q", ierr, data)
		}
		res, err := Parse(name, out)
		if err != nil {
			t.Fatalf("result does not parse: %v\n%q", err, out)
		}
		if len(res.Grants) != len(old.Grants)+1 {
			t.Fatalf("%d grants, want %d", len(res.Grants), len(old.Grants)+1)
		}
		for i := range old.Grants {
			if !bytes.Equal(kernel.CanonicalGrant(&old.Grants[i]), kernel.CanonicalGrant(&res.Grants[i])) {
				t.Fatalf("grant %d changed", i)
			}
		}
		if last := res.Grants[len(old.Grants)]; !bytes.Equal(kernel.CanonicalGrant(&last), kernel.CanonicalGrant(&g)) {
			t.Fatal("new grant changed")
		}
		if !sameContext(old.Context, res.Context) {
			t.Fatal("context changed")
		}
	})
}
