package grantfile

import (
	"fmt"
	"strings"
	"testing"
)

// slowYAMLTree is yamlTree without the fast path.
func slowYAMLTree(data []byte) (*node, *treeError) {
	return yamlTreeWith(data, false)
}

// sameTree compares two trees: kinds, values, keys and every line.
func sameTree(a, b *node, path string) error {
	if a == nil || b == nil {
		if a != b {
			return fmt.Errorf("%s: one node is nil", path)
		}
		return nil
	}
	if a.kind != b.kind || a.s != b.s || a.line != b.line || a.keyLine != b.keyLine {
		return fmt.Errorf("%s: fast %s %q line %d, library %s %q line %d", path, a.kind, a.s, a.line, b.kind, b.s, b.line)
	}
	if len(a.kids) != len(b.kids) || len(a.keys) != len(b.keys) {
		return fmt.Errorf("%s: fast has %d members, library %d", path, len(a.kids), len(b.kids))
	}
	for i := range a.keys {
		if a.keys[i] != b.keys[i] || a.keyLineAt(i) != b.keyLineAt(i) {
			return fmt.Errorf("%s: key %d: fast %q line %d, library %q line %d", path, i, a.keys[i], a.keyLineAt(i), b.keys[i], b.keyLineAt(i))
		}
	}
	for i := range a.kids {
		if err := sameTree(a.kids[i], b.kids[i], fmt.Sprintf("%s.%d", path, i)); err != nil {
			return err
		}
	}
	return nil
}

// checkFastYAML: whenever the fast reader accepts a document, the library accepts it
// too and builds the same tree.
func checkFastYAML(t *testing.T, data []byte) (fast bool) {
	t.Helper()
	f, ok := fastYAMLTree(data)
	if !ok {
		return false
	}
	s, err := slowYAMLTree(data)
	if err != nil {
		t.Fatalf("fast reader accepted what the library refuses (%s):\n%s", err.msg, data)
	}
	if err := sameTree(f, s, "$"); err != nil {
		t.Fatalf("trees differ: %v\n%s", err, data)
	}
	return true
}

func TestFastYAML(t *testing.T) {
	t.Parallel()
	accepted := []string{
		genYAML(30),
		string(readFixture(t, "example.yaml")),
		string(readFixture(t, "full.yaml")),
		"version: 1\ngrants: []\n",
		"# c\n\nversion: 1   # one\ncontext:\n  world: w # c\n\n  actor: agent:a\ngrants:\n- id: a\n  subject: agent:a\n",
		"a: {b: [1, -2.5e3, x, 'y z', \"q\"], c: {}}\nd: []\ne: true\nf: NULL\ng: 2026-01-01T00:00:00Z\nh: x:y\n",
		"a:\n  - x\n  -   y\n  - {k: v}\n  - [1, 2]\nb:\n    - c: 1\n      d: 2\n    - e: 3\n",
	}
	for _, d := range accepted {
		if !checkFastYAML(t, []byte(d)) {
			t.Errorf("fast reader declined a common document:\n%s", d)
		}
	}
	// Documents it must leave to the library (which refuses several of them).
	declined := []string{
		"a: 010\n", "a: 0x10\n", "a: 1_000\n", "a: +5\n", "a: .5\n", "a: ~\n", "a:\n", "a: &x 1\n", "a: *x\n",
		"a: !!str 1\n", "a: |\n  text\n", "a: b\n  c\n", "a: b: c\n", "---\na: 1\n", "a: 1\n...\n", "a: 1\r\n",
		"a:\t1\n", "a: 1\na: 2\n", "<<: {}\n", "true: 1\n", "1: a\n", "a: [1,\n  2]\n", "a: \"x\\n\"\n",
		"a: 2026-01-01\n", "a: 1e400\n", "a: [a, b,]\n", "a: {b}\n", "  a: 1\n", "a: b#c\n", "a: \"x\"#c\n",
		"a:\n- b\n - c\n", "- a\n", "a: -x\n", "a: 'it''s'\n",
		"a: " + strings.Repeat("[", 65) + strings.Repeat("]", 65) + "\n",
	}
	for _, d := range declined {
		if _, ok := fastYAMLTree([]byte(d)); ok {
			t.Errorf("fast reader accepted %q", d)
		}
	}
}

func FuzzFastYAML(f *testing.F) {
	fuzzSeeds(f, ".yaml", genYAML(3),
		"a: {b: [1, -2.5e3, x, 'y z', \"q\"], c: {}}\nd: []\ne: true\nf: NULL\ng: 2026-01-01T00:00:00Z\nh: x:y\n",
		"a:\n  - x\n  -   y\n  - {k: v}\n  - [1, 2]\nb:\n    - c: 1\n      d: 2\n    - e: 3\n")
	f.Fuzz(func(t *testing.T, data []byte) { checkFastYAML(t, data) })
}

// TestFastYAMLHalves: a large document is read in two halves when its last top-level
// key holds the long list, and the tree is the library's (lines included) whether or not
// it could be split: an indented or an indentless list, comments and blank lines between
// the items, a key after the list, a list that is not the last, a nested list at the
// middle; a document the fast reader must decline, with the problem in either half, is
// still declined.
func TestFastYAMLHalves(t *testing.T) {
	t.Parallel()
	big := genYAML(400)
	if len(big) < parallelYAMLMin {
		t.Fatalf("the document (%d bytes) is too small to be split", len(big))
	}
	head, items, _ := strings.Cut(big, "grants:\n")
	indentless := head + "grants:\n" + strings.ReplaceAll("\n"+items, "\n  ", "\n")[1:]
	commented := strings.ReplaceAll(big, "\n  - id:", "\n\n# a comment\n  # another\n  - id:")
	tests := []struct {
		name  string
		doc   string
		split bool // read in halves
	}{
		{"indented list", big, true},
		{"indentless list", indentless, true},
		{"comments between items", commented, true},
		{"a key after the list", big + "extra: 1\n", false},
		{"the list is not last", strings.Replace(big, "grants:\n", "grants2: {}\ngrants:\n", 1) + "after:\n  - x\n", false},
		{"a nested list in the middle", strings.Replace(big, "version: 1\n", "version: 1\nother:\n  list:\n"+strings.Repeat("    - item\n", 8000), 1), false},
	}
	for _, tc := range tests {
		p := &fastYAML{data: tc.doc}
		p.splitLines()
		root, _, split := p.halves(false)
		if split != tc.split {
			t.Errorf("%s: read in halves = %v, want %v", tc.name, split, tc.split)
		}
		lib, err := slowYAMLTree([]byte(tc.doc))
		if err != nil {
			t.Fatalf("%s: the library refuses it: %s", tc.name, err.msg)
		}
		if split {
			if err := sameTree(root, lib, "$"); err != nil {
				t.Errorf("%s: halves: %v", tc.name, err)
			}
		}
		if !checkFastYAML(t, []byte(tc.doc)) {
			t.Errorf("%s: the fast reader declined it", tc.name)
		}
	}
	// Declined in either half: a value the fast reader leaves to the library.
	lines := strings.SplitAfter(big, "\n")
	for _, at := range []int{len(lines) / 4, len(lines) * 3 / 4} {
		for !strings.HasPrefix(lines[at], "  - id:") {
			at++
		}
		doc := strings.Join(lines[:at], "") + "  - id: odd\n    subject: |\n      text\n" + strings.Join(lines[at:], "")
		if _, ok := fastYAMLTree([]byte(doc)); ok {
			t.Errorf("line %d: a block scalar was read by the fast reader", at)
		}
		if _, err := yamlTree([]byte(doc)); err != nil {
			t.Errorf("line %d: %s", at, err.msg)
		}
	}
	// Characters it leaves to the library, past the first half.
	tab := big[:len(big)*3/4] + "\t" + big[len(big)*3/4:]
	if _, ok := fastYAMLTree([]byte(tab)); ok {
		t.Error("a tab was read by the fast reader")
	}
}
