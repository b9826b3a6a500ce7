package grantfile

import (
	"context"
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

func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// grantFor writes a minimal grant (YAML list item) with the given id, subject and issuer.
func grantFor(id, subject, issuer string) string {
	return "  - id: " + id + "\n    subject: " + subject + "\n    issuer: " + issuer + "\n" +
		"    capabilities:\n      - resource: {namespace: files, path: [" + id + "]}\n        actions: [read]\n        scope: exact\n"
}

func TestLoadSet(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"a.yaml":        "version: 1\ncontext:\n  world: w1\n  actor: agent:helper\ngrants:\n" + grantFor("a1", "agent:helper", "human:alice") + grantFor("a2", "agent:other", "human:alice"),
		"b.json":        `{"version": 1, "context": {"world": "w1", "owner": {"kind": "human", "userId": "alice"}, "purpose": "ops"}, "grants": [` + jsonGrant1("b1") + `]}`,
		"c.yaml":        "version: 1\ncontext:\n  actor: {kind: agent, agentId: helper}\n  authority: human:alice\ngrants: []\n",
		"dup.yaml":      "version: 1\ngrants:\n  - id: x\n" + okGrantYAML + grantFor("a1", "agent:helper", "human:alice"),
		"conflict.yaml": "version: 1\ncontext:\n  purpose: triage\n  world: w1\ngrants: []\n",
		"actor2.yaml":   "version: 1\ncontext:\n  world: w1\n  actor: agent:other\ngrants: []\n",
		"bad.yaml":      "version: 1\ngrants:\n  - id: x\n",
	})
	p := func(names ...string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = filepath.Join(dir, n)
		}
		return out
	}
	t.Run("merge", func(t *testing.T) {
		t.Parallel()
		s, err := LoadSet(p("a.yaml", "b.json", "c.yaml"), SetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		helper := kernel.Address{Kind: kernel.KindAgent, ID: "helper"}
		alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
		want := Context{World: "w1", Actor: &helper, Owner: &alice, Authority: &alice, Purpose: "ops"}
		if got := s.Context(); !reflect.DeepEqual(got, want) {
			t.Errorf("Context() = %+v, want %+v", got, want)
		}
		var ids []string
		for _, f := range s.Files() {
			for _, g := range f.Grants {
				ids = append(ids, g.ID)
			}
		}
		if strings.Join(ids, ",") != "a1,a2,b1" || s.Len() != 3 {
			t.Errorf("grants = %v, want a1,a2,b1 in argument order", ids)
		}
	})
	t.Run("empty", func(t *testing.T) {
		t.Parallel()
		s, err := LoadSet(nil, SetOptions{})
		if err != nil || s.Len() != 0 || !reflect.DeepEqual(s.Context(), Context{}) {
			t.Fatalf("LoadSet(nil) = %v, %v", s, err)
		}
		gs, err := s.LoadGrants(context.Background(), kernel.AccessContext{World: "default"})
		if err != nil || len(gs) != 0 {
			t.Errorf("LoadGrants on an empty set = %v, %v", gs, err)
		}
	})
	errCases := []struct {
		name  string
		files []string
		want  Error
		msg   []string
	}{
		{"duplicate id across files", []string{"a.yaml", "dup.yaml"}, Error{File: "dup.yaml", Grant: "a1", Field: "id", Line: 10}, []string{"a.yaml:6", `duplicate grant id "a1"`}},
		{"same file twice", []string{"a.yaml", "a.yaml"}, Error{File: "a.yaml", Grant: "a1", Field: "id", Line: 6}, []string{"also defined in"}},
		{"context conflict", []string{"b.json", "conflict.yaml"}, Error{File: "conflict.yaml", Field: "context.purpose", Line: 3}, []string{`"triage" conflicts with "ops"`, "b.json:1"}},
		{"context actor conflict", []string{"a.yaml", "actor2.yaml"}, Error{File: "actor2.yaml", Field: "context.actor", Line: 4}, []string{`"agent:other" conflicts with "agent:helper"`, "a.yaml:4"}},
		{"invalid file", []string{"a.yaml", "bad.yaml"}, Error{File: "bad.yaml", Grant: "x", Field: "subject", Line: 3}, []string{"is required"}},
		{"missing file", []string{"a.yaml", "nope.yaml"}, Error{File: "nope.yaml"}, []string{"cannot read"}},
	}
	for _, tc := range errCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := LoadSet(p(tc.files...), SetOptions{})
			var e *Error
			if s != nil || !errors.As(err, &e) {
				t.Fatalf("LoadSet = %v, %v; want (nil, *Error)", s, err)
			}
			got := Error{File: filepath.Base(e.File), Grant: e.Grant, Field: e.Field, Line: e.Line}
			if got != tc.want {
				t.Errorf("error = %#v (%v), want %#v", got, err, tc.want)
			}
			for _, m := range tc.msg {
				if !strings.Contains(e.Message, m) {
					t.Errorf("message %q lacks %q", e.Message, m)
				}
			}
		})
	}
}

func TestGrantSource(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"a.yaml": "version: 1\ncontext: {world: w1}\ngrants:\n" +
			grantFor("g1", "agent:helper", "human:alice") +
			grantFor("g2", "agent:other", "human:alice") +
			grantFor("g3", "agent:helper", "human:bob") +
			grantFor("g4", "agent:helper", "human:alice") +
			"  - id: g5\n    namespaceId: w2\n    subject: agent:helper\n    issuer: human:alice\n    capabilities:\n      - resource: {namespace: files, path: [x], owner: human:alice}\n        actions: [read]\n        scope: exact\n    metadata: {k: [1]}\n",
		"b.yaml": "version: 1\ncontext: {world: w1}\ngrants:\n" + grantFor("g6", "agent:helper", "human:alice"),
	})
	s, err := LoadSet([]string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")}, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	actx := func(world, actor, authority string) kernel.AccessContext {
		a, _ := kernel.ParseAddress(actor)
		b, _ := kernel.ParseAddress(authority)
		return kernel.AccessContext{World: world, Actor: a, Authority: b, Owner: b}
	}
	tests := []struct {
		name string
		actx kernel.AccessContext
		want []string
	}{
		{"helper/alice in w1", actx("w1", "agent:helper", "human:alice"), []string{"g1", "g4", "g6"}},
		{"other actor", actx("w1", "agent:other", "human:alice"), []string{"g2"}},
		{"other authority", actx("w1", "agent:helper", "human:bob"), []string{"g3"}},
		{"other world", actx("w2", "agent:helper", "human:alice"), []string{"g5"}},
		{"actor and authority swapped", actx("w1", "human:alice", "agent:helper"), nil},
		{"unknown world", actx("default", "agent:helper", "human:alice"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gs, err := s.LoadGrants(context.Background(), tc.actx)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, g := range gs {
				ids = append(ids, g.ID)
				if g.NamespaceID != tc.actx.World || g.Subject != tc.actx.Actor || g.Issuer != tc.actx.Authority {
					t.Errorf("grant %s is out of the context's scope", g.ID)
				}
			}
			if !reflect.DeepEqual(ids, tc.want) {
				t.Errorf("LoadGrants = %v, want %v", ids, tc.want)
			}
		})
	}
	t.Run("callers cannot mutate the set", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		gs, _ := s.LoadGrants(ctx, actx("w2", "agent:helper", "human:alice"))
		g := &gs[0]
		g.Capabilities[0].Actions[0] = "delete"
		g.Capabilities[0].Resource.Path[0] = "/"
		g.Capabilities[0].Resource.Owner.ID = "mallory"
		g.Metadata["k"].([]any)[0] = "x"
		g.Metadata["new"] = true
		r, _ := s.ResolveGrant(ctx, "w2", "g5")
		r.Constraints.Purposes = []string{"x"}
		again, _ := s.LoadGrants(ctx, actx("w2", "agent:helper", "human:alice"))
		fresh, _ := s.ResolveGrant(ctx, "w2", "g5")
		for _, h := range []*kernel.CapabilityGrant{&again[0], fresh, &s.Files()[0].Grants[4]} {
			if h.Capabilities[0].Actions[0] != "read" || h.Capabilities[0].Resource.Path[0] != "x" ||
				h.Capabilities[0].Resource.Owner.ID != "alice" || len(h.Metadata) != 1 ||
				!reflect.DeepEqual(h.Metadata["k"], []any{jsonNum("1")}) || h.Constraints.Purposes != nil {
				t.Fatalf("the set was mutated through a returned grant: %+v", h)
			}
		}
		c := s.Context()
		c.World = "changed"
		if s.Context().World != "w1" {
			t.Error("Context() shares state")
		}
	})
}

// TestGrantSnapshotScopes: a snapshot holds exactly its scope's grants in file order,
// with the kernel's hash; a scope that is one contiguous run of one file is that run of
// the set's own grants (not a copy, and capacity-limited so that an append cannot reach a
// neighbour), a scope spread over the file or over files is its own slice.
func TestGrantSnapshotScopes(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"a.yaml": "version: 1\ncontext: {world: w1}\ngrants:\n" +
			grantFor("g1", "agent:helper", "human:alice") +
			grantFor("g2", "agent:other", "human:alice") +
			grantFor("g3", "agent:other", "human:alice") +
			grantFor("g4", "agent:helper", "human:alice"),
		"b.yaml": "version: 1\ncontext: {world: w1}\ngrants:\n" + grantFor("g5", "agent:bob", "human:alice") + grantFor("g6", "agent:helper", "human:alice"),
	})
	s, err := LoadSet([]string{filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")}, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	tests := []struct {
		actor  string
		want   []string
		shared *kernel.CapabilityGrant // the set's grant the snapshot's first must be, or nil
	}{
		{"other", []string{"g2", "g3"}, &s.files[0].Grants[1]},
		{"bob", []string{"g5"}, &s.files[1].Grants[0]},
		{"helper", []string{"g1", "g4", "g6"}, nil},
		{"nobody", nil, nil},
	}
	for _, tc := range tests {
		actx := kernel.AccessContext{World: "w1", Actor: kernel.Address{Kind: kernel.KindAgent, ID: tc.actor}, Authority: alice}
		snap, err := s.LoadGrantSnapshot(context.Background(), actx)
		if err != nil || snap.Grants == nil {
			t.Fatalf("%s: snapshot %v, %v", tc.actor, snap, err)
		}
		var ids []string
		for _, g := range snap.Grants {
			ids = append(ids, g.ID)
		}
		if !reflect.DeepEqual(ids, tc.want) {
			t.Errorf("%s: snapshot grants %v, want %v", tc.actor, ids, tc.want)
		}
		if want := kernel.HashGrants(snap.Grants); snap.Hash != want {
			t.Errorf("%s: hash %s, want the kernel's %s", tc.actor, snap.Hash, want)
		}
		if len(snap.Grants) == 0 {
			continue
		}
		if shared := &snap.Grants[0] == tc.shared; shared != (tc.shared != nil) {
			t.Errorf("%s: snapshot shares the set's grants = %v, want %v", tc.actor, shared, tc.shared != nil)
		}
		if cap(snap.Grants) != len(snap.Grants) {
			t.Errorf("%s: snapshot capacity %d beyond its %d grants", tc.actor, cap(snap.Grants), len(snap.Grants))
		}
		for _, f := range s.files {
			for i := range f.Grants {
				if tc.shared == nil && &snap.Grants[0] == &f.Grants[i] {
					t.Errorf("%s: a spread scope aliases the file's grants", tc.actor)
				}
			}
		}
	}
}

func TestResolveGrant(t *testing.T) {
	t.Parallel()
	s, err := LoadSet([]string{filepath.Join("testdata", "full.yaml")}, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		world, id string
		found     bool
	}{
		{"w1", "g-root", true},  // issued to alice, not to the context's actor: still resolvable
		{"w1", "g-child", true}, //
		{"w2", "g-bounded", true},
		{"w1", "g-bounded", false}, // wrong world
		{"w1", "nope", false},
	}
	for _, tc := range tests {
		g, err := s.ResolveGrant(context.Background(), tc.world, tc.id)
		if err != nil || (g != nil) != tc.found || (g != nil && (g.ID != tc.id || g.NamespaceID != tc.world)) {
			t.Errorf("ResolveGrant(%s, %s) = %v, %v; want found=%v", tc.world, tc.id, g, err, tc.found)
		}
	}
}

// TestSetWithKernel drives the kernel's authorizer over a Set: the derived grant of
// full.yaml authorizes through its chain, resolved from the same set.
func TestSetWithKernel(t *testing.T) {
	t.Parallel()
	s, err := LoadSet([]string{filepath.Join("testdata", "full.yaml")}, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	helper := kernel.Address{Kind: kernel.KindAgent, ID: "helper"}
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	actx := kernel.AccessContext{World: "w1", Actor: helper, Authority: alice, Owner: alice, Purpose: "triage",
		TraceID: "t", EnabledToolNamespaces: []string{"files"}, Now: "2026-03-01T00:00:00Z"}
	gs, err := s.LoadGrants(context.Background(), actx)
	if err != nil || len(gs) != 1 || gs[0].ID != "g-child" {
		t.Fatalf("LoadGrants = %v, %v", gs, err)
	}
	auth := kernel.ResolveAuthority(context.Background(), s, actx, 0)
	if auth.Unavailable() != "" {
		t.Fatalf("authority unavailable: %s", auth.Unavailable())
	}
	req := kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"Workspace", "public"}}, Action: "read"}
	z := &kernel.Authorizer{Resolver: s}
	if d, _ := z.Authorize(context.Background(), auth, actx, req, kernel.AuthorizeOptions{}); !d.Allowed || d.MatchedGrantID != "g-child" {
		t.Errorf("Authorize with the set as resolver = %+v, want allowed via g-child", d)
	}
	if d, _ := (&kernel.Authorizer{}).Authorize(context.Background(), auth, actx, req, kernel.AuthorizeOptions{}); d.Allowed {
		t.Errorf("Authorize without a resolver = %+v, want a refusal", d)
	}
}

// TestLoadSetRefusals checks the kinds of refusal LoadSet tells apart, and that a
// refused set still reports the context blocks its files' own parse read cleanly.
func TestLoadSetRefusals(t *testing.T) {
	t.Parallel()
	helper := kernel.Address{Kind: kernel.KindAgent, ID: "helper"}
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	dir := writeFiles(t, map[string]string{
		"good.yaml":        "version: 1\ncontext:\n  world: w1\n  actor: agent:helper\ngrants:\n" + grantFor("a1", "agent:helper", "human:alice"),
		"badgrant.yaml":    "version: 1\ncontext:\n  owner: human:alice\n  purpose: triage\ngrants:\n  - id: x\n",
		"badctx.yaml":      "version: 1\ncontext:\n  owner: human:bob\n  actor: nokind\ngrants: []\n",
		"dupctx.yaml":      "version: 1\ncontext:\n  owner: human:bob\n  owner: human:bob\ngrants: []\n",
		"syntax.yaml":      "version: 1\ncontext:\n  owner: human:bob\ngrants:\n  - id: [unclosed\n",
		"tab.yaml":         "version: 1\ncontext:\n  authority: human:bob\ngrants:\n\t- id: x\n",
		"jsonsyntax.json":  "{\"version\": 1, \"context\": {\"authority\": \"human:alice\"},\n \"grants\": [ }",
		"jsoninctx.json":   "{\"version\": 1, \"context\": {\"authority\": \"human:alice\", }, \"grants\": []}",
		"badversion.yaml":  "version: 2\ncontext:\n  authority: human:alice\ngrants: []\n",
		"conflictbad.yaml": "version: 1\ncontext:\n  actor: agent:other\ngrants:\n  - id: y\n",
		"bobctx.yaml":      "version: 1\ncontext:\n  owner: human:bob\ngrants: {}\n",
		"dupid.yaml":       "version: 1\ncontext:\n  purpose: ops\ngrants:\n" + grantFor("a1", "agent:helper", "human:alice"),
	})
	p := func(names ...string) []string {
		out := make([]string, len(names))
		for i, n := range names {
			out[i] = filepath.Join(dir, n)
		}
		return out
	}
	refused := []struct {
		name  string
		files []string
		want  Context
		msg   string
	}{
		{"bad grant keeps both contexts", []string{"good.yaml", "badgrant.yaml"}, Context{World: "w1", Actor: &helper, Owner: &alice, Purpose: "triage"}, "badgrant.yaml:6"},
		{"first problem in argument order", []string{"badgrant.yaml", "badctx.yaml"}, Context{Owner: &alice, Purpose: "triage"}, "badgrant.yaml:6"},
		{"invalid context block contributes nothing", []string{"badctx.yaml", "good.yaml"}, Context{World: "w1", Actor: &helper}, "badctx.yaml:4"},
		{"duplicate key in the context contributes nothing", []string{"dupctx.yaml"}, Context{}, "dupctx.yaml:4"},
		{"YAML syntax error: no tree, no context", []string{"syntax.yaml", "good.yaml"}, Context{World: "w1", Actor: &helper}, "syntax.yaml:5"},
		{"YAML tab", []string{"tab.yaml"}, Context{}, "tab.yaml:5"},
		{"JSON syntax error after a complete context", []string{"jsonsyntax.json"}, Context{Authority: &alice}, "jsonsyntax.json:2"},
		{"JSON syntax error inside the context", []string{"jsoninctx.json"}, Context{}, "jsoninctx.json:1"},
		{"bad version still reads the context", []string{"badversion.yaml"}, Context{Authority: &alice}, "badversion.yaml:1"},
		{"duplicate id across files", []string{"good.yaml", "dupid.yaml"}, Context{World: "w1", Actor: &helper, Purpose: "ops"}, "dupid.yaml:5"},
	}
	for _, tc := range refused {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := LoadSet(p(tc.files...), SetOptions{})
			var re *RefusedError
			var e *Error
			if s != nil || !errors.As(err, &re) || !errors.As(err, &e) {
				t.Fatalf("LoadSet = %v, %v; want (nil, *RefusedError wrapping *Error)", s, err)
			}
			if errors.Is(err, ErrContextConflict) {
				t.Errorf("a grant-level refusal matches ErrContextConflict: %v", err)
			}
			if !reflect.DeepEqual(re.Context, tc.want) {
				t.Errorf("Context = %s, want %s", fmtContext(re.Context), fmtContext(tc.want))
			}
			if !strings.Contains(err.Error(), tc.msg) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q does not name %s on one line", err, tc.msg)
			}
		})
	}

	conflicts := []struct {
		name  string
		files []string
		msg   string
	}{
		{"two good files", []string{"good.yaml", "badgrant.yaml", "conflictbad.yaml"}, `context.actor "agent:other" conflicts with "agent:helper"`},
		{"refused file's context still conflicts", []string{"conflictbad.yaml", "good.yaml"}, `context.actor "agent:helper" conflicts with "agent:other"`},
		{"only clean blocks count", []string{"badgrant.yaml", "badctx.yaml", "dupctx.yaml", "syntax.yaml", "good.yaml", "badversion.yaml", "jsonsyntax.json", "bobctx.yaml"}, `bobctx.yaml:3: context.owner: context.owner "human:bob" conflicts with "human:alice" in `},
	}
	for _, tc := range conflicts {
		t.Run("conflict/"+tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := LoadSet(p(tc.files...), SetOptions{})
			var re *RefusedError
			if s != nil || !errors.Is(err, ErrContextConflict) || errors.As(err, &re) {
				t.Fatalf("LoadSet = %v, %v; want an ErrContextConflict that is no *RefusedError", s, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q lacks %q", err, tc.msg)
			}
		})
	}

	t.Run("unreadable file", func(t *testing.T) {
		t.Parallel()
		s, err := LoadSet(p("good.yaml", "missing.yaml"), SetOptions{})
		var re *RefusedError
		if s != nil || !errors.Is(err, fs.ErrNotExist) || errors.As(err, &re) || errors.Is(err, ErrContextConflict) {
			t.Fatalf("LoadSet = %v, %v; want a plain not-exist *Error", s, err)
		}
	})
	t.Run("good files match neither", func(t *testing.T) {
		t.Parallel()
		if _, err := LoadSet(p("good.yaml"), SetOptions{}); err != nil {
			t.Fatal(err)
		}
	})
}

func fmtContext(c Context) string {
	a := func(x *kernel.Address) string {
		if x == nil {
			return "-"
		}
		return x.String()
	}
	return fmt.Sprintf("{world=%q actor=%s owner=%s authority=%s purpose=%q}", c.World, a(c.Actor), a(c.Owner), a(c.Authority), c.Purpose)
}
