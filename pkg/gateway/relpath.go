package gateway

import (
	"errors"
	"fmt"
	"strings"
)

// The refusals of a split argument speak to the agent that wrote it: what was wrong with
// its value, what form is accepted and why (the resource a path names is checked against
// the grants segment by segment, so the form must be one where each segment is a name),
// never the template's mechanics ("an empty piece when split on …").

// acceptedForm says which values a split element accepts, with an example.
func acceptedForm(e Elem) string {
	ex := strings.Join([]string{"docs", "notes.md"}, e.Split)
	if e.Root != "" {
		return fmt.Sprintf("paths are relative to %s or absolute under it, one name between each %q, e.g. %q or %q",
			e.Root, e.Split, ex, e.Root+e.Split+ex)
	}
	return fmt.Sprintf("paths are relative (to the directory the server serves), one name between each %q, e.g. %q", e.Split, ex)
}

// splitArg splits the string s of split element e into its pieces: with a root, an
// absolute value (one that starts with the separator) must be the root or lie under it,
// and the root is removed first (the root itself is no piece at all). An empty piece is
// refused, never dropped: "a//b", "dir/" and, without a root, "/abs/path".
func splitArg(e Elem, s string) ([]string, error) {
	rest := s
	if strings.HasPrefix(s, e.Split) {
		switch {
		case e.Root == "":
			return nil, fmt.Errorf("argument %s: got the absolute path %q; %s", e.Arg, s, acceptedForm(e))
		case s == e.Root:
			return []string{}, nil
		case e.Root == e.Split:
			rest = s[len(e.Split):]
		case strings.HasPrefix(s, e.Root+e.Split):
			rest = s[len(e.Root)+len(e.Split):]
		default:
			return nil, fmt.Errorf("argument %s: got %q, which is outside %s; %s", e.Arg, s, e.Root, acceptedForm(e))
		}
	}
	if rest == "" {
		return nil, fmt.Errorf("argument %s: got an empty path; %s", e.Arg, acceptedForm(e))
	}
	pieces := strings.Split(rest, e.Split)
	for _, p := range pieces {
		if p == "" {
			return nil, fmt.Errorf("argument %s: %q has an empty name (a doubled or trailing %q); %s", e.Arg, s, e.Split, acceptedForm(e))
		}
	}
	return pieces, nil
}

// validRoot checks a template's root: absolute (it starts with the separator), no
// trailing separator (but the separator alone), no empty, "." or ".." name.
func validRoot(root, sep string) error {
	if !strings.HasPrefix(root, sep) {
		return fmt.Errorf("must be absolute (start with %q): it is the directory the upstream's absolute paths start with", sep)
	}
	if root == sep {
		return nil
	}
	for _, name := range strings.Split(strings.TrimPrefix(root, sep), sep) {
		switch name {
		case "":
			return errors.New("has an empty name (a doubled or trailing separator)")
		case ".", "..":
			return fmt.Errorf("has the name %q: write the directory without a . or .. name", name)
		}
	}
	return nil
}
