package cmd

import "testing"

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
