package kernel

import (
	"slices"
)

// DeriveRefusal is why DeriveGrant refused to issue a derived grant ("" = issued).
type DeriveRefusal string

// The refusals of DeriveGrant, in the order they are checked (spec 20 §4).
const (
	DeriveEmptyCapabilities         DeriveRefusal = "empty_capabilities"
	DeriveIDCollidesWithParent      DeriveRefusal = "id_collides_with_parent"
	DeriveBoundedParentNotDelegable DeriveRefusal = "bounded_parent_not_delegable"
	DeriveParentNotDelegable        DeriveRefusal = "parent_not_delegable"
	DeriveDepthExhausted            DeriveRefusal = "depth_exhausted"
	DeriveCapabilityNotWithin       DeriveRefusal = "capability_not_within_parent"
	DerivePurposeNotWithin          DeriveRefusal = "purpose_not_within_parent"
	DeriveWindowNotWithin           DeriveRefusal = "window_not_within_parent"
	DeriveIssuedBeforeParent        DeriveRefusal = "issued_before_parent"
	DeriveInvalid                   DeriveRefusal = "invalid_grant"
)

// DeriveRequest asks for a grant derived from a parent: the parent's subject delegates
// part of its authority to Subject. Omitted purposes and window bounds are copied from
// the parent; DelegationDepth defaults to the parent's minus one; MaxUses is set only
// when asked for.
type DeriveRequest struct {
	ID              string
	Subject         Address
	Capabilities    []Capability
	Purposes        []string
	NotBefore       string
	ExpiresAt       string
	DelegationDepth *int64
	MaxUses         *int64
	IssuedAt        string
	Metadata        map[string]any
}

// DeriveGrant issues a grant derived from parent, or refuses; it never clamps a request
// to fit. It is pure. The result passes the delegation-link checks of the authorization
// walk (spec 20 §3.4) by construction, and the contract (a refusal DeriveInvalid names a
// request that is malformed in itself, e.g. an unparsable instant).
func DeriveGrant(parent *CapabilityGrant, req DeriveRequest) (CapabilityGrant, DeriveRefusal) {
	pc := &parent.Constraints
	switch {
	case len(req.Capabilities) == 0:
		return CapabilityGrant{}, DeriveEmptyCapabilities
	case req.ID == parent.ID:
		return CapabilityGrant{}, DeriveIDCollidesWithParent
	case pc.MaxUses != nil:
		return CapabilityGrant{}, DeriveBoundedParentNotDelegable
	case pc.DelegationDepth == nil || *pc.DelegationDepth <= 0:
		return CapabilityGrant{}, DeriveParentNotDelegable
	}
	depth := *pc.DelegationDepth - 1
	if req.DelegationDepth != nil {
		if *req.DelegationDepth > depth {
			return CapabilityGrant{}, DeriveDepthExhausted
		}
		depth = *req.DelegationDepth
	}
	for i := range req.Capabilities {
		fits := false
		for j := range parent.Capabilities {
			// Owners compare as written: an unowned parent capability cannot gain one.
			if capabilityWithin(&req.Capabilities[i], &parent.Capabilities[j], nil) {
				fits = true
				break
			}
		}
		if !fits {
			return CapabilityGrant{}, DeriveCapabilityNotWithin
		}
	}
	purposes := slices.Clone(req.Purposes)
	if purposes == nil {
		purposes = slices.Clone(pc.Purposes)
	} else if pc.Purposes != nil {
		for _, p := range purposes {
			if !slices.Contains(pc.Purposes, p) {
				return CapabilityGrant{}, DerivePurposeNotWithin
			}
		}
	}
	notBefore, expiresAt := req.NotBefore, req.ExpiresAt
	if notBefore == "" {
		notBefore = pc.NotBefore
	}
	if expiresAt == "" {
		expiresAt = pc.ExpiresAt
	}
	if before(notBefore, pc.NotBefore) || before(pc.ExpiresAt, expiresAt) {
		return CapabilityGrant{}, DeriveWindowNotWithin
	}
	if before(req.IssuedAt, parent.IssuedAt) {
		return CapabilityGrant{}, DeriveIssuedBeforeParent
	}
	g := CapabilityGrant{ID: req.ID, NamespaceID: parent.NamespaceID, Subject: req.Subject, Issuer: parent.Subject,
		Capabilities: slices.Clone(req.Capabilities), IssuedAt: req.IssuedAt, ParentGrantID: parent.ID, Metadata: req.Metadata,
		Constraints: CapabilityConstraints{Purposes: purposes, NotBefore: notBefore, ExpiresAt: expiresAt,
			DelegationDepth: &depth, MaxUses: req.MaxUses}}
	if err := g.Validate(); err != nil {
		return CapabilityGrant{}, DeriveInvalid
	}
	return g, ""
}

// before reports whether instant a is strictly earlier than b; an empty bound is never
// before anything and nothing is before it (an unparsable one is treated as earliest
// for a and latest for b, so the comparison refuses).
func before(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	am, errA := ParseTimestamp(a)
	bm, errB := ParseTimestamp(b)
	if errA != nil || errB != nil {
		return true
	}
	return am < bm
}
