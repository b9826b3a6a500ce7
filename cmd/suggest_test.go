package cmd

import (
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	t.Parallel()
	cands := []string{"allowed", "denied", "succeeded", "failed", "escalated", "interrupted"}
	for in, want := range map[string]string{
		"deny": "denied", "denid": "denied", "faild": "failed", "Denied": "denied",
		"denied": "", "xyz": "", "al": "", "succ": "succeeded",
	} {
		if got := closest(in, cands); got != want {
			t.Errorf("closest(%q) = %q, want %q", in, got, want)
		}
	}
	if got := closest("xml", []string{"table", "json", "yaml"}); got != "" {
		t.Errorf("closest(xml) = %q", got)
	}
	if got := closest("yml", []string{"table", "json", "yaml"}); got != "yaml" {
		t.Errorf("closest(yml) = %q", got)
	}
	if got := closest("fiels", []string{"files", "repo", "sharedos"}); got != "files" {
		t.Errorf("closest(fiels) = %q", got)
	}
}

func TestTableFitsWidth(t *testing.T) {
	t.Parallel()
	if got := truncate("héllo wörld", 6); got != "héllo…" {
		t.Errorf("truncate = %q", got)
	}
	ios, _, out, _ := Test()
	ios.StdoutTTY = true
	ios.width = func() int { return 30 }
	p := newPrinter(ios, FormatTable, false)
	tb := p.table("A", "TEXT").flexible(1)
	tb.row("x", "a rather long description that does not fit")
	if err := tb.render(); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if w := len([]rune(line)); w > 30 {
			t.Errorf("line %q is %d wide", line, w)
		}
	}
	if !strings.Contains(out.String(), "…") {
		t.Errorf("not cut: %q", out)
	}
	// piped: never cut
	ios, _, out, _ = Test()
	ios.width = func() int { return 30 }
	p = newPrinter(ios, FormatTable, false)
	tb = p.table("A", "TEXT").flexible(1)
	tb.row("x", "a rather long description that does not fit")
	_ = tb.render()
	if out.String() != "x\ta rather long description that does not fit\n" {
		t.Errorf("piped: %q", out)
	}
}
