package kernel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
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
	// ClaimLost: the spend was fenced by a claim that no longer holds its request
	// (ErrSpendClaimLost): nothing was spent, and the call is not this attempt's to
	// decide.
	ClaimLost bool `json:"-"`
}

type delegationFailure struct {
	unverified bool
	code       string
	grantID    string
}

// Authorize is the execution check: it decides req for actx against auth, consuming a use
// of a bounded grant only when opts.Consume is set and the decision is an allow. It is
// Evaluate followed by Settle. A denial is a value; Authorize never fails.
func (z *Authorizer) Authorize(ctx context.Context, auth *Authority, actx AccessContext, req CapabilityRequirement, opts AuthorizeOptions) (AuthorizationDecision, Diagnostic) {
	return z.Settle(ctx, auth, actx, Evaluate(auth, actx, req, opts.Now, false), opts.Consume)
}

// CanDiscover is the catalogue check: could some grant cover part of the tool's declared
// bound? It never consumes. A grant whose path lies at or below the bound's path (or, for
// descendants scope, above it) intersects.
func (z *Authorizer) CanDiscover(ctx context.Context, auth *Authority, actx AccessContext, bound CapabilityRequirement, now string) (AuthorizationDecision, Diagnostic) {
	return z.Settle(ctx, auth, actx, Evaluate(auth, actx, bound, now, true), false)
}

func deny(code ReasonCode) AuthorizationDecision {
	return AuthorizationDecision{Allowed: false, ReasonCode: code}
}

func allow(grantID string) AuthorizationDecision {
	return AuthorizationDecision{Allowed: true, ReasonCode: ReasonAllowed, MatchedGrantID: grantID}
}

// rejection is one candidate's rejection with its place in source order.
type rejection struct {
	idx int32
	RejectedGrant
}

// Evaluation is the pure half of one authorization (spec 20 §3.1 to §3.3 and the match of
// §3.2 step 2): either an immediate pre-check decision, or the candidate grants the index
// offers, in source order, each classified on demand — rejected with the first pure
// condition it fails (issuer, subject, world, window, purpose, capability) or eligible
// for Settle. Classification is pure and lazy, so that a decision whose first eligible
// candidate allows never looks at the others (their rejections would not be reported
// anyway: a diagnostic lists the candidates before the deciding one). An Evaluation
// reads its Authority and never changes it; Settle it once.
type Evaluation struct {
	// Requirement is what was asked: a call's requirement, or a tool's declared bound in
	// discovery.
	Requirement CapabilityRequirement
	// Discovery selects the intersection matcher (catalogue) instead of the covering one.
	Discovery bool
	// Immediate is set when a pre-check decided (invalid_context, invalid_request,
	// authority_unavailable): no candidate is considered.
	Immediate *AuthorizationDecision
	// GrantsResolved is how many grants the authority holds.
	GrantsResolved int

	auth            *Authority
	actx            *AccessContext // read only, owned by the caller
	cands           []int32
	next            int
	rejected        []rejection
	admitted, opNow int64
	wall            int64 // the wall-clock floor of the time rules (0: none), see activeAt
	buf             [16]int32
}

// Evaluate is the pure half of Authorize (discovery=false) and CanDiscover
// (discovery=true): the pre-checks of spec 20 §3.1, then, for the candidate grants the
// index offers in source order, eligibility (issuer, subject, world, time window,
// purpose) and the single-capability match. It calls no port and has no side effects.
//
// The optional grant verifier is a port, so it runs in Settle, after the match: a grant
// that fails the match is reported as "capability" without asking the verifier (spec 20
// puts the verifier last in eligibility; asking it about a grant that cannot match would
// be wasted I/O and changes no decision).
func Evaluate(auth *Authority, actx AccessContext, req CapabilityRequirement, now string, discovery bool) *Evaluation {
	ev := &Evaluation{}
	admitted, err := ParseTimestamp(actx.Now)
	if err != nil {
		ev.Requirement, ev.Discovery, ev.Immediate = req, discovery, ptr(deny(ReasonInvalidContext))
		return ev
	}
	opNow := admitted
	if now != "" {
		if opNow, err = ParseTimestamp(now); err != nil {
			ev.Requirement, ev.Discovery, ev.Immediate = req, discovery, ptr(deny(ReasonInvalidContext))
			return ev
		}
	}
	evaluateInto(ev, auth, &actx, admitted, opNow, 0, req, discovery)
	return ev
}

func ptr[T any](v T) *T { return &v }

// evaluateInto is Evaluate into ev, with the context's instant (admitted) and the
// operation instant already parsed: a turn parses its instant once, and reuses ev.
func evaluateInto(ev *Evaluation, auth *Authority, actx *AccessContext, admitted, opNow, wall int64, req CapabilityRequirement, discovery bool) {
	// Reset field by field: ev is reused across the tools of a listing, and copying a
	// whole Evaluation costs write barriers.
	ev.Requirement, ev.Discovery, ev.Immediate, ev.GrantsResolved = req, discovery, nil, 0
	ev.auth, ev.actx, ev.cands, ev.next, ev.rejected = nil, nil, nil, 0, ev.rejected[:0]
	if actx.Purpose == "" || actx.TraceID == "" {
		ev.Immediate = ptr(deny(ReasonInvalidContext))
		return
	}
	if req.Action == "" || req.Resource.Namespace == "" || (req.Resource.Owner != nil && *req.Resource.Owner != actx.Owner) {
		ev.Immediate = ptr(deny(ReasonInvalidRequest))
		return
	}
	if auth == nil || auth.unavailable != "" {
		code := AuthorityGrantSourceFailed
		if auth != nil {
			code = auth.unavailable
		}
		d := deny(ReasonAuthorityUnavailable)
		d.Metadata = map[string]any{"authority": map[string]any{"code": code}}
		ev.Immediate = &d
		return
	}
	ev.auth, ev.actx, ev.admitted, ev.opNow, ev.wall = auth, actx, admitted, opNow, wall
	ev.GrantsResolved = len(auth.grants)
	ev.cands = auth.candidates(&ev.Requirement, discovery, ev.buf[:0])
}

// nextEligible classifies the remaining candidates in order and returns the next one that
// passes every pure check, recording the rejections before it; -1 when none is left.
func (e *Evaluation) nextEligible() int32 {
	for e.next < len(e.cands) {
		gi := e.cands[e.next]
		e.next++
		if r := pureRejection(&e.auth.grants[gi], e.actx, &e.Requirement, e.admitted, e.opNow, e.wall, e.Discovery); r != "" {
			e.rejected = append(e.rejected, rejection{gi, RejectedGrant{GrantID: e.auth.grants[gi].g.ID, Reason: r}})
			continue
		}
		return gi
	}
	return -1
}

// pureRejection is the first failed pure condition of one candidate, or "".
func pureRejection(cg *compiledGrant, actx *AccessContext, req *CapabilityRequirement, admitted, opNow, wall int64, discovery bool) RejectReason {
	g := cg.g
	switch {
	case g.Issuer != actx.Authority:
		return RejectIssuer
	case g.Subject != actx.Actor:
		return RejectSubject
	case g.NamespaceID != actx.World:
		return RejectNamespace
	case !cg.activeAt(admitted, opNow, wall):
		return RejectWindow
	case !cg.purposeOK(actx.Purpose):
		return RejectPurpose
	case !grantMatches(g, req, actx.Owner, discovery):
		return RejectCapability
	}
	return ""
}

// verdict is what Settle learnt of one eligible candidate that did not allow.
type verdict struct {
	reason     RejectReason
	delegation *delegationFailure
	ceiling    *AuthorizationDecision
}

// Settle is the effectful half of an authorization: for each eligible candidate of ev in
// order it asks the ports — the grant verifier, the delegation chain resolver, live
// revocation, the host ceiling, then the usage store (consuming one use only when consume
// is set) — and stops at the first allow or at an immediate outage code. When nothing
// allowed, precedence picks the code. ev must come from Evaluate over the same auth and
// actx.
func (z *Authorizer) Settle(ctx context.Context, auth *Authority, actx AccessContext, ev *Evaluation, consume bool) (AuthorizationDecision, Diagnostic) {
	d, diag, res := z.settle(ctx, auth, actx, ev, consume, false)
	if res != nil {
		if err := res.Commit(ctx, nil); err != nil {
			return deny(ReasonUsageStoreUnavailable), diag
		}
	}
	return d, diag
}

// settle is Settle; with reserve, a consuming allow on a ReservingUsageStore returns the
// reservation uncommitted, for the caller to commit together with the decision's audit
// record (or release).
func (z *Authorizer) settle(ctx context.Context, auth *Authority, actx AccessContext, ev *Evaluation, consume, reserve bool) (_ AuthorizationDecision, _ Diagnostic, reservation UsageReservation) {
	diag := Diagnostic{Discovery: ev.Discovery, GrantsResolved: ev.GrantsResolved}
	if ev.Immediate != nil {
		return *ev.Immediate, diag, nil
	}
	ev.next, ev.rejected = 0, ev.rejected[:0]
	var settled []rejection
	var verdicts []verdict
	finish := func(d AuthorizationDecision, upTo int32) (AuthorizationDecision, Diagnostic, UsageReservation) {
		diag.RejectedGrants = mergeRejections(ev.rejected, settled, upTo)
		return d, diag, reservation
	}
	reject := func(gi int32, v verdict, detail string) {
		settled = append(settled, rejection{gi, RejectedGrant{GrantID: auth.grants[gi].g.ID, Reason: v.reason, Detail: detail}})
		verdicts = append(verdicts, v)
	}
	for gi := ev.nextEligible(); gi >= 0; gi = ev.nextEligible() {
		cg := &auth.grants[gi]
		g := cg.g
		if z.Verifier != nil {
			if ok, err := z.Verifier.Verify(ctx, g, actx); err != nil || !ok {
				reject(gi, verdict{reason: RejectVerifier}, "")
				continue
			}
		}
		var ancestors []string
		if g.ParentGrantID != "" {
			anc, fail := z.verifyChain(ctx, cg, actx, ev.admitted, ev.opNow, ev.wall)
			if fail != nil {
				if fail.code == LinkResolverUnavailable && diag.MissingDependency == "" {
					diag.MissingDependency = "delegationResolver"
				}
				reject(gi, verdict{reason: RejectDelegation, delegation: fail}, fail.code)
				continue
			}
			ancestors = anc
		}
		if z.Revocation != nil {
			ids := append([]string{g.ID}, ancestors...)
			chk, err := z.Revocation.Check(ctx, actx, ids)
			if err != nil || chk.Revision == "" || !subset(chk.RevokedGrantIDs, ids) {
				d := deny(ReasonAuthorityUnavailable)
				d.Metadata = map[string]any{"authority": map[string]any{"code": AuthorityRevocationUnavailable}}
				return finish(d, gi)
			}
			if len(chk.RevokedGrantIDs) > 0 {
				reject(gi, verdict{reason: RejectRevoked}, "")
				continue
			}
		}
		if z.Ceiling != nil {
			out, err := z.Ceiling.Narrow(allow(g.ID), cloneRequirement(ev.Requirement), actx)
			if err != nil || (out.Allowed && (out.MatchedGrantID != g.ID || out.ReasonCode != ReasonAllowed)) {
				return finish(deny(ReasonHostPolicyUnavailable), gi)
			}
			if !out.Allowed {
				d := deny(ReasonHostPolicyDenied)
				d.MatchedGrantID = g.ID
				if out.Metadata != nil {
					d.Metadata = out.Metadata
				}
				reject(gi, verdict{reason: RejectCeiling, ceiling: &d}, string(out.ReasonCode))
				continue
			}
		}
		if g.Constraints.MaxUses == nil {
			return finish(allow(g.ID), gi)
		}
		if z.Usage == nil {
			diag.MissingDependency = "usageStore"
			return finish(deny(ReasonUsageStoreUnavailable), gi)
		}
		var ok bool
		var err error
		rs, reserving := z.Usage.(ReservingUsageStore)
		claim, claimed := SpendClaimOf(ctx)
		switch {
		case consume && claimed:
			// a spend fenced by its request's claim: only a reservation that checks the
			// claim in its own transaction may spend it
			if cs, fences := z.Usage.(ClaimedUsageStore); fences && reserve {
				reservation, ok, err = cs.ReserveClaimedUse(ctx, UsageKeyOf(g), *g.Constraints.MaxUses, claim)
			} else {
				err = errUnfencedSpend
			}
			if errors.Is(err, ErrSpendClaimLost) {
				diag.ClaimLost = true
			}
		case consume && reserve && reserving:
			reservation, ok, err = rs.ReserveUse(ctx, UsageKeyOf(g), *g.Constraints.MaxUses)
		case consume:
			ok, err = z.Usage.TryConsume(ctx, UsageKeyOf(g), *g.Constraints.MaxUses)
		default:
			var used int64
			used, err = z.Usage.GetUsage(ctx, UsageKeyOf(g))
			ok = used < *g.Constraints.MaxUses
		}
		if err != nil {
			return finish(deny(ReasonUsageStoreUnavailable), gi)
		}
		if ok {
			diag.Consumed = consume
			return finish(allow(g.ID), gi)
		}
		reject(gi, verdict{reason: RejectExhausted}, "")
	}
	d := precedence(verdicts)
	if d.ReasonCode == ReasonNoMatchingGrant && !ev.Discovery {
		d.RequiredAuthority = RequiredAuthority(actx, ev.Requirement)
	}
	return finish(d, math.MaxInt32)
}

// mergeRejections lists the pure and the settled rejections in source order, keeping only
// candidates before upTo (the candidate that decided, when one did).
func mergeRejections(pure, settled []rejection, upTo int32) []RejectedGrant {
	if len(pure)+len(settled) == 0 {
		return nil
	}
	all := make([]rejection, 0, len(pure)+len(settled))
	for _, list := range [2][]rejection{pure, settled} {
		for _, r := range list {
			if r.idx < upTo {
				all = append(all, r)
			}
		}
	}
	slices.SortStableFunc(all, func(a, b rejection) int { return int(a.idx) - int(b.idx) })
	out := make([]RejectedGrant, len(all))
	for i := range all {
		out[i] = all[i].RejectedGrant
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// precedence is spec 20 §3.6, for when no candidate allowed and no immediate code was
// reached: delegation_chain_unverified > delegation_chain_invalid > host_policy_denied >
// grant_exhausted > no_matching_grant. Among verdicts of one rank the first in source
// order decides (its delegation link, or the grant the ceiling refused). It is pure.
func precedence(verdicts []verdict) AuthorizationDecision {
	var unverified, invalid, ceiling *verdict
	exhausted := false
	for i := range verdicts {
		v := &verdicts[i]
		switch {
		case v.delegation != nil && v.delegation.unverified:
			if unverified == nil {
				unverified = v
			}
		case v.delegation != nil:
			if invalid == nil {
				invalid = v
			}
		case v.ceiling != nil:
			if ceiling == nil {
				ceiling = v
			}
		case v.reason == RejectExhausted:
			exhausted = true
		}
	}
	delegation := func(code ReasonCode, f *delegationFailure) AuthorizationDecision {
		d := deny(code)
		d.Metadata = map[string]any{"delegation": map[string]any{"code": f.code, "grantId": f.grantID}}
		return d
	}
	switch {
	case unverified != nil:
		return delegation(ReasonDelegationChainUnverified, unverified.delegation)
	case invalid != nil:
		return delegation(ReasonDelegationChainInvalid, invalid.delegation)
	case ceiling != nil:
		return *ceiling.ceiling
	case exhausted:
		return deny(ReasonGrantExhausted)
	}
	return deny(ReasonNoMatchingGrant)
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

// grantMatches reports whether a single capability of g matches the whole request:
// covers it (execution) or intersects it (discovery). Capabilities never combine (§3.7).
func grantMatches(g *CapabilityGrant, req *CapabilityRequirement, ctxOwner Address, discovery bool) bool {
	for i := range g.Capabilities {
		c := &g.Capabilities[i]
		if discovery && CapabilityIntersects(c, req, ctxOwner) || !discovery && CapabilityCovers(c, req, ctxOwner) {
			return true
		}
	}
	return false
}

// sameTarget is what both matchers require: equal resource namespaces, the request's
// action listed literally or "*" listed (actions compare as whole strings; "snapshot:*"
// is an ordinary action), and equal effective owners (a missing owner is ctxOwner).
func sameTarget(c *Capability, req *CapabilityRequirement, ctxOwner Address) bool {
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
	return co == ro
}

// CapabilityCovers is the execution matcher of one capability (spec 20 §3.2 step 2):
// same target (see sameTarget), and by segment, never by string prefix, an exact
// capability needs a path equal to the request's and a descendants capability a path
// that is a prefix of (or equal to) the request's.
func CapabilityCovers(c *Capability, req *CapabilityRequirement, ctxOwner Address) bool {
	if !sameTarget(c, req, ctxOwner) {
		return false
	}
	if c.Scope == ScopeExact {
		return slices.Equal(c.Resource.Path, req.Resource.Path)
	}
	return PathWithin(c.Resource.Path, req.Resource.Path)
}

// CapabilityIntersects is the discovery matcher: could the capability cover part of a
// tool's declared bound B? Same target, and an exact capability needs B's path a prefix
// of its own, a descendants capability either path a prefix of the other.
func CapabilityIntersects(c *Capability, bound *CapabilityRequirement, ctxOwner Address) bool {
	if !sameTarget(c, bound, ctxOwner) {
		return false
	}
	gp, bp := c.Resource.Path, bound.Resource.Path
	if c.Scope == ScopeExact {
		return PathWithin(bp, gp)
	}
	return PathWithin(bp, gp) || PathWithin(gp, bp)
}

// verifyChain walks a derived grant's ancestors through the resolver and checks every
// link. It returns the ancestor ids on success.
func (z *Authorizer) verifyChain(ctx context.Context, leaf *compiledGrant, actx AccessContext, admitted, opNow, wall int64) ([]string, *delegationFailure) {
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
		if !cp.activeAt(admitted, opNow, wall) || !cp.purposeOK(actx.Purpose) {
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
	r := &CapabilityRequest{NamespaceID: actx.World, Requester: actx.Actor, Owner: actx.Owner,
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
	sum := sha256.Sum256(mustCanonical(b))
	return "capreq-" + hex.EncodeToString(sum[:])
}
