package kernel_test

import (
	"context"
	"errors"
	"testing"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// revocationFunc adapts a function to kernel.GrantRevocationSource.
type revocationFunc func(ids []string) (kernel.RevocationCheck, error)

func (f revocationFunc) Check(_ context.Context, _ kernel.AccessContext, ids []string) (kernel.RevocationCheck, error) {
	return f(ids)
}

type verifierFunc func(g *kernel.CapabilityGrant) (bool, error)

func (f verifierFunc) Verify(_ context.Context, g *kernel.CapabilityGrant, _ kernel.AccessContext) (bool, error) {
	return f(g)
}

// TestLiveRevocation: a revoked leaf or ancestor rejects that candidate only; a source
// that throws or answers malformed refuses immediately with authority_unavailable.
func TestLiveRevocation(t *testing.T) {
	a := grant("A", []string{"read"}, kernel.ScopeDescendants)
	b := grant("B", []string{"read"}, kernel.ScopeDescendants)
	root := withConstraints(grant("root", []string{"read"}, kernel.ScopeDescendants), func(g *kernel.CapabilityGrant) {
		g.Subject, g.Issuer = alice, carol
		g.Constraints.DelegationDepth = i64(1)
	})
	derived := withConstraints(grant("D", []string{"read"}, kernel.ScopeDescendants), func(g *kernel.CapabilityGrant) { g.ParentGrantID = "root" })
	cases := []struct {
		name   string
		grants []kernel.CapabilityGrant
		src    revocationFunc
		want   kernel.ReasonCode
		grant  string
		asked  []string
	}{
		{"none revoked", []kernel.CapabilityGrant{a}, func([]string) (kernel.RevocationCheck, error) {
			return kernel.RevocationCheck{Revision: "r1"}, nil
		}, kernel.ReasonAllowed, "A", []string{"A"}},
		{"leaf revoked, next grant covers", []kernel.CapabilityGrant{a, b}, func(ids []string) (kernel.RevocationCheck, error) {
			if ids[0] == "A" {
				return kernel.RevocationCheck{Revision: "r1", RevokedGrantIDs: []string{"A"}}, nil
			}
			return kernel.RevocationCheck{Revision: "r1"}, nil
		}, kernel.ReasonAllowed, "B", nil},
		{"ancestor revoked", []kernel.CapabilityGrant{derived}, func(ids []string) (kernel.RevocationCheck, error) {
			return kernel.RevocationCheck{Revision: "r1", RevokedGrantIDs: []string{"root"}}, nil
		}, kernel.ReasonNoMatchingGrant, "", []string{"D", "root"}},
		{"source throws", []kernel.CapabilityGrant{a}, func([]string) (kernel.RevocationCheck, error) {
			return kernel.RevocationCheck{}, errors.New("down")
		}, kernel.ReasonAuthorityUnavailable, "", nil},
		{"empty revision", []kernel.CapabilityGrant{a}, func([]string) (kernel.RevocationCheck, error) {
			return kernel.RevocationCheck{}, nil
		}, kernel.ReasonAuthorityUnavailable, "", nil},
		{"foreign id", []kernel.CapabilityGrant{a}, func([]string) (kernel.RevocationCheck, error) {
			return kernel.RevocationCheck{Revision: "r1", RevokedGrantIDs: []string{"Z"}}, nil
		}, kernel.ReasonAuthorityUnavailable, "", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var asked []string
			src := func(ids []string) (kernel.RevocationCheck, error) {
				if asked == nil {
					asked = append([]string(nil), ids...)
				}
				return c.src(ids)
			}
			z := kernel.Authorizer{Revocation: revocationFunc(src), Resolver: resolverMap{"root": &root}}
			actx := testContext()
			d, diag := z.Authorize(context.Background(), kernel.NewAuthority(c.grants, actx, 0), actx, req("read", "x"), kernel.AuthorizeOptions{})
			if d.ReasonCode != c.want || d.MatchedGrantID != c.grant {
				t.Fatalf("decision %+v (rejected %+v), want %s via %q", d, diag.RejectedGrants, c.want, c.grant)
			}
			if c.asked != nil && (len(asked) != len(c.asked) || asked[0] != c.asked[0] || asked[len(asked)-1] != c.asked[len(c.asked)-1]) {
				t.Fatalf("asked %v, want the leaf first then its ancestors %v", asked, c.asked)
			}
		})
	}
}

func TestGrantVerifier(t *testing.T) {
	a := grant("A", []string{"read"}, kernel.ScopeDescendants)
	b := grant("B", []string{"read"}, kernel.ScopeDescendants)
	z := kernel.Authorizer{Verifier: verifierFunc(func(g *kernel.CapabilityGrant) (bool, error) {
		if g.ID == "A" {
			return false, errors.New("cannot verify")
		}
		return true, nil
	})}
	actx := testContext()
	d, diag := z.Authorize(context.Background(), kernel.NewAuthority([]kernel.CapabilityGrant{a, b}, actx, 0), actx, req("read", "x"), kernel.AuthorizeOptions{})
	if !d.Allowed || d.MatchedGrantID != "B" || len(diag.RejectedGrants) != 1 || diag.RejectedGrants[0].Reason != kernel.RejectVerifier {
		t.Fatalf("decision %+v, rejected %+v", d, diag.RejectedGrants)
	}
}

func TestLocaleOrder(t *testing.T) {
	got := []string{"repo", "Files", "files", "calendar", "a", "A", "ab"}
	jscompat.SortLocale(got)
	want := []string{"a", "A", "ab", "calendar", "files", "Files", "repo"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}

func TestPublishAndClass(t *testing.T) {
	def := kernel.EscalationTool().Definition
	p := def.Publish()
	if p.Name != def.Name || p.Annotations == nil || p.Annotations.ReadOnlyHint == nil || !*p.Annotations.ReadOnlyHint ||
		p.Metadata == nil || p.Metadata.Namespace != "sharedos" {
		t.Fatalf("published %+v", p)
	}
	if def.Class() != "read" {
		t.Fatalf("class %s", def.Class())
	}
	w := echoTool("t.del", "delete").Definition
	w.ReadWrite = kernel.ClassWrite
	w.Annotations = &kernel.ToolAnnotations{Destructive: kernel.BoolPtr(true)}
	if w.Class() != "destructive" {
		t.Fatalf("class %s", w.Class())
	}
}
