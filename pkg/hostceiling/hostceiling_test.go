package hostceiling

import (
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func TestNarrow(t *testing.T) {
	c, err := New([]string{"files:Workspace/secret", "repo:"}, []string{"delete", "files:snapshot:restore", "snapshot:create"})
	if err != nil {
		t.Fatal(err)
	}
	allow := kernel.AuthorizationDecision{Allowed: true, ReasonCode: kernel.ReasonAllowed, MatchedGrantID: "g"}
	req := func(ns, action string, path ...string) kernel.CapabilityRequirement {
		return kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: ns, Path: path}, Action: action}
	}
	for _, tc := range []struct {
		name    string
		req     kernel.CapabilityRequirement
		refused bool
	}{
		{"frozen path itself", req("files", "read", "Workspace", "secret"), true},
		{"below a frozen path", req("files", "read", "Workspace", "secret", "a.md"), true},
		{"sibling with a common string prefix", req("files", "read", "Workspace", "secret-not"), false},
		{"above a frozen path", req("files", "list", "Workspace"), false},
		{"tool ceiling (discovery)", req("files", "read"), false},
		{"whole namespace frozen", req("repo", "status"), true},
		{"frozen action anywhere", req("files", "delete", "x"), true},
		{"namespaced frozen action", req("files", "snapshot:restore", "x"), true},
		{"namespaced frozen action, other namespace", req("other", "snapshot:restore", "x"), false},
		{"colon action frozen everywhere", req("other", "snapshot:create"), true},
		{"other action", req("files", "create", "x"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := c.Narrow(allow, tc.req, kernel.AccessContext{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed == tc.refused {
				t.Fatalf("allowed=%v, want refused=%v", d.Allowed, tc.refused)
			}
			if !d.Allowed && (d.MatchedGrantID != "g" || d.Metadata["rule"] == nil) {
				t.Fatalf("refusal lacks grant or rule: %+v", d)
			}
		})
	}
}

func TestNewRejects(t *testing.T) {
	for _, bad := range [][2][]string{
		{{"files"}, nil},
		{{":a/b"}, nil},
		{{"files:a/../b"}, nil},
		{{"files:a//b"}, nil},
		{nil, {""}},
		{nil, {"files: read"}},
	} {
		if _, err := New(bad[0], bad[1]); err == nil {
			t.Errorf("New(%q, %q) accepted", bad[0], bad[1])
		}
	}
	var zero *Ceiling
	if !zero.Empty() {
		t.Fatal("nil ceiling should be empty")
	}
}

// In a namespace declared case-insensitive, a frozen path refuses every spelling of
// itself (and what lies below it); elsewhere, and without the declaration, matching
// stays exact.
func TestCaseInsensitiveNamespaces(t *testing.T) {
	c, err := New([]string{"db:acme/secret", "files:Secret", "gh:Straße"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	folded := c.WithCaseInsensitive([]string{"db", "gh"})
	allow := kernel.AuthorizationDecision{Allowed: true, MatchedGrantID: "g"}
	cases := []struct {
		c       *Ceiling
		ns      string
		path    []string
		refused bool
	}{
		{c, "db", []string{"acme", "secret"}, true},
		{c, "db", []string{"acme", "Secret"}, false}, // exact without the declaration
		{folded, "db", []string{"acme", "secret"}, true},
		{folded, "db", []string{"acme", "Secret"}, true},
		{folded, "db", []string{"ACME", "SECRET", "rows"}, true},
		{folded, "db", []string{"acme", "secrets"}, false},
		{folded, "files", []string{"secret"}, false}, // files is not declared
		{folded, "files", []string{"Secret"}, true},
		{folded, "gh", []string{"STRASSE"}, true}, // full case folding: ß is ss
	}
	for _, tc := range cases {
		req := kernel.CapabilityRequirement{Action: "read", Resource: kernel.ResourceRef{Namespace: tc.ns, Path: tc.path}}
		d, err := tc.c.Narrow(allow, req, kernel.AccessContext{})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed == tc.refused {
			t.Errorf("%s:%q (folded %v): allowed=%v, want refused=%v", tc.ns, tc.path, tc.c.folded != nil, d.Allowed, tc.refused)
		}
	}
}
