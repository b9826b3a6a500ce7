package cmd

import (
	"testing"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// textStyle and textWidth replaced the terminal-styling library in table output (issue
// 28: that library's package initialisation ran in every process). The library is still
// a dependency of this test only (it is not linked into sharedos): the replacement must
// write and measure exactly as it did, with colour and without, on the text tables give
// it (escaped cell text, headers, single runes) and on the wider cases the library
// handles (wide characters, emoji sequences, combining marks, tabs, several lines).
func TestTextStyleMatchesTheLibraryItReplaced(t *testing.T) {
	inputs := []string{
		"", "a", "files.read", "ALLOWED", "  padded  ", `\x1b[2J`, "naïve", "e\u0301", "日本語のツール",
		"한국어", "👍", "👨‍👩‍👧", "🇫🇷", "a\tb", "two\nlines", "crlf\r\nline", "…", "\u200b", "ｆｕｌｌ",
		"mixed 日本 text 👍🏽 é",
	}
	for _, color := range []bool{false, true} {
		r := lipgloss.NewRenderer(nil)
		r.SetColorProfile(termenv.Ascii)
		if color {
			r.SetColorProfile(termenv.ANSI)
		}
		lib := map[string]lipgloss.Style{
			"header": r.NewStyle().Bold(true),
			"ok":     r.NewStyle().Foreground(lipgloss.Color("2")),
			"bad":    r.NewStyle().Foreground(lipgloss.Color("1")),
			"warn":   r.NewStyle().Foreground(lipgloss.Color("3")),
			"dim":    r.NewStyle().Faint(true),
			"bold":   r.NewStyle().Bold(true),
		}
		st := (&printer{color: color}).st()
		ours := map[string]textStyle{"header": st.header, "ok": st.ok, "bad": st.bad, "warn": st.warn, "dim": st.dim, "bold": st.bold}
		for name, ls := range lib {
			for _, in := range inputs {
				if got, want := ours[name].Render(in), ls.Render(in); got != want {
					t.Errorf("color %v, style %s, Render(%q) = %q; the library wrote %q", color, name, in, got, want)
				}
			}
		}
	}
	for _, in := range inputs {
		if got, want := textWidth(in), lipgloss.Width(in); got != want {
			t.Errorf("textWidth(%q) = %d; the library measured %d", in, got, want)
		}
		for _, r := range in {
			if got, want := textWidth(string(r)), lipgloss.Width(string(r)); got != want {
				t.Errorf("textWidth(%q) = %d; the library measured %d", string(r), got, want)
			}
		}
	}
}
