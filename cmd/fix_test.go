package cmd

import (
	"testing"

	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestFixGrantNamesTheAuthority: with an authority other than the owner, the suggested
// grant is issued by the authority (not the owner), and appending it makes the call
// allowed; issued by the owner it would be refused (issuer).
func TestFixGrantNamesTheAuthority(t *testing.T) {
	t.Parallel()
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	ops := kernel.Address{Kind: kernel.KindService, ID: "ops"}
	actx := kernel.AccessContext{World: "w", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "a"}, Authority: ops,
		Owner: alice, Purpose: "p", TraceID: "t", Now: "2026-08-03T09:00:00.000Z", EnabledToolNamespaces: []string{}}
	req := kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a.md"}}, Action: "read"}
	g := fixGrant(actx, req, nil)
	if g.Issuer != ops || g.Subject != actx.Actor {
		t.Fatalf("fix grant issuer %s subject %s, want issuer %s subject %s", g.Issuer, g.Subject, ops, actx.Actor)
	}
	f, err := grantfile.Parse("fix.yaml", []byte("version: 1\ngrants:\n"+grantfile.FormatGrantYAML(g)))
	if err != nil {
		t.Fatal(err)
	}
	var z kernel.Authorizer
	if d, _ := z.Authorize(t.Context(), kernel.NewAuthority(f.Grants, actx, 0), actx, req, kernel.AuthorizeOptions{}); !d.Allowed {
		t.Fatalf("the fix grant does not allow the call: %s", d.ReasonCode)
	}
	byOwner := g
	byOwner.Issuer = alice
	d, diag := z.Authorize(t.Context(), kernel.NewAuthority([]kernel.CapabilityGrant{byOwner}, kernel.AccessContext{World: "w", Actor: actx.Actor, Authority: alice,
		Owner: alice, Purpose: "p", TraceID: "t", Now: actx.Now}, 0), actx, req, kernel.AuthorizeOptions{})
	if d.Allowed || len(diag.RejectedGrants) != 1 || diag.RejectedGrants[0].Reason != kernel.RejectIssuer {
		t.Fatalf("a grant issued by the owner: %s %+v, want refused (issuer)", d.ReasonCode, diag)
	}
}
