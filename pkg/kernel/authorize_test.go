package kernel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

var (
	alice = kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	bob   = kernel.Address{Kind: kernel.KindAgent, ID: "bob"}
	carol = kernel.Address{Kind: kernel.KindHuman, ID: "carol"}
)

const admitted = "2026-08-03T09:00:00.000Z"

func testContext() kernel.AccessContext {
	return kernel.AccessContext{World: "world-a", Actor: bob, Authority: alice, Owner: alice,
		Purpose: "prepare-update", TraceID: "trace-1", EnabledToolNamespaces: []string{"files"}, Now: admitted}
}

func grant(id string, actions []string, scope kernel.Scope, path ...string) kernel.CapabilityGrant {
	if path == nil {
		path = []string{}
	}
	return kernel.CapabilityGrant{ID: id, NamespaceID: "world-a", Subject: bob, Issuer: alice,
		Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "files", Path: path}, Actions: actions, Scope: scope}},
		IssuedAt:     "2026-08-03T08:00:00.000Z"}
}

func req(action string, path ...string) kernel.CapabilityRequirement {
	if path == nil {
		path = []string{}
	}
	return kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: path}, Action: action}
}

func i64(n int64) *int64 { return &n }

// ceilingFunc adapts a function to kernel.HostCeiling.
type ceilingFunc func(kernel.AuthorizationDecision, kernel.CapabilityRequirement, kernel.AccessContext) (kernel.AuthorizationDecision, error)

func (f ceilingFunc) Narrow(d kernel.AuthorizationDecision, r kernel.CapabilityRequirement, c kernel.AccessContext) (kernel.AuthorizationDecision, error) {
	return f(d, r, c)
}

func refuse(ids ...string) ceilingFunc {
	return func(d kernel.AuthorizationDecision, _ kernel.CapabilityRequirement, _ kernel.AccessContext) (kernel.AuthorizationDecision, error) {
		for _, id := range ids {
			if d.MatchedGrantID == id {
				return kernel.AuthorizationDecision{Allowed: false, ReasonCode: "frozen", Metadata: map[string]any{"rule": "frozen"}}, nil
			}
		}
		return d, nil
	}
}

type resolverMap map[string]*kernel.CapabilityGrant

func (r resolverMap) ResolveGrant(_ context.Context, _, id string) (*kernel.CapabilityGrant, error) {
	return r[id], nil
}

type failingResolver struct{}

func (failingResolver) ResolveGrant(context.Context, string, string) (*kernel.CapabilityGrant, error) {
	return nil, errors.New("down")
}

// step is one authorization in a vector: a request, an optional operation instant and
// whether it consumes.
type step struct {
	req     kernel.CapabilityRequirement
	now     string
	consume bool
	want    kernel.ReasonCode
	grant   string // matchedGrantId expected (allow, host_policy_denied)
	link    string // metadata.delegation.code expected
}

type vector struct {
	name   string
	grants []kernel.CapabilityGrant
	ctx    func(*kernel.AccessContext)
	authz  kernel.Authorizer
	usage  bool // install a memory usage store
	steps  []step
}

func runVector(t *testing.T, v vector) {
	t.Helper()
	actx := testContext()
	if v.ctx != nil {
		v.ctx(&actx)
	}
	auth := kernel.NewAuthority(v.grants, actx, 0)
	z := v.authz
	if v.usage {
		z.Usage = newMemUsage()
	}
	for i, s := range v.steps {
		d, diag := z.Authorize(context.Background(), auth, actx, s.req, kernel.AuthorizeOptions{Consume: s.consume, Now: s.now})
		if d.ReasonCode != s.want || d.Allowed != (s.want == kernel.ReasonAllowed) {
			t.Fatalf("step %d: decision %+v (rejected %+v), want %s", i, d, diag.RejectedGrants, s.want)
		}
		if s.grant != "" && d.MatchedGrantID != s.grant {
			t.Errorf("step %d: matchedGrantId %q, want %q", i, d.MatchedGrantID, s.grant)
		}
		if s.link != "" {
			del, _ := d.Metadata["delegation"].(map[string]any)
			if del == nil || del["code"] != s.link {
				t.Errorf("step %d: delegation metadata %v, want code %s", i, d.Metadata, s.link)
			}
		}
		if d.ReasonCode == kernel.ReasonNoMatchingGrant && d.RequiredAuthority == nil {
			t.Errorf("step %d: no_matching_grant at execution must carry requiredAuthority", i)
		}
		if d.Allowed && d.MatchedGrantID == "" {
			t.Errorf("step %d: an allow must name its grant", i)
		}
	}
}

func withConstraints(g kernel.CapabilityGrant, f func(*kernel.CapabilityGrant)) kernel.CapabilityGrant {
	f(&g)
	return g
}

// TestAuthorizeVectors replays the test vectors of spec 20 §3.8 (turn admitted 09:00).
func TestAuthorizeVectors(t *testing.T) {
	star := grant("g-star", []string{"*"}, kernel.ScopeExact, "P")
	parent := withConstraints(grant("g-parent", []string{"read"}, kernel.ScopeDescendants), func(g *kernel.CapabilityGrant) {
		g.Subject = alice
		g.Issuer = carol
		g.Constraints.DelegationDepth = i64(1)
		g.Constraints.ExpiresAt = "2026-08-03T09:30:00.000Z"
	})
	child := withConstraints(grant("g-child", []string{"read"}, kernel.ScopeDescendants, "docs"), func(g *kernel.CapabilityGrant) {
		g.ParentGrantID = "g-parent"
		g.Constraints.ExpiresAt = "2026-08-03T09:30:00.000Z"
	})
	vectors := []vector{
		{name: "no grants", steps: []step{{req: req("read", "a"), want: kernel.ReasonNoMatchingGrant}}},
		{name: "star covers any action on its exact path", grants: []kernel.CapabilityGrant{star}, steps: []step{
			{req: req("delete", "P"), want: kernel.ReasonAllowed, grant: "g-star"},
			{req: req("read", "P", "x"), want: kernel.ReasonNoMatchingGrant},
		}},
		{name: "request action star needs a star grant", grants: []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants)},
			steps: []step{{req: req("*"), want: kernel.ReasonNoMatchingGrant}}},
		{name: "request owner differs from context owner", grants: []kernel.CapabilityGrant{star}, steps: []step{{
			req:  kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"P"}, Owner: &carol}, Action: "read"},
			want: kernel.ReasonInvalidRequest}}},
		{name: "expiry lands mid-turn", grants: []kernel.CapabilityGrant{withConstraints(star, func(g *kernel.CapabilityGrant) {
			g.Constraints.ExpiresAt = "2026-08-03T09:30:00.000Z"
		})}, steps: []step{
			{req: req("read", "P"), want: kernel.ReasonAllowed},
			{req: req("read", "P"), now: "2026-08-03T10:00:00.000Z", want: kernel.ReasonNoMatchingGrant},
		}},
		{name: "revocation is seen only by the next turn", grants: []kernel.CapabilityGrant{withConstraints(star, func(g *kernel.CapabilityGrant) {
			g.RevokedAt = "2026-08-03T09:30:00.000Z"
		})}, steps: []step{{req: req("read", "P"), now: "2026-08-03T10:00:00.000Z", want: kernel.ReasonAllowed}}},
		{name: "a window opening mid-turn is not honoured", grants: []kernel.CapabilityGrant{withConstraints(star, func(g *kernel.CapabilityGrant) {
			g.Constraints.NotBefore = "2026-08-03T09:30:00.000Z"
		})}, steps: []step{{req: req("read", "P"), now: "2026-08-03T10:00:00.000Z", want: kernel.ReasonNoMatchingGrant}}},
		{name: "bounded grant spends its use", usage: true, grants: []kernel.CapabilityGrant{withConstraints(star, func(g *kernel.CapabilityGrant) {
			g.Constraints.MaxUses = i64(1)
		})}, steps: []step{
			{req: req("read", "P"), want: kernel.ReasonAllowed},                // discovery-like: non-consuming
			{req: req("read", "P"), consume: true, want: kernel.ReasonAllowed}, // spends it
			{req: req("read", "P"), consume: true, want: kernel.ReasonGrantExhausted},
			{req: req("read", "P"), want: kernel.ReasonGrantExhausted},
		}},
		{name: "bounded grant without a usage store", grants: []kernel.CapabilityGrant{withConstraints(star, func(g *kernel.CapabilityGrant) {
			g.Constraints.MaxUses = i64(1)
		})}, steps: []step{{req: req("read", "P"), consume: true, want: kernel.ReasonUsageStoreUnavailable}}},
		{name: "ceiling refuses A, B covers", authz: kernel.Authorizer{Ceiling: refuse("A")},
			grants: []kernel.CapabilityGrant{grant("A", []string{"read"}, kernel.ScopeDescendants), grant("B", []string{"read"}, kernel.ScopeDescendants)},
			steps:  []step{{req: req("read", "x"), consume: true, want: kernel.ReasonAllowed, grant: "B"}}},
		{name: "ceiling refuses A, B spent", usage: true, authz: kernel.Authorizer{Ceiling: refuse("A")},
			grants: []kernel.CapabilityGrant{grant("A", []string{"read"}, kernel.ScopeDescendants), withConstraints(grant("B", []string{"read"}, kernel.ScopeDescendants), func(g *kernel.CapabilityGrant) {
				g.Constraints.MaxUses = i64(1)
			})},
			steps: []step{
				{req: req("read", "x"), consume: true, want: kernel.ReasonAllowed, grant: "B"},
				{req: req("read", "x"), consume: true, want: kernel.ReasonHostPolicyDenied, grant: "A"},
			}},
		{name: "unresolvable parent beats a ceiling refusal", authz: kernel.Authorizer{Ceiling: refuse("A"), Resolver: resolverMap{}},
			grants: []kernel.CapabilityGrant{grant("A", []string{"read"}, kernel.ScopeDescendants), withConstraints(grant("D", []string{"read"}, kernel.ScopeDescendants), func(g *kernel.CapabilityGrant) {
				g.ParentGrantID = "missing"
			})},
			steps: []step{{req: req("read", "x"), want: kernel.ReasonDelegationChainUnverified, link: kernel.LinkParentNotFound}}},
		{name: "ancestor expires mid-turn", ctx: func(c *kernel.AccessContext) {}, authz: kernel.Authorizer{Resolver: resolverMap{"g-parent": &parent}},
			grants: []kernel.CapabilityGrant{withConstraints(child, func(g *kernel.CapabilityGrant) { g.Issuer = alice })},
			steps: []step{
				{req: req("read", "docs", "a"), want: kernel.ReasonAllowed},
				{req: req("read", "docs", "a"), now: "2026-08-03T09:45:00.000Z", want: kernel.ReasonNoMatchingGrant},
			}},
		{name: "op now unparsable", grants: []kernel.CapabilityGrant{star}, steps: []step{{req: req("read", "P"), now: "soon", want: kernel.ReasonInvalidContext}}},
	}
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) { runVector(t, v) })
	}
}

// TestDelegationLinks covers every link code of the chain walk.
func TestDelegationLinks(t *testing.T) {
	root := withConstraints(grant("root", []string{"read", "list"}, kernel.ScopeDescendants, "docs"), func(g *kernel.CapabilityGrant) {
		g.Subject = alice
		g.Issuer = carol
		g.Constraints.DelegationDepth = i64(2)
		g.IssuedAt = "2026-08-03T07:00:00.000Z"
	})
	leaf := withConstraints(grant("leaf", []string{"read"}, kernel.ScopeDescendants, "docs", "a"), func(g *kernel.CapabilityGrant) {
		g.ParentGrantID = "root"
	})
	mod := func(g kernel.CapabilityGrant, f func(*kernel.CapabilityGrant)) *kernel.CapabilityGrant {
		g.Capabilities = []kernel.Capability{g.Capabilities[0]}
		f(&g)
		return &g
	}
	cases := []struct {
		name     string
		parent   *kernel.CapabilityGrant
		leaf     func(*kernel.CapabilityGrant)
		resolver kernel.DelegationChainResolver
		want     kernel.ReasonCode
		link     string
	}{
		{"valid chain", &root, nil, nil, kernel.ReasonAllowed, ""},
		{"no resolver", nil, nil, nil, kernel.ReasonDelegationChainUnverified, kernel.LinkResolverUnavailable},
		{"resolver fails", nil, nil, failingResolver{}, kernel.ReasonDelegationChainUnverified, kernel.LinkResolverFailed},
		{"parent missing", nil, nil, resolverMap{}, kernel.ReasonDelegationChainUnverified, kernel.LinkParentNotFound},
		{"cycle", mod(root, func(g *kernel.CapabilityGrant) { g.ParentGrantID = "leaf" }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkChainCycle},
		{"namespace mismatch", mod(root, func(g *kernel.CapabilityGrant) { g.NamespaceID = "world-b" }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkNamespaceMismatch},
		{"issuer is not the parent's subject", mod(root, func(g *kernel.CapabilityGrant) { g.Subject = carol }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkIssuerNotParentSubject},
		{"parent revoked", mod(root, func(g *kernel.CapabilityGrant) { g.RevokedAt = "2026-08-03T08:30:00.000Z" }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkParentInactive},
		{"parent off purpose", mod(root, func(g *kernel.CapabilityGrant) { g.Constraints.Purposes = []string{"other"} }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkParentInactive},
		{"parent not delegable", mod(root, func(g *kernel.CapabilityGrant) { g.Constraints.DelegationDepth = nil }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkDelegationNotPermitted},
		{"depth exceeded", &root, func(g *kernel.CapabilityGrant) { g.Constraints.DelegationDepth = i64(2) }, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkDelegationDepthExceeded},
		{"bounded parent", mod(root, func(g *kernel.CapabilityGrant) { g.Constraints.MaxUses = i64(3) }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkBoundedParentNotDelegable},
		{"capability widened (action)", &root, func(g *kernel.CapabilityGrant) { g.Capabilities[0].Actions = []string{"read", "delete"} }, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkCapabilityWidened},
		{"capability widened (path)", &root, func(g *kernel.CapabilityGrant) { g.Capabilities[0].Resource.Path = []string{"doc"} }, nil, kernel.ReasonNoMatchingGrant, ""},
		{"capability widened (prefix trap)", mod(root, func(g *kernel.CapabilityGrant) { g.Capabilities[0].Resource.Path = []string{"do"} }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkCapabilityWidened},
		{"constraints widened (issued before parent)", &root, func(g *kernel.CapabilityGrant) { g.IssuedAt = "2026-08-03T06:00:00.000Z" }, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkConstraintsWidened},
		{"constraints widened (no expiry)", mod(root, func(g *kernel.CapabilityGrant) { g.Constraints.ExpiresAt = "2026-08-04T00:00:00.000Z" }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkConstraintsWidened},
		{"constraints widened (purposes omitted)", mod(root, func(g *kernel.CapabilityGrant) { g.Constraints.Purposes = []string{"prepare-update"} }), nil, nil, kernel.ReasonDelegationChainInvalid, kernel.LinkConstraintsWidened},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := leaf
			l.Capabilities = []kernel.Capability{leaf.Capabilities[0]}
			l.Capabilities[0].Actions = append([]string(nil), leaf.Capabilities[0].Actions...)
			l.Issuer = alice
			if c.leaf != nil {
				c.leaf(&l)
			}
			resolver := c.resolver
			if resolver == nil && c.parent != nil {
				resolver = resolverMap{"root": c.parent, "leaf": &l}
			}
			if c.name == "no resolver" {
				resolver = nil
			}
			runVector(t, vector{grants: []kernel.CapabilityGrant{l}, authz: kernel.Authorizer{Resolver: resolver},
				steps: []step{{req: req("read", "docs", "a", "b"), want: c.want, link: c.link}}})
		})
	}
}

func TestChainTooLong(t *testing.T) {
	store := resolverMap{}
	var grants []*kernel.CapabilityGrant
	for i := 0; i < 20; i++ {
		g := grant(fmt.Sprintf("g%d", i), []string{"read"}, kernel.ScopeDescendants)
		g.Constraints.DelegationDepth = i64(int64(30 - i))
		if i < 19 {
			g.Subject = alice
		}
		if i > 0 {
			g.ParentGrantID = fmt.Sprintf("g%d", i-1)
		}
		grants = append(grants, &g)
		store[g.ID] = &g
	}
	leaf := *grants[len(grants)-1]
	runVector(t, vector{grants: []kernel.CapabilityGrant{leaf}, authz: kernel.Authorizer{Resolver: store},
		steps: []step{{req: req("read", "x"), want: kernel.ReasonDelegationChainInvalid, link: kernel.LinkChainTooLong}}})
}

// TestEligibility covers each per-grant rejection reason, and that each yields
// no_matching_grant (not an error and not an allow).
func TestEligibility(t *testing.T) {
	base := grant("g", []string{"read"}, kernel.ScopeDescendants)
	cases := []struct {
		name string
		mod  func(*kernel.CapabilityGrant)
		want kernel.RejectReason
	}{
		{"issuer", func(g *kernel.CapabilityGrant) { g.Issuer = carol }, kernel.RejectIssuer},
		{"subject", func(g *kernel.CapabilityGrant) { g.Subject = carol }, kernel.RejectSubject},
		{"window (issued later)", func(g *kernel.CapabilityGrant) { g.IssuedAt = "2026-08-03T09:00:00.001Z" }, kernel.RejectWindow},
		{"window (expired exactly now)", func(g *kernel.CapabilityGrant) { g.Constraints.ExpiresAt = admitted }, kernel.RejectWindow},
		{"purpose (exact, not prefix)", func(g *kernel.CapabilityGrant) { g.Constraints.Purposes = []string{"prepare"} }, kernel.RejectPurpose},
		{"capability (other namespace)", func(g *kernel.CapabilityGrant) { g.Capabilities[0].Resource.Namespace = "repo" }, ""},
		{"capability (owner)", func(g *kernel.CapabilityGrant) { g.Capabilities[0].Resource.Owner = &carol }, kernel.RejectCapability},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := base
			g.Capabilities = []kernel.Capability{base.Capabilities[0]}
			c.mod(&g)
			actx := testContext()
			// A source handing out grants of another subject/issuer is not conforming; to
			// observe the walk's own eligibility checks, build the authority with the
			// grant's own scope and ask with the context's.
			scope := actx
			scope.Actor, scope.Authority = g.Subject, g.Issuer
			auth := kernel.NewAuthority([]kernel.CapabilityGrant{g}, scope, 0)
			var z kernel.Authorizer
			d, diag := z.Authorize(context.Background(), auth, actx, req("read", "a"), kernel.AuthorizeOptions{})
			if d.Allowed || d.ReasonCode != kernel.ReasonNoMatchingGrant {
				t.Fatalf("decision %+v, want no_matching_grant", d)
			}
			if c.want == "" {
				if len(diag.RejectedGrants) != 0 {
					t.Fatalf("the index should not offer a grant of another namespace: %+v", diag.RejectedGrants)
				}
				return
			}
			if len(diag.RejectedGrants) != 1 || diag.RejectedGrants[0].Reason != c.want {
				t.Fatalf("rejected %+v, want reason %s", diag.RejectedGrants, c.want)
			}
		})
	}
}

// TestPrecedence checks each ordered pair of the final precedence: with two candidate
// grants failing in two different ways, the stronger code wins whatever the grant order.
func TestPrecedence(t *testing.T) {
	type failure struct {
		code kernel.ReasonCode
		make func(id string) (kernel.CapabilityGrant, func(*kernel.Authorizer))
	}
	plain := func(id string) kernel.CapabilityGrant { return grant(id, []string{"read"}, kernel.ScopeDescendants) }
	unverified := failure{kernel.ReasonDelegationChainUnverified, func(id string) (kernel.CapabilityGrant, func(*kernel.Authorizer)) {
		g := plain(id)
		g.ParentGrantID = "ghost-" + id
		return g, nil
	}}
	invalid := failure{kernel.ReasonDelegationChainInvalid, func(id string) (kernel.CapabilityGrant, func(*kernel.Authorizer)) {
		g := plain(id)
		g.ParentGrantID = "undelegable"
		return g, nil
	}}
	ceiling := failure{kernel.ReasonHostPolicyDenied, func(id string) (kernel.CapabilityGrant, func(*kernel.Authorizer)) {
		return plain(id), func(z *kernel.Authorizer) {
			prev := z.Ceiling
			z.Ceiling = ceilingFunc(func(d kernel.AuthorizationDecision, r kernel.CapabilityRequirement, c kernel.AccessContext) (kernel.AuthorizationDecision, error) {
				if d.MatchedGrantID == id {
					return kernel.AuthorizationDecision{Allowed: false, ReasonCode: "no"}, nil
				}
				if prev != nil {
					return prev.Narrow(d, r, c)
				}
				return d, nil
			})
		}
	}}
	exhausted := failure{kernel.ReasonGrantExhausted, func(id string) (kernel.CapabilityGrant, func(*kernel.Authorizer)) {
		g := plain(id)
		g.Constraints.MaxUses = i64(1)
		return g, func(z *kernel.Authorizer) {
			u := z.Usage.(*memUsage)
			u.used[usageKey(kernel.UsageKeyOf(&g))] = 1
		}
	}}
	nomatch := failure{kernel.ReasonNoMatchingGrant, func(id string) (kernel.CapabilityGrant, func(*kernel.Authorizer)) {
		g := plain(id)
		g.Capabilities[0].Resource.Path = []string{"elsewhere"}
		return g, nil
	}}
	order := []failure{unverified, invalid, ceiling, exhausted, nomatch}
	undelegable := plain("undelegable")
	undelegable.Subject = alice
	for i := 0; i < len(order); i++ {
		for j := i + 1; j < len(order); j++ {
			for _, flip := range []bool{false, true} {
				hi, lo := order[i], order[j]
				name := fmt.Sprintf("%s>%s/flip=%v", hi.code, lo.code, flip)
				t.Run(name, func(t *testing.T) {
					z := kernel.Authorizer{Usage: newMemUsage(), Resolver: resolverMap{"undelegable": &undelegable}}
					g1, f1 := hi.make("hi")
					g2, f2 := lo.make("lo")
					for _, f := range []func(*kernel.Authorizer){f1, f2} {
						if f != nil {
							f(&z)
						}
					}
					grants := []kernel.CapabilityGrant{g1, g2}
					if flip {
						grants = []kernel.CapabilityGrant{g2, g1}
					}
					actx := testContext()
					auth := kernel.NewAuthority(grants, actx, 0)
					d, _ := z.Authorize(context.Background(), auth, actx, req("read", "x"), kernel.AuthorizeOptions{Consume: true})
					if d.ReasonCode != hi.code {
						t.Fatalf("decision %s, want %s", d.ReasonCode, hi.code)
					}
				})
			}
		}
	}
}

// TestImmediateCodes covers the fail-closed codes that stop the walk at once.
func TestImmediateCodes(t *testing.T) {
	g := grant("g", []string{"read"}, kernel.ScopeDescendants)
	actx := testContext()
	ctx := context.Background()
	t.Run("authority unavailable", func(t *testing.T) {
		for _, src := range []kernel.GrantSource{nil, &grantStore{mode: "throws"}, &grantStore{mode: "passthrough", grants: []kernel.CapabilityGrant{withConstraints(g, func(g *kernel.CapabilityGrant) { g.NamespaceID = "other" })}}} {
			auth := kernel.ResolveAuthority(ctx, src, actx, 0)
			var z kernel.Authorizer
			d, _ := z.Authorize(ctx, auth, actx, req("read", "x"), kernel.AuthorizeOptions{})
			if d.ReasonCode != kernel.ReasonAuthorityUnavailable || d.Metadata["authority"] == nil {
				t.Fatalf("decision %+v", d)
			}
		}
	})
	t.Run("grant limit", func(t *testing.T) {
		auth := kernel.NewAuthority([]kernel.CapabilityGrant{g, g}, actx, 1)
		if auth.Unavailable() != kernel.AuthorityGrantLimitExceeded {
			t.Fatalf("unavailable = %q", auth.Unavailable())
		}
	})
	t.Run("invalid grant material", func(t *testing.T) {
		bad := g
		bad.Capabilities = []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{".."}}, Actions: []string{"read"}, Scope: kernel.ScopeExact}}
		if u := kernel.NewAuthority([]kernel.CapabilityGrant{g, bad}, actx, 0).Unavailable(); u != kernel.AuthorityInvalidGrantMaterial {
			t.Fatalf("unavailable = %q", u)
		}
	})
	t.Run("ceiling malfunction", func(t *testing.T) {
		for name, c := range map[string]ceilingFunc{
			"error": func(kernel.AuthorizationDecision, kernel.CapabilityRequirement, kernel.AccessContext) (kernel.AuthorizationDecision, error) {
				return kernel.AuthorizationDecision{}, errors.New("boom")
			},
			"allow naming another grant": func(d kernel.AuthorizationDecision, _ kernel.CapabilityRequirement, _ kernel.AccessContext) (kernel.AuthorizationDecision, error) {
				d.MatchedGrantID = "other"
				return d, nil
			},
		} {
			z := kernel.Authorizer{Ceiling: c}
			d, _ := z.Authorize(ctx, kernel.NewAuthority([]kernel.CapabilityGrant{g}, actx, 0), actx, req("read", "x"), kernel.AuthorizeOptions{})
			if d.ReasonCode != kernel.ReasonHostPolicyUnavailable {
				t.Fatalf("%s: decision %+v", name, d)
			}
		}
	})
	t.Run("usage store throws, nothing spent", func(t *testing.T) {
		b := withConstraints(g, func(g *kernel.CapabilityGrant) { g.Constraints.MaxUses = i64(2) })
		u := newMemUsage()
		u.broken = true
		z := kernel.Authorizer{Usage: u}
		d, _ := z.Authorize(ctx, kernel.NewAuthority([]kernel.CapabilityGrant{b}, actx, 0), actx, req("read", "x"), kernel.AuthorizeOptions{Consume: true})
		if d.ReasonCode != kernel.ReasonUsageStoreUnavailable {
			t.Fatalf("decision %+v", d)
		}
	})
	t.Run("invalid context", func(t *testing.T) {
		for _, mod := range []func(*kernel.AccessContext){
			func(c *kernel.AccessContext) { c.Now = "yesterday" },
			func(c *kernel.AccessContext) { c.Purpose = "" },
			func(c *kernel.AccessContext) { c.TraceID = "" },
		} {
			c := testContext()
			mod(&c)
			var z kernel.Authorizer
			d, _ := z.Authorize(ctx, kernel.NewAuthority([]kernel.CapabilityGrant{g}, actx, 0), c, req("read", "x"), kernel.AuthorizeOptions{})
			if d.ReasonCode != kernel.ReasonInvalidContext {
				t.Fatalf("decision %+v", d)
			}
		}
	})
	t.Run("invalid request", func(t *testing.T) {
		var z kernel.Authorizer
		for _, r := range []kernel.CapabilityRequirement{req(""), {Resource: kernel.ResourceRef{Path: []string{}}, Action: "read"}} {
			d, _ := z.Authorize(ctx, kernel.NewAuthority([]kernel.CapabilityGrant{g}, actx, 0), actx, r, kernel.AuthorizeOptions{})
			if d.ReasonCode != kernel.ReasonInvalidRequest {
				t.Fatalf("decision %+v", d)
			}
		}
	})
}

// TestScopeBySegment: descendants never match by string prefix; discovery uses the
// intersection rule.
func TestScopeBySegment(t *testing.T) {
	g := grant("g", []string{"read"}, kernel.ScopeDescendants, "projects", "x")
	e := grant("e", []string{"list"}, kernel.ScopeExact, "projects", "x")
	actx := testContext()
	auth := kernel.NewAuthority([]kernel.CapabilityGrant{g, e}, actx, 0)
	var z kernel.Authorizer
	ctx := context.Background()
	check := func(d kernel.AuthorizationDecision, want bool, what string) {
		t.Helper()
		if d.Allowed != want {
			t.Errorf("%s: allowed=%v, want %v (%s)", what, d.Allowed, want, d.ReasonCode)
		}
	}
	d, _ := z.Authorize(ctx, auth, actx, req("read", "projects", "x", "reports"), kernel.AuthorizeOptions{})
	check(d, true, "descendant")
	d, _ = z.Authorize(ctx, auth, actx, req("read", "projects", "x-secret"), kernel.AuthorizeOptions{})
	check(d, false, "string-prefix sibling")
	d, _ = z.Authorize(ctx, auth, actx, req("read", "projects"), kernel.AuthorizeOptions{})
	check(d, false, "ancestor")
	d, _ = z.Authorize(ctx, auth, actx, req("list", "projects", "x", "a"), kernel.AuthorizeOptions{})
	check(d, false, "below an exact grant")
	d, _ = z.CanDiscover(ctx, auth, actx, req("list"), "")
	check(d, true, "exact grant below the ceiling")
	d, _ = z.CanDiscover(ctx, auth, actx, req("list", "projects", "x", "a"), "")
	check(d, false, "exact grant above the ceiling")
	d, _ = z.CanDiscover(ctx, auth, actx, req("read", "projects", "x", "a", "b"), "")
	check(d, true, "descendants grant above the ceiling")
	d, _ = z.CanDiscover(ctx, auth, actx, req("read", "other"), "")
	check(d, false, "disjoint ceiling")
}

func TestRequiredAuthorityID(t *testing.T) {
	actx := testContext()
	r1 := kernel.RequiredAuthority(actx, req("read", "a"))
	actx.Now = "2026-08-04T09:00:00.000Z"
	r2 := kernel.RequiredAuthority(actx, req("read", "a"))
	if r1.ID != r2.ID || len(r1.ID) != len("capreq-")+64 {
		t.Fatalf("ids %s %s: one ask must keep one id across turns", r1.ID, r2.ID)
	}
	if r3 := kernel.RequiredAuthority(actx, req("read", "b")); r3.ID == r1.ID {
		t.Fatal("different asks must have different ids")
	}
	if r1.Capabilities[0].Scope != kernel.ScopeExact || r1.Capabilities[0].Resource.Owner != nil {
		t.Fatalf("capability %+v", r1.Capabilities[0])
	}
}
