package grantfile

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
	"golang.org/x/text/width"
)

// This file holds the look-alike checks `grants lint` runs on the subject, issuer and
// owner ids of grants (security issue 20, item 10), after Unicode Technical Standard #39
// (Unicode Security Mechanisms):
//
//   - Mixed scripts (TR39 §5.1): each character's script, from the standard library's
//     Unicode script tables (unicode.Scripts), Common and Inherited ignored, with TR39's
//     augmented sets: Han goes with Hiragana and Katakana (Japanese), with Hangul
//     (Korean) and with Bopomofo. An id whose characters share no script is mixed, such
//     as "аlice" (a Cyrillic а among Latin letters). Script_Extensions are not
//     consulted (the standard library has no table of them), so a character used by
//     several scripts counts as its Script value only.
//   - Look-alike characters (TR39 §4, confusables.txt): a character outside ASCII whose
//     prototype in Unicode's confusables.txt is ASCII, from the modest table below, or a
//     fullwidth form (width folding, golang.org/x/text/width), such as "һelper" or
//     "ａｌｉｃｅ". They are reported in an id that mixes scripts, or in one that reads
//     wholly as ASCII once they are replaced (TR39's whole-script confusable: "ѕео" is
//     Cyrillic throughout and reads as "seo"); "иван" holds a Cyrillic а but reads as
//     no Latin id, so it is not reported.
//   - Skeletons (TR39 §4): NFD, then each character replaced by its prototype (the table
//     below, with confusables.txt's ASCII entries 0 → O, 1 → l, I → l, | → l, m → rn),
//     then NFD again. Two different ids of one kind with the same skeleton ("he1per" and
//     "helper") are reported as look-alikes of each other.
//
// The table is a subset of confusables.txt (Unicode 10.0 onward; these entries are
// unchanged since), kept to the single characters that stand in for ASCII letters and
// digits in Cyrillic, Greek, Armenian and Latin's own extensions. It is not the whole
// file: a character outside it is not reported unless the script check catches it.
// Built on first use: a package-level map literal is built at start-up by every process.
var confusables = sync.OnceValue(func() map[rune]string {
	return map[rune]string{
		// ASCII (skeleton only; never reported on their own)
		'0': "O", '1': "l", 'I': "l", '|': "l", 'm': "rn",
		// Latin extensions
		'ı': "i", 'ɑ': "a", 'ɡ': "g", 'ɩ': "i", 'ɪ': "i", 'ʋ': "u", 'ſ': "f", 'ǀ': "l",
		// Greek
		'Α': "A", 'Β': "B", 'Ε': "E", 'Ζ': "Z", 'Η': "H", 'Ι': "l", 'Κ': "K", 'Μ': "M", 'Ν': "N",
		'Ο': "O", 'Ρ': "P", 'Τ': "T", 'Υ': "Y", 'Χ': "X",
		'α': "a", 'γ': "y", 'ι': "i", 'ν': "v", 'ο': "o", 'ρ': "p", 'σ': "o", 'υ': "u", 'ϲ': "c", 'ϳ': "j",
		// Cyrillic
		'Ѕ': "S", 'І': "l", 'Ј': "J", 'А': "A", 'В': "B", 'Е': "E", 'К': "K", 'М': "M", 'Н': "H",
		'О': "O", 'Р': "P", 'С': "C", 'Т': "T", 'Х': "X", 'Ү': "Y", 'Ӏ': "l", 'Ԝ': "W",
		'а': "a", 'е': "e", 'о': "o", 'р': "p", 'с': "c", 'у': "y", 'х': "x", 'ѕ': "s", 'і': "i",
		'ј': "j", 'ѡ': "w", 'ѵ': "v", 'ү': "y", 'һ': "h", 'ҽ': "e", 'ӏ': "i", 'ԁ': "d", 'ԛ': "q", 'ԝ': "w",
		// Armenian
		'Ս': "U", 'Տ': "S", 'Օ': "O", 'հ': "h", 'ո': "n", 'ս': "u", 'ց': "g", 'օ': "o",
	}
})

// skeleton is id's TR39 skeleton over the table above (and width folding).
func skeleton(id string) string {
	s := norm.NFD.String(width.Fold.String(id))
	var b strings.Builder
	for _, r := range s {
		if p, ok := confusables()[r]; ok {
			b.WriteString(p)
		} else {
			b.WriteRune(r)
		}
	}
	return norm.NFD.String(b.String())
}

// lookAlikes lists the characters of id that stand in for ASCII: outside ASCII, with an
// ASCII prototype in the table, or changed by width folding.
func lookAlikes(id string) []string {
	var out []string
	seen := map[rune]bool{}
	for _, r := range id {
		if r < utf8.RuneSelf || seen[r] {
			continue
		}
		p, ok := confusables()[r]
		if !ok {
			if f := width.Fold.String(string(r)); f != string(r) {
				p, ok = f, true
			}
		}
		if ok {
			seen[r] = true
			out = append(out, fmt.Sprintf("%q (U+%04X) looks like %q", string(r), r, p))
		}
	}
	return out
}

// augmented are TR39's augmented script sets: the scripts a character of a script also
// counts as (Han is also Japanese, Korean and Han-with-Bopomofo writing).
var augmented = sync.OnceValue(func() map[string][]string {
	return map[string][]string{
		"Han":      {"Han", "Jpan", "Kore", "Hanb"},
		"Hiragana": {"Hiragana", "Jpan"},
		"Katakana": {"Katakana", "Jpan"},
		"Hangul":   {"Hangul", "Kore"},
		"Bopomofo": {"Bopomofo", "Hanb"},
	}
})

// scriptOf is the name of r's script in the standard library's tables ("" when none).
func scriptOf(r rune) string {
	if r < utf8.RuneSelf {
		if unicode.IsLetter(r) {
			return "Latin"
		}
		return "Common"
	}
	for name, t := range unicode.Scripts {
		if unicode.Is(t, r) {
			return name
		}
	}
	return ""
}

// mixedScripts returns the scripts of id, sorted, when they have no script in common
// (TR39's resolved script set is empty); nil otherwise.
func mixedScripts(id string) []string {
	var names, common []string
	first := true
	for _, r := range id {
		name := scriptOf(r)
		if name == "" || name == "Common" || name == "Inherited" || slices.Contains(names, name) {
			continue
		}
		names = append(names, name)
		set, ok := augmented()[name]
		if !ok {
			set = []string{name}
		}
		if first {
			common, first = slices.Clone(set), false
			continue
		}
		common = slices.DeleteFunc(common, func(s string) bool { return !slices.Contains(set, s) })
	}
	if first || len(common) > 0 {
		return nil
	}
	slices.Sort(names)
	return names
}

// reading is id as it reads: each look-alike character replaced by the ASCII it stands
// in for (ASCII itself is kept).
func reading(id string) string {
	var b strings.Builder
	for _, r := range width.Fold.String(id) {
		if p, ok := confusables()[r]; ok && r >= utf8.RuneSelf {
			b.WriteString(p)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// idProblem is the warning about one id of a grant ("" when it reads as what it is).
func idProblem(id string) string {
	var parts []string
	mixed := mixedScripts(id)
	if mixed != nil {
		parts = append(parts, "mixes scripts ("+strings.Join(mixed, ", ")+")")
	}
	// Look-alikes count in an id that mixes scripts, or that reads wholly as ASCII (TR39's
	// whole-script confusable, for Latin): "иван" holds a Cyrillic а, yet reads as no
	// Latin id.
	if l := lookAlikes(id); l != nil && (mixed != nil || isASCII(reading(id))) {
		parts = append(parts, "holds look-alike characters: "+strings.Join(l, ", "))
	}
	if parts == nil {
		return ""
	}
	msg := strings.Join(parts, "; it ")
	if r := reading(id); r != id {
		msg += fmt.Sprintf(" (it reads as %q)", r)
	}
	return msg
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
