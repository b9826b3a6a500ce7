// Package hostceiling is the host ceiling (spec 20 §3.5, ADR 0020) a sharedos host
// configures in its config file: frozen resource paths and frozen actions that no grant
// can reach. It only ever narrows an allow into a refusal; it never widens, never sees
// grants beyond the decision it is shown, and keeps no state.
package hostceiling

import (
	"fmt"
	"strings"

	"golang.org/x/text/cases"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Ceiling refuses every request on a frozen path (or below it) and every frozen action.
// The zero value refuses nothing. A Ceiling is immutable and safe for concurrent use.
type Ceiling struct {
	paths   []frozenPath
	actions []frozenAction
	// folded are the resource namespaces whose servers treat names that differ only
	// by letter case as one resource (a gateway server's caseInsensitive): there a
	// frozen path and a request's path are compared case-folded.
	folded map[string]bool
}

type frozenPath struct {
	namespace string
	path      []string
	spec      string
}

type frozenAction struct {
	namespace string // "" = every resource namespace
	action    string
	spec      string
}

var _ kernel.HostCeiling = (*Ceiling)(nil)

// New parses the ceiling's configuration. A frozen path is "namespace:seg/seg" (the
// segments follow the contract's path rules; "namespace:" freezes the whole namespace);
// a frozen action is "action" (in every resource namespace) or "namespace:action".
func New(frozenPaths, frozenActions []string) (*Ceiling, error) {
	c := &Ceiling{}
	for _, spec := range frozenPaths {
		ns, rest, ok := strings.Cut(spec, ":")
		if !ok || strings.TrimSpace(ns) != ns || ns == "" {
			return nil, fmt.Errorf("frozen path %q: want namespace:seg/seg (e.g. files:Workspace/secret)", spec)
		}
		var path []string
		if rest != "" {
			path = strings.Split(rest, "/")
		}
		if err := kernel.ValidatePath(path); err != nil {
			return nil, fmt.Errorf("frozen path %q: %v", spec, err)
		}
		c.paths = append(c.paths, frozenPath{namespace: ns, path: path, spec: spec})
	}
	for _, spec := range frozenActions {
		fa := frozenAction{action: spec, spec: spec}
		if ns, act, ok := strings.Cut(spec, ":"); ok && !isAction(spec) {
			fa.namespace, fa.action = ns, act
		}
		if strings.TrimSpace(fa.action) != fa.action || fa.action == "" || strings.TrimSpace(fa.namespace) != fa.namespace {
			return nil, fmt.Errorf("frozen action %q: want action or namespace:action", spec)
		}
		c.actions = append(c.actions, fa)
	}
	return c, nil
}

// WithCaseInsensitive returns a copy of c that compares the frozen paths of the given
// resource namespaces with requests case-folded (Unicode full case folding, so that
// "Secret", "SECRET" and "secret" are one path there). Other namespaces stay exact.
func (c *Ceiling) WithCaseInsensitive(namespaces []string) *Ceiling {
	out := &Ceiling{paths: c.paths, actions: c.actions, folded: map[string]bool{}}
	for _, ns := range namespaces {
		out.folded[ns] = true
	}
	return out
}

// FoldPath case-folds every segment of a path (Unicode full case folding): the form in
// which a case-insensitive namespace's paths are compared.
func FoldPath(path []string) []string {
	out := make([]string, len(path))
	for i, seg := range path {
		out[i] = cases.Fold().String(seg)
	}
	return out
}

// isAction reports whether spec is itself a standard action containing a colon
// (snapshot:create and its kin), which "namespace:action" must not split; write
// "files:snapshot:create" to freeze it in one namespace only.
func isAction(spec string) bool {
	return strings.HasPrefix(spec, "snapshot:")
}

// FrozenPaths returns the frozen paths of one resource namespace, as segment lists (an
// empty list freezes the whole namespace). A plane whose recursive operations reach below
// their named path (the files plane's grep, search, snapshots and recursive delete; the
// repo plane's status, diff and stage over the same root) uses them to skip, preserve or
// refuse what is frozen, so the ceiling holds over whole subtrees.
func (c *Ceiling) FrozenPaths(namespace string) [][]string {
	if c == nil {
		return nil
	}
	var out [][]string
	for _, fp := range c.paths {
		if fp.namespace == namespace {
			out = append(out, append([]string{}, fp.path...))
		}
	}
	return out
}

// Empty reports whether the ceiling refuses nothing.
func (c *Ceiling) Empty() bool { return c == nil || (len(c.paths) == 0 && len(c.actions) == 0) }

// Narrow keeps allow unless req touches a frozen path or a frozen action; then it
// returns a refusal with metadata {"ceiling": "frozen_path"|"frozen_action", "rule": spec}.
func (c *Ceiling) Narrow(allow kernel.AuthorizationDecision, req kernel.CapabilityRequirement, _ kernel.AccessContext) (kernel.AuthorizationDecision, error) {
	if rule, kind := c.refuses(req); rule != "" {
		return kernel.AuthorizationDecision{Allowed: false, ReasonCode: kernel.ReasonHostPolicyDenied,
			MatchedGrantID: allow.MatchedGrantID, Metadata: map[string]any{"ceiling": kind, "rule": rule}}, nil
	}
	return allow, nil
}

func (c *Ceiling) refuses(req kernel.CapabilityRequirement) (rule, kind string) {
	if c == nil {
		return "", ""
	}
	reqPath := req.Resource.Path
	folded := c.folded[req.Resource.Namespace]
	if folded {
		reqPath = FoldPath(reqPath)
	}
	for _, fp := range c.paths {
		if fp.namespace != req.Resource.Namespace {
			continue
		}
		frozen := fp.path
		if folded {
			frozen = FoldPath(frozen)
		}
		if kernel.PathWithin(frozen, reqPath) {
			return fp.spec, "frozen_path"
		}
	}
	for _, fa := range c.actions {
		if fa.action == req.Action && (fa.namespace == "" || fa.namespace == req.Resource.Namespace) {
			return fa.spec, "frozen_action"
		}
	}
	return "", ""
}
