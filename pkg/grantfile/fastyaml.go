package grantfile

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/par"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// fastYAMLTree reads the common layout of hand-written grant files — block mappings and
// block lists indented with spaces, one-line flow lists and mappings, plain and simple
// quoted scalars, comments — straight into the tree, several times faster than the YAML
// library. It returns ok=false for anything else, and for any error: the caller then
// reads the document with the library, so the refusals (and their lines) stay the
// library's. A tree it returns equals the one yamlTree builds from the library's
// nodes, line numbers included (FuzzFastYAML holds it to that).
func fastYAMLTree(data []byte) (*node, bool) {
	// One conversion: every key and value is a substring of it (no copy per scalar).
	root, _, ok := fastYAMLRead(string(data), false)
	return root, ok
}

// fastYAMLRead is fastYAMLTree of a document held in a string; with sink, the items of
// the top-level grants list are converted into grants as they are read (fastGrant)
// instead of being kept in the tree: the list node is then empty and the returned sink
// holds the grants, in order.
func fastYAMLRead(data string, sink bool) (*node, *grantSink, bool) {
	if len(data) < parallelYAMLMin {
		if !fastYAMLText(data) {
			return nil, nil, false
		}
		return fastYAMLLines(data, sink)
	}
	// A large file: its characters are checked on the other core while it is read.
	var textOK bool
	check := par.Go(func() { textOK = fastYAMLText(data) })
	root, gs, ok := readUnchecked(data, sink)
	check.Wait()
	return root, gs, ok && textOK
}

// readUnchecked is fastYAMLLines on text not yet known to pass fastYAMLText: a panic
// there is not a result (such text is left to the library).
func readUnchecked(data string, sink bool) (root *node, gs *grantSink, ok bool) {
	defer func() {
		if recover() != nil {
			root, gs, ok = nil, nil, false
		}
	}()
	return fastYAMLLines(data, sink)
}

// parallelYAMLMin is the size from which fastYAMLTree shares its work with another
// goroutine (about 300 grants).
const parallelYAMLMin = 96 << 10

// fastYAMLLines is fastYAMLRead once the characters were checked (or while they are).
func fastYAMLLines(data string, sink bool) (*node, *grantSink, bool) {
	p := &fastYAML{data: data}
	p.splitLines()
	if len(data) >= parallelYAMLMin {
		if root, gs, ok := p.halves(sink); ok {
			return root, gs, true
		}
		p = &fastYAML{data: data, lines: p.lines, col: -1}
	}
	if sink {
		p.sink = &grantSink{}
	}
	p.skipBlank()
	if p.i >= p.lines.n() {
		return nil, nil, false
	}
	ind := p.indent()
	if ind != 0 {
		return nil, nil, false
	}
	root, ok := p.mapping(ind)
	if !ok {
		return nil, nil, false
	}
	p.skipBlank()
	if p.i < p.lines.n() {
		return nil, nil, false
	}
	return root, p.sink, true
}

// halves reads a document whose last top-level key holds a long block list (the grants)
// in two halves at once: the lines before an item near the middle (the document up to
// there, which ends inside the list), and, on another goroutine, the items from there on
// to the end of the file, read as the rest of that list; the second half's items are
// then appended to the list. It reports false when the document does not have that
// shape (the caller reads it whole): the split line must be a dash in the list's own
// column, the list the last member of the top-level mapping, and the second half must
// reach the end of the file. Read so, a document gives the tree the whole reading does
// (the items before the split end at the split line either way, and the second reader
// starts at the depth the first one was at).
func (p *fastYAML) halves(sink bool) (*node, *grantSink, bool) {
	// The list's column: that of the first content line after the top-level key above
	// the middle.
	content := func(l string) (string, int) {
		t := strings.TrimLeft(l, " ")
		if len(t) == 0 || t[0] == '#' {
			return "", -1
		}
		return t, len(l) - len(t)
	}
	key := p.lines.n() / 2
	for ; key >= 0; key-- {
		if t, in := content(p.lines.at(key)); in == 0 && !strings.HasPrefix(t, "- ") {
			break
		}
	}
	if key < 0 {
		return nil, nil, false
	}
	dash := -1
	for i := key + 1; i < p.lines.n() && dash < 0; i++ {
		if t, in := content(p.lines.at(i)); in >= 0 && strings.HasPrefix(t, "- ") {
			dash = in
		} else if in >= 0 {
			return nil, nil, false
		}
	}
	m := p.lines.n() / 2
	for ; m < p.lines.n(); m++ {
		if t, in := content(p.lines.at(m)); in == dash && strings.HasPrefix(t, "- ") {
			break
		}
	}
	if dash < 0 || m >= p.lines.n() {
		return nil, nil, false
	}
	second := &fastYAML{data: p.data, lines: p.lines, i: m, col: -1, depth: 1}
	first := &fastYAML{data: p.data, lines: p.lines.upTo(m), col: -1}
	var all []kernel.CapabilityGrant
	if sink {
		// Both halves' grants go to one buffer, the second's after the first's: each
		// half counts its items up front (a count that turns out wrong only costs a copy).
		first.sink, second.sink = &grantSink{}, &grantSink{}
		n1, n2 := countItems(p.lines, 0, m, dash), countItems(p.lines, m, p.lines.n(), dash)
		all = make([]kernel.CapabilityGrant, n1+n2)
		first.sink.out, second.sink.out = all[:0:n1], all[n1:n1:n1+n2]
		second.sinkList = true
	}
	var tail *node
	var tailOK bool
	task := par.Go(func() {
		defer func() {
			if recover() != nil { // on another goroutine: no caller to recover it
				tail, tailOK = nil, false
			}
		}()
		if tail, tailOK = second.sequence(dash); tailOK {
			second.skipBlank()
			tailOK = second.i == second.lines.n()
		}
	})
	root, ok := first.document()
	task.Wait()
	if !ok || !tailOK || root.kind != kObj || len(root.kids) == 0 {
		return nil, nil, false
	}
	list := root.kids[len(root.kids)-1]
	if sink {
		// The list must be the one the first sink received, its items in the split
		// line's column, and the second half must have read grants (an item list).
		if list != first.sink.list || first.sink.col != dash || len(first.sink.out) == 0 || second.sink.list != tail {
			return nil, nil, false
		}
		return root, first.sink.join(second.sink, all), true
	}
	if list.kind != kArr || len(list.kids) == 0 {
		return nil, nil, false
	}
	l := first.lines.at(list.kids[0].line - 1)
	if len(l)-len(strings.TrimLeft(l, " ")) != dash {
		return nil, nil, false // the split line is not an item of this list
	}
	list.kids = slices.Concat(list.kids, tail.kids)
	return root, nil, true
}

// document reads the whole of p's lines as one top-level mapping.
func (p *fastYAML) document() (*node, bool) {
	p.skipBlank()
	if p.i >= p.lines.n() || p.indent() != 0 {
		return nil, false
	}
	root, ok := p.mapping(0)
	if !ok {
		return nil, false
	}
	p.skipBlank()
	return root, p.i >= p.lines.n()
}

// fastYAMLText reports whether data holds only characters the fast reader handles: no
// tab, carriage return or other control character, no character YAML treats as a line
// break or refuses, and no document marker or directive at the start of a line.
func fastYAMLText(data string) bool {
	markerAt := func(i int) bool {
		if i >= len(data) {
			return false
		}
		c := data[i]
		return c == '%' || (c == '-' || c == '.') && (strings.HasPrefix(data[i:], "---") || strings.HasPrefix(data[i:], "..."))
	}
	if markerAt(0) {
		return false
	}
	for i := 0; i < len(data); {
		c := data[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		if c == '\n' {
			i++
			if markerAt(i) {
				return false
			}
			continue
		}
		if c < utf8.RuneSelf {
			return false // another control character
		}
		r, size := utf8.DecodeRuneInString(data[i:])
		if r == utf8.RuneError || (r >= 0x80 && r <= 0x9f) || r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff {
			return false
		}
		i += size
	}
	return true
}

type fastYAML struct {
	data  string
	lines lineTable
	i     int // current line (0-based)
	col   int // where the current line's content starts, when a list item's dash put it there (else -1)
	// Arenas the nodes and their member slices are cut from (capacity-limited, so an
	// append past the capacity copies instead of reaching a neighbour).
	nodes arena[node]
	keys  arena[string]
	kids  arena[*node]
	stack []member
	depth int // nesting of the node being read

	// sink, when set, receives the items of the document's top-level grants list
	// converted straight into grants: each item's nodes are given back to the arenas once
	// it is converted, so the tree never holds more than one grant (fastYAMLGrants).
	sink *grantSink
	// sinkList is set while the value of the top-level key grants is read: the block list
	// read there (at depth 2) is the one the sink receives.
	sinkList bool
}

// arena hands out capacity-limited slices of a shared buffer; what was handed out after a
// mark can be given back (release) as long as the buffer was not replaced since.
type arena[T any] struct {
	buf []T
	n   int
	gen int // counts the buffers replaced
}

// arenaMark is a position in an arena.
type arenaMark struct{ n, gen int }

func (a *arena[T]) take(k, size int) []T {
	if a.n+k > len(a.buf) {
		a.buf, a.n = make([]T, max(k, size)), 0
		a.gen++
	}
	s := a.buf[a.n : a.n+k : a.n+k]
	a.n += k
	return s
}

func (a *arena[T]) mark() arenaMark { return arenaMark{a.n, a.gen} }

// release gives back what was taken since m (nothing when the buffer was replaced since:
// the new buffer is kept). The caller must hold no reference to it any more.
func (a *arena[T]) release(m arenaMark) {
	if m.gen == a.gen {
		a.n = m.n
	}
}

// maxFastDepth bounds nesting on the fast path (grant files nest about six deep); deeper
// documents are left to the library and its own limit.
const maxFastDepth = 64

// enter counts one more level of nesting, reporting false past maxFastDepth; leave
// undoes it.
func (p *fastYAML) enter() bool {
	p.depth++
	return p.depth <= maxFastDepth
}

func (p *fastYAML) leave() { p.depth-- }

func (p *fastYAML) splitLines() {
	starts := make([]int32, 1, strings.Count(p.data, "\n")+2)
	for i := 0; ; {
		j := strings.IndexByte(p.data[i:], '\n')
		if j < 0 {
			break
		}
		i += j + 1
		starts = append(starts, int32(i))
	}
	p.lines = lineTable{data: p.data, starts: append(starts, int32(len(p.data)+1))}
	p.col = -1
}

// lineTable is the lines of a document (without their line breaks), as the offset where
// each starts: a quarter of the memory of a slice of strings.
type lineTable struct {
	data   string
	starts []int32 // one per line, then len(data)+1
}

// n is the number of lines.
func (t lineTable) n() int { return len(t.starts) - 1 }

// at is line i.
func (t lineTable) at(i int) string { return t.data[t.starts[i] : t.starts[i+1]-1] }

// upTo is the table of the first m lines.
func (t lineTable) upTo(m int) lineTable { return lineTable{t.data, t.starts[:m+1]} }

func (p *fastYAML) newNode(k kind, line int) *node {
	n := &p.nodes.take(1, 1024)[0]
	*n = node{kind: k, line: line} // a node given back holds its old fields
	return n
}

// member is a mapping member or list item being read; the members of the nodes being
// read are kept on one stack and copied, exactly sized, into slabs when a node is done.
type member struct {
	key  string
	line int
	kid  *node
}

// done gives n the members pushed since start.
func (p *fastYAML) done(n *node, start int) *node {
	m := p.stack[start:]
	c := len(m)
	n.kids = p.kids.take(c, 4096)
	for i := range m {
		n.kids[i] = m[i].kid
	}
	if n.kind == kObj {
		n.keys = p.keys.take(c, 4096)
		for i := range m {
			n.keys[i] = m[i].key
			m[i].kid.keyLine = int32(m[i].line)
		}
	}
	p.stack = p.stack[:start]
	return n
}

// hasMember reports whether key was pushed since start.
func (p *fastYAML) hasMember(start int, key string) bool {
	for _, m := range p.stack[start:] {
		if m.key == key {
			return true
		}
	}
	return false
}

// skipBlank moves past empty and comment-only lines (never past a line whose content a
// list item's dash already started).
func (p *fastYAML) skipBlank() {
	if p.col >= 0 {
		return
	}
	for p.i < p.lines.n() {
		t := strings.TrimLeft(p.lines.at(p.i), " ")
		if len(t) != 0 && t[0] != '#' {
			return
		}
		p.i++
	}
}

// indent is the column of the current line's content.
func (p *fastYAML) indent() int {
	if p.col >= 0 {
		return p.col
	}
	l := p.lines.at(p.i)
	i := 0
	for i < len(l) && l[i] == ' ' {
		i++
	}
	return i
}

// content is the current line from its content on.
func (p *fastYAML) content() string { return p.lines.at(p.i)[p.indent():] }

// nextLine moves to the next line.
func (p *fastYAML) nextLine() {
	p.i++
	p.col = -1
}

// endOfValue checks that a value that ended its line is not continued below (a plain
// scalar over several lines, say): the next content line must be indented at most ind.
func (p *fastYAML) endOfValue(ind int) bool {
	p.nextLine()
	p.skipBlank()
	return p.i >= p.lines.n() || p.indent() <= ind
}

// keyEnd returns the length of the mapping key at the start of s and the offset of the
// value after ": " (len(s) when the line ends after the colon), or ok=false when s does
// not start with a key the fast reader accepts.
func keyEnd(s string) (key string, value int, ok bool) {
	var k, rest string
	switch {
	case len(s) > 0 && (s[0] == '"' || s[0] == '\''):
		v, n, ok := quoted(s)
		if !ok {
			return "", 0, false
		}
		k, rest = v, s[n:]
	default:
		j := 0
		for j < len(s) && isKeyByte(s[j]) {
			j++
		}
		if j == 0 || !isLetter(s[0]) {
			return "", 0, false
		}
		k, rest = s[:j], s[j:]
		if _, reserved := resolvedWord(k); reserved {
			return "", 0, false
		}
	}
	if len(rest) == 0 || rest[0] != ':' {
		return "", 0, false
	}
	if len(rest) == 1 {
		return k, len(s), true
	}
	if rest[1] != ' ' {
		return "", 0, false
	}
	off := len(s) - len(rest) + 1
	for off < len(s) && s[off] == ' ' {
		off++
	}
	return k, off, true
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isKeyByte(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == '/'
}

// resolvedWord returns the kind of the plain scalars starting with a letter that YAML
// does not read as strings.
func resolvedWord(s string) (kind, bool) {
	switch s {
	case "true", "True", "TRUE", "false", "False", "FALSE":
		return kBool, true
	case "null", "Null", "NULL":
		return kNull, true
	}
	return 0, false
}

// mapping reads a block mapping whose keys sit in column ind; the first key is at the
// current position.
func (p *fastYAML) mapping(ind int) (*node, bool) {
	defer p.leave()
	if !p.enter() {
		return nil, false
	}
	n := p.newNode(kObj, p.i+1)
	start := len(p.stack)
	for {
		p.skipBlank()
		if p.i >= p.lines.n() {
			return p.done(n, start), true
		}
		in := p.indent()
		if in < ind {
			return p.done(n, start), true
		}
		if in > ind {
			return nil, false
		}
		line := p.i + 1
		s := p.content()
		if s[0] == '-' && (len(s) == 1 || s[1] == ' ') {
			return p.done(n, start), true // an indentless list ends the mapping it sits in: the caller decides
		}
		key, off, ok := keyEnd(s)
		if !ok || p.hasMember(start, key) {
			return nil, false
		}
		p.sinkList = p.sink != nil && p.depth == 1 && key == "grants"
		v, ok := p.value(ind, line, s[off:])
		p.sinkList = false
		if !ok {
			return nil, false
		}
		p.stack = append(p.stack, member{key, line, v})
	}
}

// value reads the value of a mapping key in column ind on line line; rest is the text
// after the key's colon.
func (p *fastYAML) value(ind, line int, rest string) (*node, bool) {
	if len(rest) == 0 || rest[0] == '#' {
		// The value is a block node below the key.
		p.nextLine()
		p.skipBlank()
		if p.i >= p.lines.n() {
			return nil, false
		}
		in := p.indent()
		s := p.content()
		isItem := s[0] == '-' && (len(s) == 1 || s[1] == ' ')
		switch {
		case isItem && in >= ind:
			return p.sequence(in)
		case in > ind:
			return p.mapping(in)
		}
		return nil, false // an empty value (null)
	}
	v, used, ok := p.inline(rest, line, false)
	if !ok || !onlyComment(rest[used:]) {
		return nil, false
	}
	return v, p.endOfValue(ind)
}

// onlyComment reports whether s is blank or blanks then a comment.
func onlyComment(s string) bool {
	t := strings.TrimLeft(s, " ")
	return len(t) == 0 || (t[0] == '#' && len(t) < len(s))
}

// sequence reads a block list whose dashes sit in column ind.
func (p *fastYAML) sequence(ind int) (*node, bool) {
	defer p.leave()
	if !p.enter() {
		return nil, false
	}
	n := p.newNode(kArr, p.i+1)
	start := len(p.stack)
	sink := p.sinkList && p.depth == 2
	p.sinkList = false
	if sink {
		p.sink.list, p.sink.col = n, ind
		p.sink.reserve(p.items(ind))
	}
	for {
		p.skipBlank()
		if p.i >= p.lines.n() {
			return p.done(n, start), true
		}
		in := p.indent()
		if in < ind {
			return p.done(n, start), true
		}
		s := p.content()
		if in > ind {
			return nil, false
		}
		if s[0] != '-' {
			return p.done(n, start), true
		}
		if len(s) < 3 || s[1] != ' ' {
			return nil, false
		}
		j := 1
		for j < len(s) && s[j] == ' ' {
			j++
		}
		item := s[j:]
		col := in + j
		line := p.i + 1
		if len(item) == 0 || item[0] == '#' || (item[0] == '-' && (len(item) == 1 || item[1] == ' ')) {
			return nil, false
		}
		var v *node
		var ok bool
		marks := [3]arenaMark{p.nodes.mark(), p.keys.mark(), p.kids.mark()}
		if _, _, isKey := keyEnd(item); isKey {
			p.col = col
			v, ok = p.mapping(col)
		} else {
			var used int
			v, used, ok = p.inline(item, line, false)
			ok = ok && onlyComment(item[used:]) && p.endOfValue(ind)
		}
		if !ok {
			return nil, false
		}
		if sink {
			// The item becomes a grant, and its nodes are given back.
			if !p.sink.add(v) {
				return nil, false
			}
			p.nodes.release(marks[0])
			p.keys.release(marks[1])
			p.kids.release(marks[2])
			continue
		}
		p.stack = append(p.stack, member{kid: v})
	}
}

// inline reads a scalar or a one-line flow collection at the start of s; flow says
// whether it sits inside a flow collection. It returns the node and the bytes used.
func (p *fastYAML) inline(s string, line int, flow bool) (*node, int, bool) {
	if len(s) == 0 {
		return nil, 0, false
	}
	switch s[0] {
	case '[', '{':
		return p.flowCollection(s, line)
	case '"', '\'':
		v, n, ok := quoted(s)
		if !ok {
			return nil, 0, false
		}
		nd := p.newNode(kStr, line)
		nd.s = v
		return nd, n, true
	case '&', '*', '!', '|', '>', '%', '@', '`', '?', ',', ']', '}', '#', ':', '.', '<', '~':
		return nil, 0, false
	}
	// A plain scalar: up to " #", the end of the line, or (in a flow) an indicator.
	end := 0
	for end < len(s) {
		c := s[end]
		if c == '#' {
			if end > 0 && s[end-1] == ' ' {
				break
			}
			return nil, 0, false
		}
		if c == ':' {
			if end+1 >= len(s) || !isKeyByte(s[end+1]) {
				return nil, 0, false // "a: b", "a:" or an unusual character after a colon
			}
		}
		if flow && (c == ',' || c == ']' || c == '}' || c == '[' || c == '{') {
			break
		}
		if !flow && (c == '[' || c == ']' || c == '{' || c == '}' || c == ',') && end == 0 {
			return nil, 0, false
		}
		end++
	}
	text := strings.TrimRight(s[:end], " ")
	if len(text) == 0 {
		return nil, 0, false
	}
	nd := p.newNode(kStr, line)
	if !resolvePlain(nd, text) {
		return nil, 0, false
	}
	return nd, len(text), true
}

// resolvePlain sets the kind and text of a plain scalar as the YAML library resolves it
// (strings, booleans, null, numbers in JSON's form), or returns false when the fast
// reader leaves it to the library.
func resolvePlain(nd *node, text string) bool {
	c := text[0]
	switch {
	case isLetter(c):
		if k, ok := resolvedWord(text); ok {
			nd.kind = k
			if k == kBool {
				nd.s = strconv.FormatBool(text[0] == 't' || text[0] == 'T')
			}
			return true
		}
		nd.s = text
		return true
	case c >= '0' && c <= '9' || c == '-':
		if isJSONNumber(text) {
			s := text
			if _, err := strconv.ParseInt(s, 0, 64); err != nil {
				if _, err := strconv.ParseUint(s, 0, 64); err != nil {
					if _, err := strconv.ParseFloat(s, 64); err != nil {
						return false // out of range: the library reads it as a string
					}
				}
			}
			nd.kind, nd.s = kNum, s
			return true
		}
		if strings.IndexByte(text, ':') >= 0 && c != '-' {
			// Not a number in any form the library knows (a timestamp, say): a string.
			nd.s = text
			return true
		}
	}
	return false
}

// isJSONNumber matches -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?.
func isJSONNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		digits()
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// quoted reads a one-line quoted scalar without escapes at the start of s, returning
// its value and length.
func quoted(s string) (string, int, bool) {
	q := s[0]
	j := strings.IndexByte(s[1:], q)
	if j < 0 {
		return "", 0, false
	}
	v := s[1 : j+1]
	if q == '"' && strings.IndexByte(v, '\\') >= 0 {
		return "", 0, false
	}
	if q == '\'' && j+2 < len(s) && s[j+2] == '\'' {
		return "", 0, false // '' is an escaped quote: left to the library
	}
	return v, j + 2, true
}

// flowCollection reads a flow list or mapping that closes on the same line.
func (p *fastYAML) flowCollection(s string, line int) (*node, int, bool) {
	defer p.leave()
	if !p.enter() {
		return nil, 0, false
	}
	open := s[0]
	closeBy := byte(']')
	k := kArr
	if open == '{' {
		closeBy, k = '}', kObj
	}
	n := p.newNode(k, line)
	start := len(p.stack)
	i := 1
	skip := func() {
		for i < len(s) && s[i] == ' ' {
			i++
		}
	}
	skip()
	if i < len(s) && s[i] == closeBy {
		return p.done(n, start), i + 1, true
	}
	for {
		skip()
		if i >= len(s) {
			return nil, 0, false
		}
		if k == kObj {
			key, off, ok := flowKey(s[i:])
			if !ok || p.hasMember(start, key) {
				return nil, 0, false
			}
			i += off
			skip()
			v, used, ok := p.inline(s[i:], line, true)
			if !ok {
				return nil, 0, false
			}
			i += used
			p.stack = append(p.stack, member{key, line, v})
		} else {
			v, used, ok := p.inline(s[i:], line, true)
			if !ok {
				return nil, 0, false
			}
			i += used
			p.stack = append(p.stack, member{kid: v})
		}
		skip()
		if i >= len(s) {
			return nil, 0, false
		}
		switch s[i] {
		case ',':
			i++
			skip()
			if i < len(s) && (s[i] == closeBy || s[i] == ',') {
				return nil, 0, false // a trailing or doubled comma: left to the library
			}
		case closeBy:
			return p.done(n, start), i + 1, true
		default:
			return nil, 0, false
		}
	}
}

// flowKey reads "key: " inside a flow mapping, returning the key and the bytes used.
func flowKey(s string) (string, int, bool) {
	key, off, ok := keyEnd(s)
	if !ok || off >= len(s) {
		return "", 0, false
	}
	return key, off, true
}
