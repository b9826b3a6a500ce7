package grantfile

import (
	"strconv"
	"strings"
)

// Error reports why a grant file (or a set of them) was refused. File is the name the
// file was loaded under; Grant is the id of the offending grant when it has one; Field is
// a dotted JSON path — relative to the grant when Grant is set ("capabilities.0.actions"),
// otherwise from the document root ("grants.3", "context.actor", "version"); Line is the
// 1-based line of that field (or of the grant, or of the syntax error) when known, else 0.
// Error values render as one line, e.g.
//
//	grants.yaml:12: grant "g-read": capabilities.0.resource.path.1: path segment ".." is a traversal marker
type Error struct {
	File    string
	Grant   string
	Field   string
	Line    int
	Message string

	cause error
}

// Error renders e as one line, omitting the parts that are empty or zero.
func (e *Error) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		b.WriteString(oneLine(e.File) + ":" + strconv.Itoa(e.Line) + ": ")
	case e.File != "":
		b.WriteString(oneLine(e.File) + ": ")
	case e.Line > 0:
		b.WriteString("line " + strconv.Itoa(e.Line) + ": ")
	}
	if e.Grant != "" {
		b.WriteString("grant " + strconv.Quote(e.Grant) + ": ")
	}
	if e.Field != "" {
		b.WriteString(oneLine(e.Field) + ": ")
	}
	b.WriteString(oneLine(e.Message))
	return b.String()
}

// oneLine quotes s when it holds a line break or another control character (a field
// path is built from the file's own keys), so an error always renders as one line.
func oneLine(s string) string {
	if strings.IndexFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029 }) < 0 {
		return s
	}
	return strconv.Quote(s)
}

// Unwrap returns the underlying cause, if any: an I/O error from reading the file
// (errors.Is(err, fs.ErrNotExist) works), the kernel's *kernel.ContractError
// (errors.Is(err, kernel.ErrContract) works) or ErrContextConflict.
func (e *Error) Unwrap() error { return e.cause }
