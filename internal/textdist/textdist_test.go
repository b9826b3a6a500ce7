package textdist

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"read", "reed", 1}, {"files", "file", 1}, {"lst", "list", 1}, {"é", "e", 1}, {"kitten", "sitting", 3}, {"", "abc", 3}} {
		if got := Levenshtein(c.a, c.b); got != c.want {
			t.Errorf("Levenshtein(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
