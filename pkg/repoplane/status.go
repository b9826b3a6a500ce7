package repoplane

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"sort"
)

// StatusOutput is the output of repo.status (see the tool's outputSchema).
type StatusOutput struct {
	Path      []string      `json:"path"`
	Branch    *string       `json:"branch"`
	Head      *string       `json:"head"`
	Detached  bool          `json:"detached"`
	Clean     bool          `json:"clean"`
	Entries   []StatusEntry `json:"entries"`
	Truncated bool          `json:"truncated"`
}

// StatusEntry is one path of repo.status with porcelain-style letters ("." = unchanged).
type StatusEntry struct {
	Path     []string `json:"path"`
	OldPath  []string `json:"oldPath,omitempty"`
	Staging  string   `json:"staging"`
	Worktree string   `json:"worktree"`
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
	for _, c := range w.out {
		if c.code == '?' {
			untracked = append(untracked, &row{path: c.path, x: '?', y: '?'})
			continue
		}
		get(c.path).y = c.code
	}
	for _, e := range idx.entries {
		if e.stage() != 0 && !r.frozen.covers(e.name) {
			rw := get(e.name)
			rw.x, rw.y = 'U', 'U'
		}
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
		Entries: make([]StatusEntry, 0, min(len(all), maxStatusEntries))}
	for _, rw := range all {
		if len(out.Entries) == maxStatusEntries {
			out.Truncated = true
			break
		}
		e := StatusEntry{Path: splitPath(rw.path), Staging: string(rw.x), Worktree: string(rw.y)}
		if rw.old != "" {
			e.OldPath = splitPath(rw.old)
		}
		out.Entries = append(out.Entries, e)
	}
	out.Clean = len(all) == 0
	return out, nil
}
