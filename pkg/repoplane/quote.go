package repoplane

import "strings"

// cQuote is git's quote_c_style for a name in a patch header: a name holding a double
// quote, a backslash, a control character or DEL (and, with core.quotePath on, git's
// default, any byte from 0x80) is written in double quotes with C escapes (\t, \n, \",
// \\, \ooo…); any other name is written as it is. Because every byte that could end a
// header line or start a forged one is escaped, an agent-chosen file name can never
// inject lines into a patch.
func cQuote(s string, full bool) string {
	need := false
	for i := 0; i < len(s); i++ {
		if quoteByte(s[i], full) {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !quoteByte(c, full) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('\\')
		switch c {
		case '\a':
			b.WriteByte('a')
		case '\b':
			b.WriteByte('b')
		case '\t':
			b.WriteByte('t')
		case '\n':
			b.WriteByte('n')
		case '\v':
			b.WriteByte('v')
		case '\f':
			b.WriteByte('f')
		case '\r':
			b.WriteByte('r')
		case '"', '\\':
			b.WriteByte(c)
		default:
			b.WriteByte('0' + c>>6)
			b.WriteByte('0' + c>>3&7)
			b.WriteByte('0' + c&7)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func quoteByte(c byte, full bool) bool {
	return c < 0x20 || c == '"' || c == '\\' || c == 0x7f || full && c >= 0x80
}
