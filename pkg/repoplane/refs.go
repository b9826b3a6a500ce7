package repoplane

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// headState is where HEAD points.
type headState struct {
	ref    string        // "refs/heads/<branch>" when HEAD is symbolic; "" when detached
	hash   plumbing.Hash // current commit; zero on an unborn branch
	unborn bool
}

func (h headState) branch() *string {
	if h.ref == "" {
		return nil
	}
	b := strings.TrimPrefix(h.ref, "refs/heads/")
	return &b
}

func (h headState) head() *string {
	if h.unborn {
		return nil
	}
	s := h.hash.String()
	return &s
}

// readHead reads .git/HEAD itself (a symbolic ref must name a well-formed branch) and
// resolves the branch through go-git's loose and packed reference storage.
func (r *repo) readHead() (headState, *opError) {
	data, err := readFileLimited(r.git, "HEAD", 4096)
	if err != nil {
		return headState{}, failed(CodeNotARepository, "HEAD cannot be read: %v", err)
	}
	s := strings.TrimRight(string(data), "\r\n \t")
	if target, ok := strings.CutPrefix(s, "ref:"); ok {
		target = strings.TrimSpace(target)
		if !strings.HasPrefix(target, "refs/heads/") || !validRefName(target) {
			return headState{}, denied(CodeNotPermitted, "HEAD points at %q, which is not a branch", target)
		}
		h, ok, oe := r.readRef(target)
		if oe != nil {
			return headState{}, oe
		}
		return headState{ref: target, hash: h, unborn: !ok}, nil
	}
	if !plumbing.IsHash(s) {
		return headState{}, failed(CodeNotARepository, "HEAD is malformed")
	}
	return headState{hash: plumbing.NewHash(s)}, nil
}

// readRef returns the commit a branch names (ok false when the branch does not exist).
func (r *repo) readRef(name string) (plumbing.Hash, bool, *opError) {
	ref, err := r.st.Reference(plumbing.ReferenceName(name))
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, false, nil
	}
	if err != nil {
		return plumbing.ZeroHash, false, failed(CodeProviderError, "read %s: %v", name, err)
	}
	if ref.Type() != plumbing.HashReference {
		return plumbing.ZeroHash, false, denied(CodeNotPermitted, "%s is a symbolic reference; sharedos only follows HEAD", name)
	}
	return ref.Hash(), true, nil
}

// validRefName applies git check-ref-format to a full reference name.
func validRefName(name string) bool {
	if name == "" || strings.HasSuffix(name, "/") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.Contains(name, "@{") || strings.Contains(name, "//") || name == "@" {
		return false
	}
	for _, c := range strings.Split(name, "/") {
		if c == "" || strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) {
			return false
		}
	}
	return true
}

// commitTree returns the root tree of a commit (zero for the zero hash: an unborn HEAD).
func (r *repo) commitTree(h plumbing.Hash) (plumbing.Hash, *opError) {
	if h.IsZero() {
		return plumbing.ZeroHash, nil
	}
	c, err := r.getCommit(h)
	if err != nil {
		return plumbing.ZeroHash, failed(CodeProviderError, "read commit %s: %v", h, err)
	}
	return c.TreeHash, nil
}

// readTree reads a tree object and validates every entry name (a tree naming "..",
// ".git" or a path with "/" is refused like a bad index path).
func (r *repo) readTree(h plumbing.Hash) ([]object.TreeEntry, error) {
	t, err := r.getTree(h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	for _, e := range t.Entries {
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\x00") || isDotGit(e.Name) {
			return nil, errBadIndexPath{e.Name}
		}
	}
	return t.Entries, nil
}

// isTreeMode reports whether a tree entry is a subdirectory.
func isTreeMode(m filemode.FileMode) bool { return m == filemode.Dir }
