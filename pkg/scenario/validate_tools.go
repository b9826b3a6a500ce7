package scenario

import (
	"fmt"
	"strings"

	"github.com/sharedos/sharedos/internal/textdist"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// validateTools refuses a file whose call or explain step names a tool no host
// registers: a person wrote the name, so a typo is an invalid file (file:line), never a
// denial that an `expect: {status: denied}` would pass. An agent's unknown name stays the
// kernel's tool_unavailable; a step that means to test it says so by expecting its cause
// (`cause: not_registered`), and only such a step may name an unregistered tool. The
// registered tools are the host's own (files, repo, sharedos.escalate): a scenario has no
// gateway servers.
func validateTools(f *File) *Error {
	defs, err := host.DefinitionTools()
	if err != nil {
		return &Error{File: f.Path, Message: fmt.Sprintf("the registered tools cannot be listed: %v", err)}
	}
	names := make([]string, len(defs))
	known := make(map[string]bool, len(defs))
	for i, d := range defs {
		names[i] = d.Definition.Name
		known[d.Definition.Name] = true
	}
	for ti := range f.Tests {
		for _, s := range f.Tests[ti].Steps {
			if (s.Kind != "call" && s.Kind != "explain") || known[s.Tool] {
				continue
			}
			if s.Expect != nil && s.Expect.Cause != nil && *s.Expect.Cause == string(kernel.CauseNotRegistered) {
				continue // deliberately unknown: the step tests the agent's refusal
			}
			msg := fmt.Sprintf("test %q: %s names %q, which is not a registered tool", f.Tests[ti].Name, s.Kind, s.Tool)
			if near := nearestTool(s.Tool, names); near != "" {
				msg += "; did you mean " + near + "?"
			} else {
				msg += " (a step that tests an unknown name expects cause: not_registered)"
			}
			return &Error{File: f.Path, Line: s.Line, Message: msg}
		}
	}
	return nil
}

// nearestTool is the registered name at most 2 edits from name (case-insensitive), the
// first of the nearest, or "".
func nearestTool(name string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := textdist.Levenshtein(strings.ToLower(name), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}
