package grantfile

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMixedScripts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   string
		want []string
	}{
		{"alice", nil},
		{"build-bot_2", nil},
		{"иван", nil},                            // Cyrillic throughout
		{"ελληνικά", nil},                        // Greek throughout
		{"josé", nil},                            // é is Latin
		{"jose\u0301", nil},                      // a combining accent is Inherited
		{"日本ひらがなカタカナ", nil},                      // Han, Hiragana, Katakana: Japanese
		{"한국漢字", nil},                            // Hangul and Han: Korean
		{"аlice", []string{"Cyrillic", "Latin"}}, // U+0430
		{"αlice", []string{"Greek", "Latin"}},
		{"ひらがな한국", []string{"Hangul", "Hiragana"}}, // no writing system has both
		{"abc-日本", []string{"Han", "Latin"}},
		{"123", nil}, // digits are Common
	} {
		if got := mixedScripts(tc.id); !slices.Equal(got, tc.want) {
			t.Errorf("mixedScripts(%q) = %v, want %v", tc.id, got, tc.want)
		}
	}
}

func TestIDProblem(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   string
		want []string // substrings of the warning; nil: no warning
	}{
		{"helper", nil},
		{"he1per", nil}, // ASCII alone is not reported (the skeleton check compares it to others)
		{"josé", nil},
		{"иван", nil},
		{"һelper", []string{`mixes scripts (Cyrillic, Latin)`, `"һ" (U+04BB) looks like "h"`, `(it reads as "helper")`}},
		{"аlice", []string{`mixes scripts (Cyrillic, Latin)`, `"а" (U+0430) looks like "a"`, `(it reads as "alice")`}},
		{"ѕео", []string{`"ѕ" (U+0455) looks like "s"`, `"о" (U+043E) looks like "o"`, `(it reads as "seo")`}},
		{"ａｌｉｃｅ", []string{`"ａ" (U+FF41) looks like "a"`, `(it reads as "alice")`}},
		{"ρaypal", []string{`mixes scripts (Greek, Latin)`, `"ρ" (U+03C1) looks like "p"`}},
		{"bıll", []string{`"ı" (U+0131) looks like "i"`, `(it reads as "bill")`}},
	} {
		got := idProblem(tc.id)
		if tc.want == nil {
			if got != "" {
				t.Errorf("idProblem(%q) = %q, want none", tc.id, got)
			}
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("idProblem(%q) = %q, want it to hold %q", tc.id, got, w)
			}
		}
	}
}

func TestSkeleton(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"helper", "he1per", true},
		{"helper", "һelper", true},
		{"alice", "ａｌｉｃｅ", true},
		{"mary", "rnary", true},
		{"bill", "biII", true},
		{"seo", "ѕео", true},
		{"bob", "bab", false},
		{"josé", "jose", false}, // a diacritic is not a look-alike
	} {
		if got := skeleton(tc.a) == skeleton(tc.b); got != tc.same {
			t.Errorf("skeleton(%q) == skeleton(%q) is %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// TestLintLookAlikes: a subject, issuer or owner id that mixes scripts or holds
// look-alike characters is a warning on its field and line, and so is a second id of one
// kind that reads like an earlier one; different kinds never collide.
func TestLintLookAlikes(t *testing.T) {
	t.Parallel()
	const exact = "[{resource: {namespace: files, path: [W]}, actions: [read], scope: exact}]"
	dir := writeFiles(t, map[string]string{"f.yaml": lintFile(
		lg{id: "g-ok", sub: "agent:helper", caps: exact},
		lg{id: "g-cyr", sub: "agent:һelper", caps: exact},
		lg{id: "g-digit", sub: "agent:he1per", caps: exact},
		lg{id: "g-iss", sub: "agent:other", iss: "human:аlice", caps: exact},
		lg{id: "g-own", sub: "human:helper", caps: "[{resource: {namespace: files, path: [W], owner: \"human:ａｌｉｃｅ\"}, actions: [read], scope: exact}]"},
	)})
	got := lintAt([]string{filepath.Join(dir, "f.yaml")})
	var lines []string
	for _, f := range got {
		lines = append(lines, fmt.Sprintf("%s %d %s %s: %s", f.Grant, f.Line, f.Severity, f.Field, f.Message))
	}
	want := []string{
		`g-cyr 4 warning subject: subject id "һelper" mixes scripts (Cyrillic, Latin); it holds look-alike characters: "һ" (U+04BB) looks like "h" (it reads as "helper")`,
		`g-cyr 4 warning subject: subject agent:һelper looks like agent:helper (grant "g-ok", ` + filepath.Join(dir, "f.yaml") + `:3): two different ids that read alike`,
		`g-digit 5 warning subject: subject agent:he1per looks like agent:helper (grant "g-ok", ` + filepath.Join(dir, "f.yaml") + `:3): two different ids that read alike`,
		`g-iss 6 warning issuer: issuer id "аlice" mixes scripts (Cyrillic, Latin); it holds look-alike characters: "а" (U+0430) looks like "a" (it reads as "alice")`,
		`g-iss 6 warning issuer: issuer human:аlice looks like human:alice (grant "g-ok", ` + filepath.Join(dir, "f.yaml") + `:3): two different ids that read alike`,
		`g-own 7 warning capabilities.0.resource.owner: owner id "ａｌｉｃｅ" holds look-alike characters: "ａ" (U+FF41) looks like "a", "ｌ" (U+FF4C) looks like "l", "ｉ" (U+FF49) looks like "i", "ｃ" (U+FF43) looks like "c", "ｅ" (U+FF45) looks like "e" (it reads as "alice")`,
		`g-own 7 warning capabilities.0.resource.owner: owner human:ａｌｉｃｅ looks like human:alice (grant "g-ok", ` + filepath.Join(dir, "f.yaml") + `:3): two different ids that read alike`,
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("Lint =\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestLintExpired: a grant whose expiresAt is at or before the wall clock is a warning
// (the kernel refuses it from that instant on); the clock is LintOptions.Now.
func TestLintExpired(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"f.yaml": lintFile(lg{id: "g", sub: "agent:x", cons: "{expiresAt: 2026-06-01T12:00:00Z}"})})
	expires := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now     time.Time
		expired bool
	}{
		{expires.Add(-time.Millisecond), false},
		{expires, true}, // expiry is exclusive: at expiresAt the grant is refused
		{expires.Add(365 * 24 * time.Hour), true},
	} {
		got := LintWithOptions([]string{filepath.Join(dir, "f.yaml")}, LintOptions{Now: func() time.Time { return tc.now }})
		var found []Finding
		for _, f := range got {
			if f.Field == "constraints.expiresAt" {
				found = append(found, f)
			}
		}
		if tc.expired != (len(found) == 1) || len(found) > 1 {
			t.Errorf("at %s: findings %v, want expired %v", tc.now, got, tc.expired)
			continue
		}
		if tc.expired {
			f := found[0]
			want := "grant expired at 2026-06-01T12:00:00Z (the wall clock reads " + tc.now.Format(time.RFC3339) + "): it authorizes nothing"
			if f.Severity != SeverityWarning || f.Line != 3 || f.Grant != "g" || f.Message != want {
				t.Errorf("at %s: %s, want a warning on line 3: %s", tc.now, f, want)
			}
		}
	}
}
