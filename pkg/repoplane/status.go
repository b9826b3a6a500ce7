package repoplane

import (
	"context"
	"crypto/sha1"
	"errors"
	"io"
	"io/fs"
	"sort"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// StatusOutput is the output of repo.status (see the tool's outputSchema).
type StatusOutput struct {
	Path     []string `json:"path"`
	Branch   *string  `json:"branch"`
	Head     *string  `json:"head"`
	Detached bool     `json:"detached"`
	Clean    bool     `json:"clean"`
	// InProgress lists the operations git left in progress (merge, cherry-pick,
	// revert, rebase, am, bisect), as git status reports them; empty when none.
	InProgress []string      `json:"inProgress"`
	Entries    []StatusEntry `json:"entries"`
	Truncated  bool          `json:"truncated"`
	// SubmodulesNotInspected lists the submodules (gitlink entries) present in the
	// working tree: only the commit each has checked out is compared, never the files
	// inside, so modified or untracked content in them (git status: " M sub") is not
	// reported. Empty when there are none.
	SubmodulesNotInspected [][]string `json:"submodulesNotInspected"`
}

// StatusEntry is one path of repo.status with porcelain-style letters ("." = unchanged).
type StatusEntry struct {
	Path     []string `json:"path"`
	OldPath  []string `json:"oldPath,omitempty"`
	Staging  string   `json:"staging"`
	Worktree string   `json:"worktree"`
	// Filter is the filter driver the path's attributes name (git-lfs: "lfs"), whose
	// clean command sharedos never runs; "" when none.
	Filter string `json:"filter,omitempty"`
	// Addressable is false when the path (or its old path) cannot be named in a
	// pathspec: a segment holding a control character such as a tab, a backslash,
	// leading or trailing white space, bytes that are not UTF-8, over 256 characters,
	// or a .git spelling. Such a file is staged with its directory. Absent otherwise.
	Addressable *bool `json:"addressable,omitempty"`
}

// addressable reports whether p can be named in a pathspec as status shows it.
func addressable(p string) bool {
	segs := splitPath(p)
	if kernel.ValidatePath(segs) != nil {
		return false
	}
	for _, s := range segs {
		if isDotGit(s) {
			return false
		}
	}
	return true
}

const maxIndexBytes = 1 << 30

// loadIndex reads .git/index (an absent index is empty) and returns it with the index
// file's modification time in seconds (for the racy-timestamp rule).
func (r *repo) loadIndex() (*gitIndex, uint32, error) {
	f, err := r.git.OpenFile("index", openReadNoFollow, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return &gitIndex{version: 2}, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxIndexBytes {
		return nil, 0, errUnsupportedIndex{"the index is not a regular file of sane size"}
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, 0, err
	}
	idx, err := decodeIndex(data)
	if err != nil {
		return nil, 0, err
	}
	r.idx = idx
	return idx, statOf(fi).mtimeS, nil
}

func (r *repo) status(ctx context.Context) (any, *opError) {
	head, oe := r.readHead()
	if oe != nil {
		return nil, oe
	}
	idx, idxSec, err := r.loadIndex()
	if err != nil {
		return nil, internal("read the index", err)
	}
	tree, oe := r.commitTree(head.hash)
	if oe != nil {
		return nil, oe
	}
	staged, err := r.stagedChanges(ctx, idx, tree, nil)
	if err != nil {
		return nil, internal("compare the index with HEAD", err)
	}
	w := newWalker(ctx, r, idxSec, true, nil)
	if err := w.run(idx.entries); err != nil {
		return nil, internal("compare the working tree with the index", err)
	}

	type row struct {
		path, old string
		x, y      byte
	}
	rows := map[string]*row{}
	var untracked []*row
	get := func(p string) *row {
		if r := rows[p]; r != nil {
			return r
		}
		r := &row{path: p, x: '.', y: '.'}
		rows[p] = r
		return r
	}
	for _, ch := range staged {
		rw := get(ch.path)
		rw.x = ch.code
		rw.old = ch.oldPath
	}
	wtRenamed := r.worktreeRenames(w.out) // new path -> old path
	for _, c := range w.out {
		if c.code == '?' {
			untracked = append(untracked, &row{path: c.path, x: '?', y: '?'})
			continue
		}
		get(c.path).y = c.code
	}
	for nw, old := range wtRenamed {
		if o := rows[old]; o != nil && o.x == '.' && rows[nw] != nil && rows[nw].old == "" {
			delete(rows, old)
			rows[nw].y, rows[nw].old = 'R', old
		}
	}
	for i := 0; i < len(idx.entries); {
		e := idx.entries[i]
		j := i + 1
		if e.stage() == 0 || r.frozen.covers(e.name) {
			i = j
			continue
		}
		mask := 0
		for ; i < len(idx.entries) && idx.entries[i].name == e.name; i++ {
			if s := idx.entries[i].stage(); s > 0 {
				mask |= 1 << (s - 1)
			}
		}
		rw := get(e.name)
		rw.x, rw.y = conflictCode(mask)
	}
	all := make([]*row, 0, len(rows)+len(untracked))
	for _, rw := range rows {
		all = append(all, rw)
	}
	all = append(all, untracked...)
	sort.Slice(all, func(i, j int) bool {
		if ui, uj := all[i].x == '?', all[j].x == '?'; ui != uj {
			return uj // untracked files after the others, as in git's porcelain
		}
		return all[i].path < all[j].path
	})
	out := StatusOutput{Path: r.path, Branch: head.branch(), Head: head.head(), Detached: head.ref == "",
		InProgress: r.inProgress(), Entries: make([]StatusEntry, 0, min(len(all), maxStatusEntries))}
	for _, rw := range all {
		if len(out.Entries) == maxStatusEntries {
			out.Truncated = true
			break
		}
		e := StatusEntry{Path: splitPath(rw.path), Staging: string(rw.x), Worktree: string(rw.y), Filter: r.filterOf(rw.path)}
		if rw.old != "" {
			e.OldPath = splitPath(rw.old)
		}
		if !addressable(rw.path) || rw.old != "" && !addressable(rw.old) {
			e.Addressable = new(bool)
		}
		out.Entries = append(out.Entries, e)
	}
	out.Clean = len(all) == 0
	out.SubmodulesNotInspected = [][]string{}
	for _, e := range idx.entries {
		if e.mode != modeGitlink || e.stage() != 0 || r.frozen.covers(e.name) || len(out.SubmodulesNotInspected) == maxStatusEntries {
			continue
		}
		if fi, err := r.wt.Lstat(e.name); err == nil && fi.IsDir() {
			out.SubmodulesNotInspected = append(out.SubmodulesNotInspected, splitPath(e.name))
		}
	}
	return out, nil
}

// conflictCode is git's two-letter status of an unmerged path from the stages it has
// (bit 0: stage 1, the common ancestor; bit 1: stage 2, ours; bit 2: stage 3, theirs).
func conflictCode(mask int) (byte, byte) {
	switch mask {
	case 1:
		return 'D', 'D' // both deleted
	case 2:
		return 'A', 'U' // added by us
	case 3:
		return 'U', 'D' // deleted by them
	case 4:
		return 'U', 'A' // added by them
	case 5:
		return 'D', 'U' // deleted by us
	case 6:
		return 'A', 'A' // both added
	}
	return 'U', 'U' // both modified
}

// worktreeRenames pairs files deleted from the working tree with intent-to-add files of
// identical content, the renames git status shows in its worktree column (" R"); as for
// staged renames, only identical contents are paired.
func (r *repo) worktreeRenames(out []wtChange) map[string]string {
	var chs []change
	dels := 0
	for _, c := range out {
		if c.code == 'D' && c.entry != nil {
			chs = append(chs, change{path: c.path, code: 'D', oldMode: c.entry.mode, oldHash: plumbing.Hash(c.entry.hash)})
			dels++
		}
	}
	if dels == 0 {
		return nil
	}
	for _, c := range out {
		if c.code != 'A' || c.entry == nil {
			continue
		}
		h, ok := r.worktreeBlob(c.path, c.newMode)
		if ok {
			chs = append(chs, change{path: c.path, code: 'A', newMode: c.newMode, newHash: h})
		}
	}
	detectRenames(chs)
	m := map[string]string{}
	for _, ch := range chs {
		if ch.code == 'R' {
			m[ch.path] = ch.oldPath
		}
	}
	return m
}

// worktreeBlob is the blob id of a working-tree file or link as git would store it.
func (r *repo) worktreeBlob(p string, mode uint32) (plumbing.Hash, bool) {
	if mode == modeSymlink {
		t, err := r.wt.Readlink(p)
		if err != nil {
			return plumbing.ZeroHash, false
		}
		return blobHash(sha1.New(), []byte(t)), true
	}
	data, err := readFileLimited(r.wt, p, maxStageFileBytes)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	conv, err := r.convertToGit(p, data)
	if err != nil {
		return plumbing.ZeroHash, false
	}
	return blobHash(sha1.New(), conv), true
}
