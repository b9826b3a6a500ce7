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
