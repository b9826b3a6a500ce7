package repoplane

import (
	"bytes"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// This file is git's built-in end-of-line conversion in the direction git applies when
// it reads the working tree (convert_to_git: status, diff and add), decided from the
// text, eol and crlf attributes and core.autocrlf. It is data only: no filter or other
// program is involved. (core.eol and the eol attribute's crlf choice only shape
// checkout, which sharedos never does, so they matter here only in making a file text.)

// crlfAction is git's convert_crlf_action.
type crlfAction int

const (
	crlfBinary    crlfAction = iota // no conversion
	crlfText                        // text: CRLF becomes LF
	crlfTextInput                   // text, eol=lf
	crlfTextCRLF                    // text, eol=crlf
	crlfAuto                        // text=auto: CRLF becomes LF unless the file looks binary or the index has CRLF
	crlfAutoInput
	crlfAutoCRLF
)

// autocrlf values (core.autocrlf).
const (
	autocrlfFalse = iota
	autocrlfTrue
	autocrlfInput
)

func (a crlfAction) auto() bool { return a == crlfAuto || a == crlfAutoInput || a == crlfAutoCRLF }

// crlfActionOf decides the conversion of a path from its attributes and core.autocrlf,
// as git's convert_attrs does: text (or the legacy crlf) first, then eol, which makes a
// file text by itself, then core.autocrlf for files whose attributes say nothing.
func crlfActionOf(at fileAttrs, autocrlf int) crlfAction {
	action, undefined := textAttrAction(at.text)
	if undefined {
		action, undefined = textAttrAction(at.crlf)
	}
	if undefined || action != crlfBinary {
		eol := ""
		if at.eol.set && !at.eol.unset {
			eol = at.eol.value
		}
		switch {
		case !undefined && action == crlfAuto && eol == "lf":
			action = crlfAutoInput
		case !undefined && action == crlfAuto && eol == "crlf":
			action = crlfAutoCRLF
		case eol == "lf":
			action, undefined = crlfTextInput, false
		case eol == "crlf":
			action, undefined = crlfTextCRLF, false
		}
	}
	if undefined {
		switch autocrlf {
		case autocrlfTrue:
			return crlfAutoCRLF
		case autocrlfInput:
			return crlfAutoInput
		}
		return crlfBinary
	}
	return action
}

// textAttrAction maps the text (or legacy crlf) attribute; undefined when it is
// unspecified or has a value git does not know.
func textAttrAction(s attrState) (crlfAction, bool) {
	switch {
	case !s.set:
		return 0, true
	case s.unset:
		return crlfBinary, false
	case s.value == "":
		return crlfText, false
	case s.value == "input":
		return crlfTextInput, false
	case s.value == "auto":
		return crlfAuto, false
	}
	return 0, true
}

// textStats are git's gather_stats counts.
type textStats struct {
	nul, loneCR, loneLF, crlf, printable, nonPrintable int
}

func gatherStats(b []byte) textStats {
	var s textStats
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\r':
			if i+1 < len(b) && b[i+1] == '\n' {
				s.crlf++
				i++
			} else {
				s.loneCR++
			}
		case c == '\n':
			s.loneLF++
		case c == 127:
			s.nonPrintable++
		case c < 32:
			switch c {
			case '\b', '\t', 0x1b, 0x0c:
				s.printable++
			case 0:
				s.nul++
				s.nonPrintable++
			default:
				s.nonPrintable++
			}
		default:
			s.printable++
		}
	}
	// a file ending in ^Z (DOS end of file) does not count it
	if len(b) > 0 && b[len(b)-1] == 0x1a {
		s.nonPrintable--
	}
	return s
}

// looksBinary is git's convert_is_binary (text=auto's guess).
func (s textStats) looksBinary() bool {
	return s.loneCR > 0 || s.nul > 0 || (s.printable>>7) < s.nonPrintable
}

// hasCRLFText reports whether data is text (by git's guess) with CRLF line endings —
// git's has_crlf_in_index test on the index's copy of a file.
func hasCRLFText(data []byte) bool {
	if bytes.IndexByte(data, '\r') < 0 {
		return false
	}
	s := gatherStats(data)
	return !s.looksBinary() && s.crlf > 0
}

// toGit converts working-tree content to what git stores (crlf_to_git). indexCRLF
// reports, lazily, whether the index's copy of the file is text with CRLF (then
// text=auto leaves the file alone, git's "safer autocrlf"). It returns data itself when
// nothing changes.
func toGit(data []byte, action crlfAction, indexCRLF func() bool) []byte {
	if action == crlfBinary || len(data) == 0 || bytes.IndexByte(data, '\r') < 0 {
		return data
	}
	s := gatherStats(data)
	if s.crlf == 0 {
		return data
	}
	if action.auto() {
		if s.looksBinary() || indexCRLF != nil && indexCRLF() {
			return data
		}
		// no lone CR here (that would look binary): drop every CR
		return bytes.ReplaceAll(data, []byte("\r"), nil)
	}
	return bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
}

// parseAutocrlf reads core.autocrlf (a boolean or "input").
func parseAutocrlf(v string) int {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "input":
		return autocrlfInput
	case "", "true", "yes", "on", "1":
		return autocrlfTrue
	}
	return autocrlfFalse
}

// conversion returns how the working-tree file path is converted when read, and
// whether the diff attribute forces binary (-diff) or text (diff, diff=driver).
func (r *repo) conversion(path string) (crlfAction, fileAttrs) {
	at := r.attributes().lookup(path)
	return crlfActionOf(at, r.autocrlf), at
}

// indexHasCRLF returns the lazy has_crlf_in_index test for path.
func (r *repo) indexHasCRLF(path string) func() bool {
	return func() bool {
		e := r.indexEntry(path)
		if e == nil || e.mode == modeSymlink || e.mode == modeGitlink {
			return false
		}
		data, err := r.readBlobLimited(plumbing.Hash(e.hash), maxTextBytes)
		return err == nil && hasCRLFText(data)
	}
}
