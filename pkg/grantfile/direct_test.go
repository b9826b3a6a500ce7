package grantfile

import (
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// checkDirect holds the direct path to the tree path on one input: whenever the direct
// path takes a file, the tree path accepts it too and gives the same File (grants,
// context, Derived) and the same lines (of each grant's id and of each context field).
// It reports whether the direct path took the file.
func checkDirect(t *testing.T, name string, data []byte) bool {
	t.Helper()
	d, ok := directYAML(name, string(data))
	if !ok {
		return false // parseDirect then runs the tree path: nothing to compare
	}
	tree, _, err := parseWithContext(name, string(data))
	if err != nil {
		t.Fatalf("the direct path took a file the tree path refuses (%v):\n%s", err, data)
	}
	if !reflect.DeepEqual(d.file, tree.file) {
		t.Fatalf("files differ:\ndirect %#v\ntree   %#v\n%s", d.file, tree.file, data)
	}
	if !reflect.DeepEqual(d.ctxLines, tree.ctxLines) {
		t.Fatalf("context lines differ: direct %v, tree %v\n%s", d.ctxLines, tree.ctxLines, data)
	}
	if len(d.idLines) != len(tree.file.Grants) {
		t.Fatalf("%d id lines for %d grants", len(d.idLines), len(tree.file.Grants))
	}
	for i := range tree.file.Grants {
		if got, want := d.idLine(i), tree.idLine(i); got != want {
			t.Fatalf("grant %d: id line %d, tree path %d\n%s", i, got, want, data)
		}
	}
	return true
}

// directDocs are documents the direct path must take: the benchmark layouts (large
// enough to be read in halves, indented and indentless), the fixtures, a world set after
// the grants, grants with and without namespaceId, issuedAt and a parent, comments.
func directDocs(t testing.TB) map[string]string {
	big := genYAML(400)
	head, items, _ := strings.Cut(big, "grants:\n")
	return map[string]string{
		"gen":        genYAML(30),
		"gen-halves": big,
		"indentless": head + "grants:\n" + strings.ReplaceAll("\n"+items, "\n  ", "\n")[1:],
		"commented":  strings.ReplaceAll(big, "\n  - id:", "\n\n# a comment\n  # another\n  - id:"),
		"cli-halves": genCLIYAML(1000),
		"example":    string(readFixture(t, "example.yaml")),
		"full":       string(readFixture(t, "full.yaml")),
		"world-after": "version: 1\ngrants:\n  - id: a\n    subject: agent:a\n    issuer: human:b\n    capabilities: [{resource: {namespace: files, path: []}, actions: [read], scope: exact}]\n" +
			"  - id: b\n    namespaceId: other\n    subject: agent:a\n    issuer: human:b\n    parentGrantId: a\n    capabilities: [{resource: {namespace: files, path: [x]}, actions: [read], scope: exact}]\n" +
			"context:\n  world: w1\n  actor: agent:a\n",
		"id-later": "version: 1\ngrants:\n  - subject: agent:a\n    issuer: human:b\n\n    id: late\n    capabilities: [{resource: {namespace: files, path: [x]}, actions: [read], scope: exact}]\n",
		"derived": "version: 1\ngrants:\n  - id: p\n    subject: agent:a\n    issuer: human:b\n    issuedAt: 2026-01-01T00:00:00Z\n    capabilities: [{resource: {namespace: files, path: [x]}, actions: [read], scope: descendants}]\n" +
			"  - id: c\n    parentGrantId: p\n    subject: agent:a\n    issuer: human:b\n    capabilities: [{resource: {namespace: files, path: [x]}, actions: [read], scope: exact}]\n",
	}
}

func TestDirectYAMLTakesCommonFiles(t *testing.T) {
	t.Parallel()
	for name, doc := range directDocs(t) {
		if !checkDirect(t, name+".yaml", []byte(doc)) {
			t.Errorf("%s: the direct path declined it", name)
		}
	}
}

// TestDirectYAMLDeclines: documents the tree path refuses, or reads otherwise than the
// fast reader does, are declined by the direct path, and LoadSet and Parse then refuse
// them with the tree path's very error (the same one line, file, grant, field and line).
func TestDirectYAMLDeclines(t *testing.T) {
	t.Parallel()
	g := func(id, extra string) string {
		return "  - id: " + id + "\n    subject: agent:a\n    issuer: human:b\n" + extra +
			"    capabilities: [{resource: {namespace: files, path: [x]}, actions: [read], scope: exact}]\n"
	}
	big := genYAML(400)
	lines := strings.SplitAfter(big, "\n")
	at := len(lines) * 3 / 4
	for !strings.HasPrefix(lines[at], "  - id:") {
		at++
	}
	late := func(item string) string { // an item past the middle of a large file
		return strings.Join(lines[:at], "") + item + strings.Join(lines[at:], "")
	}
	docs := map[string]string{
		"duplicate id":       "version: 1\ngrants:\n" + g("a", "") + g("a", ""),
		"duplicate id late":  late(g("g-00001", "")),
		"invalid grant":      "version: 1\ngrants:\n" + g("a", "    scope: wide\n"),
		"unknown grant key":  "version: 1\ngrants:\n" + g("a", "    colour: red\n"),
		"bad path late":      late(g("x", "")[:len(g("x", ""))-1] + "\n    namespaceId: ' '\n"),
		"unknown root key":   "version: 1\nextra: 1\ngrants:\n" + g("a", ""),
		"version 2":          "version: 2\ngrants:\n" + g("a", ""),
		"version string":     "version: '1'\ngrants:\n" + g("a", ""),
		"no version":         "grants:\n" + g("a", ""),
		"no grants":          "version: 1\n",
		"grants flow":        "version: 1\ngrants: []\n",
		"grants mapping":     "version: 1\ngrants:\n  a: 1\n",
		"bad context":        "version: 1\ncontext:\n  actor: robot:x\ngrants:\n" + g("a", ""),
		"unknown context":    "version: 1\ncontext:\n  colour: red\ngrants:\n" + g("a", ""),
		"scalar item":        "version: 1\ngrants:\n  - a\n",
		"block scalar late":  late("  - id: odd\n    subject: |\n      agent:a\n"),
		"tab":                "version: 1\ngrants:\n" + g("a", "\t"),
		"not utf-8":          "version: 1\ngrants:\n" + g("a\xff", ""),
		"json":               `{"version": 1, "grants": []}`,
		"list not last":      big + "context: {world: w}\n",
		"nested grants list": "version: 1\nother:\n  grants:\n" + g("a", ""),
	}
	for name, doc := range docs {
		if p, ok := directYAML("f.yaml", doc); ok {
			t.Errorf("%s: the direct path took it (%d grants)", name, len(p.file.Grants))
		}
		_, _, treeErr := parseWithContext("f.yaml", doc)
		_, _, err := parseDirect("f.yaml", doc)
		if !reflect.DeepEqual(err, treeErr) {
			t.Errorf("%s: parseDirect's error %v, the tree path's %v", name, err, treeErr)
		}
	}
}

// TestLoadSetDirectAndTreeAgree: LoadSet's result and errors are the same with the direct
// path on and off, over the test corpus, a duplicate id across two files (its lines come
// from the direct path's id lines) and a context conflict.
func TestLoadSetDirectAndTreeAgree(t *testing.T) {
	docs := directDocs(t)
	dup := "version: 1\ngrants:\n\n  - id: g-00003\n    subject: agent:x\n    issuer: human:y\n    capabilities: [{resource: {namespace: files, path: [x]}, actions: [read], scope: exact}]\n"
	files := map[string]string{"dup.yaml": dup, "ctx.yaml": "version: 1\ncontext:\n  world: elsewhere\ngrants:\n" + strings.SplitN(dup, "grants:\n", 2)[1]}
	for name, doc := range docs {
		files[name+".yaml"] = doc
	}
	dir := writeFiles(t, files)
	sets := [][]string{{"gen.yaml", "dup.yaml"}, {"dup.yaml", "gen.yaml"}, {"gen-halves.yaml", "ctx.yaml"}, {"example.yaml", "full.yaml"}, {"cli-halves.yaml"}}
	for name := range docs {
		sets = append(sets, []string{name + ".yaml"})
	}
	for _, set := range sets {
		paths := make([]string, len(set))
		for i, p := range set {
			paths[i] = filepath.Join(dir, p)
		}
		load := func(direct bool) (*Set, error) {
			directEnabled = direct
			defer func() { directEnabled = true }()
			return LoadSet(paths, SetOptions{})
		}
		s1, err1 := load(true)
		s2, err2 := load(false)
		if !reflect.DeepEqual(err1, err2) {
			t.Errorf("%v: direct %v, tree %v", set, err1, err2)
			continue
		}
		if err1 == nil && !reflect.DeepEqual(s1.Files(), s2.Files()) {
			t.Errorf("%v: the sets differ", set)
		}
	}
}

func FuzzDirectYAML(f *testing.F) {
	docs := directDocs(f)
	for _, name := range []string{"gen", "example", "full", "world-after", "derived"} {
		f.Add([]byte(docs[name]))
	}
	f.Add([]byte("version: 1\ngrants:\n  - id: a\n    subject: agent:a\n    issuer: human:b\n    capabilities: [{resource: {namespace: f, path: [x]}, actions: [r], scope: exact}]\n"))
	// Inputs read in halves (large files) are TestDirectYAMLMutations': with a 100 KB
	// file around each input, the fuzzing engine ran only a few inputs a minute here.
	f.Fuzz(func(t *testing.T, data []byte) { checkDirect(t, "f.yaml", data) })
}

// TestDirectYAMLMemory bounds what a cold load of a large file allocates on the direct
// path, per grant (the tree path allocates ~3.2 KB per grant of bench/cli.sh's
// file): the grant file is read once and each item's nodes are given back. Counts and
// bytes, no timing. Not parallel: the heap statistics are the process's.
func TestDirectYAMLMemory(t *testing.T) {
	const n = 2000
	data := genCLIYAML(n)
	dir := writeFiles(t, map[string]string{"g.yaml": data})
	paths := []string{filepath.Join(dir, "g.yaml")}
	load := func() {
		s, err := LoadSet(paths, SetOptions{})
		if err != nil || s.Len() != n {
			t.Fatal(s, err)
		}
	}
	load()
	allocs := testing.AllocsPerRun(5, load)
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	const runs = 5
	for range runs {
		load()
	}
	runtime.ReadMemStats(&m1)
	perGrant := float64(m1.TotalAlloc-m0.TotalAlloc) / runs / n
	t.Logf("%.0f allocations per load, %.0f bytes per grant (the file is %d bytes per grant)", allocs, perGrant, len(data)/n)
	if allocs > 150 {
		t.Errorf("%.0f allocations per load of %d grants, want at most 150", allocs, n)
	}
	if limit := 1400.0; perGrant > limit {
		t.Errorf("%.0f bytes allocated per grant, want at most %.0f", perGrant, limit)
	}
}

// TestDirectYAMLMutations is FuzzDirectYAML's check over a fixed set of mutated grant
// files (seeded, so every run checks the same inputs): single-byte changes, deletions and
// insertions of YAML's structural characters, alone and inside a file large enough to be
// read in halves.
func TestDirectYAMLMutations(t *testing.T) {
	t.Parallel()
	docs := directDocs(t)
	big := genYAML(220)
	seeds := []string{docs["gen"], docs["example"], docs["world-after"], docs["derived"]}
	r := rand.New(rand.NewPCG(28, 6))
	taken := 0
	for range 300 {
		d := []byte(seeds[r.IntN(len(seeds))])
		for range 1 + r.IntN(4)/3 {
			j := r.IntN(len(d))
			switch r.IntN(3) {
			case 0:
				d[j] = byte(r.IntN(128))
			case 1:
				d = append(d[:j], d[j+1:]...)
			default:
				const structural = " -:\n[]{}#'\"a1,"
				d = append(d[:j], append([]byte{structural[r.IntN(len(structural))]}, d[j:]...)...)
			}
		}
		if checkDirect(t, "f.yaml", d) {
			taken++
		}
		// Its grants (renamed apart) among a large file's, past the middle.
		_, items, _ := strings.Cut(strings.ReplaceAll(string(d), "id: g-", "id: m-"), "grants:\n")
		if checkDirect(t, "f.yaml", []byte(strings.Replace(big, "  - id: g-00110\n", items+"  - id: g-00110\n", 1))) {
			taken++
		}
	}
	t.Logf("the direct path took %d of 600 mutated files", taken)
	if taken < 60 {
		t.Errorf("the direct path took only %d of 600 mutated files: the check compares little", taken)
	}
}
