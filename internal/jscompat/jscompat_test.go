package jscompat

import (
	"slices"
	"testing"
)

func TestUTF16Len(t *testing.T) {
	for s, want := range map[string]int{"": 0, "abc": 3, "é": 1, "😀": 2, "a😀b": 4, "\u2028": 1} {
		if got := UTF16Len(s); got != want {
			t.Errorf("UTF16Len(%q) = %d, want %d", s, got, want)
		}
	}
}

func TestJSTrim(t *testing.T) {
	for s, want := range map[string]string{
		" a ": "a", "\ufeffa\u3000": "a", "\u0085a\u0085": "\u0085a\u0085", "\u200aa\u2000": "a", "\t\n\v\f\r a": "a",
	} {
		if got := JSTrim(s); got != want {
			t.Errorf("JSTrim(%q) = %q, want %q", s, got, want)
		}
	}
}

func TestSortLocale(t *testing.T) {
	got := []string{"b", "B", "a", "A", "é", "ab", "Ab"}
	SortLocale(got)
	want := []string{"a", "A", "ab", "Ab", "b", "B", "é"}
	if !slices.Equal(got, want) {
		t.Fatalf("SortLocale = %q, want %q", got, want)
	}
}
