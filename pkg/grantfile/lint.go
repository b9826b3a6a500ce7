package grantfile

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sharedos/sharedos/internal/textdist"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Severities of a Finding.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Finding is one problem Lint reports. Field is a dotted JSON path inside the grant when
// Grant is set, otherwise from the document root; Line is 0 when unknown.
type Finding struct {
	File     string `json:"file"`
	Grant    string `json:"grant"`
	Field    string `json:"field"`
	Line     int    `json:"line,omitempty"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

// String renders f as one line: `file:line: severity: grant "id": field: message`.
func (f Finding) String() string {
	var b strings.Builder
	if f.File != "" {
		b.WriteString(oneLine(f.File))
		if f.Line > 0 {
			b.WriteString(":" + strconv.Itoa(f.Line))
		}
		b.WriteString(": ")
	}
	b.WriteString(f.Severity + ": ")
	if f.Grant != "" {
		b.WriteString("grant " + strconv.Quote(f.Grant) + ": ")
	}
	if f.Field != "" {
		b.WriteString(oneLine(f.Field) + ": ")
	}
	b.WriteString(oneLine(f.Message))
	return b.String()
}

// HasErrors reports whether findings hold an error, or with strict any finding at all
// (warnings count too).
func HasErrors(findings []Finding, strict bool) bool {
	for _, f := range findings {
		if strict || f.Severity == SeverityError {
			return true
		}
	}
	return false
}

// lintGrant is one grant of the linted set, with where it was written.
type lintGrant struct {
	g    *kernel.CapabilityGrant
	file *parsed
	node *node
}

// LintOptions tune LintWithOptions.
type LintOptions struct {
	// Tools are the registered tool definitions. When non-nil, a capability whose
	// resource namespace no tool requires (RequiredCapability.Resource.Namespace), or
	// an action no tool of that namespace requires (RequiredCapability.Action), is
	// warned about — it can never match a call — with the closest registered name as a
	// suggestion. The action "*" is never reported by this check.
	Tools []kernel.ToolDefinition
	// Now is the wall clock a grant's expiry is judged at (nil: time.Now).
	Now func() time.Time
}

// Lint is LintWithOptions without options.
func Lint(paths []string) []Finding { return LintWithOptions(paths, LintOptions{}) }

// LintWithOptions validates the grant files at paths as the CLI's `grants lint` does and
// returns every finding, in file and grant order.
//
// Errors: anything Parse refuses (one finding per file: parsing stops at the first
// problem), a grant id defined in two files, a derived grant (parentGrantId) without
// issuedAt, a parent grant that is not in the linted files in the same world, a
// delegation link that fails kernel.CheckDelegationLink, and delegation chains that cycle
// or hold more than kernel.DefaultMaxDelegationChainLength grants.
// Warnings: the action "*", a capability over a whole namespace (empty path with
// descendants scope), a grant without constraints.expiresAt, a grant whose expiresAt is
// at or before the wall clock (opts.Now: it authorizes nothing; a --now a command may pin
// does not enter here), a subject, issuer or owner id that mixes scripts or holds
// look-alike characters, two different ids of one kind that look alike (the same TR39
// skeleton; confusable.go says what is covered), and, with opts.Tools, a namespace or
// action that no registered tool uses.
func LintWithOptions(paths []string, opts LintOptions) []Finding {
	var reg *registry
	if opts.Tools != nil {
		reg = newRegistry(opts.Tools)
	}
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	wall := now()
	looks := lookAlikeIndex{}
	var out []Finding
	var all []lintGrant
	byID := map[string]lintGrant{}
	dupOf := map[*kernel.CapabilityGrant]lintGrant{}
	for _, path := range paths {
		p, err := loadParsed(path)
		if err != nil {
			out = append(out, Finding{File: err.File, Grant: err.Grant, Field: err.Field, Line: err.Line,
				Severity: SeverityError, Message: err.Message})
			continue
		}
		for i := range p.file.Grants {
			lg := lintGrant{g: &p.file.Grants[i], file: p, node: p.grantNodes[i]}
			if first, dup := byID[lg.g.ID]; dup {
				dupOf[lg.g] = first
			} else {
				byID[lg.g.ID] = lg
			}
			all = append(all, lg)
		}
	}
	depth, cycles := chainDepths(all, byID)
	for _, lg := range all {
		g := lg.g
		find := func(sev, field, format string, args ...any) {
			out = append(out, Finding{File: lg.file.file.Path, Grant: g.ID, Field: field, Line: lineOf(lg.node, field),
				Severity: sev, Message: fmt.Sprintf(format, args...)})
		}
		if first, dup := dupOf[g]; dup {
			find(SeverityError, "id", "duplicate grant id %q: also defined in %s", g.ID,
				at(first.file.file.Path, lineOf(first.node, "id")))
		}
		if lg.file.file.Derived[g.ID] {
			find(SeverityError, "issuedAt", "derived grant (parentGrantId %q) has no issuedAt: it would default to the Unix epoch, before its parent was issued", g.ParentGrantID)
		}
		if g.ParentGrantID != "" {
			lintLink(lg, byID, find)
			if c, ok := cycles[g]; ok {
				find(SeverityError, "parentGrantId", "delegation chain cycles: %s", strings.Join(c, " → "))
			}
			if depth[g] == kernel.DefaultMaxDelegationChainLength+1 {
				find(SeverityError, "parentGrantId", "delegation chain holds more than %d grants: this grant and every grant derived from it are refused (chain_too_long)", kernel.DefaultMaxDelegationChainLength)
			}
		}
		for i, c := range g.Capabilities {
			for j, a := range c.Actions {
				if a == kernel.WildcardAction {
					find(SeverityWarning, fmt.Sprintf("capabilities.%d.actions.%d", i, j), "action \"*\" allows every action, including ones added later")
				}
			}
			if reg != nil {
				reg.lint(c, fmt.Sprintf("capabilities.%d", i), func(field, msg string) { find(SeverityWarning, field, "%s", msg) })
			}
			if len(c.Resource.Path) == 0 && c.Scope == kernel.ScopeDescendants {
				find(SeverityWarning, fmt.Sprintf("capabilities.%d.resource.path", i), "empty path with descendants scope covers the whole %q namespace", c.Resource.Namespace)
			}
		}
		if g.Constraints.ExpiresAt == "" {
			find(SeverityWarning, "constraints", "grant never expires (no constraints.expiresAt)")
		} else if ms, err := kernel.ParseTimestamp(g.Constraints.ExpiresAt); err == nil && wall.UnixMilli() >= ms {
			find(SeverityWarning, "constraints.expiresAt", "grant expired at %s (the wall clock reads %s): it authorizes nothing",
				g.Constraints.ExpiresAt, wall.UTC().Format(time.RFC3339))
		}
		ids := []idField{{"subject", g.Subject}, {"issuer", g.Issuer}}
		for i, c := range g.Capabilities {
			if c.Resource.Owner != nil {
				ids = append(ids, idField{fmt.Sprintf("capabilities.%d.resource.owner", i), *c.Resource.Owner})
			}
		}
		for _, id := range ids {
			if id.a.ID == "" {
				continue
			}
			if msg := idProblem(id.a.ID); msg != "" {
				find(SeverityWarning, id.field, "%s id %q %s", addressRole(id.field), id.a.ID, msg)
			}
			if other, ok := looks.see(id.a, at(lg.file.file.Path, lineOf(lg.node, id.field)), g.ID); ok {
				find(SeverityWarning, id.field, "%s %s looks like %s (%s): two different ids that read alike",
					addressRole(id.field), id.a.String(), other.addr.String(), other.where)
			}
		}
	}
	return out
}

// idField is one address of a grant and the field it is written in.
type idField struct {
	field string
	a     kernel.Address
}

// addressRole names the id of field in a message.
func addressRole(field string) string {
	if strings.HasSuffix(field, ".owner") {
		return "owner"
	}
	return field
}

// lookAlikeIndex remembers, per address kind and skeleton, the first id seen, to report
// a different id of that kind that reads alike (once per pair).
type lookAlikeIndex map[string]*lookAlikeSeen

type lookAlikeSeen struct {
	addr     kernel.Address
	where    string
	reported map[string]bool
}

// see records a and reports the earlier, different id of a's kind with its skeleton.
func (x lookAlikeIndex) see(a kernel.Address, where, grant string) (lookAlikeSeen, bool) {
	key := string(a.Kind) + ":" + skeleton(a.ID)
	first, ok := x[key]
	if !ok {
		x[key] = &lookAlikeSeen{addr: a, where: "grant " + strconv.Quote(grant) + ", " + where, reported: map[string]bool{}}
		return lookAlikeSeen{}, false
	}
	if first.addr.ID == a.ID || first.reported[a.ID] {
		return lookAlikeSeen{}, false
	}
	first.reported[a.ID] = true
	return *first, true
}

// parentOf returns g's parent in the same world, if the linted set holds it.
func parentOf(g *kernel.CapabilityGrant, byID map[string]lintGrant) (lintGrant, bool) {
	p, ok := byID[g.ParentGrantID]
	if !ok || p.g.NamespaceID != g.NamespaceID {
		return lintGrant{}, false
	}
	return p, true
}

// lintLink checks one delegation link.
func lintLink(lg lintGrant, byID map[string]lintGrant, find func(sev, field, format string, args ...any)) {
	g := lg.g
	p, ok := parentOf(g, byID)
	if !ok {
		if other, exists := byID[g.ParentGrantID]; exists {
			find(SeverityError, "parentGrantId", "parent grant %q not found in world %q (it is in world %q)", g.ParentGrantID, g.NamespaceID, other.g.NamespaceID)
		} else {
			find(SeverityError, "parentGrantId", "parent grant %q not found", g.ParentGrantID)
		}
		return
	}
	code := kernel.CheckDelegationLink(g, p.g)
	if code == "" {
		return
	}
	field, why := linkExplanation(code, g, p.g)
	find(SeverityError, field, "delegation from parent grant %q is invalid (%s): %s", p.g.ID, code, why)
}

// linkExplanation names the field at fault for a failed link and says why in a sentence.
func linkExplanation(code string, child, parent *kernel.CapabilityGrant) (string, string) {
	pc := &parent.Constraints
	switch code {
	case kernel.LinkNamespaceMismatch:
		return "namespaceId", fmt.Sprintf("the parent is in world %q, this grant in %q", parent.NamespaceID, child.NamespaceID)
	case kernel.LinkIssuerNotParentSubject:
		return "issuer", fmt.Sprintf("the issuer must be the parent's subject, %s", parent.Subject)
	case kernel.LinkDelegationNotPermitted:
		return "parentGrantId", "the parent does not permit delegation (its constraints.delegationDepth is absent or 0)"
	case kernel.LinkDelegationDepthExceeded:
		return "constraints.delegationDepth", fmt.Sprintf("delegationDepth must be at most %d (the parent's minus one)", *pc.DelegationDepth-1)
	case kernel.LinkBoundedParentNotDelegable:
		return "parentGrantId", "the parent has maxUses, and a bounded grant cannot be delegated"
	case kernel.LinkCapabilityWidened:
		for i := range child.Capabilities {
			one := *child
			one.Capabilities = child.Capabilities[i : i+1]
			if kernel.CheckDelegationLink(&one, parent) == kernel.LinkCapabilityWidened {
				return "capabilities." + strconv.Itoa(i), fmt.Sprintf("capability %d is not within any capability of the parent (same namespace and owner, a subset of its actions, inside its path and scope)", i)
			}
		}
		return "capabilities", "a capability is not within any capability of the parent"
	case kernel.LinkConstraintsWidened:
		return constraintsWidening(child, parent)
	}
	return "parentGrantId", "the link to the parent is invalid"
}

// constraintsWidening says which constraint of child is wider than its parent's.
func constraintsWidening(child, parent *kernel.CapabilityGrant) (string, string) {
	ci, _ := kernel.ParseTimestamp(child.IssuedAt)
	pi, _ := kernel.ParseTimestamp(parent.IssuedAt)
	pc, cc := &parent.Constraints, &child.Constraints
	switch {
	case ci < pi:
		return "issuedAt", fmt.Sprintf("issued before its parent (%s)", parent.IssuedAt)
	case pc.ExpiresAt != "" && cc.ExpiresAt == "":
		return "constraints", fmt.Sprintf("the parent expires at %s but this grant never does", pc.ExpiresAt)
	case pc.ExpiresAt != "" && later(cc.ExpiresAt, pc.ExpiresAt):
		return "constraints.expiresAt", fmt.Sprintf("expires after its parent (%s)", pc.ExpiresAt)
	case pc.NotBefore != "" && cc.NotBefore == "":
		return "issuedAt", fmt.Sprintf("the parent is not valid before %s but this grant is active from its issuedAt", pc.NotBefore)
	case pc.NotBefore != "":
		return "constraints.notBefore", fmt.Sprintf("becomes valid before its parent (%s)", pc.NotBefore)
	case pc.Purposes != nil && cc.Purposes == nil:
		return "constraints", fmt.Sprintf("the parent is limited to purposes %q but this grant names none", pc.Purposes)
	case pc.Purposes != nil:
		for i, p := range cc.Purposes {
			if !slices.Contains(pc.Purposes, p) {
				return "constraints.purposes." + strconv.Itoa(i), fmt.Sprintf("purpose %q is not among the parent's %q", p, pc.Purposes)
			}
		}
	}
	return "constraints", "the constraints are wider than the parent's"
}

func later(a, b string) bool {
	x, _ := kernel.ParseTimestamp(a)
	y, _ := kernel.ParseTimestamp(b)
	return x > y
}

// chainDepths computes, for every grant, the number of grants in its delegation chain
// (itself included, following parents present in the same world), capped at
// max+1 — and, for every grant on a cycle, the cycle as a list of ids starting with it.
// It runs in linear time.
func chainDepths(all []lintGrant, byID map[string]lintGrant) (map[*kernel.CapabilityGrant]int, map[*kernel.CapabilityGrant][]string) {
	const limit = kernel.DefaultMaxDelegationChainLength + 1
	const onCycle = -1
	depth := make(map[*kernel.CapabilityGrant]int, len(all))
	cycles := map[*kernel.CapabilityGrant][]string{}
	for _, start := range all {
		if _, done := depth[start.g]; done {
			continue
		}
		// Walk up until a grant with a known depth, a root, or a grant already on this walk.
		var stack []*kernel.CapabilityGrant
		onStack := map[*kernel.CapabilityGrant]int{}
		g := start.g
		base := 0
		for {
			if d, done := depth[g]; done {
				base = d
				break
			}
			if i, seen := onStack[g]; seen {
				cyc := stack[i:]
				for k, m := range cyc {
					ids := make([]string, 0, len(cyc)+1)
					for x := 0; x <= len(cyc); x++ {
						ids = append(ids, cyc[(k+x)%len(cyc)].ID)
					}
					cycles[m] = ids
					depth[m] = onCycle
				}
				stack = stack[:i]
				base = onCycle
				break
			}
			onStack[g] = len(stack)
			stack = append(stack, g)
			p, ok := parentOf(g, byID)
			if g.ParentGrantID == "" || !ok {
				base = 0
				break
			}
			g = p.g
		}
		// Unwind: each grant's depth is its parent's plus one (a cycle poisons descendants,
		// which are not reported again).
		for i := len(stack) - 1; i >= 0; i-- {
			if base == onCycle {
				depth[stack[i]] = onCycle
				continue
			}
			base = min(base+1, limit+1)
			depth[stack[i]] = base
		}
	}
	for g, d := range depth {
		if d == onCycle {
			delete(depth, g)
		}
	}
	return depth, cycles
}

// registry is what lint knows of the registered tools: the actions required in each
// resource namespace.
type registry struct {
	namespaces []string            // sorted
	actions    map[string][]string // namespace → sorted actions
}

func newRegistry(defs []kernel.ToolDefinition) *registry {
	r := &registry{actions: map[string][]string{}}
	for _, d := range defs {
		ns, a := d.RequiredCapability.Resource.Namespace, d.RequiredCapability.Action
		if _, ok := r.actions[ns]; !ok {
			r.namespaces = append(r.namespaces, ns)
		}
		if !slices.Contains(r.actions[ns], a) {
			r.actions[ns] = append(r.actions[ns], a)
		}
	}
	slices.Sort(r.namespaces)
	for _, as := range r.actions {
		slices.Sort(as)
	}
	return r
}

// lint reports the namespace or actions of capability c (at field) that no registered
// tool uses.
func (r *registry) lint(c kernel.Capability, field string, warn func(field, msg string)) {
	ns := c.Resource.Namespace
	actions, ok := r.actions[ns]
	if !ok {
		warn(field+".resource.namespace", fmt.Sprintf("namespace %q is used by no registered tool; %s", ns, suggest(ns, r.namespaces, "registered namespaces")))
		return
	}
	for j, a := range c.Actions {
		if a == kernel.WildcardAction || slices.Contains(actions, a) {
			continue
		}
		warn(fmt.Sprintf("%s.actions.%d", field, j), fmt.Sprintf("action %q is used by no registered tool in namespace %s; %s", a, ns, suggest(a, actions, "its actions")))
	}
}

// suggest names the closest of names to s ("did you mean X?") when one is close enough,
// else lists them ("<what>: a, b, c").
func suggest(s string, names []string, what string) string {
	best, bestD := "", -1
	for _, n := range names {
		d := textdist.Levenshtein(strings.ToLower(s), strings.ToLower(n))
		if bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if bestD >= 0 && bestD <= max(1, min(3, len([]rune(s))/3)) {
		return "did you mean " + best + "?"
	}
	return what + ": " + strings.Join(names, ", ")
}

// ActionsTable renders, as a Markdown table, the action each registered tool requires
// and in which resource namespace — what a grant's capability must name for the tool
// to be usable — sorted by namespace, then action, then tool. The declared path is the
// tool's requiredCapability path: [] means the call's own path argument is authorized.
// docs/grant-files.md holds this table for the tools every sharedos host registers (a
// test keeps it current).
func ActionsTable(defs []kernel.ToolDefinition) string {
	sorted := slices.Clone(defs)
	slices.SortFunc(sorted, func(a, b kernel.ToolDefinition) int {
		ra, rb := a.RequiredCapability, b.RequiredCapability
		if c := strings.Compare(ra.Resource.Namespace, rb.Resource.Namespace); c != 0 {
			return c
		}
		if c := strings.Compare(ra.Action, rb.Action); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	var b strings.Builder
	b.WriteString("| Resource namespace | Action | Tool | Reads or writes | Declared path |\n")
	b.WriteString("|---|---|---|---|---|\n")
	for _, d := range sorted {
		rc := d.RequiredCapability
		path := make([]string, len(rc.Resource.Path))
		for i, seg := range rc.Resource.Path {
			path[i] = mdCell(seg)
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | `%s` | %s | `[%s]` |\n", mdCell(rc.Resource.Namespace), mdCell(rc.Action),
			mdCell(d.Name), mdCell(string(d.ReadWrite)), strings.Join(path, ", "))
	}
	return b.String()
}

// mdCell keeps a value inside its table cell and code span.
func mdCell(s string) string {
	return strings.NewReplacer("|", "\\|", "`", "'", "\n", " ", "\r", " ").Replace(s)
}
