package repoplane

// This file is git's wildmatch (the matcher of .gitignore, .gitattributes and glob
// pathspecs), written from its documented semantics: "*" and "?" never match "/" when
// wmPathname is set, "**" does when it stands for whole components ("**/", "/**/",
// "/**"), "[...]" classes with ranges, "!" or "^" negation and [:name:] classes, and
// "\" escaping the next character. Bytes are compared, not characters, as git does.

const wmPathname = 1 // "*" and "?" do not match "/"; "**" is special

type wmResult int

const (
	wmMatch wmResult = iota
	wmNoMatch
	wmAbortAll        // the text ran out: no shorter text can match either
	wmAbortToStarStar // a "/" stopped a single "*": only an outer "**" may go on
)

// wildmatch reports whether text matches pattern.
func wildmatch(pattern, text string, flags int) bool {
	return doWild(pattern, 0, text, 0, flags) == wmMatch
}

func isGlobSpecial(c byte) bool { return c == '*' || c == '?' || c == '[' || c == '\\' }

func doWild(p string, pi int, t string, ti int, flags int) wmResult {
	pathname := flags&wmPathname != 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pc := p[pi]
		if ti >= len(t) && pc != '*' {
			return wmAbortAll
		}
		var tc byte
		if ti < len(t) {
			tc = t[ti]
		}
		switch pc {
		case '\\':
			// the next byte literally; a trailing "\" matches nothing
			pi++
			if pi >= len(p) || tc != p[pi] {
				return wmNoMatch
			}
			continue
		case '?':
			if pathname && tc == '/' {
				return wmNoMatch
			}
			continue
		case '*':
			matchSlash := false
			pi++
			if pi < len(p) && p[pi] == '*' {
				prev := pi - 2
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if !pathname {
					matchSlash = true
				} else if (prev < 0 || p[prev] == '/') &&
					(pi == len(p) || p[pi] == '/' || p[pi] == '\\' && pi+1 < len(p) && p[pi+1] == '/') {
					// "**/" may also match nothing at all: "a/**/b" matches "a/b"
					if pi < len(p) && p[pi] == '/' && doWild(p, pi+1, t, ti, flags) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				}
			} else {
				matchSlash = !pathname
			}
			if pi == len(p) {
				// a trailing "**" matches everything, a trailing "*" the rest of
				// one component
				if !matchSlash {
					for k := ti; k < len(t); k++ {
						if t[k] == '/' {
							return wmNoMatch
						}
					}
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				// one "*" then "/": skip to the end of this component
				k := ti
				for k < len(t) && t[k] != '/' {
					k++
				}
				if k == len(t) {
					return wmNoMatch
				}
				ti = k
				continue // the loop steps over the "/" in both
			}
			for {
				if ti >= len(t) {
					break
				}
				if !isGlobSpecial(p[pi]) {
					// a literal follows: everything before its next occurrence
					// belongs to the star
					want := p[pi]
					for ti < len(t) && (matchSlash || t[ti] != '/') && t[ti] != want {
						ti++
					}
					if ti >= len(t) || t[ti] != want {
						return wmNoMatch
					}
				}
				m := doWild(p, pi, t, ti, flags)
				if m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && t[ti] == '/' {
					return wmAbortToStarStar
				}
				ti++
			}
			return wmAbortAll
		case '[':
			pi++
			if pi >= len(p) {
				return wmAbortAll
			}
			pc = p[pi]
			if pc == '^' {
				pc = '!'
			}
			negated := pc == '!'
			if negated {
				pi++
				if pi >= len(p) {
					return wmAbortAll
				}
				pc = p[pi]
			}
			var prev byte
			matched := false
			for {
				// the first byte of a class is literal, even "]"
				switch {
				case pc == '\\':
					pi++
					if pi >= len(p) {
						return wmAbortAll
					}
					pc = p[pi]
					if tc == pc {
						matched = true
					}
				case pc == '-' && prev != 0 && pi+1 < len(p) && p[pi+1] != ']':
					pi++
					pc = p[pi]
					if pc == '\\' {
						pi++
						if pi >= len(p) {
							return wmAbortAll
						}
						pc = p[pi]
					}
					if tc <= pc && tc >= prev {
						matched = true
					}
					pc = 0 // a range cannot start a range
				case pc == '[' && pi+1 < len(p) && p[pi+1] == ':':
					s := pi + 2
					k := s
					for k < len(p) && p[k] != ']' {
						k++
					}
					if k >= len(p) {
						return wmAbortAll
					}
					if k-s-1 < 0 || p[k-1] != ':' {
						// no ":]": an ordinary "["
						if tc == '[' {
							matched = true
						}
						pc = '['
						break
					}
					in, ok := charClass(p[s:k-1], tc)
					if !ok {
						return wmAbortAll // malformed [:class:]
					}
					if in {
						matched = true
					}
					pi = k
					pc = 0
				default:
					if tc == pc {
						matched = true
					}
				}
				prev = pc
				pi++
				if pi >= len(p) {
					return wmAbortAll
				}
				pc = p[pi]
				if pc == ']' {
					break
				}
			}
			if matched == negated || pathname && tc == '/' {
				return wmNoMatch
			}
			continue
		default:
			if tc != pc {
				return wmNoMatch
			}
			continue
		}
	}
	if ti < len(t) {
		return wmNoMatch
	}
	return wmMatch
}

// charClass evaluates a POSIX class name for one byte (C locale); ok is false for an
// unknown name.
func charClass(name string, c byte) (in, ok bool) {
	upper := c >= 'A' && c <= 'Z'
	lower := c >= 'a' && c <= 'z'
	digit := c >= '0' && c <= '9'
	switch name {
	case "alnum":
		return upper || lower || digit, true
	case "alpha":
		return upper || lower, true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return digit, true
	case "graph":
		return c > 0x20 && c < 0x7f, true
	case "lower":
		return lower, true
	case "print":
		return c >= 0x20 && c < 0x7f, true
	case "punct":
		return c > 0x20 && c < 0x7f && !upper && !lower && !digit, true
	case "space":
		return c == ' ' || c == '\t' || c == '\n' || c == '\r', true
	case "upper":
		return upper, true
	case "xdigit":
		return digit || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F', true
	}
	return false, false
}
