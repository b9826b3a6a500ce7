package grantfile

import (
	"encoding/json"
	"strings"

	"github.com/sharedos/sharedos/internal/par"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// The direct path of a YAML grant file: the fast reader (fastyaml.go) converts each item
// of the top-level grants list into a grant as soon as it is read (fastGrant, as build
// does for the tree's items) and gives the item's nodes back, so the tree of a large file
// is never built (it was most of a cold load's memory: ~1.7 KB of nodes per grant, and on
// this machine every fresh page of memory costs as much as a few microseconds of work).
//
// It is only a shortcut, never a second reader with rules of its own: it takes a file
// only when every step would have succeeded on the tree path with the same result (the
// fast reader accepts the text, every grant takes fastGrant's path and passes Validate,
// the document's shape and context pass build's own checks, no id is repeated), and
// declines anything else, for which parseDirect runs the tree path from the start: every
// refusal, and every line it names, is the tree path's. FuzzDirectYAML holds the two to
// the same File on every input.

// grantSink receives the grants of the fast reader's top-level grants list.
type grantSink struct {
	alloc grantAlloc
	out   []kernel.CapabilityGrant // the grants so far (their namespaceId not yet defaulted)
	// Per grant: the line of its id (lineOf(item, "id")); the indexes of the grants
	// without namespaceId (defaulted to the world once the context is known) and of those
	// Derived (no issuedAt, a parentGrantId).
	idLines   []int32
	defaulted []int32
	derived   []int32
	list      *node // the list node (its items are not kept)
	col       int   // the column of its dashes
}

// reserve makes room for about n grants (nothing when room was given already).
func (s *grantSink) reserve(n int) {
	if s.out == nil {
		s.out = make([]kernel.CapabilityGrant, 0, n)
	}
	if s.idLines == nil {
		s.idLines = make([]int32, 0, n)
	}
}

// add converts one item; false when fastGrant declines it (the direct path then declines
// the file).
func (s *grantSink) add(gn *node) bool {
	g, noIssuedAt, ok := fastGrant(gn, "", &s.alloc)
	if !ok {
		return false
	}
	i := int32(len(s.out))
	if v, _ := gn.get("namespaceId"); v == nil {
		s.defaulted = append(s.defaulted, i)
	}
	if noIssuedAt && g.ParentGrantID != "" {
		s.derived = append(s.derived, i)
	}
	line := gn.line // lineOf(gn, "id"), without splitting the path
	if _, l := gn.get("id"); l > 0 {
		line = l
	}
	s.idLines = append(s.idLines, int32(line))
	s.out = append(s.out, g)
	return true
}

// join returns the grants of s followed by those of t (a later part of the same list),
// without a copy when both were written where all has room for them.
func (s *grantSink) join(t *grantSink, all []kernel.CapabilityGrant) *grantSink {
	n1 := len(s.out)
	contiguous := n1 > 0 && len(all) > 0 && &s.out[0] == &all[0] && (len(t.out) == 0 || n1 < len(all) && &t.out[0] == &all[n1])
	if contiguous {
		s.out = all[:n1+len(t.out)]
	} else {
		s.out = append(s.out[:n1:n1], t.out...)
	}
	s.idLines = append(s.idLines, t.idLines...)
	for _, i := range t.defaulted {
		s.defaulted = append(s.defaulted, i+int32(n1))
	}
	for _, i := range t.derived {
		s.derived = append(s.derived, i+int32(n1))
	}
	return s
}

// countItems counts the lines from..to-1 that start a list item (a dash) in column col.
func countItems(lines lineTable, from, to, col int) int {
	n := 0
	for i := from; i < to; i++ {
		l := lines.at(i)
		if len(l) > col+1 && l[col] == '-' && l[col+1] == ' ' || len(l) == col+1 && l[col] == '-' {
			if strings.TrimLeft(l[:col], " ") == "" {
				n++
			}
		}
	}
	return n
}

// items counts the list items in column col from the current line on (a size hint).
func (p *fastYAML) items(col int) int { return countItems(p.lines, p.i, p.lines.n(), col) }

// parseDirect is parseWithContext, by the direct path when it takes the file.
func parseDirect(name string, data string) (*parsed, *fileContext, *Error) {
	if directEnabled {
		if p, ok := directYAML(name, data); ok {
			return p, &fileContext{ctx: p.file.Context, lines: p.ctxLines}, nil
		}
	}
	return parseWithContext(name, data)
}

// directEnabled lets tests and benchmarks compare the direct path with the tree path.
var directEnabled = true

// directYAML parses a YAML grant file by the direct path, or reports false when it
// declines it (see above). The parsed value has no tree of the grants: idLines gives the
// line of each grant's id.
func directYAML(name string, data string) (*parsed, bool) {
	if len(data) > MaxFileSize {
		return nil, false
	}
	data = strings.TrimPrefix(data, "\xef\xbb\xbf")
	// fastYAMLText refuses invalid UTF-8, so the tree path's UTF-8 check is implied.
	if isJSON(name, data) {
		return nil, false
	}
	root, sink, ok := fastYAMLRead(data, true)
	if !ok || sink == nil || root == nil || root.kind != kObj {
		return nil, false
	}
	// build's checks of the document, each of which declines here (build words them).
	for _, k := range root.keys {
		if k != "version" && k != "context" && k != "grants" {
			return nil, false
		}
	}
	v, _ := root.get("version")
	if v == nil || v.kind != kNum || !plainInt(v.s) {
		return nil, false
	}
	if n, err := json.Number(v.s).Int64(); err != nil || n != 1 {
		return nil, false
	}
	b := &builder{name: name, root: root}
	p := &parsed{root: root, ctxLines: map[string]int{}}
	f := &File{Path: name, Derived: map[string]bool{}}
	p.file = f
	if c, cline := root.get("context"); c != nil {
		if err := b.context(c, cline, &f.Context, p.ctxLines); err != nil {
			return nil, false
		}
	}
	if gs, _ := root.get("grants"); gs == nil || gs != sink.list {
		return nil, false
	}
	world := f.Context.World
	if world == "" {
		world = DefaultWorld
	}
	grants := sink.out
	for _, i := range sink.defaulted {
		grants[i].NamespaceID = world
	}
	if !validAll(grants) {
		return nil, false
	}
	seen := make(map[string]struct{}, len(grants))
	for i := range grants {
		if _, dup := seen[grants[i].ID]; dup {
			return nil, false
		}
		seen[grants[i].ID] = struct{}{}
	}
	for _, i := range sink.derived {
		f.Derived[grants[i].ID] = true
	}
	if grants == nil {
		grants = []kernel.CapabilityGrant{}
	}
	f.Grants = grants
	p.idLines = sink.idLines
	return p, true
}

// validAll reports whether every grant passes Validate (in two halves at once from
// parallelBuildMin grants on).
func validAll(grants []kernel.CapabilityGrant) bool {
	valid := func(gs []kernel.CapabilityGrant) bool {
		for i := range gs {
			if gs[i].Validate() != nil {
				return false
			}
		}
		return true
	}
	if len(grants) < parallelBuildMin {
		return valid(grants)
	}
	mid := len(grants) / 2
	var ok2 bool
	second := par.Go(func() { ok2 = valid(grants[mid:]) })
	ok1 := valid(grants[:mid])
	second.Wait()
	return ok1 && ok2
}
