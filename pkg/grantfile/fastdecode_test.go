package grantfile

import (
	"reflect"
	"testing"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// checkFastGrant: whenever fastGrant decodes a grant node and the kernel's Validate
// accepts it, the kernel's strict decoder accepts the node too, with an equal grant.
func checkFastGrant(t *testing.T, gn *node, world string) bool {
	t.Helper()
	g, noIssuedAt, ok := fastGrant(gn, world, &grantAlloc{})
	if !ok || g.Validate() != nil {
		return false
	}
	var slow kernel.CapabilityGrant
	derived := map[string]bool{}
	if err := (&builder{name: "f"}).decodeGrant(0, gn, world, &slow, derived); err != nil {
		t.Fatalf("fast decoder accepted a grant the kernel's decoder refuses: %v", err)
	}
	if !reflect.DeepEqual(g, slow) {
		t.Fatalf("fast decoder read\n%#v\nthe kernel's decoder\n%#v", g, slow)
	}
	if noIssuedAt && g.ParentGrantID != "" && !derived[g.ID] || derived[g.ID] && !noIssuedAt {
		t.Fatal("derived flag differs")
	}
	return true
}

// grantNodes returns the nodes a document's grants would be decoded from: the items of
// its grants list, or the document itself.
func grantNodes(data []byte, name string) []*node {
	var root *node
	var terr *treeError
	if isJSON(name, data) {
		root, terr = jsonTree(data)
	} else {
		root, terr = yamlTree(data)
	}
	if terr != nil || root == nil {
		return nil
	}
	if gs, _ := root.get("grants"); gs != nil && gs.kind == kArr {
		return gs.kids
	}
	return []*node{root}
}

func TestFastGrant(t *testing.T) {
	t.Parallel()
	n := 0
	for _, name := range []string{"full.yaml", "full.json", "example.yaml", "example.json"} {
		for _, gn := range grantNodes(readFixture(t, name), name) {
			if checkFastGrant(t, gn, "w") {
				n++
			}
		}
	}
	for _, gn := range grantNodes([]byte(genYAML(20)), "g.yaml") {
		if !checkFastGrant(t, gn, "w") {
			t.Fatal("a generated grant took the slow path")
		}
	}
	if n < 4 {
		t.Errorf("only %d fixture grants took the fast path", n)
	}
	// Nodes the fast decoder must leave to the kernel's decoder.
	for _, d := range []string{
		"id: a\nsubject: agent:a\nissuer: human:b\ncapabilities: []\nextra: 1\n",
		"id: a\nsubject: agent:a\nissuer: human:b\ncapabilities: [{resource: {namespace: n, path: []}, actions: [r], scope: exact}]\nrevokedAt: ''\n",
		"id: a\nsubject: agent:a\nissuer: human:b\ncapabilities: [{resource: {namespace: n, path: []}, actions: [r], scope: exact}]\nparentGrantId: ' '\n",
		"id: a\nsubject: agent:a\nissuer: human:b\ncapabilities: [{resource: {namespace: n, path: []}, actions: [r], scope: exact}]\nconstraints: {maxUses: 1.0}\n",
		"id: a\nsubject: '{\"kind\": \"agent\", \"agentId\": \"a\"}'\nissuer: human:b\ncapabilities: [{resource: {namespace: n, path: []}, actions: [r], scope: exact}]\n",
		"id: a\nsubject: {kind: agent, userId: a}\nissuer: human:b\ncapabilities: [{resource: {namespace: n, path: []}, actions: [r], scope: exact}]\n",
	} {
		for _, gn := range grantNodes([]byte(d), "g.yaml") {
			if _, _, ok := fastGrant(gn, "w", &grantAlloc{}); ok {
				t.Errorf("fast decoder accepted %q", d)
			}
		}
	}
}

func FuzzFastGrant(f *testing.F) {
	fuzzSeeds(f, ".yaml", genYAML(2),
		"id: ' a '\nnamespaceId: ' w'\nsubject: {kind: agent, agentId: ' x '}\nissuer: human: b\ncapabilities: [{resource: {namespace: ' n ', path: [' a'], owner: group:g}, actions: [' r ', '*'], scope: exact}]\nconstraints: {purposes: [' p '], notBefore: 2026-01-01T00:00:00Z, expiresAt: 2025-01-01T00:00:00Z, maxUses: 0, delegationDepth: -1}\nmetadata: {a: [1, {b: null}]}\nparentGrantId: a\n")
	for _, s := range []string{"full.json", "example.json"} {
		f.Add(readFixture(f, s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range []string{"f.yaml", "f.json"} {
			for _, gn := range grantNodes(data, name) {
				checkFastGrant(t, gn, "w")
			}
		}
	})
}

func TestTrim(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", " ", "a", " a", "a ", "\u00a0a", "a\u3000", "\ufeffa", "a\u2028", "\ta\n", "ab", "é", "a b", "\x7f", "~"} {
		if got, want := jsTrim(s), jscompat.JSTrim(s); got != want {
			t.Errorf("jsTrim(%q) = %q, want %q", s, got, want)
		}
	}
}
