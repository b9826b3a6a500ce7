package cmd

import (
	"strings"

	"github.com/sharedos/sharedos/internal/textdist"
	"github.com/spf13/cobra"
)

// closest is the candidate nearest to s (Levenshtein distance at most 2, as cobra's
// command suggestions; at most 1 for words of up to 3 characters), else one that s nearly begins), or "" when none is close or s is
// itself a candidate. Ties go to the first candidate.
func closest(s string, candidates []string) string {
	ls := strings.ToLower(s)
	best, bestD := "", 3
	if len(ls) <= 3 {
		bestD = 2 // short words: one edit at most (xml is not yaml)
	}
	for _, c := range candidates {
		if c == s {
			return ""
		}
		d := textdist.Levenshtein(ls, strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	if best != "" || len(ls) < 3 {
		return best
	}
	// Else the candidate that s nearly begins (deny → denied): a common prefix of at
	// least 3 characters covering all of s but its last character.
	bestP := 0
	for _, c := range candidates {
		lc := strings.ToLower(c)
		n := 0
		for n < len(ls) && n < len(lc) && ls[n] == lc[n] {
			n++
		}
		if n >= 3 && n >= len(ls)-1 && n > bestP {
			best, bestP = c, n
		}
	}
	return best
}

// completeList completes a flag from a closed list of values.
func completeList(vals []string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return cobra.FixedCompletions(vals, cobra.ShellCompDirectiveNoFileComp)
}
