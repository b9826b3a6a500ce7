package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
)

// DefaultMaxDelegationChainLength bounds a delegation chain (leaf included).
const DefaultMaxDelegationChainLength = 16

// Authorizer decides requests against an Authority. Its ports are optional: without a
// Resolver a derived grant is unverifiable, without Usage a bounded grant is refused
// usage_store_unavailable, and without Ceiling, Verifier or Revocation their steps are
// skipped. An Authorizer holds no state of its own and is safe for concurrent use.
type Authorizer struct {
	Resolver   DelegationChainResolver
	Usage      UsageStore
	Ceiling    HostCeiling
	Verifier   GrantVerifier
	Revocation GrantRevocationSource
	// MaxChainLength overrides DefaultMaxDelegationChainLength when > 0.
	MaxChainLength int
}

// AuthorizeOptions select the entry point's behaviour.
type AuthorizeOptions struct {
	// Consume spends one use of a bounded grant on allow. Set it only when an effect
	// will follow; discovery and dry runs never consume.
	Consume bool
	// Now is the operation instant (RFC 3339); empty means the context's now (the
	// admitted instant).
	Now string
}

// RejectedGrant says why one candidate grant did not authorize the request.
type RejectedGrant struct {
	GrantID string       `json:"grantId"`
	Reason  RejectReason `json:"reason"`
	// Detail is the delegation link code or ceiling code when Reason is delegation or ceiling.
	Detail string `json:"detail,omitempty"`
}

// Diagnostic is what the decision looked at: for audit records and for `explain`, never
// for authority. RejectedGrants lists the candidate grants the index offered.
type Diagnostic struct {
	GrantsResolved    int             `json:"grantsResolved"`
	RejectedGrants    []RejectedGrant `json:"rejectedGrants"`
	MissingDependency string          `json:"missingDependency,omitempty"`
	Consumed          bool            `json:"consumed"`
	Discovery         bool            `json:"discovery"`
}

type delegationFailure struct {
	unverified bool
	code       string
	grantID    string
}

// Authorize is the execution check: it decides req for actx against auth, consuming a use
// of a bounded grant only when opts.Consume is set and the decision is an allow. A denial
// is a value; Authorize never fails.
func (z *Authorizer) Authorize(ctx context.Context, auth *Authority, actx AccessContext, req CapabilityRequirement, opts AuthorizeOptions) (AuthorizationDecision, Diagnostic) {
	return z.decide(ctx, auth, actx, req, opts.Now, opts.Consume, false)
}

// CanDiscover is the catalogue check: could some grant cover part of the tool's declared
// ceiling? It never consumes. A grant whose path lies at or below the ceiling path (or,
// for descendants scope, above it) intersects.
func (z *Authorizer) CanDiscover(ctx context.Context, auth *Authority, actx AccessContext, ceiling CapabilityRequirement, now string) (AuthorizationDecision, Diagnostic) {
	return z.decide(ctx, auth, actx, ceiling, now, false, true)
}

func deny(code ReasonCode) AuthorizationDecision {
	return AuthorizationDecision{Allowed: false, ReasonCode: code}
}

func (z *Authorizer) decide(ctx context.Context, auth *Authority, actx AccessContext, req CapabilityRequirement, now string, consume, discovery bool) (AuthorizationDecision, Diagnostic) {
	diag := Diagnostic{Discovery: discovery}
	admitted, err := ParseTimestamp(actx.Now)
	if err != nil || actx.Purpose == "" || actx.TraceID == "" {
		return deny(ReasonInvalidContext), diag
	}
	opNow := admitted
	if now != "" {
		if opNow, err = ParseTimestamp(now); err != nil {
			return deny(ReasonInvalidContext), diag
		}
	}
	if req.Action == "" || req.Resource.Namespace == "" || (req.Resource.Owner != nil && *req.Resource.Owner != actx.Owner) {
		return deny(ReasonInvalidRequest), diag
	}
	if auth == nil || auth.unavailable != "" {
		code := AuthorityGrantSourceFailed
		if auth != nil {
			code = auth.unavailable
		}
		d := deny(ReasonAuthorityUnavailable)
		d.Metadata = map[string]any{"authority": map[string]any{"code": code}}
		return d, diag
	}
	diag.GrantsResolved = len(auth.grants)

	var stack [32]int32
	cands := auth.candidates(&req, discovery, stack[:0])

	var worstDelegation *delegationFailure
	var ceilingDenied *AuthorizationDecision
	exhausted := false
	reject := func(id string, r RejectReason, detail string) {
		diag.RejectedGrants = append(diag.RejectedGrants, RejectedGrant{GrantID: id, Reason: r, Detail: detail})
	}
	for _, gi := range cands {
		cg := &auth.grants[gi]
		g := cg.g
		// 1. eligibility
		switch {
		case g.Issuer != actx.Authority:
			reject(g.ID, RejectIssuer, "")
			continue
		case g.Subject != actx.Actor:
			reject(g.ID, RejectSubject, "")
			continue
		case g.NamespaceID != actx.NamespaceID:
			reject(g.ID, RejectNamespace, "")
			continue
		case !cg.active(admitted, opNow):
			reject(g.ID, RejectWindow, "")
			continue
		case !cg.purposeOK(actx.Purpose):
			reject(g.ID, RejectPurpose, "")
			continue
		}
		if z.Verifier != nil {
			ok, err := z.Verifier.Verify(ctx, g, actx)
			if err != nil || !ok {
				reject(g.ID, RejectVerifier, "")
				continue
			}
		}
		// 2. one capability must match the whole request
		if !grantMatches(g, &req, actx.Owner, discovery) {
			reject(g.ID, RejectCapability, "")
			continue
		}
		// 3. delegation chain
		var ancestors []string
		if g.ParentGrantID != "" {
			anc, fail := z.verifyChain(ctx, cg, actx, admitted, opNow)
			if fail != nil {
				if fail.code == LinkResolverUnavailable && diag.MissingDependency == "" {
					diag.MissingDependency = "delegationResolver"
				}
				if worstDelegation == nil || (fail.unverified && !worstDelegation.unverified) {
					worstDelegation = fail
				}
				reject(g.ID, RejectDelegation, fail.code)
				continue
			}
			ancestors = anc
		}
		// 4. live revocation
		if z.Revocation != nil {
			ids := append([]string{g.ID}, ancestors...)
			chk, err := z.Revocation.Check(ctx, actx, ids)
			if err != nil || chk.Revision == "" || !subset(chk.RevokedGrantIDs, ids) {
				d := deny(ReasonAuthorityUnavailable)
				d.Metadata = map[string]any{"authority": map[string]any{"code": AuthorityRevocationUnavailable}}
				return d, diag
			}
			if len(chk.RevokedGrantIDs) > 0 {
				reject(g.ID, RejectRevoked, "")
				continue
			}
		}
		// 5. host ceiling
		if z.Ceiling != nil {
			allow := AuthorizationDecision{Allowed: true, ReasonCode: ReasonAllowed, MatchedGrantID: g.ID}
			out, err := z.Ceiling.Narrow(allow, cloneRequirement(req), actx)
			if err != nil || (out.Allowed && (out.MatchedGrantID != g.ID || out.ReasonCode != ReasonAllowed)) {
				return deny(ReasonHostPolicyUnavailable), diag
			}
			if !out.Allowed {
				if ceilingDenied == nil {
					d := deny(ReasonHostPolicyDenied)
					d.MatchedGrantID = g.ID
					if out.Metadata != nil {
						d.Metadata = out.Metadata
					}
					ceilingDenied = &d
				}
				reject(g.ID, RejectCeiling, string(out.ReasonCode))
				continue
			}
		}
		// 6. bounded use
		if g.Constraints.MaxUses == nil {
			return AuthorizationDecision{Allowed: true, ReasonCode: ReasonAllowed, MatchedGrantID: g.ID}, diag
		}
		if z.Usage == nil {
			diag.MissingDependency = "usageStore"
			return deny(ReasonUsageStoreUnavailable), diag
		}
		var ok bool
		if consume {
			ok, err = z.Usage.TryConsume(ctx, g.NamespaceID, g.ID, *g.Constraints.MaxUses)
		} else {
			var used int64
			used, err = z.Usage.GetUsage(ctx, g.NamespaceID, g.ID)
			ok = used < *g.Constraints.MaxUses
		}
		if err != nil {
			return deny(ReasonUsageStoreUnavailable), diag
		}
		if ok {
			diag.Consumed = consume
			return AuthorizationDecision{Allowed: true, ReasonCode: ReasonAllowed, MatchedGrantID: g.ID}, diag
		}
		exhausted = true
		reject(g.ID, RejectExhausted, "")
	}
	switch {
	case worstDelegation != nil && worstDelegation.unverified:
		d := deny(ReasonDelegationChainUnverified)
		d.Metadata = map[string]any{"delegation": map[string]any{"code": worstDelegation.code, "grantId": worstDelegation.grantID}}
		return d, diag
	case worstDelegation != nil:
		d := deny(ReasonDelegationChainInvalid)
		d.Metadata = map[string]any{"delegation": map[string]any{"code": worstDelegation.code, "grantId": worstDelegation.grantID}}
		return d, diag
	case ceilingDenied != nil:
		return *ceilingDenied, diag
	case exhausted:
		return deny(ReasonGrantExhausted), diag
	}
	d := deny(ReasonNoMatchingGrant)
	if !discovery {
		d.RequiredAuthority = RequiredAuthority(actx, req)
	}
	return d, diag
}

func subset(sub, of []string) bool {
	for _, s := range sub {
		if !slices.Contains(of, s) {
			return false
		}
	}
	return true
}

func cloneRequirement(r CapabilityRequirement) CapabilityRequirement {
	r.Resource.Path = slices.Clone(r.Resource.Path)
	if r.Resource.Owner != nil {
		o := *r.Resource.Owner
		r.Resource.Owner = &o
	}
	return r
}

// grantMatches reports whether a single capability of g covers the whole request.
func grantMatches(g *CapabilityGrant, req *CapabilityRequirement, ctxOwner Address, discovery bool) bool {
	for i := range g.Capabilities {
		if CapabilityMatches(&g.Capabilities[i], req, ctxOwner, discovery) {
			return true
		}
	}
	return false
}

// CapabilityMatches is the single-capability matcher. Namespaces must be equal; the
// actions must contain the request's action literally or "*"; the effective owners
// (missing = ctxOwner) must be equal. Paths compare by segment, never by string prefix:
// at execution an exact capability needs an equal path and a descendants capability a
// path that is a prefix of the request's; in discovery (request = a tool's ceiling C,
// capability path G) exact needs C a prefix of G and descendants either a prefix of the other.
func CapabilityMatches(c *Capability, req *CapabilityRequirement, ctxOwner Address, discovery bool) bool {
	if c.Resource.Namespace != req.Resource.Namespace {
		return false
	}
	if !slices.Contains(c.Actions, req.Action) && !slices.Contains(c.Actions, WildcardAction) {
		return false
	}
	co, ro := ctxOwner, ctxOwner
	if c.Resource.Owner != nil {
		co = *c.Resource.Owner
	}
	if req.Resource.Owner != nil {
		ro = *req.Resource.Owner
	}
	if co != ro {
		return false
	}
	gp, rp := c.Resource.Path, req.Resource.Path
	if discovery {
		if c.Scope == ScopeExact {
			return PathWithin(rp, gp)
		}
		return PathWithin(rp, gp) || PathWithin(gp, rp)
	}
	if c.Scope == ScopeExact {
		return slices.Equal(gp, rp)
	}
	return PathWithin(gp, rp)
}

// verifyChain walks a derived grant's ancestors through the resolver and checks every
// link. It returns the ancestor ids on success.
func (z *Authorizer) verifyChain(ctx context.Context, leaf *compiledGrant, actx AccessContext, admitted, opNow int64) ([]string, *delegationFailure) {
	maxLen := z.MaxChainLength
	if maxLen <= 0 {
		maxLen = DefaultMaxDelegationChainLength
	}
	walked := []string{leaf.g.ID}
	child := leaf.g
	var ancestors []string
	for child.ParentGrantID != "" {
		pid := child.ParentGrantID
		if z.Resolver == nil {
			return nil, &delegationFailure{unverified: true, code: LinkResolverUnavailable, grantID: pid}
		}
		if len(walked) >= maxLen {
			return nil, &delegationFailure{code: LinkChainTooLong, grantID: pid}
		}
		parent, err := z.Resolver.ResolveGrant(ctx, child.NamespaceID, pid)
		if err != nil {
			return nil, &delegationFailure{unverified: true, code: LinkResolverFailed, grantID: pid}
		}
		if parent == nil {
			return nil, &delegationFailure{unverified: true, code: LinkParentNotFound, grantID: pid}
		}
		if slices.Contains(walked, parent.ID) {
			return nil, &delegationFailure{code: LinkChainCycle, grantID: pid}
		}
		if err := parent.Validate(); err != nil {
			return nil, &delegationFailure{code: LinkParentInactive, grantID: pid}
		}
		cp := compileGrant(parent)
		if parent.NamespaceID != child.NamespaceID {
			return nil, &delegationFailure{code: LinkNamespaceMismatch, grantID: pid}
		}
		if child.Issuer != parent.Subject {
			return nil, &delegationFailure{code: LinkIssuerNotParentSubject, grantID: pid}
		}
		if !cp.active(admitted, opNow) || !cp.purposeOK(actx.Purpose) {
			return nil, &delegationFailure{code: LinkParentInactive, grantID: pid}
		}
		if code := staticLinkCheck(child, parent, &actx.Owner); code != "" {
			return nil, &delegationFailure{code: code, grantID: pid}
		}
		walked = append(walked, parent.ID)
		ancestors = append(ancestors, parent.ID)
		child = parent
	}
	return ancestors, nil
}

// CheckDelegationLink applies the context-free link rules of a delegation (spec 20 §3.4)
// to child and its parent and returns the first failing link code, or "" when the link
// holds. It does not judge time windows against a clock (parent_inactive) — only whether
// the child's window fits inside the parent's. Owners are compared as written (a missing
// owner equals only a missing owner).
func CheckDelegationLink(child, parent *CapabilityGrant) string {
	if parent.NamespaceID != child.NamespaceID {
		return LinkNamespaceMismatch
	}
	if child.Issuer != parent.Subject {
		return LinkIssuerNotParentSubject
	}
	return staticLinkCheck(child, parent, nil)
}

func staticLinkCheck(child, parent *CapabilityGrant, ctxOwner *Address) string {
	pd := parent.Constraints.DelegationDepth
	if pd == nil || *pd < 1 {
		return LinkDelegationNotPermitted
	}
	cd := int64(0)
	if child.Constraints.DelegationDepth != nil {
		cd = *child.Constraints.DelegationDepth
	}
	if cd > *pd-1 {
		return LinkDelegationDepthExceeded
	}
	if parent.Constraints.MaxUses != nil {
		return LinkBoundedParentNotDelegable
	}
	for i := range child.Capabilities {
		fits := false
		for j := range parent.Capabilities {
			if capabilityWithin(&child.Capabilities[i], &parent.Capabilities[j], ctxOwner) {
				fits = true
				break
			}
		}
		if !fits {
			return LinkCapabilityWidened
		}
	}
	if constraintsWidened(child, parent) {
		return LinkConstraintsWidened
	}
	return ""
}

func effectiveOwner(o *Address, ctxOwner *Address) (Address, bool) {
	if o != nil {
		return *o, true
	}
	if ctxOwner != nil {
		return *ctxOwner, true
	}
	return Address{}, false
}

// capabilityWithin reports whether child fits inside parent.
func capabilityWithin(child, parent *Capability, ctxOwner *Address) bool {
	if child.Resource.Namespace != parent.Resource.Namespace {
		return false
	}
	co, _ := effectiveOwner(child.Resource.Owner, ctxOwner)
	po, _ := effectiveOwner(parent.Resource.Owner, ctxOwner)
	if co != po {
		return false
	}
	if !slices.Contains(parent.Actions, WildcardAction) {
		for _, a := range child.Actions {
			if !slices.Contains(parent.Actions, a) {
				return false
			}
		}
	}
	if parent.Scope == ScopeExact {
		return child.Scope == ScopeExact && slices.Equal(child.Resource.Path, parent.Resource.Path)
	}
	return PathWithin(parent.Resource.Path, child.Resource.Path)
}

func constraintsWidened(child, parent *CapabilityGrant) bool {
	ci, err1 := ParseTimestamp(child.IssuedAt)
	pi, err2 := ParseTimestamp(parent.IssuedAt)
	if err1 != nil || err2 != nil || ci < pi {
		return true
	}
	pc, cc := &parent.Constraints, &child.Constraints
	if pc.ExpiresAt != "" {
		if cc.ExpiresAt == "" {
			return true
		}
		pe, _ := ParseTimestamp(pc.ExpiresAt)
		ce, _ := ParseTimestamp(cc.ExpiresAt)
		if ce > pe {
			return true
		}
	}
	if pc.NotBefore != "" {
		pn, _ := ParseTimestamp(pc.NotBefore)
		cn := ci
		if cc.NotBefore != "" {
			cn, _ = ParseTimestamp(cc.NotBefore)
		}
		if cn < pn {
			return true
		}
	}
	if pc.Purposes != nil {
		if cc.Purposes == nil {
			return true
		}
		for _, p := range cc.Purposes {
			if !slices.Contains(pc.Purposes, p) {
				return true
			}
		}
	}
	return false
}

// RequiredAuthority describes the authority a denied execution request lacked, as a
// CapabilityRequest: one capability {resource (owner only if the request named one),
// actions:[action], scope:"exact"}, with requester, owner, purpose and requestedAt from
// the context. Its id is deterministic ("capreq-" + SHA-256 of the canonical request
// without requestedAt and metadata), so one ask keeps one id across turns.
func RequiredAuthority(actx AccessContext, req CapabilityRequirement) *CapabilityRequest {
	res := ResourceRef{Namespace: req.Resource.Namespace, Path: slices.Clone(req.Resource.Path)}
	if res.Path == nil {
		res.Path = []string{}
	}
	if req.Resource.Owner != nil {
		o := *req.Resource.Owner
		res.Owner = &o
	}
	r := &CapabilityRequest{NamespaceID: actx.NamespaceID, Requester: actx.Actor, Owner: actx.Owner,
		Capabilities: []Capability{{Resource: res, Actions: []string{req.Action}, Scope: ScopeExact}},
		Purpose:      actx.Purpose, RequestedAt: actx.Now}
	r.ID = CapabilityRequestID(r)
	return r
}

// CapabilityRequestID computes the deterministic id of a capability request.
func CapabilityRequestID(r *CapabilityRequest) string {
	body := map[string]any{"namespaceId": r.NamespaceID, "requester": r.Requester, "owner": r.Owner,
		"capabilities": r.Capabilities, "purpose": r.Purpose}
	if r.Constraints != nil {
		body["constraints"] = r.Constraints
	}
	b, _ := json.Marshal(body)
	sum := sha256.Sum256(CanonicalJSON(b))
	return "capreq-" + hex.EncodeToString(sum[:])
}
