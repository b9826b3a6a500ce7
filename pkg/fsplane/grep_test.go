package fsplane

import (
	"bytes"
	"fmt"
	"math/rand"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// naiveLines is the reference grep: split into lines, match each on its own.
func naiveLines(in GrepInput, buf []byte) ([]int, bool) {
	if !utf8.ValidString(in.Pattern) {
		return nil, false
	}
	var match func([]byte) bool
	switch {
	case in.Mode == ModeLiteral && in.CaseSensitive:
		match = func(l []byte) bool { return bytes.Contains(l, []byte(in.Pattern)) }
	case in.Mode == ModeLiteral:
		re := regexp.MustCompile("(?i)" + regexp.QuoteMeta(in.Pattern))
		match = re.Match
	default:
		prefix := ""
		if !in.CaseSensitive {
			prefix = "(?i)"
		}
		re, err := regexp.Compile(prefix + in.Pattern)
		if err != nil || strings.Contains(in.Pattern, "\n") {
			return nil, false // a regex holding a literal newline is refused, as rg does
		}
		match = re.Match
	}
	var out []int
	buf = bytes.TrimPrefix(buf, []byte("\ufeff")) // a leading byte order mark is not text
	if len(buf) == 0 {
		return out, true
	}
	lines := bytes.Split(buf, []byte("\n"))
	if buf[len(buf)-1] == '\n' {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		if match(l) {
			out = append(out, i+1)
		}
	}
	return out, true
}

func fastLines(t testing.TB, in GrepInput, buf []byte) ([]int, bool) {
	m, err := newGrepMatcher(in)
	if err != nil {
		return nil, false
	}
	var out []int
	for _, gm := range m.fileMatches([]string{"f"}, buf, 0, 0, 1<<30, 1<<62) {
		out = append(out, gm.Line)
	}
	return out, true
}

func checkGrepAgrees(t testing.TB, in GrepInput, text string) {
	want, ok1 := naiveLines(in, []byte(text))
	got, ok2 := fastLines(t, in, []byte(text))
	if ok1 != ok2 {
		t.Fatalf("pattern %q mode %s cs %v: compiles naive=%v fast=%v", in.Pattern, in.Mode, in.CaseSensitive, ok1, ok2)
	}
	if fmt.Sprint(want) != fmt.Sprint(got) {
		t.Fatalf("pattern %q mode %s cs %v text %q: lines %v, want %v", in.Pattern, in.Mode, in.CaseSensitive, text, got, want)
	}
}

func TestGrepMatcherAgreesWithNaive(t *testing.T) {
	t.Parallel()
	patterns := []string{"a", "ab", "k", "s", "KS", "é", "É", "aé", "x\ny", "\n", ".", "Abc", "sk", "ſ", "K",
		`^a`, `a$`, `\Aa`, `a\z`, `\bk`, `[^a]+`, `a\sb`, `(?s)a.b`, `x*`, `(?m)^$`, `^$`, `s+K`, `(a|b)c`,
		`a{2,}`, `(?i)É`, `\w+\s\w+`, `(?-s:a.)`, `[[:upper:]]k`, `b\b`, `\Bs`, `(ab)+c`, `a(?:bc)?d`, "e.x", `\.`, `$`, `^`}
	alphabet := []string{"a", "b", "c", "A", "B", "k", "K", "s", "S", " ", "\n", "\n", "\u212a", "\u017f", "é", "É", ".", "x", "y", "\t", "d", "e"}
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 3000; i++ {
		var sb strings.Builder
		for n := rng.Intn(40); n > 0; n-- {
			sb.WriteString(alphabet[rng.Intn(len(alphabet))])
		}
		in := GrepInput{Pattern: patterns[rng.Intn(len(patterns))], Mode: ModeLiteral, CaseSensitive: rng.Intn(2) == 0}
		if rng.Intn(2) == 0 {
			in.Mode = ModeRegex
		}
		checkGrepAgrees(t, in, sb.String())
	}
}

func TestFinder(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewSource(2))
	for i := 0; i < 5000; i++ {
		s := make([]byte, rng.Intn(60))
		for j := range s {
			s[j] = "abcABC xyzXZ"[rng.Intn(12)]
		}
		lit := make([]byte, 1+rng.Intn(4))
		for j := range lit {
			lit[j] = "abcABCxX "[rng.Intn(9)]
		}
		f := newFinder(lit, false)
		if got, want := f.index(s), bytes.Index(s, lit); got != want {
			t.Fatalf("index(%q, %q) = %d, want %d", s, lit, got, want)
		}
		ff := newFinder(lit, true)
		want := bytes.Index(bytes.ToLower(s), bytes.ToLower(lit))
		if got := ff.index(s); got != want {
			t.Fatalf("fold index(%q, %q) = %d, want %d", s, lit, got, want)
		}
	}
}

// TestOnlyKelvinAndLongSFoldToASCII pins the assumption behind the ASCII fold
// prefilter: the only non-ASCII runes whose simple case folding reaches an ASCII
// letter are U+212A (k) and U+017F (s).
func TestOnlyKelvinAndLongSFoldToASCII(t *testing.T) {
	t.Parallel()
	var found []rune
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < 0x80 {
				found = append(found, r)
				break
			}
		}
	}
	if fmt.Sprint(found) != fmt.Sprint([]rune{0x17f, 0x212a}) {
		t.Fatalf("non-ASCII runes folding to ASCII: %U", found)
	}
}

func TestGrepContextAndLines(t *testing.T) {
	t.Parallel()
	m, _ := newGrepMatcher(GrepInput{Pattern: "x", Mode: ModeLiteral, CaseSensitive: true})
	buf := []byte("l1\nl2 x\nl3\nl4 x\nl5")
	ms := m.fileMatches([]string{"f"}, buf, 2, 2, 100, 1<<30)
	if len(ms) != 2 || ms[0].Line != 2 || fmt.Sprint(ms[0].Context) != "[l1 l2 x l3 l4 x]" ||
		ms[1].Line != 4 || fmt.Sprint(ms[1].Context) != "[l2 x l3 l4 x l5]" {
		t.Fatalf("matches %+v", ms)
	}
	// Empty lines, CRLF kept as text, a last line without newline.
	m2, _ := newGrepMatcher(GrepInput{Pattern: `^$`, Mode: ModeRegex})
	if got := m2.fileMatches([]string{"f"}, []byte("\n\na\n\n"), 0, 0, 100, 1<<30); len(got) != 3 {
		t.Fatalf("empty lines: %+v", got)
	}
	if got := m2.fileMatches([]string{"f"}, []byte(""), 0, 0, 100, 1<<30); len(got) != 0 {
		t.Fatalf("empty file: %+v", got)
	}
	// A context line longer than the limit is cut and marks the match.
	long := strings.Repeat("y", 1200)
	ms = m.fileMatches([]string{"f"}, []byte(long+"\nx\n"), 1, 0, 100, 1<<30)
	if len(ms) != 1 || !ms[0].Truncated || len(ms[0].Context[0]) != MaxGrepLineChars {
		t.Fatalf("cut context: %+v", ms)
	}
}

// TestGrepRegexNewlineRefused: a regex that needs a literal newline is refused with a
// message, as rg does, instead of silently matching nothing; a literal-mode pattern
// and regexes that merely may span a newline are not.
func TestGrepRegexNewlineRefused(t *testing.T) {
	for _, p := range []string{"a\nb", `a\nb`, "\n", `[\n]`} {
		_, err := newGrepMatcher(GrepInput{Pattern: p, Mode: ModeRegex})
		if err == nil || !strings.Contains(err.Error(), "literal newline") {
			t.Fatalf("pattern %q: %v", p, err)
		}
	}
	for _, in := range []GrepInput{{Pattern: `(?s)a.b`, Mode: ModeRegex}, {Pattern: `[^a]`, Mode: ModeRegex},
		{Pattern: `\s`, Mode: ModeRegex}, {Pattern: "a\nb", Mode: ModeLiteral}} {
		if _, err := newGrepMatcher(in); err != nil {
			t.Fatalf("%+v: %v", in, err)
		}
	}
}

// TestGrepSkipsBinaryFilesWhole: a file holding a NUL byte anywhere is skipped by grep
// and search, whether the NUL byte lies in the first binaryProbe bytes (the file's rest
// is then not read), after them, or after the match; a large text file is still read to
// its end.
func TestGrepSkipsBinaryFilesWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	filler := strings.Repeat("plain text line\n", 2*binaryProbe/16) // 2 probes long
	e.write("a/nul-first.dat", "\x00"+filler+"ships\n")
	e.write("a/nul-after-probe.dat", "ships\n"+filler+"\x00")
	e.write("a/nul-after-match.txt", "x\nships\n\x00")
	e.write("a/nul-before-match.txt", "\x00ships\n")
	e.write("a/text.txt", filler+"ships\n")
	e.write("a/small.txt", "ships\n")
	out := e.ok("files.grep", jobj{"path": pth(), "pattern": "ships"})
	var got []string
	for _, m := range out["matches"].([]any) {
		mm := m.(map[string]any)
		got = append(got, fmt.Sprintf("%v:%v", mm["path"], mm["line"]))
	}
	want := fmt.Sprintf("[[a small.txt]:1 [a text.txt]:%d]", 2*binaryProbe/16+1)
	if fmt.Sprint(got) != want {
		t.Fatalf("grep = %v, want %s", got, want)
	}
	hits := e.ok("files.search", jobj{"path": pth(), "query": "ships"})["hits"].([]any)
	got = nil
	for _, h := range hits {
		got = append(got, fmt.Sprint(h.(map[string]any)["path"]))
	}
	sort.Strings(got)
	if fmt.Sprint(got) != "[[a small.txt] [a text.txt]]" {
		t.Fatalf("search = %v", got)
	}
}
