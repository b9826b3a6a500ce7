package repoplane

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// This file finds the commit a submodule's working tree has checked out, which is all
// git compares a gitlink entry with (new commits show as a modified submodule; sharedos
// does not look for uncommitted changes inside it, and repo.status says so in
// submodulesNotInspected). Only two layouts are read, both
// through descriptors confined to this repository: a .git directory inside the
// submodule, and a "gitdir:" file naming the superproject's own .git/modules/<name>
// (what git submodule add writes). Anything else — a link, a gitdir elsewhere, a
// malformed HEAD — reads as "not checked out", which git shows as unchanged.

const maxSubmoduleRefBytes = 4 << 20

// submoduleHead returns the commit checked out in the submodule at path sub (a
// directory in sub's parent, open as parent), and whether one was found.
func (r *repo) submoduleHead(parent *os.Root, name, sub string) (plumbing.Hash, bool) {
	sr, err := parent.OpenRoot(name)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	defer sr.Close()
	fi, err := sr.Lstat(".git")
	if err != nil {
		return plumbing.ZeroHash, false
	}
	switch {
	case fi.IsDir():
		g, err := sr.OpenRoot(".git")
		if err != nil {
			return plumbing.ZeroHash, false
		}
		defer g.Close()
		return resolveHead(g)
	case fi.Mode().IsRegular():
		data, err := readFileLimited(sr, ".git", 4096)
		if err != nil {
			return plumbing.ZeroHash, false
		}
		target, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:")
		if !ok {
			return plumbing.ZeroHash, false
		}
		target = strings.TrimSpace(target)
		if path.IsAbs(target) {
			return plumbing.ZeroHash, false
		}
		// relative to the submodule's directory; it must name .git/modules/… of this
		// repository
		p := path.Clean(path.Join(path.Dir(sub+"/x"), target))
		rest, ok := strings.CutPrefix(p, ".git/modules/")
		if !ok || rest == "" {
			return plumbing.ZeroHash, false
		}
		g, err := r.git.OpenRoot("modules/" + rest)
		if err != nil {
			return plumbing.ZeroHash, false
		}
		defer g.Close()
		return resolveHead(g)
	}
	return plumbing.ZeroHash, false
}

// resolveHead reads HEAD of a git directory: a hash, or a branch resolved through its
// loose file or packed-refs.
func resolveHead(g *os.Root) (plumbing.Hash, bool) {
	data, err := readFileLimited(g, "HEAD", 4096)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	s := strings.TrimSpace(string(data))
	ref, sym := strings.CutPrefix(s, "ref:")
	if !sym {
		if plumbing.IsHash(s) {
			return plumbing.NewHash(s), true
		}
		return plumbing.ZeroHash, false
	}
	ref = strings.TrimSpace(ref)
	if !strings.HasPrefix(ref, "refs/") || !validRefName(ref) {
		return plumbing.ZeroHash, false
	}
	if data, err := readFileLimited(g, ref, 4096); err == nil {
		if h := strings.TrimSpace(string(data)); plumbing.IsHash(h) {
			return plumbing.NewHash(h), true
		}
		return plumbing.ZeroHash, false
	}
	packed, err := readFileLimited(g, "packed-refs", maxSubmoduleRefBytes)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	sc := bufio.NewScanner(bytes.NewReader(packed))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if h, name, ok := strings.Cut(l, " "); ok && name == ref && plumbing.IsHash(h) {
			return plumbing.NewHash(h), true
		}
	}
	return plumbing.ZeroHash, false
}
