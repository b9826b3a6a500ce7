package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"go.yaml.in/yaml/v3"
)

// Output formats of -o/--output.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// parseFormat validates an --output value ("" means the default); "yml" is yaml. The
// error names where the value came from: --output, SHAREDOS_OUTPUT or the config file.
func parseFormat(s string) (string, error) { return parseFormatFrom(s, "--output") }

func parseFormatFrom(s, source string) (string, error) {
	switch s {
	case FormatTable, FormatJSON, FormatYAML:
		return s, nil
	case "yml":
		return FormatYAML, nil
	}
	msg := fmt.Sprintf("invalid value %q for %s: want table, json or yaml", s, source)
	if c := closest(s, []string{FormatTable, FormatJSON, FormatYAML}); c != "" {
		msg += fmt.Sprintf("; did you mean %s?", c)
	}
	return "", usageError("use -o table, -o json or -o yaml", "%s", msg)
}

// defaultFormat is table on a terminal and json otherwise.
func defaultFormat(ios *IOStreams) string {
	if ios.StdoutTTY {
		return FormatTable
	}
	return FormatJSON
}

// printer writes a command's result in the chosen format.
type printer struct {
	ios    *IOStreams
	format string
	color  bool
	styles *styles
}

func newPrinter(ios *IOStreams, format string, color bool) *printer {
	return &printer{ios: ios, format: format, color: color}
}

// data prints v as JSON or YAML. It is not used for tables.
func (p *printer) data(v any) error {
	if p.format == FormatYAML {
		return writeYAML(p.ios.Out, v)
	}
	return writeJSON(p.ios.Out, v)
}

func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(w io.Writer, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return internalError(fmt.Errorf("encode output: %w", err))
	}
	_, err = w.Write(b)
	return err
}

// writeYAML renders v's JSON form as block YAML, keeping the JSON key order. It never
// fails on content (it runs after a call took effect): text the YAML encoder will not
// write (C1 controls and the like) makes it write the document as indented JSON instead,
// which is YAML too.
func writeYAML(w io.Writer, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return internalError(fmt.Errorf("encode output: %w", err))
	}
	var out bytes.Buffer
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err == nil {
		blockStyle(&n)
		enc := yaml.NewEncoder(&out)
		enc.SetIndent(2)
		if enc.Encode(&n) == nil && enc.Close() == nil && sameDocument(out.Bytes(), b) {
			_, err := w.Write(out.Bytes())
			return err
		}
	}
	// JSON is YAML once the characters YAML refuses even in quoted strings (DEL and
	// the C1 controls, which encoding/json writes raw) are escaped.
	var esc bytes.Buffer
	if err := json.Indent(&esc, yamlSafeJSON(b), "", "  "); err != nil {
		return internalError(fmt.Errorf("encode output: %w", err))
	}
	esc.WriteByte('\n')
	_, err = w.Write(esc.Bytes())
	return err
}

// sameDocument reports whether the YAML document y reads back as the JSON document j
// (the encoder folds some characters, U+0085 for one, when it writes block scalars).
func sameDocument(y, j []byte) bool {
	var yv, jv any
	if yaml.Unmarshal(y, &yv) != nil || json.Unmarshal(j, &jv) != nil {
		return false
	}
	yb, err1 := json.Marshal(yv)
	jb, err2 := json.Marshal(jv)
	return err1 == nil && err2 == nil && bytes.Equal(yb, jb)
}

// yamlSafeJSON escapes DEL and the C1 controls of a JSON document (they only occur in
// its strings) as \u00XX.
func yamlSafeJSON(b []byte) []byte {
	var out bytes.Buffer
	for _, r := range string(b) {
		if r == 0x7f || (r >= 0x80 && r < 0xa0) {
			fmt.Fprintf(&out, `\u%04x`, r)
			continue
		}
		out.WriteRune(r)
	}
	return out.Bytes()
}

// blockStyle clears the flow and quoting styles a JSON document parses with, so the
// encoder picks plain block YAML (quoting only where a string needs it).
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// styles are the few text styles of table output; all plain without colour.
type styles struct {
	header, ok, bad, warn, dim, bold textStyle
}

func (p *printer) st() *styles {
	if p.styles != nil {
		return p.styles
	}
	sgr := func(code string) textStyle {
		if !p.color {
			return textStyle{}
		}
		return textStyle{sgr: code}
	}
	p.styles = &styles{
		header: sgr("1"),
		ok:     sgr("32"),
		bad:    sgr("31"),
		warn:   sgr("33"),
		dim:    sgr("2"),
		bold:   sgr("1"),
	}
	return p.styles
}

// textStyle is one SGR attribute (bold, faint or a foreground colour of the 8 ANSI
// ones), or none. It writes what the terminal-styling library it replaced wrote (issue
// 28: that library's package initialisation, a parser table built in every process, was
// the second largest of `sharedos version`): tabs as four spaces, CR LF as LF, each line
// wrapped in ESC[<sgr>m … ESC[0m (with no attribute, colour off: as is), and the lines
// of a text of several padded with spaces to the widest.
type textStyle struct{ sgr string }

// Render styles s.
func (st textStyle) Render(s string) string {
	s = strings.ReplaceAll(s, "\t", "    ")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if !strings.Contains(s, "\n") {
		if st.sgr == "" {
			return s
		}
		return "\x1b[" + st.sgr + "m" + s + "\x1b[0m"
	}
	// Several lines: each styled, then padded with plain spaces to the widest.
	lines := strings.Split(s, "\n")
	widest := textWidth(s)
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte('\n')
		}
		if st.sgr != "" {
			b.WriteString("\x1b[" + st.sgr + "m" + l + "\x1b[0m")
		} else {
			b.WriteString(l)
		}
		b.WriteString(strings.Repeat(" ", widest-textWidth(l)))
	}
	return b.String()
}

// textWidth is the number of terminal cells s takes: the widest of its lines, each line
// the sum of its grapheme clusters' widths (East Asian wide characters and emoji two
// cells, combining marks none), printable ASCII one cell each and other C0 controls
// none. It is the measure of the styling library it replaced for text without escape
// sequences, which is all it is given: cell text is escaped (escapeText) before it is
// measured.
func textWidth(s string) int {
	width := 0
	for _, l := range strings.Split(s, "\n") {
		w := 0
		for i := 0; i < len(l); i++ {
			c := l[i]
			if c < utf8.RuneSelf {
				if c >= 0x20 && c < 0x7f {
					w++
				}
				continue
			}
			cluster, _, cw, _ := uniseg.FirstGraphemeClusterInString(l[i:], -1)
			w += cw
			i += len(cluster) - 1
		}
		width = max(width, w)
	}
	return width
}

// table collects rows and prints them: aligned with a header on a terminal, plain
// tab-separated without a header when piped (cli/cli's convention). On a terminal the
// table fits its width: only the flexible column (the last free-text one, e.g. a
// description) is cut, with "…"; piped output is never cut.
type table struct {
	p      *printer
	header []string
	rows   [][]cell
	flex   int  // index of the flexible column; -1: none
	wrap   bool // the flexible column (the last) wraps onto further lines instead of being cut
}

// minFlexWidth is the narrowest a flexible column is cut to; below that the row wraps.
const minFlexWidth = 12

// flexible marks column i as the one to cut when the table is wider than the terminal.
func (t *table) flexible(i int) *table { t.flex = i; return t }

type cell struct {
	text  string
	style *textStyle
}

func (p *printer) table(header ...string) *table { return &table{p: p, header: header, flex: -1} }

// row adds a row of plain cells. Cell text is escaped (see escapeText): agent-supplied
// names and reasons cannot clear the screen, paint text, or add rows.
func (t *table) row(cols ...string) {
	r := make([]cell, len(cols))
	for i, c := range cols {
		r[i] = cell{text: escapeText(c)}
	}
	t.rows = append(t.rows, r)
}

// rowCells adds a row of (possibly styled) cells, their text escaped.
func (t *table) rowCells(cells ...cell) {
	for i := range cells {
		cells[i].text = escapeText(cells[i].text)
	}
	t.rows = append(t.rows, cells)
}

// escapeText makes text safe for a terminal and for tab-separated output: every C0
// control character (tab and line breaks included), DEL, every C1 control character and
// every byte that is not UTF-8 is written as a Go escape (\t, \n, \x1b, \u0085, \xff),
// and a backslash that would start one is doubled. Text without them is unchanged.
func escapeText(s string) string {
	clean := true
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError || r == '\\' {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	q := strconv.Quote(s) // escapes exactly those, and " (which needs none here)
	q = q[1 : len(q)-1]
	return strings.ReplaceAll(q, `\"`, `"`)
}

// styledText is text already rendered with a style's escape sequences: line leaves it as
// it is, and escapes every other string argument.
type styledText string

func (t *table) render() error {
	w := t.p.ios.Out
	var b strings.Builder
	if !t.p.ios.StdoutTTY {
		for _, r := range t.rows {
			for i, c := range r {
				if i > 0 {
					b.WriteByte('\t')
				}
				b.WriteString(string(t.p.styled(c)))
			}
			b.WriteByte('\n')
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = textWidth(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], textWidth(c.text))
			}
		}
	}
	if t.flex >= 0 && t.flex < len(widths) {
		if tw := t.p.ios.TerminalWidth(); tw > 0 {
			total := 0
			for i, w := range widths {
				total += w
				if i < len(widths)-1 {
					total += 2
				}
			}
			if over := total - tw; over > 0 {
				widths[t.flex] = max(minFlexWidth, widths[t.flex]-over)
			}
		}
	}
	st := t.p.st()
	line := func(cells []cell, header bool) {
		var more []string // wrapped lines of the flexible column after the first
		for i, c := range cells {
			if i == t.flex && textWidth(c.text) > widths[i] {
				if t.wrap && i == len(cells)-1 {
					lines := wordWrap(c.text, widths[i])
					c.text, more = lines[0], lines[1:]
				} else {
					c.text = truncate(c.text, widths[i])
				}
			}
			text := c.text
			if header {
				text = st.header.Render(text)
			} else {
				text = string(t.p.styled(c))
			}
			b.WriteString(text)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-textWidth(c.text)+2))
			}
		}
		b.WriteByte('\n')
		indent := 0
		for i := 0; i < t.flex && i < len(widths); i++ {
			indent += widths[i] + 2
		}
		for _, l := range more {
			b.WriteString(strings.Repeat(" ", indent))
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	hdr := make([]cell, len(t.header))
	for i, h := range t.header {
		hdr[i] = cell{text: h}
	}
	line(hdr, true)
	for _, r := range t.rows {
		line(r, false)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// wrapping makes the flexible column, which must be the last, wrap onto further lines
// (indented to the column) instead of being cut: for messages that must be read whole.
func (t *table) wrapping(i int) *table { t.flex, t.wrap = i, true; return t }

// wordWrap breaks s into lines of at most width display cells, at spaces where it can
// (a word longer than width is broken inside). It returns at least one line.
func wordWrap(s string, width int) []string {
	var lines []string
	cur, curW := "", 0
	flush := func() { lines = append(lines, cur); cur, curW = "", 0 }
	for _, word := range strings.Fields(s) {
		ww := textWidth(word)
		for ww > width { // a word wider than the column: break it
			if curW > 0 {
				flush()
			}
			part, pw := "", 0
			for _, r := range word {
				rw := textWidth(string(r))
				if pw+rw > width {
					break
				}
				part, pw = part+string(r), pw+rw
			}
			if part == "" {
				break
			}
			lines = append(lines, part)
			word, ww = word[len(part):], ww-pw
		}
		switch {
		case curW == 0:
			cur, curW = word, ww
		case curW+1+ww <= width:
			cur, curW = cur+" "+word, curW+1+ww
		default:
			flush()
			cur, curW = word, ww
		}
	}
	if curW > 0 || len(lines) == 0 {
		flush()
	}
	return lines
}

// truncate cuts s to width display cells, ending in "…".
func truncate(s string, width int) string {
	if width < 1 {
		return ""
	}
	out := []rune{}
	w := 0
	for _, r := range s {
		rw := textWidth(string(r))
		if w+rw > width-1 {
			break
		}
		out = append(out, r)
		w += rw
	}
	return string(out) + "…"
}

func (p *printer) styled(c cell) styledText {
	if c.style == nil || !p.color {
		return styledText(c.text)
	}
	return styledText(c.style.Render(c.text))
}

// line writes one line of human output. String arguments are escaped (escapeText), so
// agent-supplied text (an escalation reason, a tool name, an error message) cannot
// forge output; styled text (styledText) is written as rendered.
func (p *printer) line(format string, args ...any) {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = escapeText(v)
		case styledText:
			args[i] = string(v)
		}
	}
	fmt.Fprintf(p.ios.Out, format+"\n", args...)
}

// errorEnvelope is the JSON error object of spec 40 §4.
type errorEnvelope struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// printError reports a command failure on stderr: the JSON envelope with -o json, else
// "sharedos: <message>" and a "hint:" line.
func printError(ios *IOStreams, format string, err error) {
	var ee *ExitError
	if !errors.As(err, &ee) {
		ee = internalError(err)
	}
	if format == FormatJSON {
		var env errorEnvelope
		env.Error.Code = ee.ErrorCode
		env.Error.Message = ee.Message
		b, _ := json.Marshal(env)
		fmt.Fprintln(ios.ErrOut, string(b))
		return
	}
	fmt.Fprintf(ios.ErrOut, "sharedos: %s\n", ee.Message)
	if ee.Hint != "" {
		fmt.Fprintf(ios.ErrOut, "hint: %s\n", ee.Hint)
	}
}

// warn prints a one-line warning on stderr (in every format).
func warn(ios *IOStreams, format string, args ...any) {
	fmt.Fprintf(ios.ErrOut, "sharedos: warning: "+format+"\n", args...)
}

// empty reports an empty listing in table output: on a terminal one sentence instead of
// a bare header; piped, nothing (an empty TSV, as gh prints for no results).
func (p *printer) empty(sentence string) error {
	if p.ios.StdoutTTY {
		p.line("%s", sentence)
	}
	return nil
}
