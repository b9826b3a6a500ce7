package fsplane

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func searchPaths(t *testing.T, e *env, query string) ([]string, []map[string]any) {
	t.Helper()
	out := e.ok("files.search", jobj{"path": pth(), "query": query})
	var paths []string
	var hits []map[string]any
	for _, h := range out["hits"].([]any) {
		m := h.(map[string]any)
		paths = append(paths, strings.Join(toStrings(m["path"]), "/"))
		hits = append(hits, m)
	}
	return paths, hits
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// TestSearchMatchesTokensNotSubstrings: a term matches whole words and the parts of
// compound identifiers (camelCase, snake_case, letters and digits), never the inside of
// another word.
func TestSearchMatchesTokensNotSubstrings(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("a.txt", "run the command, recommend a commander") // no "man" token
	e.write("b.txt", "see the man page")
	e.write("c.go", "return io.ErrUnexpectedEOF // manPage man_db HTTPServer utf8")
	e.write("d.txt", "Manual and MANAGER and humane")
	cases := []struct {
		q    string
		want string
	}{
		{"man", "[b.txt c.go]"},
		{"unexpected", "[c.go]"},
		{"eof", "[c.go]"},
		{"ErrUnexpectedEOF", "[c.go]"},
		{"err", "[c.go]"},
		{"page", "[b.txt c.go]"},
		{"db", "[c.go]"},
		{"http", "[c.go]"},
		{"server", "[c.go]"},
		{"utf", "[c.go]"},
		{"command", "[a.txt]"},
		{"command,", "[a.txt]"}, // punctuation around a term is not part of it
		{"ommand", "[]"},
		{"manual", "[d.txt]"},
		{"manage", "[]"},
	}
	for _, c := range cases {
		if got, _ := searchPaths(t, e, c.q); !sameSet(got, c.want) {
			t.Errorf("search %q = %v, want %s (in any order)", c.q, got, c.want)
		}
	}
}

func sameSet(got []string, want string) bool {
	w := strings.Fields(strings.Trim(want, "[]"))
	if len(w) != len(got) {
		return false
	}
	m := map[string]bool{}
	for _, x := range w {
		m[x] = true
	}
	for _, g := range got {
		if !m[g] {
			return false
		}
	}
	return true
}

// TestSearchRanking pins the ranking's ingredients: a rare term outweighs a common one
// (idf), term frequency counts with saturation and length normalisation, the terms
// next to each other as in the query win (phrase), and names count.
func TestSearchRanking(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	filler := strings.Repeat("common words everywhere here. ", 20)
	for i := 0; i < 20; i++ {
		e.write(fmt.Sprintf("corpus/f%02d.txt", i), filler+"the cache layer")
	}
	// idf: "zebra" is rare, "cache" is everywhere.
	e.write("rare.txt", filler+"zebra once")
	e.write("often.txt", filler+"cache cache cache cache")
	// phrase: both hold both words as often; only one has them adjacent.
	e.write("phrase/near.txt", filler+"connection pool is here; "+filler)
	e.write("phrase/far.txt", "connection "+filler+filler+" pool")
	// names: the file named after the term beats a longer mention in content.
	e.write("names/retry.go", filler+"retry once")
	e.write("names/other.go", filler+"retry once")

	got, hits := searchPaths(t, e, "zebra cache")
	if got[0] != "rare.txt" {
		t.Fatalf("rare term should rank first: %v", got)
	}
	if hits[0]["score"] != float64(1) || hits[1]["score"].(float64) >= 1 {
		t.Fatalf("scores: %v", hits)
	}
	got, _ = searchPaths(t, e, "connection pool")
	if len(got) < 2 || got[0] != "phrase/near.txt" || got[1] != "phrase/far.txt" {
		t.Fatalf("phrase: %v", got)
	}
	_, hits = searchPaths(t, e, "connection pool")
	if ex := hits[0]["excerpt"].(string); !strings.Contains(ex, "connection pool") {
		t.Fatalf("the excerpt should show the phrase: %q", ex)
	}
	got, _ = searchPaths(t, e, "retry")
	if got[0] != "names/retry.go" {
		t.Fatalf("name match: %v", got)
	}
	// Saturation: four occurrences beat one, but not by four times.
	got, hits = searchPaths(t, e, "cache")
	if got[0] != "often.txt" {
		t.Fatalf("term frequency: %v", got)
	}
	if s := hits[1]["score"].(float64); s < 0.4 {
		t.Fatalf("one occurrence scores %v of four's: no saturation", s)
	}
	// Directory names count, less than the file's name.
	e.write("sched/queue.txt", filler+"sched notes")
	e.write("x/sched.txt", filler+"sched notes")
	e.write("x/plain.txt", filler+"sched notes")
	got, _ = searchPaths(t, e, "sched")
	if len(got) != 3 || got[0] != "x/sched.txt" || got[1] != "sched/queue.txt" {
		t.Fatalf("directory names: %v", got)
	}
}

// refBoundaries is a straightforward statement of the token rules over the text's runes:
// the byte offsets where a word may start or end.
func refBoundaries(s string) map[int]bool {
	type rc struct{ off, cls int }
	var rs []rc
	for off, r := range s {
		rs = append(rs, rc{off, classOf(r)})
	}
	rs = append(rs, rc{len(s), clsOther})
	b := map[int]bool{0: true}
	for i := 1; i < len(rs); i++ {
		prev, cur := rs[i-1].cls, rs[i].cls
		next := clsOther
		if i+1 < len(rs) {
			next = rs[i+1].cls
		}
		switch {
		case prev == clsOther || cur == clsOther:
			b[rs[i].off] = true
		case prev == cur:
			b[rs[i].off] = cur == clsUpper && next == clsLower // HTTPServer: the S
		case prev == clsUpper && cur == clsLower: // Server: inside a capitalised word
		default:
			b[rs[i].off] = true
		}
	}
	return b
}

// FuzzTokenBoundaries checks tokenStart (which works on bytes, decoding runes around
// an offset) against the rune-by-rune statement of the rules, at every rune offset.
func FuzzTokenBoundaries(f *testing.F) {
	for _, s := range []string{"ErrUnexpectedEOF", "HTTPServer utf8 man_db", "command", "ÉtéÀ bientôt", "a\xffb", "İstanbul", "x1Y2z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 256 || !utf8.ValidString(s) {
			return
		}
		ref := refBoundaries(s)
		b := []byte(s)
		for off := range s {
			if tokenStart(b, off) != ref[off] {
				t.Fatalf("%q at %d: tokenStart %v, rules %v", s, off, tokenStart(b, off), ref[off])
			}
		}
		if !tokenStart(b, len(b)) {
			t.Fatalf("%q: the end is not a boundary", s)
		}
	})
}
