package kernel_test

import (
	"context"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func TestDeriveGrant(t *testing.T) {
	parent := withConstraints(grant("root", []string{"read", "list"}, kernel.ScopeDescendants, "docs"), func(g *kernel.CapabilityGrant) {
		g.Subject = alice
		g.Issuer = carol
		g.Constraints.DelegationDepth = i64(2)
		g.Constraints.Purposes = []string{"prepare-update", "audit"}
		g.Constraints.NotBefore = "2026-08-03T07:00:00.000Z"
		g.Constraints.ExpiresAt = "2026-08-04T00:00:00.000Z"
	})
	base := func() kernel.DeriveRequest {
		return kernel.DeriveRequest{ID: "child", Subject: bob, IssuedAt: "2026-08-03T08:30:00.000Z",
			Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"docs", "a"}}, Actions: []string{"read"}, Scope: kernel.ScopeExact}}}
	}
	cases := []struct {
		name   string
		parent func(*kernel.CapabilityGrant)
		req    func(*kernel.DeriveRequest)
		want   kernel.DeriveRefusal
	}{
		{"issued", nil, nil, ""},
		{"empty capabilities", nil, func(r *kernel.DeriveRequest) { r.Capabilities = nil }, kernel.DeriveEmptyCapabilities},
		{"id collides", nil, func(r *kernel.DeriveRequest) { r.ID = "root" }, kernel.DeriveIDCollidesWithParent},
		{"bounded parent", func(g *kernel.CapabilityGrant) { g.Constraints.MaxUses = i64(1) }, nil, kernel.DeriveBoundedParentNotDelegable},
		{"parent not delegable", func(g *kernel.CapabilityGrant) { g.Constraints.DelegationDepth = i64(0) }, nil, kernel.DeriveParentNotDelegable},
		{"depth exhausted", nil, func(r *kernel.DeriveRequest) { r.DelegationDepth = i64(2) }, kernel.DeriveDepthExhausted},
		{"wider action", nil, func(r *kernel.DeriveRequest) { r.Capabilities[0].Actions = []string{"delete"} }, kernel.DeriveCapabilityNotWithin},
		{"star needs star", nil, func(r *kernel.DeriveRequest) { r.Capabilities[0].Actions = []string{"*"} }, kernel.DeriveCapabilityNotWithin},
		{"prefix trap", nil, func(r *kernel.DeriveRequest) { r.Capabilities[0].Resource.Path = []string{"docsx"} }, kernel.DeriveCapabilityNotWithin},
		{"gains an owner", nil, func(r *kernel.DeriveRequest) { r.Capabilities[0].Resource.Owner = &alice }, kernel.DeriveCapabilityNotWithin},
		{"foreign purpose", nil, func(r *kernel.DeriveRequest) { r.Purposes = []string{"other"} }, kernel.DerivePurposeNotWithin},
		{"earlier notBefore", nil, func(r *kernel.DeriveRequest) { r.NotBefore = "2026-08-03T06:00:00.000Z" }, kernel.DeriveWindowNotWithin},
		{"later expiry", nil, func(r *kernel.DeriveRequest) { r.ExpiresAt = "2026-08-05T00:00:00.000Z" }, kernel.DeriveWindowNotWithin},
		{"issued before parent", nil, func(r *kernel.DeriveRequest) { r.IssuedAt = "2026-08-03T07:30:00.000Z" }, kernel.DeriveIssuedBeforeParent},
		{"malformed instant", nil, func(r *kernel.DeriveRequest) { r.IssuedAt = "soon" }, kernel.DeriveIssuedBeforeParent},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := parent
			p.Constraints.Purposes = append([]string(nil), parent.Constraints.Purposes...)
			if c.parent != nil {
				c.parent(&p)
			}
			r := base()
			if c.req != nil {
				c.req(&r)
			}
			g, refusal := kernel.DeriveGrant(&p, r)
			if refusal != c.want {
				t.Fatalf("refusal %q, want %q", refusal, c.want)
			}
			if refusal != "" {
				if g.ID != "" {
					t.Fatal("a refusal must not return a grant")
				}
				return
			}
			// Defaults written down, and the link holds for the authorization walk.
			if g.Issuer != p.Subject || g.ParentGrantID != p.ID || *g.Constraints.DelegationDepth != 1 ||
				g.Constraints.ExpiresAt != p.Constraints.ExpiresAt || len(g.Constraints.Purposes) != 2 || g.Constraints.MaxUses != nil {
				t.Fatalf("derived %+v", g)
			}
			if code := kernel.CheckDelegationLink(&g, &p); code != "" {
				t.Fatalf("derived grant fails the link check: %s", code)
			}
			actx := testContext()
			z := kernel.Authorizer{Resolver: resolverMap{"root": &p}}
			d, _ := z.Authorize(context.Background(), kernel.NewAuthority([]kernel.CapabilityGrant{g}, actx, 0), actx, req("read", "docs", "a"), kernel.AuthorizeOptions{})
			if !d.Allowed || d.MatchedGrantID != "child" {
				t.Fatalf("derived grant does not authorize: %+v", d)
			}
		})
	}
}
