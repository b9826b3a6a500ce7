package repoplane

import (
	"context"
	"crypto/sha1"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
)

// statData is the part of lstat that git records per index entry.
type statData struct {
	ctimeS, ctimeN, mtimeS, mtimeN, dev, ino, uid, gid, size uint32
}

// pathspec is a list of repository-relative paths ("a/b"); nil means everything.
type pathspec []string

func newPathspec(ps [][]string) pathspec {
	if ps == nil {
		return nil
	}
	out := make(pathspec, len(ps))
	for i, p := range ps {
		out[i] = strings.Join(p, "/")
	}
	return out
}

// match reports whether path is one of the entries or lies beneath one.
func (s pathspec) match(path string) bool {
	if s == nil {
		return true
	}
	for _, e := range s {
		if path == e || strings.HasPrefix(path, e) && len(path) > len(e) && path[len(e)] == '/' {
			return true
		}
	}
	return false
}

// touchesDir reports whether anything beneath directory dir can match.
func (s pathspec) touchesDir(dir string) bool {
	if s == nil {
		return true
	}
	if s.match(dir) {
		return true
	}
	for _, e := range s {
		if strings.HasPrefix(e, dir) && len(e) > len(dir) && e[len(dir)] == '/' {
			return true
		}
	}
	return false
}

// wtChange is one difference between the index and the working tree, or an untracked
// path (code '?').
type wtChange struct {
	path    string
	code    byte      // 'M' modified, 'D' deleted, 'T' type changed, 'A' intent to add, '?' untracked
	entry   *idxEntry // the index side; nil when untracked
	newMode uint32    // the working-tree mode; 0 when deleted; modeGitlink for a nested repository
	newHash plumbing.Hash
	hashed  bool     // newHash is known
	stat    statData // lstat data of the working-tree file (when present)
}

// walker compares the working tree with the index in one pass over both. Directories
// are opened one level at a time from descriptors (never by re-resolving a full path),
// symbolic links are never followed, ignored directories are not descended into unless
// they hold tracked files, and a tracked file whose stat data still match its index
// entry is not read (unless it is racily clean: modified in the same second the index
// was written, git's rule).
//
// What is never skipped, and why (issue 28 item 2, decided after git's read-cache.c):
//   - Every tracked file is lstat'ed. git's refresh_cache_ent skips the lstat only for
//     an entry marked assume-unchanged (CE_VALID) or skip-worktree, or one an fsmonitor
//     daemon vouched for (CE_FSMONITOR_VALID); otherwise the stat data decide, and
//     d_type cannot stand for them (a clean file and an edited one have the same
//     type). The walker skips the first two like git; the fsmonitor bits of an index
//     are not trusted (that would need the daemon's answer for the index's token).
//   - No untracked cache. An ignored directory is never opened or listed (it is one
//     name in its parent's listing; only its tracked entries, if any, are looked up),
//     so a tree of ignored files costs nothing to cache. git's untracked cache (the
//     index's UNTR extension) saves the listing of unchanged tracked directories
//     across processes, validated by each directory's stat data and the hashes of
//     the ignore files; using it would mean replicating those validity rules exactly
//     (and a status writing the index to keep it), and within one process a status
//     walks each directory once. So each status lists every directory it enters.
type walker struct {
	*walkShared
	out   []wtChange
	buf   []byte
	h     hash.Hash
	spare []map[string]fs.FileMode // listing maps of finished directories, reused
}

// takeNames returns an empty map for a directory's listing (one of a finished
// directory's when there is one: a walk allocates about one map per level of depth,
// not one per directory).
func (w *walker) takeNames() map[string]fs.FileMode {
	if n := len(w.spare); n > 0 {
		m := w.spare[n-1]
		w.spare = w.spare[:n-1]
		return m
	}
	return make(map[string]fs.FileMode)
}

func (w *walker) putNames(m map[string]fs.FileMode) {
	if len(m) > 256 {
		return // an unusually large directory's map is not kept
	}
	clear(m)
	w.spare = append(w.spare, m)
}

// walkShared is the state all goroutines of one walk share. Subdirectories are handed
// to another goroutine while a slot is free (git's preload-index does the same with
// threads), otherwise walked inline.
type walkShared struct {
	ctx       context.Context
	r         *repo
	idxSec    uint32 // mtime (seconds) of the index file; 0 when there was none
	untracked bool   // list untracked files
	spec      pathspec
	sem       chan struct{}
	wg        sync.WaitGroup
	mu        sync.Mutex
	merged    []wtChange
	err       error
	failed    atomic.Bool
}

func newWalker(ctx context.Context, r *repo, idxSec uint32, untracked bool, spec pathspec) *walker {
	sh := &walkShared{ctx: ctx, r: r, idxSec: idxSec, untracked: untracked, spec: spec,
		sem: make(chan struct{}, max(runtime.GOMAXPROCS(0)-1, 0))}
	return sh.newLocal()
}

func (sh *walkShared) newLocal() *walker {
	return &walker{walkShared: sh, buf: make([]byte, 64<<10), h: sha1.New()}
}

func (w *walker) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
	}
	w.mu.Unlock()
	w.failed.Store(true)
}

// run walks the whole working tree against entries (the sorted index); the changes
// are left in w.out (unordered).
func (w *walker) run(entries []*idxEntry) error {
	d, err := openDirHandle(w.r.wt)
	if err != nil {
		return fmt.Errorf("open the working tree: %w", err)
	}
	w.walkDir(d, "", entries, false, w.r.baseIgnore())
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.out = append(w.out, w.merged...)
	w.merged = nil
	return w.err
}

// spawn walks sub in another goroutine when a slot is free; it reports false otherwise.
// The goroutine owns sub and closes it.
func (w *walker) spawn(sub *dirHandle, prefix string, ents []*idxEntry, ignored bool, ir *ignoreRules) bool {
	select {
	case w.sem <- struct{}{}:
	default:
		return false
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() { <-w.sem }()
		cw := w.newLocal()
		cw.walkDir(sub, prefix, ents, ignored, ir)
		w.mu.Lock()
		w.merged = append(w.merged, cw.out...)
		w.mu.Unlock()
	}()
	return true
}

// testHookListed, when set by a test, runs after a directory was listed and before
// anything in it is inspected (where a concurrent swap would strike).
var testHookListed func(prefix string)

func (w *walker) add(c wtChange) { w.out = append(w.out, c) }

// walkDir visits directory d (path prefix, "" or ending in "/"), and closes it; ents
// are the index entries beneath it, sorted. The directory is listed only when untracked
// files are wanted and it is not ignored; otherwise only its tracked entries are looked
// up.
func (w *walker) walkDir(d *dirHandle, prefix string, ents []*idxEntry, ignored bool, ir *ignoreRules) {
	defer d.close()
	if w.failed.Load() {
		return
	}
	if err := w.ctx.Err(); err != nil {
		w.fail(err)
		return
	}
	listing := w.untracked && !ignored
	var names map[string]fs.FileMode // listed names not yet matched with the index
	if listing {
		names = w.takeNames()
		defer w.putNames(names)
		if err := d.list(w.buf, func(name string, typ fs.FileMode) { names[name] = typ }); err != nil {
			w.fail(fmt.Errorf("read directory %q: %w", prefix, err))
			return
		}
		if testHookListed != nil {
			testHookListed(prefix)
		}
		if t, ok := names[".gitignore"]; ok && (t == 0 || t == typeUnknown) { // read only if regular
			if data, err := d.readFileLimited(".gitignore", maxIgnoreFileBytes); err == nil {
				ir = ir.with(data, strings.TrimSuffix(prefix, "/"))
			}
		}
	}
	for i := 0; i < len(ents); {
		rest := ents[i].name[len(prefix):]
		slash := strings.IndexByte(rest, '/')
		j := i + 1
		if slash < 0 {
			for j < len(ents) && ents[j].name == ents[i].name {
				j++
			}
			typ, seen := names[rest]
			delete(names, rest)
			if w.r.frozen.covers(ents[i].name) {
				// frozen by the host: never inspected, never reported
			} else if w.spec.match(ents[i].name) && (seen || !listing) {
				w.checkEntry(d, prefix, rest, ents[i:j], listing, ir)
			} else if w.spec.match(ents[i].name) {
				w.missing(ents[i:j])
			} else if seen && w.spec.touchesDir(ents[i].name) {
				if typ == typeUnknown { // the fast listing gives names only
					if st, err := d.lstat(rest); err == nil {
						typ = typeOf(st.mode)
					}
				}
				if typ == fs.ModeDir {
					// the tracked file became a directory and the pathspec names
					// something inside it: what is there is new (staging it replaces
					// the file entry)
					w.untrackedEntry(d, prefix, rest, fs.ModeDir, ir)
				}
			}
		} else {
			name := rest[:slash]
			sub := prefix + name + "/"
			for j < len(ents) && strings.HasPrefix(ents[j].name, sub) {
				j++
			}
			typ, seen := names[name]
			delete(names, name)
			if w.spec.touchesDir(prefix+name) && !w.r.frozen.covers(prefix+name) {
				w.checkDir(d, prefix, name, ents[i:j], ignored, listing, ir, typ, seen)
			}
		}
		i = j
	}
	for name, typ := range names {
		w.untrackedEntry(d, prefix, name, typ, ir)
	}
}

// missing reports tracked entries whose file is gone.
func (w *walker) missing(group []*idxEntry) {
	for _, e := range group {
		if e.stage() == 0 && !e.skipWorktree() && !e.assumeUnchanged() && w.spec.match(e.name) {
			w.add(wtChange{path: e.name, code: 'D', entry: e})
		}
	}
}

// checkEntry compares one tracked file (group: its index entries, several when unmerged).
func (w *walker) checkEntry(d *dirHandle, prefix, name string, group []*idxEntry, listing bool, ir *ignoreRules) {
	e := group[0]
	if len(group) > 1 || e.stage() != 0 || e.skipWorktree() || e.assumeUnchanged() {
		// unmerged entries are reported as such; skip-worktree and assume-unchanged
		// entries are taken as up to date without looking (git's refresh does the same);
		// a directory now in the entry's place is still listed for untracked files
		if listing {
			if st, err := d.lstat(name); err == nil && st.mode.IsDir() {
				w.untrackedEntry(d, prefix, name, fs.ModeDir, ir)
			}
		}
		return
	}
	st, err := d.lstat(name)
	if err != nil && (errors.Is(err, fs.ErrNotExist) || isNotDir(err)) {
		w.add(wtChange{path: e.name, code: 'D', entry: e})
		return
	}
	if err != nil {
		w.fail(fmt.Errorf("inspect %q: %w", e.name, err))
		return
	}
	mode := st.mode
	c := wtChange{path: e.name, entry: e, stat: st.sd}
	switch {
	case e.mode == modeGitlink:
		// a submodule: only the commit it has checked out is compared (submodule.go)
		if !mode.IsDir() {
			c.code = 'D'
			w.add(c)
		} else if root, err := d.rootOf(); err == nil {
			if h, ok := w.r.submoduleHead(root, name, e.name); ok && h != plumbing.Hash(e.hash) {
				c.code, c.newMode, c.newHash, c.hashed = 'M', modeGitlink, h, true
				w.add(c)
			}
		}
		return
	case mode.IsDir():
		w.add(wtChange{path: e.name, code: 'D', entry: e})
		if listing {
			w.untrackedEntry(d, prefix, name, fs.ModeDir, ir)
		}
		return
	case mode&fs.ModeSymlink != 0:
		c.newMode = modeSymlink
		if e.mode != modeSymlink {
			c.code = 'T'
			w.add(c)
			return
		}
	case mode.IsRegular():
		c.newMode = modeRegular
		if w.r.fileMode && mode&0o100 != 0 || !w.r.fileMode && e.mode == modeExecutable {
			c.newMode = modeExecutable
		}
		if e.mode == modeSymlink {
			c.code = 'T'
			w.add(c)
			return
		}
	default: // a socket, fifo or device is not content git tracks
		w.add(wtChange{path: e.name, code: 'D', entry: e})
		return
	}
	if e.intentToAdd() { // git add -N: present in the index only as an intention
		c.code = 'A'
		w.add(c)
		return
	}
	if c.newMode == e.mode && w.statClean(e, st.sd) {
		return
	}
	if c.newMode == e.mode && e.size != 0 && e.size != st.sd.size {
		// git's ie_modified: a size other than the recorded one is a change, without
		// reading the file (even when end-of-line conversion would make it equal)
		c.code = 'M'
		w.add(c)
		return
	}
	if c.newMode == e.mode && e.size != 0 && (w.idxSec == 0 || e.mtimeS < w.idxSec) && w.r.filterOf(e.name) != "" {
		// a filtered file (git-lfs…) of the recorded size whose other stat data
		// changed (touched, copied back): git would run the clean command and compare
		// its output; sharedos cannot, and the raw bytes never equal the stored
		// pointer. The entry is not racily clean (its mtime is before the index
		// was written), so, as git trusts such an entry's size, it is taken as
		// unchanged. A different size is reported as a change (above).
		return
	}
	h, err := w.hashPath(d, e.name, name, st)
	if err != nil {
		w.fail(err)
		return
	}
	c.newHash, c.hashed = h, true
	if h == plumbing.Hash(e.hash) && c.newMode == e.mode {
		return
	}
	c.code = 'M'
	w.add(c)
}

// statClean reports whether the recorded stat data still match and are trustworthy.
func (w *walker) statClean(e *idxEntry, sd statData) bool {
	if e.size != sd.size || e.mtimeS != sd.mtimeS || e.mtimeN != 0 && e.mtimeN != sd.mtimeN {
		return false
	}
	if w.r.ctime && (e.ctimeS != sd.ctimeS || e.ctimeN != 0 && e.ctimeN != sd.ctimeN) {
		return false
	}
	if e.ino != 0 && sd.ino != 0 && e.ino != sd.ino || e.uid != sd.uid || e.gid != sd.gid {
		return false
	}
	// racily clean: the file may have changed in the same second the index was written
	return w.idxSec == 0 || e.mtimeS < w.idxSec
}

// checkDir handles a directory holding tracked entries (typ/seen: from the listing).
func (w *walker) checkDir(d *dirHandle, prefix, name string, group []*idxEntry, ignored, listing bool, ir *ignoreRules, typ fs.FileMode, seen bool) {
	// not listing (an ignored directory, or no untracked files wanted): the open below
	// decides, a link or file in the directory's place is "not a directory"
	isDir := seen && typ == fs.ModeDir || !listing
	if listing && seen && typ == typeUnknown {
		st, err := d.lstat(name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
			w.fail(fmt.Errorf("inspect %q: %w", prefix+name, err))
			return
		}
		isDir = err == nil && st.mode.IsDir()
		if err == nil {
			typ = typeOf(st.mode)
		}
	}
	var sub *dirHandle
	if isDir {
		var err error
		sub, err = d.openSub(name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !isNotDir(err) {
			w.fail(fmt.Errorf("open %q: %w", prefix+name, err))
			return
		}
	}
	if sub == nil {
		// gone, or replaced by a file or a link (never followed): every entry is deleted
		w.missing(group)
		if listing && seen {
			w.untrackedEntry(d, prefix, name, typ, ir)
		}
		return
	}
	cignored := ignored
	if listing && ir.match(prefix+name, true) {
		cignored = true
	}
	if w.spawn(sub, prefix+name+"/", group, cignored, ir) {
		return
	}
	w.walkDir(sub, prefix+name+"/", group, cignored, ir)
}

// untrackedEntry handles a listed name with no index entry.
func (w *walker) untrackedEntry(d *dirHandle, prefix, name string, typ fs.FileMode, ir *ignoreRules) {
	p := prefix + name
	if name == ".git" || w.failed.Load() || w.r.frozen.covers(p) {
		// only the repository's own name is hidden, as in git: ".GIT" or "git~1" on a
		// case-sensitive file system are ordinary untracked names (that git, and
		// sharedos, refuse to stage); a frozen path is never inspected
		return
	}
	if typ == typeUnknown {
		st, err := d.lstat(name)
		if err != nil {
			return // gone since it was listed
		}
		typ = typeOf(st.mode)
	}
	switch typ {
	case fs.ModeDir:
		if !w.spec.touchesDir(p) || ir.match(p, true) {
			return
		}
		sub, err := d.openSub(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
				return
			}
			w.fail(fmt.Errorf("open %q: %w", p, err))
			return
		}
		if st, err := sub.lstat(".git"); err == nil && (st.mode.IsDir() || st.mode.IsRegular()) {
			// a nested repository is shown as one entry and never entered
			sub.close()
			if w.spec.match(p) {
				w.add(wtChange{path: p, code: '?', newMode: modeGitlink})
			}
			return
		}
		if w.spawn(sub, p+"/", nil, false, ir) {
			return
		}
		w.walkDir(sub, p+"/", nil, false, ir)
	case fs.ModeSymlink, 0:
		if !w.spec.match(p) || ir.match(p, false) {
			return
		}
		c := wtChange{path: p, code: '?', newMode: modeRegular}
		if typ == fs.ModeSymlink {
			c.newMode = modeSymlink
		}
		w.add(c)
	}
}

func isNotDir(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && (errors.Is(pe.Err, syscall.ENOTDIR) || strings.Contains(pe.Err.Error(), "not a directory"))
}

// hashPath computes the blob id of a working-tree file or link (name in d, lstat st,
// path its repository path) without following links, after git's built-in end-of-line
// conversion, working-tree-encoding and ident when the file's attributes or
// core.autocrlf ask for them (never a filter).
func (w *walker) hashPath(d *dirHandle, path, name string, st fileStat) (plumbing.Hash, error) {
	if st.mode&fs.ModeSymlink != 0 {
		t, err := d.readlink(name)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read link %s: %w", name, err)
		}
		return blobHash(w.h, []byte(t)), nil
	}
	f, err := d.openChecked(name, st)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	defer f.Close()
	if action, at := w.r.conversion(path); needsFullRead(action, at) && st.size <= maxStageFileBytes {
		data, err := io.ReadAll(io.LimitReader(f, maxStageFileBytes+1))
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read %s: %w", name, err)
		}
		if int64(len(data)) != st.size {
			return plumbing.ZeroHash, nil // changed while read: reported as modified
		}
		conv, err := w.r.convertToGit(path, data)
		if err != nil {
			return plumbing.ZeroHash, nil // not convertible: reported as modified
		}
		return blobHash(w.h, conv), nil
	}
	w.h.Reset()
	w.h.Write([]byte("blob " + strconv.FormatInt(st.size, 10) + "\x00"))
	n, err := io.CopyBuffer(w.h, f, w.buf)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("read %s: %w", name, err)
	}
	if n != st.size {
		return plumbing.ZeroHash, nil // changed while read: reported as modified
	}
	var out plumbing.Hash
	copy(out[:], w.h.Sum(nil))
	return out, nil
}

// openChecked opens a regular file without following a link and checks it is the file
// lstat described (a file swapped for another in between is refused, not read).
func openChecked(root *os.Root, name string, st fileStat) (*os.File, error) {
	f, err := root.OpenFile(name, openReadNoFollow, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	if !sameFile(st, f) {
		f.Close()
		return nil, fmt.Errorf("%s changed while it was read", name)
	}
	return f, nil
}

// blobHash is git's object id of data as a blob.
func blobHash(h hash.Hash, data []byte) plumbing.Hash {
	h.Reset()
	h.Write([]byte("blob " + strconv.Itoa(len(data)) + "\x00"))
	h.Write(data)
	var out plumbing.Hash
	copy(out[:], h.Sum(nil))
	return out
}
