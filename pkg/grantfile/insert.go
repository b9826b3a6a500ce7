package grantfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// InsertGrant adds g at the end of the grants list of the YAML or JSON grant file at
// path (a symbolic link is followed: its target is rewritten), structurally and in the
// file's own format, leaving every other byte of the file as it was — comments
// included:
//
//   - YAML: g is written in FormatGrantYAML's style, indented like the list's items,
//     after the last line of the list's last item, wherever `grants:` sits in the file.
//     `grants: []` (and an empty `grants:` or `grants: ~`) becomes a block list under
//     the key; a non-empty flow list gains g as one compact JSON element (JSON is YAML
//     flow syntax); a file without `grants:` gains a `grants:` key at its end. Line
//     breaks follow the file (CRLF stays CRLF).
//   - JSON: g is written as an element of the "grants" array with the array's own
//     separator and the file's indentation unit (compact when the file is on one line);
//     `[]`, `null` and a missing "grants" member are handled the same way.
//
// It refuses (returning an *Error naming path, and leaving the file untouched) when g
// fails the grant contract, when the file is not a valid grant file (except for a
// missing or empty grants list), when a grant with g's id already exists in the file,
// or when the result would not be exactly the file's grants followed by g under the
// package's strict parser — the result is parsed before anything is written. The file
// is replaced atomically (a temporary file in the same directory, fsynced, renamed over
// it, the directory fsynced) and keeps its permission bits; if the file changed while
// InsertGrant ran, it refuses rather than overwrite the change.
//
// Ids must also be unique across the other grant files of a set; InsertGrant sees only
// this file (LoadSet refuses a duplicate across files).
func InsertGrant(path string, g kernel.CapabilityGrant) error {
	fail := func(format string, args ...any) error {
		return &Error{File: path, Grant: g.ID, Message: fmt.Sprintf(format, args...)}
	}
	if err := g.Validate(); err != nil {
		e := &Error{File: path, Grant: g.ID, Message: contractMessage(err), cause: err}
		var ce *kernel.ContractError
		if errors.As(err, &ce) {
			e.Field, e.Message = ce.Field, ce.Message
		}
		return e
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return &Error{File: path, Message: "cannot read grant file: " + unwrapPathError(err), cause: err}
	}
	info, err := os.Stat(target)
	if err != nil {
		return &Error{File: path, Message: "cannot read grant file: " + unwrapPathError(err), cause: err}
	}
	if !info.Mode().IsRegular() {
		return fail("not a regular file")
	}
	data, rerr := readFile(target)
	if rerr != nil {
		rerr.File = path
		return rerr
	}
	out, ierr := insertGrant(path, data, g)
	if ierr != nil {
		return ierr
	}
	if err := replaceFile(target, data, out, info.Mode().Perm()); err != nil {
		return fail("%v", err)
	}
	return nil
}

// insertGrant returns data with g inserted, verified by the strict parser.
func insertGrant(name string, data []byte, g kernel.CapabilityGrant) ([]byte, *Error) {
	fail := func(format string, args ...any) *Error {
		return &Error{File: name, Grant: g.ID, Message: fmt.Sprintf(format, args...)}
	}
	old, perr := parse(name, data)
	if perr != nil && !(perr.Grant == "" && perr.Field == "grants") {
		// A file that is invalid for any reason but a missing or empty list stays as it is.
		return nil, perr
	}
	if old != nil {
		for i := range old.file.Grants {
			if old.file.Grants[i].ID == g.ID {
				return nil, &Error{File: name, Grant: g.ID, Field: "id", Line: lineOf(old.grantNodes[i], "id"),
					Message: fmt.Sprintf("a grant with id %q already exists in this file", g.ID)}
			}
		}
	}
	body := bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	bom := data[:len(data)-len(body)]
	var out []byte
	var err error
	if isJSON(name, body) {
		out, err = insertJSON(body, g)
	} else {
		out, err = insertYAML(body, g)
	}
	if err != nil {
		return nil, fail("cannot insert the grant: %v", err)
	}
	out = append(append([]byte(nil), bom...), out...)
	// The result must be the old grants, unchanged and in order, followed by g.
	res, rerr := parse(name, out)
	if rerr != nil {
		return nil, fail("cannot insert the grant: the result would not parse (%v)", rerr)
	}
	var before []kernel.CapabilityGrant
	if old != nil {
		before = old.file.Grants
		if !sameContext(old.file.Context, res.file.Context) {
			return nil, fail("cannot insert the grant: the result would change the file's context")
		}
	}
	if len(res.file.Grants) != len(before)+1 {
		return nil, fail("cannot insert the grant: the result would hold %d grants, not %d", len(res.file.Grants), len(before)+1)
	}
	for i := range before {
		if !bytes.Equal(kernel.CanonicalGrant(&before[i]), kernel.CanonicalGrant(&res.file.Grants[i])) {
			return nil, fail("cannot insert the grant: the result would change grant %q", before[i].ID)
		}
	}
	if !bytes.Equal(kernel.CanonicalGrant(&g), kernel.CanonicalGrant(&res.file.Grants[len(before)])) {
		return nil, fail("cannot insert the grant: the grant would not read back unchanged")
	}
	return out, nil
}

func sameContext(a, b Context) bool {
	for _, k := range contextKeys {
		if contextField(&a, k) != contextField(&b, k) {
			return false
		}
	}
	return true
}

// replaceFile writes data to path atomically, if path still holds old.
func replaceFile(path string, old, data []byte, perm os.FileMode) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if now, rerr := readFile(path); rerr != nil || !bytes.Equal(now, old) {
		return errors.New("the file changed while the grant was being inserted; try again")
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// ---------------------------------------------------------------------------------------
// YAML

// yamlText indexes the lines of a YAML document.
type yamlText struct {
	data   []byte
	starts []int // byte offset of each line (0-based line i starts at starts[i])
	nl     string
}

func newYAMLText(data []byte) (*yamlText, error) {
	t := &yamlText{data: data, starts: []int{0}, nl: "\n"}
	for i, c := range data {
		if c == '\n' {
			t.starts = append(t.starts, i+1)
		}
	}
	if bytes.Contains(data, []byte("\r\n")) {
		t.nl = "\r\n"
	}
	// Line breaks YAML counts but this index does not would shift every position.
	for _, lb := range []string{"\u0085", "\u2028", "\u2029"} {
		if bytes.Contains(data, []byte(lb)) {
			return nil, fmt.Errorf("the file holds a %q line break", lb)
		}
	}
	if bytes.Count(data, []byte("\r")) != bytes.Count(data, []byte("\r\n")) {
		return nil, errors.New("the file holds a bare carriage return")
	}
	return t, nil
}

// line returns 1-based line n without its line break ("" past the end).
func (t *yamlText) line(n int) string {
	if n < 1 || n > len(t.starts) {
		return ""
	}
	end := len(t.data)
	if n < len(t.starts) {
		end = t.starts[n] - 1
	}
	return strings.TrimSuffix(string(t.data[t.starts[n-1]:end]), "\r")
}

// offset converts a 1-based line and column (in characters, as the YAML library counts)
// to a byte offset.
func (t *yamlText) offset(line, col int) (int, error) {
	if line < 1 || line > len(t.starts) {
		return 0, fmt.Errorf("line %d out of range", line)
	}
	off := t.starts[line-1]
	for i := 1; i < col; i++ {
		if off >= len(t.data) || t.data[off] == '\n' {
			return 0, fmt.Errorf("column %d out of range on line %d", col, line)
		}
		_, size := utf8.DecodeRune(t.data[off:])
		off += size
	}
	return off, nil
}

// endOfLine is the offset just after the line break of line n (len(data) for the last).
func (t *yamlText) endOfLine(n int) int {
	if n < len(t.starts) {
		return t.starts[n]
	}
	return len(t.data)
}

// blockItems renders g as a block list item whose dash sits in column indent (0-based).
func blockItems(g kernel.CapabilityGrant, indent int, nl string) string {
	lines := strings.SplitAfter(FormatGrantYAML(g), "\n")
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		l = strings.TrimSuffix(l, "\n")
		if indent >= 2 {
			b.WriteString(strings.Repeat(" ", indent-2) + l)
		} else {
			b.WriteString(l[2-indent:])
		}
		b.WriteString(nl)
	}
	return b.String()
}

// compactGrantJSON renders g as one line of JSON (also a YAML flow mapping).
func compactGrantJSON(g kernel.CapabilityGrant) (string, error) {
	return marshalGrantJSON(g, "", "")
}

func insertYAML(data []byte, g kernel.CapabilityGrant) ([]byte, error) {
	t, err := newYAMLText(data)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("the file is not a YAML mapping")
	}
	root := doc.Content[0]
	flowRoot := root.Style&yaml.FlowStyle != 0
	var key, val *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "grants" {
			key, val = root.Content[i], root.Content[i+1]
		}
	}
	splice := func(at int, s string) []byte {
		out := make([]byte, 0, len(data)+len(s)+2)
		out = append(out, data[:at]...)
		out = append(out, s...)
		return append(out, data[at:]...)
	}
	switch {
	case key == nil:
		if flowRoot {
			return nil, errors.New("the file has no grants key and is a flow mapping; add `grants: []` first")
		}
		// A new key at the end of the file, at the root mapping's indentation.
		out := append([]byte(nil), data...)
		if len(out) > 0 && out[len(out)-1] != '\n' {
			out = append(out, t.nl...)
		}
		ind := root.Column - 1
		out = append(out, strings.Repeat(" ", ind)+"grants:"+t.nl...)
		return append(out, blockItems(g, ind+2, t.nl)...), nil

	case val.Kind == yaml.SequenceNode && val.Style&yaml.FlowStyle == 0:
		// A block list: after the last line that still belongs to it.
		dash := val.Column - 1
		last := val.Line
		for n := val.Line + 1; n <= len(t.starts); n++ {
			l := t.line(n)
			trimmed := strings.TrimLeft(l, " ")
			ind := len(l) - len(trimmed)
			// Blank lines, and comments not indented into the item, belong to what follows.
			if trimmed == "" || (strings.HasPrefix(trimmed, "#") && ind <= dash) {
				continue
			}
			if ind > dash || (ind == dash && (trimmed == "-" || strings.HasPrefix(trimmed, "- "))) {
				last = n
				continue
			}
			break
		}
		at := t.endOfLine(last)
		prefix := ""
		if at == len(data) && (len(data) == 0 || data[len(data)-1] != '\n') {
			prefix = t.nl
		}
		return splice(at, prefix+blockItems(g, dash, t.nl)), nil

	case val.Kind == yaml.SequenceNode:
		open, err := t.offset(val.Line, val.Column)
		if err != nil {
			return nil, err
		}
		closing, lastItem, err := scanFlowSeq(data, open)
		if err != nil {
			return nil, err
		}
		js, err := compactGrantJSON(g)
		if err != nil {
			return nil, err
		}
		if len(val.Content) > 0 {
			sep := ", "
			if data[lastItem] == ',' {
				sep = " "
			}
			return splice(lastItem+1, sep+js), nil
		}
		if flowRoot {
			return splice(closing, js), nil
		}
		// `grants: []` in a block mapping becomes a block list under the key.
		if strings.TrimSpace(string(data[open+1:closing])) != "" {
			return nil, errors.New("the empty grants list holds a comment; remove it first")
		}
		return blockUnderKey(t, key, open, closing+1, lineAt(data, closing), g)

	case val.Kind == yaml.ScalarNode && val.ShortTag() == "!!null":
		if flowRoot {
			return nil, errors.New("grants is null in a flow mapping; write grants: [] first")
		}
		from, err := t.offset(val.Line, val.Column)
		if err != nil {
			return nil, err
		}
		to := from + len(val.Value)
		if val.Value == "" {
			from, to = -1, -1
		}
		return blockUnderKey(t, key, from, to, val.Line, g)
	}
	return nil, errors.New("grants is not a list")
}

// blockUnderKey removes data[from:to] (the empty list or null written after the key,
// ending on line valLine; from == to == -1 when nothing is written) and puts g as a
// block list on the lines after it; the rest of that line may hold only a comment.
func blockUnderKey(t *yamlText, key *yaml.Node, from, to, valLine int, g kernel.CapabilityGrant) ([]byte, error) {
	data := t.data
	if from < 0 {
		start, err := t.offset(key.Line, key.Column)
		if err != nil {
			return nil, err
		}
		eol := t.endOfLine(key.Line)
		colon := bytes.IndexByte(data[start:eol], ':')
		if colon < 0 {
			return nil, errors.New("cannot find the grants key's colon")
		}
		from = start + colon + 1
		to = from
		valLine = key.Line
	}
	eol := t.endOfLine(valLine)
	if to > eol {
		return nil, errors.New("cannot find the end of the grants value")
	}
	rest := strings.TrimSpace(string(data[to:eol]))
	if rest != "" && !strings.HasPrefix(rest, "#") {
		return nil, errors.New("the grants value's line holds more than the list")
	}
	if rest == "" {
		// "grants: []" becomes "grants:" without a trailing blank.
		for from > 0 && data[from-1] == ' ' {
			from--
		}
	}
	out := make([]byte, 0, len(data)+1024)
	out = append(out, data[:from]...)
	out = append(out, data[to:eol]...)
	if eol == len(data) && (len(data) == 0 || data[len(data)-1] != '\n') {
		out = append(out, t.nl...)
	}
	out = append(out, blockItems(g, key.Column-1+2, t.nl)...)
	return append(out, data[eol:]...), nil
}

// lineAt is the 1-based line of offset at.
func lineAt(data []byte, at int) int { return 1 + bytes.Count(data[:at], []byte{'\n'}) }

// scanFlowSeq finds, for the flow sequence opening at data[open] == '[', the offset of
// its closing ']' and of the last significant character before it (the end of the last
// item, or a trailing comma; the '[' itself when empty). Quoted scalars and comments
// are skipped; plain scalars cannot hold flow indicators.
func scanFlowSeq(data []byte, open int) (closing, last int, err error) {
	if open >= len(data) || data[open] != '[' {
		return 0, 0, errors.New("cannot find the grants list's '['")
	}
	depth := 0
	last = open
	for i := open; i < len(data); i++ {
		c := data[i]
		switch c {
		case '"':
			j := i + 1
			for ; j < len(data) && data[j] != '"'; j++ {
				if data[j] == '\\' {
					j++
				}
			}
			if j >= len(data) {
				return 0, 0, errors.New("unterminated quoted scalar")
			}
			i, last = j, j
			continue
		case '\'':
			j := i + 1
			for ; j < len(data); j++ {
				if data[j] == '\'' {
					if j+1 < len(data) && data[j+1] == '\'' {
						j++
						continue
					}
					break
				}
			}
			if j >= len(data) {
				return 0, 0, errors.New("unterminated quoted scalar")
			}
			i, last = j, j
			continue
		case '#':
			if i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n' || data[i-1] == '\r' {
				for i < len(data) && data[i] != '\n' {
					i++
				}
				continue
			}
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return i, last, nil
			}
		case ' ', '\t', '\r', '\n':
			continue
		}
		last = i
	}
	return 0, 0, errors.New("cannot find the end of the grants list")
}

// ---------------------------------------------------------------------------------------
// JSON

// jsonSpan is a member of a JSON object: where its key starts and its value starts and ends.
type jsonSpan struct {
	key              string
	keyStart         int
	valStart, valEnd int
	sepStart, sepEnd int // the white space before the key (after '{' or ',')
	// For the grants array: where each element starts and ends, and the white space
	// before it (after '[' or ',').
	elemStarts, elemEnds []int
	elemSeps             [][2]int
}

type jsonPos struct {
	data []byte
	pos  int
}

func (p *jsonPos) ws() {
	for p.pos < len(p.data) && strings.IndexByte(" \t\r\n", p.data[p.pos]) >= 0 {
		p.pos++
	}
}

// skip moves past the value at the current position (the document is valid JSON).
func (p *jsonPos) skip() error {
	if p.pos >= len(p.data) {
		return errors.New("unexpected end of JSON")
	}
	switch c := p.data[p.pos]; c {
	case '"':
		p.pos++
		for p.pos < len(p.data) && p.data[p.pos] != '"' {
			if p.data[p.pos] == '\\' {
				p.pos++
			}
			p.pos++
		}
		if p.pos >= len(p.data) {
			return errors.New("unterminated JSON string")
		}
		p.pos++
	case '{', '[':
		closeBy := byte('}')
		if c == '[' {
			closeBy = ']'
		}
		p.pos++
		p.ws()
		if p.pos < len(p.data) && p.data[p.pos] == closeBy {
			p.pos++
			return nil
		}
		for {
			p.ws()
			if c == '{' {
				if err := p.skip(); err != nil { // key
					return err
				}
				p.ws()
				p.pos++ // ':'
				p.ws()
			}
			if err := p.skip(); err != nil {
				return err
			}
			p.ws()
			if p.pos >= len(p.data) {
				return errors.New("unexpected end of JSON")
			}
			if p.data[p.pos] == ',' {
				p.pos++
				continue
			}
			p.pos++
			return nil
		}
	default:
		for p.pos < len(p.data) && strings.IndexByte(",]} \t\r\n", p.data[p.pos]) < 0 {
			p.pos++
		}
	}
	return nil
}

// rootMembers lists the members of the top-level object, with the elements of the
// grants array when it is one.
func rootMembers(data []byte) (open, closing int, members []jsonSpan, err error) {
	p := &jsonPos{data: data}
	p.ws()
	if p.pos >= len(data) || data[p.pos] != '{' {
		return 0, 0, nil, errors.New("the file is not a JSON object")
	}
	open = p.pos
	p.pos++
	for {
		sep := p.pos
		p.ws()
		if p.pos < len(data) && data[p.pos] == '}' {
			return open, p.pos, members, nil
		}
		m := jsonSpan{sepStart: sep, sepEnd: p.pos, keyStart: p.pos}
		ks := p.pos
		if err := p.skip(); err != nil {
			return 0, 0, nil, err
		}
		if err := json.Unmarshal(data[ks:p.pos], &m.key); err != nil {
			return 0, 0, nil, err
		}
		p.ws()
		p.pos++ // ':'
		p.ws()
		m.valStart = p.pos
		if m.key == "grants" && p.pos < len(data) && data[p.pos] == '[' {
			p.pos++
			for {
				es := p.pos
				p.ws()
				if p.pos < len(data) && data[p.pos] == ']' {
					p.pos++
					break
				}
				m.elemSeps = append(m.elemSeps, [2]int{es, p.pos})
				m.elemStarts = append(m.elemStarts, p.pos)
				if err := p.skip(); err != nil {
					return 0, 0, nil, err
				}
				m.elemEnds = append(m.elemEnds, p.pos)
				p.ws()
				if p.pos < len(data) && data[p.pos] == ',' {
					p.pos++
					continue
				}
				p.ws()
				p.pos++ // ']'
				break
			}
		} else if err := p.skip(); err != nil {
			return 0, 0, nil, err
		}
		m.valEnd = p.pos
		members = append(members, m)
		p.ws()
		if p.pos >= len(data) {
			return 0, 0, nil, errors.New("unexpected end of JSON")
		}
		if data[p.pos] == ',' {
			p.pos++
			continue
		}
		return open, p.pos, members, nil
	}
}

// jsonIndentUnit is the indentation of the file's first indented line ("" when the
// file is on one line; two spaces when no line is indented).
func jsonIndentUnit(data []byte) string {
	if !bytes.Contains(bytes.TrimRight(data, " \t\r\n"), []byte("\n")) {
		return ""
	}
	for _, l := range bytes.Split(data, []byte("\n"))[1:] {
		t := bytes.TrimLeft(l, " \t")
		if len(t) > 0 && len(t) < len(l) {
			return string(l[:len(l)-len(t)])
		}
	}
	return "  "
}

// lineIndent is the leading white space of the line holding offset at.
func lineIndent(data []byte, at int) string {
	start := bytes.LastIndexByte(data[:at], '\n') + 1
	end := start
	for end < len(data) && (data[end] == ' ' || data[end] == '\t') {
		end++
	}
	return string(data[start:end])
}

func insertJSON(data []byte, g kernel.CapabilityGrant) ([]byte, error) {
	_, closing, members, err := rootMembers(data)
	if err != nil {
		return nil, err
	}
	unit := jsonIndentUnit(data)
	nl := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		nl = "\r\n"
	}
	// emptyArray renders a one-element array for a member whose key line has indent ind.
	array := func(ind string) (string, error) {
		if unit == "" {
			js, err := compactGrantJSON(g)
			return "[" + js + "]", err
		}
		js, err := marshalGrantJSON(g, ind+unit, unit)
		if err != nil {
			return "", err
		}
		return "[" + nl + ind + unit + strings.ReplaceAll(js, "\n", nl) + nl + ind + "]", nil
	}
	splice := func(from, to int, s string) []byte {
		out := make([]byte, 0, len(data)+len(s))
		out = append(out, data[:from]...)
		out = append(out, s...)
		return append(out, data[to:]...)
	}
	for _, m := range members {
		if m.key != "grants" {
			continue
		}
		switch {
		case data[m.valStart] == '[' && len(m.elemStarts) > 0:
			n := len(m.elemStarts) - 1
			sep := string(data[m.elemSeps[n][0]:m.elemSeps[n][1]])
			var js string
			var err error
			if i := strings.LastIndexByte(sep, '\n'); i >= 0 && unit != "" {
				js, err = marshalGrantJSON(g, strings.TrimRight(sep[i+1:], "\r"), unit)
				js = strings.ReplaceAll(js, "\n", nl)
			} else {
				js, err = compactGrantJSON(g)
			}
			if err != nil {
				return nil, err
			}
			return splice(m.elemEnds[n], m.elemEnds[n], ","+sep+js), nil
		case data[m.valStart] == '[' || bytes.Equal(data[m.valStart:m.valEnd], []byte("null")):
			s, err := array(lineIndent(data, m.keyStart))
			if err != nil {
				return nil, err
			}
			return splice(m.valStart, m.valEnd, s), nil
		}
		return nil, errors.New("grants is not a list")
	}
	// No grants member: one more member after the last.
	if len(members) == 0 {
		return nil, errors.New("the file's object is empty (want version: 1)")
	}
	last := members[len(members)-1]
	sep := string(data[last.sepStart:last.sepEnd])
	s, err := array(lineIndent(data, last.keyStart))
	if err != nil {
		return nil, err
	}
	_ = closing
	return splice(last.valEnd, last.valEnd, ","+sep+`"grants": `+s), nil
}
