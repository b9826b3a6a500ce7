package repoplane

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
)

// StageOutput is the output of repo.stage (see the tool's outputSchema).
type StageOutput struct {
	Path    []string       `json:"path"`
	Staged  []StageEntry   `json:"staged"`
	Skipped []StageSkipped `json:"skipped,omitempty"`
}

// StageSkipped is a path under the pathspec that repo.stage deliberately left alone.
type StageSkipped struct {
	Path   []string `json:"path"`
	Reason string   `json:"reason"`
}

// StageEntry is one index entry repo.stage changed.
type StageEntry struct {
	Path   []string `json:"path"`
	Status string   `json:"status"`
}

const maxStageFileBytes = 256 << 20

// stage is git add for each pathspec entry: new and modified files are hashed into
// blobs and their index entries updated, vanished files are removed from the index.
// It runs no status of the whole tree (go-git's Add does): only the pathspec's
// subtrees are visited. Symbolic links, paths through them and nested repositories are
// never staged; ignored untracked files are skipped (or refused when named directly).
func (r *repo) stage(ctx context.Context, ps [][]string) (any, *opError) {
	if oe := r.refuseFrozenPathspec(ps); oe != nil {
		return nil, oe
	}
	spec := newPathspec(ps)
	exists := make([]bool, len(spec))
	for i, p := range ps {
		ok, oe := r.checkStagePath(p)
		if oe != nil {
			return nil, oe
		}
		exists[i] = ok
	}
	lock, oe := acquireLock(r.git, "index")
	if oe != nil {
		return nil, oe
	}
	defer lock.release()
	idx, idxSec, err := r.loadIndex()
	if err != nil {
		return nil, internal("read the index", err)
	}
	w := newWalker(ctx, r, idxSec, true, spec)
	if err := w.run(idx.entries); err != nil {
		return nil, internal("compare the working tree with the index", err)
	}
	// unmerged paths under the pathspec are resolved by staging what the tree holds now
	for i := 0; i < len(idx.entries); i++ {
		e := idx.entries[i]
		if e.stage() == 0 || !spec.match(e.name) || r.frozen.covers(e.name) {
			continue
		}
		for i+1 < len(idx.entries) && idx.entries[i+1].name == e.name {
			i++
		}
		fi, err := r.wt.Lstat(e.name)
		switch {
		case err != nil:
			w.out = append(w.out, wtChange{path: e.name, code: 'D', entry: e})
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, denied(CodeNotPermitted, "%s is a symbolic link; sharedos does not stage links", e.name)
		case fi.Mode().IsRegular():
			w.out = append(w.out, wtChange{path: e.name, code: 'M', entry: e, newMode: modeRegular})
		}
	}
	for i, e := range spec {
		if matchedIndex(idx.entries, e) {
			if onlySkipWorktree(idx.entries, e) {
				return nil, failed(CodeInvalidInput, "%s is outside the sparse checkout (skip-worktree) and is not staged", e)
			}
			continue
		}
		if !exists[i] {
			return nil, failed(CodeNotFound, "pathspec %s did not match any file", e)
		}
		found := false
		for _, c := range w.out {
			if spec[i : i+1].match(c.path) {
				found = true
				break
			}
		}
		if !found && r.ignoredPath(e) {
			return nil, failed(CodeInvalidInput, "%s is ignored (by .gitignore, .git/info/exclude or the host's excludes files) and is not staged", e)
		}
	}
	for _, c := range w.out {
		if c.entry == nil && !validIndexPath(c.path) {
			return nil, denied(CodeNotPermitted, "%s cannot be staged: git refuses to record a path naming .git in any spelling", c.path)
		}
		if c.newMode == modeSymlink {
			return nil, denied(CodeNotPermitted, "%s is a symbolic link; sharedos does not stage links", c.path)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, internal("stage", err)
	}

	updates := map[string]*idxEntry{}
	removed := map[string]bool{}
	out := StageOutput{Path: r.path, Staged: []StageEntry{}}
	// git add removes deleted entries as it goes, so an attributes file this call
	// removes no longer applies to the files it stages (from the index either)
	for _, c := range w.out {
		if c.code == 'D' && path.Base(c.path) == ".gitattributes" {
			r.attributes().forget(c.path)
		}
	}
	// a path whose attributes name a filter would need the filter's clean command,
	// which sharedos never runs: refused when named, skipped under a directory
	filtered := map[string]string{}
	for _, c := range w.out {
		if c.code == 'D' || c.newMode == modeGitlink {
			continue
		}
		f := r.filterOf(c.path)
		if f == "" {
			continue
		}
		for _, e := range spec {
			if e == c.path {
				return nil, failed(CodeFilterRequired, "%s has the filter attribute %q: git would run that filter's clean command to stage it, and sharedos never runs a program; stage it with git", c.path, f)
			}
		}
		filtered[c.path] = f
	}
	for _, c := range w.out {
		if c.code == '?' && c.newMode == modeGitlink {
			// a nested repository is never staged (git would add it as a gitlink)
			out.Skipped = append(out.Skipped, StageSkipped{Path: splitPath(c.path),
				Reason: "a nested git repository; sharedos does not stage repositories (git would record it as a submodule link)"})
			continue
		}
		if f := filtered[c.path]; f != "" {
			out.Skipped = append(out.Skipped, StageSkipped{Path: splitPath(c.path),
				Reason: "filter=" + f + ": git would run that filter's clean command to stage it, and sharedos never runs a program"})
			continue
		}
		if c.code == 'D' {
			removed[c.path] = true
			out.Staged = append(out.Staged, StageEntry{Path: splitPath(c.path), Status: "D"})
			continue
		}
		var ne *idxEntry
		if c.entry != nil && c.newMode == modeGitlink && c.hashed {
			// a submodule with new commits: record the commit it has checked out
			cp := *c.entry
			cp.hash, cp.flags, cp.ext = c.newHash, 0, 0
			ne = &cp
		} else {
			var oe *opError
			if ne, oe = r.stageFile(c); oe != nil {
				return nil, oe
			}
		}
		status := "M"
		switch {
		case c.entry == nil || c.entry.intentToAdd():
			status = "A"
		case objectKind(c.entry.mode) != objectKind(ne.mode):
			status = "T"
		case c.entry.stage() == 0 && c.entry.hash == ne.hash && c.entry.mode == ne.mode:
			// stat data only: refresh the entry silently
			updates[c.path] = ne
			continue
		}
		removed[c.path] = true // drops unmerged stages too
		updates[c.path] = ne
		out.Staged = append(out.Staged, StageEntry{Path: splitPath(c.path), Status: status})
	}
	// a directory that became a file: the file replaces every entry beneath it (even
	// assume-unchanged or skip-worktree ones, which the walk leaves alone), as in git
	for p := range updates {
		i := sort.Search(len(idx.entries), func(i int) bool { return idx.entries[i].name >= p+"/" })
		for ; i < len(idx.entries) && strings.HasPrefix(idx.entries[i].name, p+"/"); i++ {
			if q := idx.entries[i].name; !removed[q] {
				removed[q] = true
				out.Staged = append(out.Staged, StageEntry{Path: splitPath(q), Status: "D"})
			}
		}
	}
	// a file that became a directory: staging something inside replaces its entry
	for p := range updates {
		for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
			if q := p[:i]; !removed[q] && hasEntry(idx.entries, q) {
				removed[q] = true
				out.Staged = append(out.Staged, StageEntry{Path: splitPath(q), Status: "D"})
			}
		}
	}
	if len(updates) == 0 && len(removed) == 0 {
		return out, nil
	}
	ents := make([]*idxEntry, 0, len(idx.entries)+len(updates))
	for _, e := range idx.entries {
		if ne := updates[e.name]; ne != nil && !removed[e.name] {
			ents = append(ents, ne)
			delete(updates, e.name)
			continue
		}
		if removed[e.name] {
			continue
		}
		ents = append(ents, e)
	}
	for name, ne := range updates {
		_ = name
		ents = append(ents, ne)
	}
	sort.SliceStable(ents, func(i, j int) bool { return entryLess(ents[i], ents[j]) })
	for _, c := range w.out {
		if idx.tree != nil {
			idx.tree.invalidate(c.path)
		}
	}
	idx.entries = ents
	if err := lock.commit(encodeIndex(r.prepareWrite(idx))); err != nil {
		return nil, internal("write the index", err)
	}
	sort.Slice(out.Staged, func(i, j int) bool {
		return strings.Join(out.Staged[i].Path, "/") < strings.Join(out.Staged[j].Path, "/")
	})
	return out, nil
}

// checkStagePath inspects a pathspec entry segment by segment without following links:
// a link anywhere is refused. It reports whether the path exists.
func (r *repo) checkStagePath(p []string) (bool, *opError) {
	for i := range p {
		sub := strings.Join(p[:i+1], "/")
		fi, err := r.wt.Lstat(sub)
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
			return false, nil
		}
		if err != nil {
			return false, failed(CodeProviderError, "inspect %s: %v", sub, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			if i == len(p)-1 {
				return false, denied(CodeNotPermitted, "%s is a symbolic link; sharedos does not stage links", sub)
			}
			return false, denied(CodeNotPermitted, "%s runs through the symbolic link %s; sharedos does not follow links", strings.Join(p, "/"), sub)
		}
		if i < len(p)-1 && !fi.IsDir() {
			return false, nil
		}
	}
	return true, nil
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

// hasEntry reports whether the sorted index has an entry named exactly p.
func hasEntry(ents []*idxEntry, p string) bool {
	i := sort.Search(len(ents), func(i int) bool { return ents[i].name >= p })
	return i < len(ents) && ents[i].name == p
}

// matchedIndex reports whether the sorted index has an entry at or beneath p.
func matchedIndex(ents []*idxEntry, p string) bool {
	i := sort.Search(len(ents), func(i int) bool { return ents[i].name >= p })
	for ; i < len(ents); i++ {
		n := ents[i].name
		if n == p || strings.HasPrefix(n, p+"/") {
			return true
		}
		if !strings.HasPrefix(n, p) {
			return false
		}
	}
	return false
}

// onlySkipWorktree reports whether every stage-0 entry at or beneath p is marked
// skip-worktree (git add refuses such a pathspec: the paths are outside the sparse
// checkout).
func onlySkipWorktree(ents []*idxEntry, p string) bool {
	i := sort.Search(len(ents), func(i int) bool { return ents[i].name >= p })
	seen := false
	for ; i < len(ents); i++ {
		n := ents[i].name
		if n != p && !strings.HasPrefix(n, p+"/") {
			if !strings.HasPrefix(n, p) {
				break
			}
			continue
		}
		if ents[i].stage() != 0 || !ents[i].skipWorktree() {
			return false
		}
		seen = true
	}
	return seen
}

// ignoredPath reports whether p (or a directory above it) is ignored.
func (r *repo) ignoredPath(p string) bool {
	ir := r.baseIgnore()
	segs := splitPath(p)
	for i := range segs {
		dir := strings.Join(segs[:i], "/")
		name := ".gitignore"
		if dir != "" {
			name = dir + "/.gitignore"
		}
		if data := loadIgnoreFile(r.wt, name); data != nil {
			ir = ir.with(data, strings.Join(segs[:i], "/"))
		}
		isDir := true
		if i == len(segs)-1 {
			fi, err := r.wt.Lstat(p)
			isDir = err == nil && fi.IsDir()
		}
		if ir.match(strings.Join(segs[:i+1], "/"), isDir) {
			return true
		}
	}
	return false
}

// stageFile hashes a working-tree file into a blob and returns its new index entry.
func (r *repo) stageFile(c wtChange) (*idxEntry, *opError) {
	fi, err := r.wt.Lstat(c.path)
	if err != nil {
		return nil, failed(CodeProviderError, "inspect %s: %v", c.path, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, denied(CodeNotPermitted, "%s is a symbolic link; sharedos does not stage links", c.path)
	}
	if !fi.Mode().IsRegular() {
		return nil, failed(CodeInvalidInput, "%s is not a regular file", c.path)
	}
	if fi.Size() > maxStageFileBytes {
		return nil, failed(CodeInvalidInput, "%s is larger than %d bytes", c.path, maxStageFileBytes)
	}
	f, err := r.wt.OpenFile(c.path, openReadNoFollow, 0)
	if err != nil {
		return nil, failed(CodeProviderError, "open %s: %v", c.path, err)
	}
	defer f.Close()
	si, err := f.Stat()
	if err != nil || !si.Mode().IsRegular() || !os.SameFile(fi, si) {
		return nil, busy("%s changed while it was staged; retry", c.path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStageFileBytes+1))
	if err != nil {
		return nil, failed(CodeProviderError, "read %s: %v", c.path, err)
	}
	conv, err := r.convertToGit(c.path, data)
	if err != nil {
		return nil, failed(CodeEncodingUnsupported, "%s cannot be staged: %v (git would refuse it too)", c.path, err)
	}
	h, err := r.writeObject(plumbing.BlobObject, conv)
	if err != nil {
		return nil, internal("store "+c.path, err)
	}
	mode := uint32(modeRegular)
	switch {
	case r.fileMode && si.Mode()&0o100 != 0:
		mode = modeExecutable
	case !r.fileMode && c.entry != nil && c.entry.mode == modeExecutable:
		mode = modeExecutable
	}
	sd := statOf(si)
	e := &idxEntry{ctimeS: sd.ctimeS, ctimeN: sd.ctimeN, mtimeS: sd.mtimeS, mtimeN: sd.mtimeN,
		dev: sd.dev, ino: sd.ino, mode: mode, uid: sd.uid, gid: sd.gid, size: sd.size,
		hash: h, name: c.path}
	if int64(len(data)) != si.Size() {
		e.size = 0 // changed while read: never trust these stat data
	}
	return e, nil
}

// writeObject stores an object (unless present) and returns its id.
func (r *repo) writeObject(t plumbing.ObjectType, data []byte) (plumbing.Hash, error) {
	obj := r.st.NewEncodedObject()
	obj.SetType(t)
	obj.SetSize(int64(len(data)))
	wr, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if _, err := wr.Write(data); err != nil {
		return plumbing.ZeroHash, err
	}
	if err := wr.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	h := obj.Hash()
	if r.st.HasEncodedObject(h) == nil {
		return h, nil
	}
	return r.st.SetEncodedObject(obj)
}

// prepareWrite smudges racily clean entries before the index is written, as git's
// ce_smudge_racily_clean_entry does: an entry whose file was modified within the last
// second cannot be told apart by stat data from a same-second change, so its file is
// compared with the entry now, and only when it differs (or cannot be read) does the
// entry get size 0, which makes every later reader re-hash it. An entry that still
// matches keeps its stat data, so git diff-files does not list just-staged files.
func (r *repo) prepareWrite(idx *gitIndex) *gitIndex {
	now := uint32(time.Now().Unix())
	var w *walker
	for _, e := range idx.entries {
		if e.mtimeS+1 < now || e.mode == modeGitlink || e.size == 0 {
			continue
		}
		if e.stage() != 0 || e.intentToAdd() || e.skipWorktree() || e.assumeUnchanged() {
			e.size = 0
			continue
		}
		if w == nil {
			w = newWalker(context.Background(), r, 0, false, nil)
		}
		if !r.stillMatches(w, e) {
			e.size = 0
		}
	}
	return idx
}

// stillMatches reports whether the working-tree file of e has e's stat data and content.
func (r *repo) stillMatches(w *walker, e *idxEntry) bool {
	dir, name := "", e.name
	if i := strings.LastIndexByte(e.name, '/'); i >= 0 {
		dir, name = e.name[:i], e.name[i+1:]
	}
	root := r.wt
	if dir != "" {
		sub, err := r.wt.OpenRoot(dir)
		if err != nil {
			return false
		}
		defer sub.Close()
		root = sub
	}
	d, err := openDirHandle(root)
	if err != nil {
		return false
	}
	defer d.close()
	st, err := d.lstat(name)
	if err != nil || st.sd.size != e.size || st.sd.mtimeS != e.mtimeS || st.sd.mtimeN != e.mtimeN {
		return false
	}
	if r.filterOf(e.name) != "" {
		// the filter's clean command would decide, and it is never run: stat data
		// that still match are kept (the raw bytes never equal the stored pointer)
		return true
	}
	h, err := w.hashPath(d, e.name, name, st)
	return err == nil && h == plumbing.Hash(e.hash)
}
