package fsplane

import (
	"unicode/utf8"
)

// DefaultMaxOutputBytes is the output budget of list, grep and search (and the least
// budget of read) when ProviderOptions.MaxOutputBytes is 0: the size of the output
// once encoded as JSON, measured as encoding/json writes it (with its HTML escapes).
const DefaultMaxOutputBytes = 1 << 20

// jsonStringLen is the length of s encoded by encoding/json as a JSON string, quotes
// included: a byte that is not UTF-8 becomes \ufffd (6 bytes), control characters
// \n \r \t \b \f take 2 bytes and the others 6, as do <, >, &, U+2028 and U+2029 (escaped
// for HTML); '"' and '\' take 2.
func jsonStringLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			n += asciiJSONLen(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6 // written as \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

func asciiJSONLen(c byte) int {
	switch c {
	case '"', '\\', '\n', '\r', '\t', '\b', '\f':
		return 2
	case '<', '>', '&':
		return 6
	}
	if c < 0x20 {
		return 6
	}
	return 1
}

// jsonStringsLen is the encoded length of a JSON array of strings.
func jsonStringsLen(ss []string) int {
	n := 2
	for i, s := range ss {
		if i > 0 {
			n++
		}
		n += jsonStringLen(s)
	}
	return n
}

// cutToJSONBudget returns the longest prefix of s, ending at a character boundary,
// whose JSON encoding takes at most budget bytes, and whether it is shorter than s.
func cutToJSONBudget(s string, budget int) (string, bool) {
	n := 2
	for i := 0; i < len(s); {
		c := s[i]
		w, size := 0, 1
		if c < utf8.RuneSelf {
			w = asciiJSONLen(c)
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				w = 6
			case r == '\u2028' || r == '\u2029':
				w = 6
			default:
				w = size
			}
		}
		if n+w > budget {
			return s[:i], true
		}
		n += w
		i += size
	}
	return s, false
}

// grepMatchJSONLen is the encoded size of a grep match (an upper bound within a few
// bytes: the optional flags are counted as present).
func grepMatchJSONLen(m *GrepMatch) int {
	return 128 + jsonStringsLen(m.Path) + jsonStringLen(m.Text) + jsonStringsLen(m.Context)
}

// searchHitJSONLen is the encoded size of a search hit (an upper bound).
func searchHitJSONLen(h *SearchHit) int {
	return 128 + jsonStringsLen(h.Path) + jsonStringLen(h.Excerpt) + len(h.Version)
}

// listEntryJSONLen is the encoded size of a list entry (an upper bound).
func listEntryJSONLen(e *ListEntry) int {
	return 48 + jsonStringLen(e.Name) + len(e.Kind)
}

// fitGrepMatch makes m fit in budget bytes by dropping context lines, farthest from
// the matching line first (and marking it truncated). It reports whether m fits.
func fitGrepMatch(m *GrepMatch, budget int) bool {
	size := grepMatchJSONLen(m)
	if size <= budget {
		return true
	}
	at, ctx := m.at, m.Context
	lo, hi := 0, len(ctx)
	for size > budget && hi-lo > 1 {
		// Drop the line farther from the match.
		if at-lo >= hi-1-at {
			size -= jsonStringLen(ctx[lo]) + 1
			lo++
		} else {
			hi--
			size -= jsonStringLen(ctx[hi]) + 1
		}
		m.Truncated = true
	}
	m.Context = ctx[lo:hi]
	m.at = -1 // trimmed (the caller stops here: the budget is spent)
	return size <= budget
}
