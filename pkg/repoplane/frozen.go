package repoplane

import (
	"fmt"
	"strings"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// CodeHostPolicyDenied: the operation would read or stage a path the host froze
// (ProviderOptions.Frozen). Denied.
const CodeHostPolicyDenied = kernel.ErrorCode(kernel.ReasonHostPolicyDenied)

// frozenSet is the list of repository-relative paths ("a/b") the host froze inside one
// repository. Unlike a pathspec, the empty set covers nothing.
type frozenSet []string

// covers reports whether p is a frozen path or lies beneath one (whole segments).
func (f frozenSet) covers(p string) bool {
	for _, e := range f {
		if p == e || len(p) > len(e) && p[len(e)] == '/' && strings.HasPrefix(p, e) {
			return true
		}
	}
	return false
}

// checkFrozen validates ProviderOptions.Frozen.
func checkFrozen(frozen [][]string) error {
	for i, f := range frozen {
		if err := kernel.ValidatePath(f); err != nil {
			return fmt.Errorf("repoplane: Frozen[%d]: %v", i, err)
		}
	}
	return nil
}

// frozenFor relates the frozen paths to the repository at repoPath: an operation is
// refused outright when the repository lies at or beneath a frozen path, or when a
// frozen path lies in its .git (its objects hold everything); otherwise the frozen
// paths inside its working tree are returned, relative to it.
func (p *Provider) frozenFor(repoPath []string) (frozenSet, *opError) {
	var inside frozenSet
	for _, f := range p.opts.Frozen {
		n := min(len(f), len(repoPath))
		if !segmentsEqual(f[:n], repoPath[:n]) {
			continue
		}
		if len(f) <= len(repoPath) {
			return nil, denied(CodeHostPolicyDenied, "the repository %s lies in the frozen path %s; the host ceiling refuses every operation on it",
				shownPath(repoPath), shownPath(f))
		}
		rel := f[len(repoPath):]
		if isDotGit(rel[0]) {
			return nil, denied(CodeHostPolicyDenied, "the frozen path %s lies in the repository's .git; the host ceiling refuses every operation on it",
				shownPath(f))
		}
		inside = append(inside, strings.Join(rel, "/"))
	}
	return inside, nil
}

func segmentsEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// refuseFrozenPathspec refuses a stage pathspec entry that names a frozen path or
// something beneath one. (An entry naming a directory that holds a frozen path stages
// the rest of the directory: the walk never enters the frozen subtree.)
func (r *repo) refuseFrozenPathspec(ps [][]string) *opError {
	for _, p := range ps {
		if s := strings.Join(p, "/"); r.frozen.covers(s) {
			return denied(CodeHostPolicyDenied, "%s is frozen by the host ceiling; it is never read or staged", s)
		}
	}
	return nil
}

// shownPath names a root-relative path in a message ("." for the root itself).
func shownPath(p []string) string {
	if len(p) == 0 {
		return "."
	}
	return kernel.JoinPath(p)
}

func cloneFrozen(frozen [][]string) [][]string {
	out := make([][]string, len(frozen))
	for i, f := range frozen {
		out[i] = append([]string{}, f...)
	}
	return out
}
