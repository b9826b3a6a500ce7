package grantfile

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// lintClock is the wall clock of the lint tests: before the fixtures' expiries.
func lintClock() time.Time { return time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC) }

// lintAt is Lint at lintClock.
func lintAt(paths []string) []Finding { return LintWithOptions(paths, LintOptions{Now: lintClock}) }

// lg is one grant of a lint fixture, written as a one-line YAML flow mapping (so grant i
// of a file is on line i+3).
type lg struct {
	id, ns, sub, iss, parent, issued, caps, cons string
}

func (g lg) yaml() string {
	def := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	var parts []string
	parts = append(parts, "id: "+g.id)
	if g.ns != "" {
		parts = append(parts, "namespaceId: "+g.ns)
	}
	parts = append(parts, "subject: "+def(g.sub, "agent:x"), "issuer: "+def(g.iss, "human:alice"))
	if g.parent != "" {
		parts = append(parts, "parentGrantId: "+g.parent)
	}
	if g.issued != "-" {
		parts = append(parts, "issuedAt: "+def(g.issued, "2026-02-01T00:00:00Z"))
	}
	parts = append(parts, "capabilities: "+def(g.caps, "[{resource: {namespace: files, path: [W, a]}, actions: [read], scope: exact}]"))
	if g.cons != "-" {
		parts = append(parts, "constraints: "+def(g.cons, "{expiresAt: 2026-12-01T00:00:00Z}"))
	}
	return "  - {" + strings.Join(parts, ", ") + "}\n"
}

func lintFile(gs ...lg) string {
	var b strings.Builder
	b.WriteString("version: 1\ngrants:\n")
	for _, g := range gs {
		b.WriteString(g.yaml())
	}
	return b.String()
}

// parentP is a delegable root grant.
var parentP = lg{id: "P", sub: "human:alice", iss: "service:admin", issued: "2026-01-01T00:00:00Z",
	caps: "[{resource: {namespace: files, path: [W]}, actions: [read, write], scope: descendants}]",
	cons: "{expiresAt: 2027-01-01T00:00:00Z, delegationDepth: 2}"}

func withCons(g lg, cons string) lg { g.cons = cons; return g }

func chain(n int) []lg {
	out := make([]lg, n)
	for i := range out {
		out[i] = lg{id: fmt.Sprintf("c%02d", i), sub: "human:alice", iss: "human:alice",
			caps: "[{resource: {namespace: files, path: [W]}, actions: [read], scope: exact}]",
			cons: fmt.Sprintf("{expiresAt: 2027-01-01T00:00:00Z, delegationDepth: %d}", n-1-i)}
		if i > 0 {
			out[i].parent = out[i-1].id
		}
	}
	return out
}

func TestLint(t *testing.T) {
	t.Parallel()
	type want struct {
		file, grant, field string
		line               int
		sev, msg           string
	}
	const E, W = SeverityError, SeverityWarning
	tests := []struct {
		name  string
		files []string // file i is written as f<i>.yaml
		want  []want
	}{
		{"valid chain", []string{lintFile(parentP, lg{id: "C", parent: "P"})}, nil},
		{"parent in another file", []string{lintFile(parentP), lintFile(lg{id: "C", parent: "P"})}, nil},
		{"parent not found", []string{lintFile(lg{id: "C", parent: "nope"})},
			[]want{{"f0", "C", "parentGrantId", 3, E, `parent grant "nope" not found`}}},
		{"parent in another world", []string{lintFile(func() lg { p := parentP; p.ns = "w2"; return p }(), lg{id: "C", parent: "P"})},
			[]want{{"f0", "C", "parentGrantId", 4, E, `parent grant "P" not found in world "default" (it is in world "w2")`}}},
		{"issuer is not the parent's subject", []string{lintFile(parentP, lg{id: "C", parent: "P", iss: "human:bob"})},
			[]want{{"f0", "C", "issuer", 4, E, "(issuer_not_parent_subject): the issuer must be the parent's subject, human:alice"}}},
		{"parent not delegable", []string{lintFile(withCons(parentP, "{expiresAt: 2027-01-01T00:00:00Z}"), lg{id: "C", parent: "P"})},
			[]want{{"f0", "C", "parentGrantId", 4, E, "(delegation_not_permitted)"}}},
		{"depth exceeded", []string{lintFile(parentP, lg{id: "C", parent: "P", cons: "{expiresAt: 2026-12-01T00:00:00Z, delegationDepth: 2}"})},
			[]want{{"f0", "C", "constraints.delegationDepth", 4, E, "(delegation_depth_exceeded): delegationDepth must be at most 1"}}},
		{"bounded parent", []string{lintFile(withCons(parentP, "{expiresAt: 2027-01-01T00:00:00Z, delegationDepth: 2, maxUses: 5}"), lg{id: "C", parent: "P"})},
			[]want{{"f0", "C", "parentGrantId", 4, E, "(bounded_parent_not_delegable)"}}},
		{"capability widened", []string{lintFile(parentP, lg{id: "C", parent: "P", caps: "[{resource: {namespace: files, path: [W, a]}, actions: [read], scope: exact}, {resource: {namespace: files, path: [W]}, actions: [delete], scope: exact}]"})},
			[]want{{"f0", "C", "capabilities.1", 4, E, "(capability_widened): capability 1 is not within"}}},
		{"issued before parent", []string{lintFile(parentP, lg{id: "C", parent: "P", issued: "2025-01-01T00:00:00Z"})},
			[]want{{"f0", "C", "issuedAt", 4, E, "(constraints_widened): issued before its parent"}}},
		{"never expires under an expiring parent", []string{lintFile(parentP, lg{id: "C", parent: "P", cons: "-"})},
			[]want{{"f0", "C", "constraints", 4, E, "(constraints_widened): the parent expires at"}, {"f0", "C", "constraints", 4, W, "never expires"}}},
		{"derived grant without issuedAt", []string{lintFile(parentP, lg{id: "C", parent: "P", issued: "-"})},
			[]want{{"f0", "C", "issuedAt", 4, E, "has no issuedAt"}, {"f0", "C", "issuedAt", 4, E, "(constraints_widened): issued before its parent"}}},
		{"cycle", []string{lintFile(
			lg{id: "A", sub: "human:alice", parent: "B", cons: "{expiresAt: 2026-12-01T00:00:00Z, delegationDepth: 1}"},
			lg{id: "B", sub: "human:alice", parent: "A", cons: "{expiresAt: 2026-12-01T00:00:00Z, delegationDepth: 1}"})},
			[]want{
				{"f0", "A", "constraints.delegationDepth", 3, E, "delegation_depth_exceeded"},
				{"f0", "A", "parentGrantId", 3, E, "delegation chain cycles: A → B → A"},
				{"f0", "B", "constraints.delegationDepth", 4, E, "delegation_depth_exceeded"},
				{"f0", "B", "parentGrantId", 4, E, "delegation chain cycles: B → A → B"},
			}},
		{"chain of 16 is fine", []string{lintFile(chain(16)...)}, nil},
		{"chain of 18 is too long", []string{lintFile(chain(18)...)},
			[]want{{"f0", "c16", "parentGrantId", 19, E, "more than 16 grants"}}},
		{"duplicate id across files", []string{lintFile(parentP), lintFile(lg{id: "X"}, withCons(parentP, "{expiresAt: 2027-01-01T00:00:00Z}"))},
			[]want{{"f1", "P", "id", 4, E, `duplicate grant id "P": also defined in`}}},
		{"breadth warnings", []string{lintFile(lg{id: "W", caps: "[{resource: {namespace: files, path: []}, actions: [read, \"*\"], scope: descendants}]", cons: "{}"})},
			[]want{
				{"f0", "W", "capabilities.0.actions.1", 3, W, `action "*" allows every action`},
				{"f0", "W", "capabilities.0.resource.path", 3, W, `covers the whole "files" namespace`},
				{"f0", "W", "constraints", 3, W, "never expires"},
			}},
		{"unparsable file, then a good one", []string{"version: 1\ngrants:\n  - {id: B, subject: robot:r}\n", lintFile(lg{id: "C", parent: "nope"})},
			[]want{{"f0", "B", "subject", 3, E, `unknown kind "robot"`}, {"f1", "C", "parentGrantId", 3, E, "not found"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := map[string]string{}
			var paths []string
			for i, data := range tc.files {
				name := fmt.Sprintf("f%d.yaml", i)
				files[name] = data
			}
			dir := writeFiles(t, files)
			for i := range tc.files {
				paths = append(paths, filepath.Join(dir, fmt.Sprintf("f%d.yaml", i)))
			}
			got := lintAt(paths)
			var lines []string
			for _, f := range got {
				lines = append(lines, f.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Lint = %d findings, want %d:\n%s", len(got), len(tc.want), strings.Join(lines, "\n"))
			}
			for i, w := range tc.want {
				f := got[i]
				if strings.TrimSuffix(filepath.Base(f.File), ".yaml") != w.file || f.Grant != w.grant || f.Field != w.field ||
					f.Line != w.line || f.Severity != w.sev || !strings.Contains(f.Message, w.msg) {
					t.Errorf("finding %d = %s\nwant %+v", i, f, w)
				}
			}
		})
	}
}

func TestLintFixtures(t *testing.T) {
	t.Parallel()
	got := lintAt([]string{filepath.Join("testdata", "full.yaml"), filepath.Join("testdata", "example.yaml")})
	var lines []string
	for _, f := range got {
		lines = append(lines, f.String())
	}
	want := []string{
		`testdata/full.yaml:21: warning: grant "g-root": capabilities.1.actions.0: action "*" allows every action, including ones added later`,
		`testdata/full.yaml:47: warning: grant "g-bounded": constraints: grant never expires (no constraints.expiresAt)`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("Lint =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if HasErrors(got, false) || !HasErrors(got, true) || HasErrors(nil, true) {
		t.Error("HasErrors: warnings count only when strict")
	}
	if !HasErrors([]Finding{{Severity: SeverityError}}, false) {
		t.Error("HasErrors misses an error")
	}
}

func TestFindingJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		f    Finding
		want string
	}{
		{Finding{File: "g.yaml", Grant: "g1", Field: "constraints", Line: 4, Severity: SeverityWarning, Message: "m"},
			`{"file":"g.yaml","grant":"g1","field":"constraints","line":4,"severity":"warning","message":"m"}`},
		{Finding{File: "g.yaml", Severity: SeverityError, Message: "m"},
			`{"file":"g.yaml","grant":"","field":"","severity":"error","message":"m"}`},
	} {
		b, err := json.Marshal(tc.f)
		if err != nil || string(b) != tc.want {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", tc.f, b, err, tc.want)
		}
	}
}
