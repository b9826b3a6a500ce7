package grantfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// kind is the JSON type of a tree node.
type kind uint8

const (
	kNull kind = iota
	kBool
	kNum
	kStr
	kArr
	kObj
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "a list", "a mapping"}[k]
}

// node is one value of a grant file, with the line it was written on (0 for values the
// loader added). Both formats are read into this tree, so defaults, shorthand expansion,
// line look-ups and the conversion to JSON are written once.
type node struct {
	kind    kind
	keyLine int32 // of an object member: the line of its key (0 for members the loader added)
	line    int
	s       string   // string value; number literal (valid JSON); "true"/"false"
	keys    []string // object keys, in document order
	kids    []*node  // object values (parallel to keys) or list items
}

// keyLineAt returns the line of key i of an object.
func (n *node) keyLineAt(i int) int {
	if k := n.kids[i]; k != nil {
		return int(k.keyLine)
	}
	return 0
}

// get returns the value of key and the line of the key, or (nil, 0).
func (n *node) get(key string) (*node, int) {
	if n == nil || n.kind != kObj {
		return nil, 0
	}
	for i, k := range n.keys {
		if k == key {
			return n.kids[i], n.keyLineAt(i)
		}
	}
	return nil, 0
}

// put sets key (replacing the value in place when present, keeping the key's line, else
// appending it).
func (n *node) put(key string, v *node) {
	for i, k := range n.keys {
		if k == key {
			v.keyLine = int32(n.keyLineAt(i))
			n.kids[i] = v
			return
		}
	}
	v.keyLine = 0
	n.keys = append(n.keys, key)
	n.kids = append(n.kids, v)
}

func strNode(s string, line int) *node { return &node{kind: kStr, s: s, line: line} }

// lineOf walks a dotted field path from n and returns the line of the deepest element
// found (a key's line for object members, an item's line for list items), falling back to
// n's own line.
func lineOf(n *node, field string) int {
	line := n.line
	if field == "" {
		return line
	}
	cur := n
	for _, part := range strings.Split(field, ".") {
		var next *node
		var l int
		switch cur.kind {
		case kObj:
			next, l = cur.get(part)
		case kArr:
			if i, err := strconv.Atoi(part); err == nil && i >= 0 && i < len(cur.kids) {
				next = cur.kids[i]
				l = next.line
			}
		}
		if next == nil {
			break
		}
		if l > 0 {
			line = l
		}
		cur = next
	}
	return line
}

// nodeValue turns n into the generic JSON value the kernel's strict decoders take
// (numbers as json.Number, from their valid-JSON literal), without re-encoding it.
func nodeValue(n *node) any {
	switch n.kind {
	case kBool:
		return n.s == "true"
	case kNum:
		return json.Number(n.s)
	case kStr:
		return n.s
	case kArr:
		out := make([]any, len(n.kids))
		for i, k := range n.kids {
			out[i] = nodeValue(k)
		}
		return out
	case kObj:
		out := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			out[k] = nodeValue(n.kids[i])
		}
		return out
	}
	return nil
}

// appendJSON serializes the tree as compact JSON.
func appendJSON(b []byte, n *node) []byte {
	switch n.kind {
	case kNull:
		return append(b, "null"...)
	case kBool, kNum:
		return append(b, n.s...)
	case kStr:
		return appendJSONString(b, n.s)
	case kArr:
		b = append(b, '[')
		for i, k := range n.kids {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, k)
		}
		return append(b, ']')
	default:
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSON(b, n.kids[i])
		}
		return append(b, '}')
	}
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s as a JSON string (invalid UTF-8 becomes U+FFFD, as
// encoding/json does).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, `\ufffd`...)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// treeError is a failure while reading the document into a tree: the absolute path of
// the offending value (nil when unknown) and its line.
type treeError struct {
	path  []string
	line  int
	msg   string
	cause error
}

func (e *treeError) Error() string { return e.msg }

var jsonNumberRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`) })

// ---------------------------------------------------------------------------------------
// YAML

type yamlReader struct {
	path []string
}

func (r *yamlReader) fail(line int, format string, args ...any) *treeError {
	return &treeError{path: append([]string(nil), r.path...), line: line, msg: fmt.Sprintf(format, args...)}
}

var yamlLineRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^yaml: line (\d+): (.*)$`) })

// yamlParserErrors are the messages of the YAML library's parser (as opposed to its
// scanner): it reports their line 0-based, so one is added.
var yamlParserErrors = []string{
	"did not find expected key", "did not find expected ',' or ']'", "did not find expected ',' or '}'",
	"did not find expected node content", "did not find expected <document start>",
	"did not find expected '-' indicator",
}

func yamlSyntaxError(err error, data string) *treeError {
	msg := err.Error()
	if m := yamlLineRE().FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		for _, pe := range yamlParserErrors {
			if strings.HasPrefix(m[2], pe) {
				line++
				break
			}
		}
		if strings.HasPrefix(m[2], "found a tab character that violates indentation") {
			// The library reports the line of the scalar it was reading, not the tab's:
			// the tab is in the indentation of the first line from there that has one.
			line = tabLine(data, line)
		}
		return &treeError{line: line, msg: "YAML syntax: " + m[2], cause: err}
	}
	return &treeError{msg: "YAML syntax: " + strings.TrimPrefix(msg, "yaml: "), cause: err}
}

// tabLine returns the first line, from line from on, whose indentation holds a tab (from
// itself when there is none).
func tabLine(data string, from int) int {
	n := 1
	for len(data) > 0 {
		l := data
		if i := strings.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			data = ""
		}
		if n >= from {
			if ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]; strings.IndexByte(ind, '\t') >= 0 {
				return n
			}
		}
		n++
	}
	return from
}

// yamlTree reads exactly one YAML document into a tree. It never panics: a panic inside
// the YAML library is reported as a syntax error.
func yamlTree(data []byte) (root *node, terr *treeError) {
	return yamlTreeText(string(data), fastYAMLEnabled)
}

// fastYAMLEnabled lets benchmarks measure the YAML library alone.
var fastYAMLEnabled = true

// yamlTreeWith is yamlTree, trying the fast reader first when fast is set.
func yamlTreeWith(data []byte, fast bool) (root *node, terr *treeError) {
	return yamlTreeText(string(data), fast)
}

// yamlTreeText is yamlTreeWith of a document held in a string (the tree's strings are
// substrings of it).
func yamlTreeText(data string, fast bool) (root *node, terr *treeError) {
	defer func() {
		if p := recover(); p != nil {
			root, terr = nil, &treeError{msg: fmt.Sprintf("YAML syntax: %v", p)}
		}
	}()
	if fast {
		if root, _, ok := fastYAMLRead(data, false); ok {
			return root, nil
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &treeError{msg: "the file is empty (want version: 1 and grants)"}
		}
		return nil, yamlSyntaxError(err, data)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &treeError{line: extra.Line, msg: "a grant file holds exactly one YAML document"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlSyntaxError(err, data)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, &treeError{line: doc.Line, msg: "the file is empty (want version: 1 and grants)"}
	}
	r := &yamlReader{}
	terr = r.convert(doc.Content[0], &root)
	return root, terr
}

// convert reads y into *slot. The node is stored in *slot before its children are read,
// so on failure the caller still holds the partial tree (to name the grant that failed).
func (r *yamlReader) convert(y *yaml.Node, slot **node) *treeError {
	if y.Kind == yaml.AliasNode {
		return r.fail(y.Line, "YAML aliases (*%s) are not allowed in a grant file", y.Value)
	}
	if y.Anchor != "" {
		return r.fail(y.Line, "YAML anchors (&%s) are not allowed in a grant file", y.Anchor)
	}
	tag := y.ShortTag()
	switch y.Kind {
	case yaml.MappingNode:
		if tag != "!!map" {
			return r.fail(y.Line, "unsupported YAML tag %s", tag)
		}
		n := &node{kind: kObj, line: y.Line}
		*slot = n
		for i := 0; i+1 < len(y.Content); i += 2 {
			k, v := y.Content[i], y.Content[i+1]
			if k.Kind == yaml.AliasNode {
				return r.fail(k.Line, "YAML aliases (*%s) are not allowed in a grant file", k.Value)
			}
			if k.Anchor != "" {
				return r.fail(k.Line, "YAML anchors (&%s) are not allowed in a grant file", k.Anchor)
			}
			if k.Kind != yaml.ScalarNode {
				return r.fail(k.Line, "mapping keys must be strings")
			}
			switch kt := k.ShortTag(); kt {
			case "!!str":
			case "!!merge":
				return r.fail(k.Line, "YAML merge keys (<<) are not allowed in a grant file")
			default:
				return r.fail(k.Line, "mapping key %q must be a string, not %s (quote it)", k.Value, kt)
			}
			if n.hasKey(k.Value) {
				_, first := n.get(k.Value)
				r.path = append(r.path, k.Value)
				return r.fail(k.Line, "duplicate key %q (first at line %d)", k.Value, first)
			}
			n.keys = append(n.keys, k.Value)
			n.kids = append(n.kids, nil)
			r.path = append(r.path, k.Value)
			err := r.convert(v, &n.kids[len(n.kids)-1])
			if kid := n.kids[len(n.kids)-1]; kid != nil {
				kid.keyLine = int32(k.Line)
			}
			if err != nil {
				n.trimLast()
				return err
			}
			r.path = r.path[:len(r.path)-1]
		}
		return nil
	case yaml.SequenceNode:
		if tag != "!!seq" {
			return r.fail(y.Line, "unsupported YAML tag %s", tag)
		}
		n := &node{kind: kArr, line: y.Line, kids: make([]*node, len(y.Content))}
		*slot = n
		for i, item := range y.Content {
			r.path = append(r.path, strconv.Itoa(i))
			if err := r.convert(item, &n.kids[i]); err != nil {
				n.kids = n.kids[:i+1]
				n.trimLast()
				return err
			}
			r.path = r.path[:len(r.path)-1]
		}
		return nil
	case yaml.ScalarNode:
		n, err := r.scalar(y, tag)
		if err != nil {
			return err
		}
		*slot = n
		return nil
	}
	return r.fail(y.Line, "unsupported YAML node")
}

func (n *node) hasKey(key string) bool {
	for _, k := range n.keys {
		if k == key {
			return true
		}
	}
	return false
}

// scalar converts one YAML scalar by its resolved tag: !!str and !!timestamp stay the
// literal text, !!int and !!float become JSON numbers (the literal when it already is
// valid JSON, else the decoded value), !!bool and !!null their JSON counterparts.
func (r *yamlReader) scalar(y *yaml.Node, tag string) (*node, *treeError) {
	switch tag {
	case "!!str", "!!timestamp":
		return &node{kind: kStr, s: y.Value, line: y.Line}, nil
	case "!!null":
		return &node{kind: kNull, line: y.Line}, nil
	case "!!bool":
		var b bool
		if err := y.Decode(&b); err != nil {
			return nil, r.fail(y.Line, "%q is not a boolean", y.Value)
		}
		return &node{kind: kBool, s: strconv.FormatBool(b), line: y.Line}, nil
	case "!!int", "!!float":
		// Only the JSON form of a number: YAML 1.1 and other library forms are refused,
		// since they read as a surprise (010 is 8, 1_000 is 1000).
		if !jsonNumberRE().MatchString(y.Value) {
			return nil, r.fail(y.Line, "%q is not a plain decimal number (forms such as 010, 0x10, 0o10, 1_000, +5, .5 and .inf are refused; quote it to write a string)", y.Value)
		}
		return &node{kind: kNum, s: y.Value, line: y.Line}, nil
	}
	return nil, r.fail(y.Line, "unsupported YAML tag %s on %q", tag, y.Value)
}

// ---------------------------------------------------------------------------------------
// JSON

// maxJSONDepth bounds nesting, as encoding/json does.
const maxJSONDepth = 10000

// jsonScanner reads JSON (RFC 8259) into a tree in one pass, tracking lines. It is
// stricter than encoding/json in one way only: duplicate object keys are refused, as in
// YAML. Input is valid UTF-8 (checked by the caller).
type jsonScanner struct {
	data  string // strings without escapes are substrings of it
	pos   int
	line  int
	depth int
	path  []string
	slab  []node
}

func (s *jsonScanner) newNode(k kind, line int) *node {
	if len(s.slab) == 0 {
		s.slab = make([]node, 1024)
	}
	n := &s.slab[0]
	s.slab = s.slab[1:]
	n.kind, n.line = k, line
	return n
}

// jsonTree reads one JSON value (and nothing after it) into a tree.
func jsonTree(data []byte) (*node, *treeError) { return jsonText(string(data)) }

// jsonText is jsonTree of a document held in a string.
func jsonText(data string) (*node, *treeError) {
	s := &jsonScanner{data: data, line: 1}
	s.skipWS()
	if s.pos == len(data) {
		return nil, &treeError{msg: "the file is empty (want version: 1 and grants)"}
	}
	var root *node
	if err := s.value(&root); err != nil {
		return root, err
	}
	s.skipWS()
	if s.pos != len(data) {
		return root, s.syntax("unexpected data after the top-level object")
	}
	return root, nil
}

func (s *jsonScanner) skipWS() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case '\n':
			s.line++
		case ' ', '\t', '\r':
		default:
			return
		}
		s.pos++
	}
}

func (s *jsonScanner) syntax(format string, args ...any) *treeError {
	return &treeError{path: append([]string(nil), s.path...), line: s.line, msg: "JSON syntax: " + fmt.Sprintf(format, args...)}
}

// unexpected describes the byte at the current position for an error message.
func (s *jsonScanner) unexpected(want string) *treeError {
	if s.pos >= len(s.data) {
		return s.syntax("unexpected end of input, want %s", want)
	}
	r, _ := utf8.DecodeRuneInString(s.data[s.pos:])
	return s.syntax("unexpected %q, want %s", r, want)
}

func (s *jsonScanner) peek() byte {
	if s.pos < len(s.data) {
		return s.data[s.pos]
	}
	return 0
}

// value reads the value at the current position into *slot (stored before its children
// are read, so a failure leaves the partial tree in place).
func (s *jsonScanner) value(slot **node) *treeError {
	line := s.line
	switch c := s.peek(); {
	case c == '{':
		if s.depth++; s.depth > maxJSONDepth {
			return s.syntax("nested too deeply")
		}
		s.pos++
		n := s.newNode(kObj, line)
		*slot = n
		s.skipWS()
		if s.peek() == '}' {
			s.pos++
			s.depth--
			return nil
		}
		for {
			s.skipWS()
			if s.peek() != '"' {
				return s.unexpected("a string key")
			}
			kline := s.line
			key, err := s.str()
			if err != nil {
				return err
			}
			s.skipWS()
			if s.peek() != ':' {
				return s.unexpected("':' after the key")
			}
			s.pos++
			s.skipWS()
			s.path = append(s.path, key)
			if n.hasKey(key) {
				_, first := n.get(key)
				e := s.syntax("")
				e.line, e.msg = kline, fmt.Sprintf("duplicate key %q (first at line %d)", key, first)
				return e
			}
			n.keys = append(n.keys, key)
			n.kids = append(n.kids, nil)
			err = s.value(&n.kids[len(n.kids)-1])
			if kid := n.kids[len(n.kids)-1]; kid != nil {
				kid.keyLine = int32(kline)
			}
			if err != nil {
				n.trimLast()
				return err
			}
			s.path = s.path[:len(s.path)-1]
			s.skipWS()
			switch s.peek() {
			case ',':
				s.pos++
				continue
			case '}':
				s.pos++
				s.depth--
				return nil
			}
			return s.unexpected("',' or '}'")
		}
	case c == '[':
		if s.depth++; s.depth > maxJSONDepth {
			return s.syntax("nested too deeply")
		}
		s.pos++
		n := s.newNode(kArr, line)
		*slot = n
		s.skipWS()
		if s.peek() == ']' {
			s.pos++
			s.depth--
			return nil
		}
		for i := 0; ; i++ {
			s.skipWS()
			s.path = append(s.path, strconv.Itoa(i))
			n.kids = append(n.kids, nil)
			if err := s.value(&n.kids[i]); err != nil {
				n.trimLast()
				return err
			}
			s.path = s.path[:len(s.path)-1]
			s.skipWS()
			switch s.peek() {
			case ',':
				s.pos++
				continue
			case ']':
				s.pos++
				s.depth--
				return nil
			}
			return s.unexpected("',' or ']'")
		}
	case c == '"':
		v, err := s.str()
		if err != nil {
			return err
		}
		n := s.newNode(kStr, line)
		n.s = v
		*slot = n
		return nil
	case c == 't' || c == 'f' || c == 'n':
		for _, lit := range [...]string{"true", "false", "null"} {
			if strings.HasPrefix(s.data[s.pos:], lit) {
				s.pos += len(lit)
				if lit == "null" {
					*slot = s.newNode(kNull, line)
				} else {
					n := s.newNode(kBool, line)
					n.s = lit
					*slot = n
				}
				return nil
			}
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number(slot, line)
	}
	return s.unexpected("a value")
}

// number reads -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)? and keeps the literal.
func (s *jsonScanner) number(slot **node, line int) *treeError {
	start := s.pos
	digits := func() int {
		n := 0
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.peek() == '-' {
		s.pos++
	}
	switch c := s.peek(); {
	case c == '0':
		s.pos++
	case c >= '1' && c <= '9':
		digits()
	default:
		return s.unexpected("a digit")
	}
	if s.peek() == '.' {
		s.pos++
		if digits() == 0 {
			return s.unexpected("a digit after '.'")
		}
	}
	if c := s.peek(); c == 'e' || c == 'E' {
		s.pos++
		if c := s.peek(); c == '+' || c == '-' {
			s.pos++
		}
		if digits() == 0 {
			return s.unexpected("a digit in the exponent")
		}
	}
	n := s.newNode(kNum, line)
	n.s = s.data[start:s.pos]
	*slot = n
	return nil
}

// str reads a string literal (the cursor is on its opening quote), decoding escapes as
// encoding/json does (an invalid surrogate becomes U+FFFD).
func (s *jsonScanner) str() (string, *treeError) {
	s.pos++
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		if c == '"' {
			v := s.data[start:s.pos]
			s.pos++
			return v, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", s.syntax("control character %q in a string (escape it)", rune(c))
		}
		s.pos++
	}
	buf := append([]byte(nil), s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return string(buf), nil
		case c < 0x20:
			return "", s.syntax("control character %q in a string (escape it)", rune(c))
		case c != '\\':
			buf = append(buf, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.data) {
			break
		}
		e := s.data[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r := s.hex4(s.pos)
			if r < 0 {
				return "", s.syntax("invalid \\u escape")
			}
			s.pos += 4
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
					r2 = s.hex4(s.pos + 2)
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r = d
					s.pos += 6
				} else {
					r = utf8.RuneError
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", s.syntax("invalid escape %q in a string", "\\"+string(rune(e)))
		}
	}
	return "", s.syntax("unexpected end of input in a string")
}

// hex4 decodes four hex digits at i, or returns -1.
func (s *jsonScanner) hex4(i int) rune {
	if i+4 > len(s.data) {
		return -1
	}
	var r rune
	for j := i; j < i+4; j++ {
		c := s.data[j]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r<<4 | rune(c)
	}
	return r
}

// trimLast drops a trailing member or item whose value was never stored.
func (n *node) trimLast() {
	if k := len(n.kids); k > 0 && n.kids[k-1] == nil {
		n.kids = n.kids[:k-1]
		if n.kind == kObj {
			n.keys = n.keys[:k-1]
		}
	}
}
