// Package jscompat holds the JavaScript-compatible string rules the SharedOS contract is
// defined by (the reference is TypeScript): lengths in UTF-16 code units, String.prototype
// .trim's white space, and an order close to localeCompare. It is not an API of its own:
// the kernel and the planes use it so that every limit and every order matches the
// reference exactly.
package jscompat

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// UTF16Len is the length of s as JavaScript counts it (UTF-16 code units), which is how
// every length limit of the contract is measured.
func UTF16Len(s string) int {
	n := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// IsJSSpace reports whether r is white space for JavaScript's String.prototype.trim and the
// Unicode-aware \s class: the set differs from unicode.IsSpace (U+FEFF yes, U+0085 no).
func IsJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x00a0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000, 0xfeff:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// JSTrim trims s the way JavaScript's String.prototype.trim does.
func JSTrim(s string) string { return strings.TrimFunc(s, IsJSSpace) }

// SortLocale sorts strings in an order close to JavaScript's localeCompare for the
// identifier-like strings the contract sorts: case-insensitive first (ASCII folding),
// lower case before upper case on a tie, then by code point. Non-ASCII letters sort by
// code point, after ASCII — unlike ICU, which would sort "é" with "e"; namespace and
// source names are ASCII in practice.
func SortLocale(s []string) {
	sort.Slice(s, func(i, j int) bool { return LocaleLess(s[i], s[j]) })
}

// LocaleLess is the comparison SortLocale uses.
func LocaleLess(a, b string) bool {
	la, lb := foldLower(a), foldLower(b)
	if la != lb {
		return la < lb
	}
	if a == b {
		return false
	}
	// tertiary: lower case first
	ra, rb := []rune(a), []rune(b)
	for i := 0; i < len(ra) && i < len(rb); i++ {
		if ra[i] != rb[i] {
			return ra[i] > rb[i]
		}
	}
	return len(ra) < len(rb)
}

func foldLower(s string) string {
	b := []byte(s)
	ascii := true
	for i, c := range b {
		if c >= 0x80 {
			ascii = false
			break
		}
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 32
		}
	}
	if ascii {
		return string(b)
	}
	out := []rune(s)
	for i, r := range out {
		if 'A' <= r && r <= 'Z' {
			out[i] = r + 32
		}
	}
	return string(out)
}
