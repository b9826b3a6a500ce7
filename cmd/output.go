package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
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

// writeYAML renders v's JSON form as block YAML, keeping the JSON key order.
func writeYAML(w io.Writer, v any) error {
	b, err := marshalJSON(v)
	if err != nil {
		return internalError(fmt.Errorf("encode output: %w", err))
	}
	var n yaml.Node
	if err := yaml.Unmarshal(b, &n); err != nil {
		return internalError(fmt.Errorf("encode output as yaml: %w", err))
	}
	blockStyle(&n)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return internalError(fmt.Errorf("encode output as yaml: %w", err))
	}
	return enc.Close()
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
	header, ok, bad, warn, dim, bold lipgloss.Style
}

func (p *printer) st() *styles {
	if p.styles != nil {
		return p.styles
	}
	r := lipgloss.NewRenderer(p.ios.Out)
	if p.color {
		r.SetColorProfile(termenv.ANSI)
	} else {
		r.SetColorProfile(termenv.Ascii)
	}
	p.styles = &styles{
		header: r.NewStyle().Bold(true),
		ok:     r.NewStyle().Foreground(lipgloss.Color("2")),
		bad:    r.NewStyle().Foreground(lipgloss.Color("1")),
		warn:   r.NewStyle().Foreground(lipgloss.Color("3")),
		dim:    r.NewStyle().Faint(true),
		bold:   r.NewStyle().Bold(true),
	}
	return p.styles
}

// table collects rows and prints them: aligned with a header on a terminal, plain
// tab-separated without a header when piped (cli/cli's convention). On a terminal the
// table fits its width: only the flexible column (the last free-text one, e.g. a
// description) is cut, with "…"; piped output is never cut.
type table struct {
	p      *printer
	header []string
	rows   [][]cell
	flex   int // index of the flexible column; -1: none
}

// minFlexWidth is the narrowest a flexible column is cut to; below that the row wraps.
const minFlexWidth = 12

// flexible marks column i as the one to cut when the table is wider than the terminal.
func (t *table) flexible(i int) *table { t.flex = i; return t }

type cell struct {
	text  string
	style *lipgloss.Style
}

func (p *printer) table(header ...string) *table { return &table{p: p, header: header, flex: -1} }

// row adds a row of plain cells.
func (t *table) row(cols ...string) {
	r := make([]cell, len(cols))
	for i, c := range cols {
		r[i] = cell{text: c}
	}
	t.rows = append(t.rows, r)
}

// rowCells adds a row of (possibly styled) cells.
func (t *table) rowCells(cells ...cell) { t.rows = append(t.rows, cells) }

func (t *table) render() error {
	w := t.p.ios.Out
	var b strings.Builder
	if !t.p.ios.StdoutTTY {
		for _, r := range t.rows {
			for i, c := range r {
				if i > 0 {
					b.WriteByte('\t')
				}
				b.WriteString(t.p.styled(c))
			}
			b.WriteByte('\n')
		}
		_, err := io.WriteString(w, b.String())
		return err
	}
	widths := make([]int, len(t.header))
	for i, h := range t.header {
		widths[i] = lipgloss.Width(h)
	}
	for _, r := range t.rows {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], lipgloss.Width(c.text))
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
		for i, c := range cells {
			if i == t.flex && lipgloss.Width(c.text) > widths[i] {
				c.text = truncate(c.text, widths[i])
			}
			text := c.text
			if header {
				text = st.header.Render(text)
			} else {
				text = t.p.styled(c)
			}
			b.WriteString(text)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-lipgloss.Width(c.text)+2))
			}
		}
		b.WriteByte('\n')
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

// truncate cuts s to width display cells, ending in "…".
func truncate(s string, width int) string {
	if width < 1 {
		return ""
	}
	out := []rune{}
	w := 0
	for _, r := range s {
		rw := lipgloss.Width(string(r))
		if w+rw > width-1 {
			break
		}
		out = append(out, r)
		w += rw
	}
	return string(out) + "…"
}

func (p *printer) styled(c cell) string {
	if c.style == nil || !p.color {
		return c.text
	}
	return c.style.Render(c.text)
}

// line writes one line of human output.
func (p *printer) line(format string, args ...any) {
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
