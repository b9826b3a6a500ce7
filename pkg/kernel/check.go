package kernel

import (
	"context"
	"slices"
	"strings"
)

// Authorize is the dry run of spec 30 §2.2's POST /v1/authorize: it decides req for the
// turn's context exactly as the execution check would (every port asked, the grant
// verifier, delegation, revocation, ceiling and usage store), but never consumes a use.
// A denied decision of no_matching_grant carries the requiredAuthority a human would
// have to grant. The decision is recorded (authorization.checked, consumed false, a
// write-ahead record: it changed nothing); a record that cannot be written refuses the
// check (authority_unavailable, its metadata naming audit_unavailable) rather than
// answering unrecorded. operationID names the
// check in the record ("" leaves it out). A denial is a value; Authorize never fails.
func (t *Turn) Authorize(ctx context.Context, req CapabilityRequirement, operationID string) AuthorizationDecision {
	if err := req.Validate(); err != nil {
		return deny(ReasonInvalidRequest)
	}
	auth := t.auditedAuthority(ctx)
	d, diag := t.k.authz.Authorize(ctx, auth, t.actx, req, AuthorizeOptions{})
	if !d.Allowed && d.ReasonCode == ReasonNoMatchingGrant {
		d.RequiredAuthority = RequiredAuthority(t.actx, req)
	}
	ev := t.decisionEvent(auth, ToolCall{ID: operationID}, req, d, diag, false)
	if err := t.auditWriteAhead(ctx, ev); err != nil {
		d = deny(ReasonAuthorityUnavailable)
		d.Metadata = map[string]any{"authority": map[string]any{"code": string(CodeAuditUnavailable)}}
	}
	return d
}

// ReachEntry is one place some grant of the context reaches: a resource namespace and
// path, the actions, and whether it covers the path only or everything below it.
type ReachEntry struct {
	Namespace string   `json:"namespace"`
	Path      []string `json:"path"`
	Actions   []string `json:"actions"`
	Scope     Scope    `json:"scope"`
}

// ReachResult is spec 30 §2.2's ReachResult: where the context's grants reach
// (Status "computed"), or why that could not be computed (Status "unavailable" with
// ReasonCode authority_unavailable).
type ReachResult struct {
	Status     string       `json:"status"`
	Reach      []ReachEntry `json:"reach,omitempty"`
	ReasonCode ReasonCode   `json:"reasonCode,omitempty"`
}

// Reach reports where the turn's authority reaches: for every grant that is eligible for
// the context now (issuer, subject, world, validity window, purpose — the pure checks of
// a decision), each capability's resource, actions and scope, merged by (namespace,
// path, scope) and sorted. It names no grant, issuer or constraint (no authority
// details), consults no port and spends nothing; a capability of another owner is left
// out. It writes the turn's authority.resolved record like any audited operation.
func (t *Turn) Reach(ctx context.Context) ReachResult {
	auth := t.auditedAuthority(ctx)
	if auth == nil || auth.unavailable != "" {
		return ReachResult{Status: "unavailable", ReasonCode: ReasonAuthorityUnavailable}
	}
	admitted, err := ParseTimestamp(t.actx.Now)
	if err != nil {
		return ReachResult{Status: "unavailable", ReasonCode: ReasonAuthorityUnavailable}
	}
	type key struct {
		ns, path string
		scope    Scope
	}
	merged := map[key]*ReachEntry{}
	for i := range auth.grants {
		cg := &auth.grants[i]
		g := cg.g
		if g.Issuer != t.actx.Authority || g.Subject != t.actx.Actor || g.NamespaceID != t.actx.World ||
			!cg.activeAt(admitted, admitted, 0) || !cg.purposeOK(t.actx.Purpose) {
			continue
		}
		for _, c := range g.Capabilities {
			if c.Resource.Owner != nil && *c.Resource.Owner != t.actx.Owner {
				continue
			}
			k := key{c.Resource.Namespace, strings.Join(c.Resource.Path, "\x00"), c.Scope}
			e := merged[k]
			if e == nil {
				e = &ReachEntry{Namespace: c.Resource.Namespace, Path: slices.Clone(c.Resource.Path), Scope: c.Scope}
				if e.Path == nil {
					e.Path = []string{}
				}
				merged[k] = e
			}
			for _, a := range c.Actions {
				if !slices.Contains(e.Actions, a) {
					e.Actions = append(e.Actions, a)
				}
			}
		}
	}
	out := make([]ReachEntry, 0, len(merged))
	for _, e := range merged {
		slices.Sort(e.Actions)
		out = append(out, *e)
	}
	slices.SortFunc(out, func(a, b ReachEntry) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		if c := slices.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return strings.Compare(string(a.Scope), string(b.Scope))
	})
	return ReachResult{Status: "computed", Reach: out}
}

// ExplainRequirement is the dry run of Authorize for `POST /v1/authorize?explain=true`:
// the same decision (every port asked, nothing consumed) as an explanation of a call —
// the refusing finding, the requirement and the execution decision with its diagnostic
// — with no tool (Tool "" and Registered false: a bare requirement names none). Nothing
// is audited, not even the turn's authority.resolved. An invalid requirement is a
// finding (invalid_request), as Authorize denies it.
func (t *Turn) ExplainRequirement(ctx context.Context, req CapabilityRequirement) *CallExplanation {
	r := req
	var d AuthorizationDecision
	var diag Diagnostic
	if err := req.Validate(); err != nil {
		d = deny(ReasonInvalidRequest)
	} else {
		d, diag = t.k.authz.Authorize(ctx, t.Authority(ctx), t.actx, req, AuthorizeOptions{})
	}
	if !d.Allowed && d.ReasonCode == ReasonNoMatchingGrant {
		d.RequiredAuthority = RequiredAuthority(t.actx, req)
	}
	e := &CallExplanation{Status: StatusSucceeded, Findings: []Finding{}, Requirement: &r, Decision: &d, DecisionDiag: &diag,
		Allowed: d.Allowed}
	if f := authorizationFinding(StageAuthorization, &r, d); f != nil {
		e.Findings = append(e.Findings, *f)
		e.Status, e.Code, e.Gate, e.Cause = f.Status, f.Code, f.Gate, f.Cause
	}
	return e
}
