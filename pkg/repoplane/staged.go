package repoplane

import (
	"context"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// change is one difference between HEAD and the index.
type change struct {
	path, oldPath    string
	code             byte // 'A', 'M', 'D', 'T', 'R'
	oldMode, newMode uint32
	oldHash, newHash plumbing.Hash
}

// stagedCompare compares a HEAD tree with the index. A directory whose cache-tree node
// (the index's TREE extension) is valid and equal to the HEAD subtree is skipped without
// reading it, which is what keeps this cheap on large repositories.
type stagedCompare struct {
	ctx  context.Context
	r    *repo
	spec pathspec
	out  []change
}

// stagedChanges returns the changes from tree (zero: empty) to the stage-0 index entries.
func (r *repo) stagedChanges(ctx context.Context, idx *gitIndex, tree plumbing.Hash, spec pathspec) ([]change, error) {
	ents := make([]*idxEntry, 0, len(idx.entries))
	for _, e := range idx.entries {
		if e.stage() == 0 && !e.intentToAdd() {
			ents = append(ents, e)
		}
	}
	c := &stagedCompare{ctx: ctx, r: r, spec: spec}
	if err := c.dir(tree, "", ents, idx.tree); err != nil {
		return nil, err
	}
	detectRenames(c.out)
	out := c.out[:0]
	for _, ch := range c.out {
		if ch.code != 0 {
			out = append(out, ch)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out, nil
}

func (c *stagedCompare) dir(tree plumbing.Hash, prefix string, ents []*idxEntry, node *cacheTree) error {
	if node != nil && node.count >= 0 && node.count == len(ents) && plumbing.Hash(node.hash) == tree {
		return nil
	}
	if err := c.ctx.Err(); err != nil {
		return err
	}
	type seenEntry struct {
		mode filemode.FileMode
		hash plumbing.Hash
		used bool
	}
	tm := map[string]*seenEntry{}
	var order []string
	if !tree.IsZero() {
		if err := checkTreeDepth(prefix); err != nil {
			return err
		}
		tes, err := c.r.readTree(tree)
		if err != nil {
			return err
		}
		for _, te := range tes {
			tm[te.Name] = &seenEntry{mode: te.Mode, hash: te.Hash}
			order = append(order, te.Name)
		}
	}
	for i := 0; i < len(ents); {
		rest := ents[i].name[len(prefix):]
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			e := ents[i]
			i++
			te := tm[rest]
			if te != nil {
				te.used = true
			}
			if !c.spec.match(e.name) || c.r.frozen.covers(e.name) {
				if te != nil && isTreeMode(te.mode) && c.spec.touchesDir(e.name) {
					// the directory became a file and the pathspec names something
					// that was inside it: those files are deleted
					if err := c.deletedTree(te.hash, e.name+"/"); err != nil {
						return err
					}
				}
				continue
			}
			switch {
			case te == nil:
				c.added(e)
			case isTreeMode(te.mode):
				if err := c.deletedTree(te.hash, e.name+"/"); err != nil {
					return err
				}
				c.added(e)
			default:
				c.compare(e, normMode(uint32(te.mode)), te.hash)
			}
			continue
		}
		name := rest[:slash]
		sub := prefix + name + "/"
		j := i + 1
		for j < len(ents) && strings.HasPrefix(ents[j].name, sub) {
			j++
		}
		group := ents[i:j]
		i = j
		te := tm[name]
		if te != nil {
			te.used = true
		}
		if !c.spec.touchesDir(prefix+name) || c.r.frozen.covers(prefix+name) {
			continue
		}
		switch {
		case te != nil && isTreeMode(te.mode):
			if err := c.dir(te.hash, sub, group, node.child(name)); err != nil {
				return err
			}
		default:
			if te != nil && c.spec.match(prefix+name) {
				c.out = append(c.out, change{path: prefix + name, code: 'D', oldMode: normMode(uint32(te.mode)), oldHash: te.hash})
			}
			for _, e := range group {
				if c.spec.match(e.name) {
					c.added(e)
				}
			}
		}
	}
	for _, name := range order {
		te := tm[name]
		p := prefix + name
		if te.used || c.r.frozen.covers(p) {
			continue
		}
		if isTreeMode(te.mode) {
			if c.spec.touchesDir(p) {
				if err := c.deletedTree(te.hash, p+"/"); err != nil {
					return err
				}
			}
		} else if c.spec.match(p) {
			c.out = append(c.out, change{path: p, code: 'D', oldMode: normMode(uint32(te.mode)), oldHash: te.hash})
		}
	}
	return nil
}

func (c *stagedCompare) added(e *idxEntry) {
	c.out = append(c.out, change{path: e.name, code: 'A', newMode: e.mode, newHash: e.hash})
}

func (c *stagedCompare) compare(e *idxEntry, mode uint32, h plumbing.Hash) {
	if mode == e.mode && h == plumbing.Hash(e.hash) {
		return
	}
	code := byte('M')
	if objectKind(mode) != objectKind(e.mode) {
		code = 'T'
	}
	c.out = append(c.out, change{path: e.name, code: code, oldMode: mode, newMode: e.mode, oldHash: h, newHash: e.hash})
}

// deletedTree records every file of a tree that the index no longer has.
func (c *stagedCompare) deletedTree(tree plumbing.Hash, prefix string) error {
	if err := checkTreeDepth(prefix); err != nil {
		return err
	}
	tes, err := c.r.readTree(tree)
	if err != nil {
		return err
	}
	for _, te := range tes {
		p := prefix + te.Name
		if c.r.frozen.covers(p) {
			continue
		}
		if isTreeMode(te.Mode) {
			if c.spec.touchesDir(p) {
				if err := c.deletedTree(te.Hash, p+"/"); err != nil {
					return err
				}
			}
		} else if c.spec.match(p) {
			c.out = append(c.out, change{path: p, code: 'D', oldMode: normMode(uint32(te.Mode)), oldHash: te.Hash})
		}
	}
	return nil
}

// objectKind groups modes by what git diffs: file (either permission), link, submodule.
func objectKind(mode uint32) uint32 {
	switch mode {
	case modeRegular, modeExecutable:
		return modeRegular
	}
	return mode
}

// detectRenames pairs deletions and additions of identical content (same blob and kind)
// into renames, in path order, preferring a source with the same file name as git
// does; git's similarity-based detection is not attempted.
func detectRenames(chs []change) {
	type key struct {
		h    plumbing.Hash
		kind uint32
	}
	dels := map[key][]int{}
	for i, ch := range chs {
		if ch.code == 'D' && objectKind(ch.oldMode) != modeGitlink {
			k := key{ch.oldHash, objectKind(ch.oldMode)}
			dels[k] = append(dels[k], i)
		}
	}
	if len(dels) == 0 {
		return
	}
	for _, l := range dels {
		sort.Slice(l, func(a, b int) bool { return chs[l[a]].path < chs[l[b]].path })
	}
	adds := []int{}
	for i, ch := range chs {
		if ch.code == 'A' {
			adds = append(adds, i)
		}
	}
	sort.Slice(adds, func(a, b int) bool { return chs[adds[a]].path < chs[adds[b]].path })
	for _, i := range adds {
		k := key{chs[i].newHash, objectKind(chs[i].newMode)}
		l := dels[k]
		if len(l) == 0 {
			continue
		}
		// git's exact rename detection prefers a source with the same file name,
		// then the first in path order
		pick := 0
		for j, d := range l {
			if path.Base(chs[d].path) == path.Base(chs[i].path) {
				pick = j
				break
			}
		}
		d := l[pick]
		dels[k] = append(l[:pick:pick], l[pick+1:]...)
		chs[i].code = 'R'
		chs[i].oldPath = chs[d].path
		chs[i].oldMode = chs[d].oldMode
		chs[i].oldHash = chs[d].oldHash
		chs[d].code = 0 // merged into the rename
	}
}

// normMode maps the legacy group-writable file mode (100664) onto 100644, as git does.
func normMode(m uint32) uint32 {
	if m&0o170000 == 0o100000 && m != modeExecutable {
		return modeRegular
	}
	return m
}
