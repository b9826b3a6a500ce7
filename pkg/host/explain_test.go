package host

import (
	"context"
	"fmt"
	"testing"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// rejectGrants are grants for reading docs that each fail the call on docs/a.md at
// 2026-08-03T09:00:00Z for another reason, and one for another path.
var rejectGrants = "version: 1\ncontext: {actor: agent:helper, owner: human:alice, purpose: triage}\ngrants:\n" +
	readGrant("g-expired", "agent:helper", "read", "docs", `constraints: {expiresAt: "2026-08-01T00:00:00Z"}`) +
	readGrant("g-later", "agent:helper", "read", "docs", `constraints: {notBefore: "2026-09-01T00:00:00Z"}`) +
	readGrant("g-revoked", "agent:helper", "read", "docs", `revokedAt: "2026-08-02T00:00:00Z"`) +
	readGrant("g-purpose", "agent:helper", "read", "docs", `constraints: {purposes: [billing]}`) +
	readGrant("g-other", "agent:other", "read", "docs", "") +
	readGrant("g-write", "agent:helper", "write", "docs", "") +
	readGrant("g-src", "agent:helper", "read", "src", "")

// readGrant is one grant of alice's on files:path (descendants) for action, with an
// extra line (a constraint, a revocation) when it is not "".
func readGrant(id, subject, action, path, extra string) string {
	g := fmt.Sprintf("  - id: %s\n    subject: %s\n    issuer: human:alice\n    capabilities:\n"+
		"      - {resource: {namespace: files, path: [%s]}, actions: [%s], scope: descendants}\n", id, subject, path, action)
	if extra != "" {
		g += "    " + extra + "\n"
	}
	return g
}

// TestExplainSaysWhyEachCandidateFailed: each rejected grant's reason is said in words
// (the texts `explain` prints and scenario files assert), and the refusal is the grant
// gate's with a fix that adds a grant.
func TestExplainSaysWhyEachCandidateFailed(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, rejectGrants)
	ex, err := fx.svc.Explain(context.Background(), api.InvokeRequest{Tool: "files.read",
		Arguments: args(t, map[string]any{"path": []string{"docs", "a.md"}})})
	if err != nil {
		t.Fatal(err)
	}
	if ex.Allowed || ex.Refusal == nil || ex.Refusal.Gate != kernel.GateGrant {
		t.Fatalf("explanation %+v", ex)
	}
	want := map[string]string{
		"g-expired": "expired at 2026-08-01T00:00:00Z",
		"g-later":   "not yet active: active from 2026-09-01T00:00:00Z",
		"g-revoked": "revoked at 2026-08-02T00:00:00Z",
		"g-purpose": `wrong purpose: allows billing, the context's purpose is "triage"`,
		"g-write":   `does not cover the action "read" on files:docs/a.md (it allows write)`,
		"g-src":     `allows "read" but not on files:docs/a.md (it covers files:src, descendants)`,
	}
	got := map[string]string{}
	for _, c := range ex.Candidates {
		got[c.GrantID] = c.Rejected
	}
	for id, reason := range want {
		if got[id] != reason {
			t.Errorf("%s: reason %q, want %q", id, got[id], reason)
		}
	}
	if _, ok := got["g-other"]; ok {
		t.Errorf("a grant to another subject is a candidate: %q", got["g-other"])
	}
	hasAdd := false
	for _, f := range ex.Fixes {
		hasAdd = hasAdd || f.Kind == api.FixAddGrant
	}
	if !hasAdd {
		t.Errorf("no fix adds a grant: %+v", ex.Fixes)
	}
}

// TestRejectionTexts: the reasons no grant file above reaches (issuer, world, verifier,
// delegation, exhaustion, ceiling) and the fallbacks without the grant.
func TestRejectionTexts(t *testing.T) {
	t.Parallel()
	alice, _ := kernel.ParseAddress("human:alice")
	bob, _ := kernel.ParseAddress("agent:bob")
	actx := kernel.AccessContext{Authority: alice, Actor: bob, World: "w1", Purpose: "p", Now: "2026-08-03T09:00:00Z"}
	three := int64(3)
	spent := &kernel.CapabilityGrant{ID: "g", Constraints: kernel.CapabilityConstraints{MaxUses: &three}}
	issued := &kernel.CapabilityGrant{ID: "g", IssuedAt: "2026-09-01T00:00:00Z"}
	for _, tc := range []struct {
		g    *kernel.CapabilityGrant
		r    kernel.RejectedGrant
		want string
	}{
		{nil, kernel.RejectedGrant{Reason: kernel.RejectIssuer}, "issued by another principal than the context's authority human:alice"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectSubject}, "issued to another subject than the actor agent:bob"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectNamespace}, "belongs to another world than w1"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectWindow}, "not active at 2026-08-03T09:00:00Z"},
		{issued, kernel.RejectedGrant{Reason: kernel.RejectWindow}, "not yet active: issued at 2026-09-01T00:00:00Z"},
		{&kernel.CapabilityGrant{}, kernel.RejectedGrant{Reason: kernel.RejectWindow}, "not active at 2026-08-03T09:00:00Z"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectPurpose}, "wrong purpose"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectVerifier}, "refused by the grant verifier"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectCapability}, "does not cover this resource or action"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectDelegation, Detail: "parent revoked"}, "delegation chain: parent revoked"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectDelegation}, "delegation chain: -"},
		{spent, kernel.RejectedGrant{Reason: kernel.RejectExhausted}, "exhausted: all 3 uses are spent"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectExhausted}, "exhausted: all uses are spent"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectRevoked}, "revoked"},
		{nil, kernel.RejectedGrant{Reason: kernel.RejectCeiling}, "refused by the host ceiling"},
		{nil, kernel.RejectedGrant{Reason: "something_new"}, "something_new"},
	} {
		if got := rejectionText(tc.g, tc.r, actx); got != tc.want {
			t.Errorf("%s (grant %v): %q, want %q", tc.r.Reason, tc.g != nil, got, tc.want)
		}
	}
}
