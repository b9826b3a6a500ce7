package host

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// The explanation types are pkg/api's (a remote client reads them without importing
// host); these names keep the host's callers compiling.
type (
	Explanation = api.Explanation
	Refusal     = api.Refusal
	Candidate   = api.Candidate
	Fix         = api.Fix
)

// Fix kinds (api's).
const (
	FixEnableNamespace = api.FixEnableNamespace
	FixAddGrant        = api.FixAddGrant
	FixArguments       = api.FixArguments
)

// Explain names the candidates and the fixes of ex, a dry run of a call in turn t. It
// reads the turn's authority (already loaded by the dry run) and writes nothing.
func Explain(ctx context.Context, t *kernel.Turn, ex *kernel.CallExplanation) Explanation {
	actx := t.Context()
	out := Explanation{Tool: ex.Tool, Allowed: ex.Allowed, Findings: ex.Findings, Requirement: ex.Requirement,
		Candidates: []Candidate{}, Fixes: []Fix{}, Context: actx}
	if len(ex.Findings) > 0 {
		fd := ex.Findings[0]
		out.Refusal = &Refusal{Gate: fd.Gate, Code: fd.Code, Cause: fd.Cause}
	}
	auth := t.Authority(ctx)
	if ex.Allowed && ex.Decision != nil && ex.Decision.MatchedGrantID != "" {
		if g := auth.Grant(ex.Decision.MatchedGrantID); g != nil {
			c := grantfile.CloneGrant(g)
			out.MatchedGrant = &c
		}
	}
	// Candidates: the execution decision's, then any the discovery check saw besides.
	seen := map[string]bool{}
	for _, diag := range []*kernel.Diagnostic{ex.DecisionDiag, ex.DiscoveryDiag} {
		if diag == nil {
			continue
		}
		for _, r := range diag.RejectedGrants {
			if seen[r.GrantID] {
				continue
			}
			seen[r.GrantID] = true
			g := auth.Grant(r.GrantID)
			text := rejectionText(g, r, actx)
			if r.Reason == kernel.RejectCapability && g != nil && ex.Requirement != nil {
				text = capabilityMiss(g, *ex.Requirement, actx.Owner)
			}
			out.Candidates = append(out.Candidates, Candidate{GrantID: r.GrantID, Reason: string(r.Reason), Rejected: text})
		}
	}
	// The index offers only grants with the requested action; for a refusal, also name
	// the grants that reach the same resource namespace and say what they lack.
	decisionRefused := ex.Decision != nil && !ex.Decision.Allowed
	if decisionRefused && ex.Requirement != nil && auth.Unavailable() == "" {
		for _, g := range auth.Grants() {
			if seen[g.ID] || !reachesNamespace(g, ex.Requirement.Resource.Namespace) {
				continue
			}
			seen[g.ID] = true
			out.Candidates = append(out.Candidates, Candidate{GrantID: g.ID, Reason: string(kernel.RejectCapability),
				Rejected: capabilityMiss(g, *ex.Requirement, actx.Owner)})
		}
	}
	// Fixes, one per kind of refusing gate. While the namespace is off no grant fix is
	// offered: enabling it comes first, and explain then says what grant is still missing.
	namespaceOff := false
	for _, fd := range ex.Findings {
		if fd.Cause == kernel.CauseNamespaceDisabled {
			namespaceOff = true
		}
	}
	addedGrant := false
	for _, fd := range ex.Findings {
		switch {
		case fd.Cause == kernel.CauseNamespaceDisabled:
			msg := "enable the tool namespace first"
			if decisionRefused {
				msg += "; the call would still be refused, so run explain again for the grant to add"
			}
			out.Fixes = append(out.Fixes, Fix{Kind: FixEnableNamespace, Namespace: ex.Namespace,
				Command: "sharedos namespaces enable " + ex.Namespace, Message: msg})
		case fd.Code == kernel.CodeInvalidToolArguments || fd.Code == kernel.CodeToolRequirementResolutionFailed:
			msg := fd.Message
			if ex.ArgumentsError != "" {
				msg = ex.ArgumentsError
			}
			out.Fixes = append(out.Fixes, Fix{Kind: FixArguments,
				Message: fmt.Sprintf("%s; 'sharedos tools describe %s' shows what the tool takes", msg, ex.Tool)})
		case fd.Gate == kernel.GateGrant && !addedGrant && !namespaceOff && ex.Requirement != nil:
			g := FixGrant(actx, *ex.Requirement, replacedCandidate(auth, out.Candidates))
			out.Fixes = append(out.Fixes, Fix{Kind: FixAddGrant, Grant: &g, YAML: grantfile.FormatGrantYAML(g)})
			addedGrant = true
		}
	}
	return out
}

// replacedCandidate is the rejected candidate a grant fix replaces: the first listed
// candidate that failed for a reason a new grant can fix (the resource or action, its
// window, its purpose, its spent uses), with that reason; nil when none.
func replacedCandidate(auth *kernel.Authority, cands []Candidate) *RejectedCandidate {
	for _, c := range cands {
		switch r := kernel.RejectReason(c.Reason); r {
		case kernel.RejectCapability, kernel.RejectWindow, kernel.RejectPurpose, kernel.RejectExhausted:
			if g := auth.Grant(c.GrantID); g != nil {
				return &RejectedCandidate{grant: g, reason: r}
			}
		}
	}
	return nil
}

// RejectedCandidate is a candidate grant and why the decision rejected it.
type RejectedCandidate struct {
	grant  *kernel.CapabilityGrant
	reason kernel.RejectReason
}

// FixGrant is the grant that covers exactly req for the context: subject = actor, issuer
// = authority, in the context's world, one exact capability on the requirement's
// resource (owner = the context's owner) with its one action, issued at the turn's
// instant (so it is active under a pinned --now too). Its id is derived from the
// requirement, so the same ask gives the same grant. When it replaces a rejected
// candidate, it keeps that grant's narrowing constraints — expiry, purposes, maxUses —
// except the one that was the reason for the refusal (an expired window, a wrong
// purpose, spent uses); it never carries delegation.
func FixGrant(actx kernel.AccessContext, req kernel.CapabilityRequirement, replaced *RejectedCandidate) kernel.CapabilityGrant {
	owner := actx.Owner
	res := kernel.ResourceRef{Namespace: req.Resource.Namespace, Path: append([]string{}, req.Resource.Path...), Owner: &owner}
	ra := kernel.RequiredAuthority(actx, kernel.CapabilityRequirement{Resource: res, Action: req.Action})
	return kernel.CapabilityGrant{
		ID:           "fix-" + strings.TrimPrefix(ra.ID, "capreq-")[:12],
		NamespaceID:  actx.World,
		Subject:      actx.Actor,
		Issuer:       actx.Authority,
		Capabilities: []kernel.Capability{{Resource: res, Actions: []string{req.Action}, Scope: kernel.ScopeExact}},
		Constraints:  keptConstraints(replaced, actx.Now),
		IssuedAt:     actx.Now,
	}
}

// keptConstraints are the narrowing constraints of a replaced candidate that still hold
// at now and were not the reason it was rejected.
func keptConstraints(replaced *RejectedCandidate, now string) kernel.CapabilityConstraints {
	var out kernel.CapabilityConstraints
	if replaced == nil {
		return out
	}
	c := replaced.grant.Constraints
	at, _ := kernel.ParseTimestamp(now)
	if replaced.reason != kernel.RejectWindow && c.ExpiresAt != "" {
		if exp, err := kernel.ParseTimestamp(c.ExpiresAt); err == nil && exp > at {
			out.ExpiresAt = c.ExpiresAt
		}
	}
	if replaced.reason != kernel.RejectPurpose && c.Purposes != nil {
		out.Purposes = append([]string(nil), c.Purposes...)
	}
	if replaced.reason != kernel.RejectExhausted && c.MaxUses != nil {
		n := *c.MaxUses
		out.MaxUses = &n
	}
	return out
}

// rejectionText says in words why a candidate grant was rejected.
func rejectionText(g *kernel.CapabilityGrant, r kernel.RejectedGrant, actx kernel.AccessContext) string {
	switch r.Reason {
	case kernel.RejectIssuer:
		return "issued by another principal than the context's authority " + actx.Authority.String()
	case kernel.RejectSubject:
		return "issued to another subject than the actor " + actx.Actor.String()
	case kernel.RejectNamespace:
		return "belongs to another world than " + actx.World
	case kernel.RejectWindow:
		return windowText(g, actx.Now)
	case kernel.RejectPurpose:
		if g != nil {
			return fmt.Sprintf("wrong purpose: allows %s, the context's purpose is %q", strings.Join(g.Constraints.Purposes, ", "), actx.Purpose)
		}
		return "wrong purpose"
	case kernel.RejectVerifier:
		return "refused by the grant verifier"
	case kernel.RejectCapability:
		return "does not cover this resource or action"
	case kernel.RejectDelegation:
		return "delegation chain: " + dashed(r.Detail)
	case kernel.RejectExhausted:
		if g != nil && g.Constraints.MaxUses != nil {
			return fmt.Sprintf("exhausted: all %d uses are spent", *g.Constraints.MaxUses)
		}
		return "exhausted: all uses are spent"
	case kernel.RejectRevoked:
		return "revoked"
	case kernel.RejectCeiling:
		return "refused by the host ceiling"
	}
	return string(r.Reason)
}

func reachesNamespace(g *kernel.CapabilityGrant, ns string) bool {
	for _, c := range g.Capabilities {
		if c.Resource.Namespace == ns {
			return true
		}
	}
	return false
}

// capabilityMiss says what a grant's capabilities lack for req: the action, the path or
// the owner (a request is covered only by one capability matching all of them).
func capabilityMiss(g *kernel.CapabilityGrant, req kernel.CapabilityRequirement, ctxOwner kernel.Address) string {
	where := req.Resource.Namespace + ":" + kernel.JoinPath(req.Resource.Path)
	for _, c := range g.Capabilities {
		if c.Resource.Namespace != req.Resource.Namespace {
			continue
		}
		probe := req
		probe.Action = kernel.WildcardAction
		cc := c
		cc.Actions = []string{kernel.WildcardAction}
		if kernel.CapabilityCovers(&cc, &probe, ctxOwner) {
			return fmt.Sprintf("does not cover the action %q on %s (it allows %s)", req.Action, where, strings.Join(c.Actions, ", "))
		}
	}
	for _, c := range g.Capabilities {
		if c.Resource.Namespace == req.Resource.Namespace && (slices.Contains(c.Actions, req.Action) || slices.Contains(c.Actions, kernel.WildcardAction)) {
			owner := ""
			if c.Resource.Owner != nil && *c.Resource.Owner != ctxOwner {
				owner = ", owned by " + c.Resource.Owner.String()
			}
			return fmt.Sprintf("allows %q but not on %s (it covers %s:%s, %s%s)", req.Action, where,
				c.Resource.Namespace, kernel.JoinPath(c.Resource.Path), c.Scope, owner)
		}
	}
	return "does not cover this resource or action"
}

func windowText(g *kernel.CapabilityGrant, now string) string {
	if g == nil {
		return "not active at " + now
	}
	at, _ := kernel.ParseTimestamp(now)
	before := func(ts string) bool { t, err := kernel.ParseTimestamp(ts); return err == nil && t <= at }
	after := func(ts string) bool { t, err := kernel.ParseTimestamp(ts); return err == nil && t > at }
	switch {
	case g.RevokedAt != "" && before(g.RevokedAt):
		return "revoked at " + g.RevokedAt
	case g.Constraints.ExpiresAt != "" && before(g.Constraints.ExpiresAt):
		return "expired at " + g.Constraints.ExpiresAt
	case g.Constraints.NotBefore != "" && after(g.Constraints.NotBefore):
		return "not yet active: active from " + g.Constraints.NotBefore
	case after(g.IssuedAt):
		return "not yet active: issued at " + g.IssuedAt
	}
	return "not active at " + now
}

func dashed(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
