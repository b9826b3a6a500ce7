package fsplane

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"syscall"
)

// A restore streams every blob it puts back (its digest checked on the way), so its
// memory does not grow with the files' size.
//
// A directory restore runs in two phases. Staging changes nothing visible: it walks the
// current tree, takes the write lock of every directory it will change (in path order,
// so two restores cannot deadlock) and writes each file to put back to a temporary file
// beside its target (a missing directory is built whole in a temporary directory). A
// failure while staging (a damaged blob, a full disk, an unreadable entry) removes what
// was staged, so the old tree is left as it was, and names the entry. Only then does the
// commit phase rename the staged entries into place and remove what was created since
// the snapshot: each step is atomic, and a failure there (rare: the renames were
// prepared) says where the restore stopped.

// restoreFile puts back the single file of a file snapshot.
func (p *Provider) restoreFile(ctx context.Context, path []string, rec *SnapshotRecord, expected *string) (any, error) {
	e := rec.Entries[0]
	if !blobNameOK(e.Blob) {
		return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged (bad blob name)", rec.ID)
	}
	parent, name, dirf, release, err := p.lockedParent(ctx, path, expected == nil, expected != nil)
	if err != nil {
		return nil, err
	}
	defer release()
	out := SnapshotRestoreOutput{Path: path, SnapshotID: rec.ID, Kind: SnapshotFile, Version: e.Blob[:32]}
	fi, err := parent.r.Lstat(name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	buf := make([]byte, copyBuf)
	var mode fs.FileMode
	if exists {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, escapeErr(path, false)
		case fi.IsDir():
			return nil, failed(CodeNotAFile, "%s is now a directory; delete it first to restore the file snapshot %s", show(path), rec.ID)
		case !fi.Mode().IsRegular():
			return nil, failed(CodeNotAFile, "%s is not a regular file", show(path))
		}
		sum, st, err := hashFileIn(parent.r, name, path, buf)
		if err != nil {
			return nil, err
		}
		if expected != nil && versionOfDigest(sum) != *expected {
			return nil, versionConflict(path, versionOfDigest(sum))
		}
		if hex.EncodeToString(sum) == e.Blob {
			return out, nil
		}
		mode = st.Mode().Perm()
	} else if expected != nil {
		return nil, versionConflict(path, "")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fill := func(w io.Writer) error { return p.copyBlob(w, rec.ID, e, buf) }
	if err := atomicWriteFrom(parent.r, dirf, name, fill, mode, exists, false); err != nil {
		return nil, err
	}
	out.Restored = 1
	return out, nil
}

// restoreNode is the content a directory snapshot holds for one directory.
type restoreNode struct {
	files map[string]SnapshotEntry
	dirs  map[string]*restoreNode
}

func newRestoreNode() *restoreNode {
	return &restoreNode{files: map[string]SnapshotEntry{}, dirs: map[string]*restoreNode{}}
}

// buildRestoreTree arranges the entries of rec (a snapshot of path) as a tree, leaving
// out those at or below a frozen path: a snapshot taken before a path was frozen does not
// put its content back.
func (p *Provider) buildRestoreTree(rec *SnapshotRecord, path []string) (*restoreNode, error) {
	root := newRestoreNode()
	for _, e := range rec.Entries {
		if len(e.Path) == 0 || checkSegments(e.Path) != nil {
			return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged (bad entry path %q)", rec.ID, e.Path)
		}
		if _, spec := p.frozen.at(append(clonePath(path), e.Path...)); spec != "" {
			continue
		}
		n := root
		for _, seg := range e.Path[:len(e.Path)-1] {
			if _, clash := n.files[seg]; clash {
				return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged (%s is both a file and a directory)", rec.ID, seg)
			}
			c := n.dirs[seg]
			if c == nil {
				c = newRestoreNode()
				n.dirs[seg] = c
			}
			n = c
		}
		last := e.Path[len(e.Path)-1]
		if _, clash := n.dirs[last]; clash {
			return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged (%s is both a file and a directory)", rec.ID, last)
		}
		n.files[last] = e
	}
	return root, nil
}

// Kinds of removal a restore step makes before it moves its staged entry into place.
const (
	removeNothing = iota
	removeEntry   // a file, link or special file
	removeTree    // a directory holding only files and directories
)

// restoreStep is one change to a directory, made in the commit phase.
type restoreStep struct {
	name    string
	tmp     string // the staged file or directory to rename to name ("" for none)
	remove  int    // what to remove at name first
	files   int    // files the staged entry holds
	removes int    // entries the removal takes away
}

// restoreDir is a directory the restore changes, locked from staging to the end.
type restoreDirPlan struct {
	path  []string
	name  string // its name in its parent
	r     *os.Root
	dirf  *os.File
	steps []restoreStep
	subs  []*restoreDirPlan // existing sub-directories, in name order
	rmdir bool              // not in the snapshot: removed once emptied (if it can be)
}

type restoreRun struct {
	p         *Provider
	ctx       context.Context
	rec       *SnapshotRecord
	buf       []byte
	release   []func() // unlock and close, in reverse
	staged    []func() // remove what was staged (a no-op once it was moved)
	restored  int
	removed   int
	preserved int
}

func (p *Provider) restoreDir(ctx context.Context, path []string, rec *SnapshotRecord) (any, error) {
	tree, err := p.buildRestoreTree(rec, path)
	if err != nil {
		return nil, err
	}
	run := &restoreRun{p: p, ctx: ctx, rec: rec, buf: make([]byte, copyBuf)}
	defer run.finish()
	fnode, _ := p.frozen.at(path)
	var top *restoreDirPlan
	if len(path) == 0 {
		if top, err = run.lock(p.root, nil, "", false); err != nil {
			return nil, err
		}
	} else {
		// The parent is locked first (path order): the snapshot's directory may have to
		// be built in it.
		parent, name, err := p.openParent(path, true)
		if err != nil {
			return nil, err
		}
		pp, err := run.lock(parent.r, path[:len(path)-1], "", parent.owned)
		if err != nil {
			return nil, err
		}
		fi, err := pp.r.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			tmp, files, err := run.stageTree(pp, tree, path)
			if err != nil {
				return nil, err
			}
			pp.steps = append(pp.steps, restoreStep{name: name, tmp: tmp, files: files})
			top = pp
		case err != nil:
			return nil, fsError(path, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, escapeErr(path, false)
		case !fi.IsDir():
			return nil, failed(CodeInvalidInput, "%s is now a file, but snapshot %s is of a directory; delete the file first", show(path), rec.ID)
		default:
			child, err := openChild(pp.r, name, path, false)
			if err != nil {
				return nil, err
			}
			if top, err = run.lock(child, path, name, true); err != nil {
				return nil, err
			}
		}
	}
	if top.name != "" || len(path) == 0 {
		repo, err := run.plan(top, tree, fnode)
		if err != nil {
			return nil, err
		}
		if repo {
			return nil, denied(CodeNotPermitted, "%s holds a .git repository; a restore never changes a repository's working tree (use the repo tools)", show(path))
		}
	}
	if err := run.commit(top); err != nil {
		return nil, err
	}
	return SnapshotRestoreOutput{Path: path, SnapshotID: rec.ID, Kind: SnapshotDirectory,
		Restored: run.restored, Removed: run.removed, Preserved: run.preserved}, nil
}

// lock takes the write lock of the directory r (at path, called name in its parent),
// removes stale temporary files in it, and registers its release.
func (run *restoreRun) lock(r *os.Root, path []string, name string, owned bool) (*restoreDirPlan, error) {
	dirf, unlock, err := lockDir(run.ctx, r)
	if err != nil {
		if owned {
			r.Close()
		}
		return nil, fsError(path, err)
	}
	run.release = append(run.release, func() {
		unlock()
		if owned {
			r.Close()
		}
	})
	cleanTemps(r, dirf)
	return &restoreDirPlan{path: clonePath(path), name: name, r: r, dirf: dirf}, nil
}

// finish removes what was staged and never moved into place, then releases every lock.
func (run *restoreRun) finish() {
	for i := len(run.staged) - 1; i >= 0; i-- {
		run.staged[i]()
	}
	for i := len(run.release) - 1; i >= 0; i-- {
		run.release[i]()
	}
}

// at names the entry a failure happened on, and says that nothing was changed.
func (run *restoreRun) at(path []string, err error) error {
	err = fsError(path, err)
	var oe *opError
	if errors.As(err, &oe) {
		c := *oe
		c.msg = capMessage(fmt.Sprintf("cannot restore %s from snapshot %s: %s; nothing was changed", show(path), run.rec.ID, oe.msg))
		return &c
	}
	return err
}

// plan stages the changes that make the directory d equal to node, recursing into its
// sub-directories. It reports repo=true, changing nothing, when d holds a .git entry.
func (run *restoreRun) plan(d *restoreDirPlan, node *restoreNode, fnode *frozenNode) (repo bool, err error) {
	if err := run.ctx.Err(); err != nil {
		return false, err
	}
	names, err := readNames(d.r)
	if err != nil {
		return false, run.at(d.path, err)
	}
	for _, n := range names {
		if isGitName(n) {
			return true, nil
		}
	}
	sort.Strings(names)
	p := run.p
	seen := map[string]bool{}
	for _, n := range names {
		if hidden(n) {
			continue
		}
		child := append(clonePath(d.path), n)
		if c := p.frozen.child(fnode, n); c != nil && c.frozen {
			seen[n] = true
			run.preserved++
			continue
		}
		fi, err := d.r.Lstat(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, run.at(child, err)
		}
		seen[n] = true
		if frozenIDsFrom(run.ctx).of(fi) != "" {
			run.preserved++ // a frozen entry under another name
			continue
		}
		want, wantFile := node.files[n]
		wantNode, wantDir := node.dirs[n]
		isLink := fi.Mode()&fs.ModeSymlink != 0
		switch {
		case fi.IsDir() && !isLink && wantFile:
			// A directory where the snapshot has a file: replaced only when it holds
			// nothing a restore must keep.
			files, ok, err := removableTree(d.r, n, child, frozenIDsFrom(run.ctx))
			if err != nil {
				return false, run.at(child, err)
			}
			if !ok || p.frozen.below(child) != "" {
				run.preserved++
				continue
			}
			tmp, err := run.stageFile(d, want, child, 0, false)
			if err != nil {
				return false, err
			}
			d.steps = append(d.steps, restoreStep{name: n, tmp: tmp, remove: removeTree, files: 1, removes: files})
		case fi.IsDir() && !isLink:
			sub, err := openChild(d.r, n, child, false)
			if err != nil {
				return false, run.at(child, err)
			}
			sd, err := run.lock(sub, child, n, true)
			if err != nil {
				return false, err
			}
			if !wantDir {
				wantNode = newRestoreNode()
			}
			repo, err := run.plan(sd, wantNode, p.frozen.child(fnode, n))
			if err != nil {
				return false, err
			}
			if repo {
				run.preserved++ // a repository's working tree: the repo plane's, left as it is
				continue
			}
			sd.rmdir = !wantDir
			d.subs = append(d.subs, sd)
		case fi.Mode().IsRegular() && wantFile:
			if fi.Size() == want.Size {
				sum, _, err := hashFileIn(d.r, n, child, run.buf)
				if err != nil {
					return false, run.at(child, err)
				}
				if hex.EncodeToString(sum) == want.Blob {
					continue
				}
			}
			tmp, err := run.stageFile(d, want, child, fi.Mode().Perm(), true)
			if err != nil {
				return false, err
			}
			d.steps = append(d.steps, restoreStep{name: n, tmp: tmp, files: 1})
		case wantFile:
			// A link or special file where the snapshot has a file: the entry itself is
			// removed (a link is never followed).
			tmp, err := run.stageFile(d, want, child, 0, false)
			if err != nil {
				return false, err
			}
			d.steps = append(d.steps, restoreStep{name: n, tmp: tmp, remove: removeEntry, files: 1, removes: 1})
		case wantDir:
			// A file, link or special file where the snapshot has a directory.
			tmp, files, err := run.stageTree(d, wantNode, child)
			if err != nil {
				return false, err
			}
			d.steps = append(d.steps, restoreStep{name: n, tmp: tmp, remove: removeEntry, files: files, removes: 1})
		case fi.Mode().IsRegular():
			// Created since the snapshot (a complete snapshot saw every file).
			d.steps = append(d.steps, restoreStep{name: n, remove: removeEntry, removes: 1})
		}
		// Links and special files the snapshot never captured are left alone.
	}
	for _, n := range sortedKeys(node.files) {
		if !seen[n] {
			tmp, err := run.stageFile(d, node.files[n], append(clonePath(d.path), n), 0, false)
			if err != nil {
				return false, err
			}
			d.steps = append(d.steps, restoreStep{name: n, tmp: tmp, files: 1})
		}
	}
	for _, n := range sortedKeys(node.dirs) {
		if !seen[n] {
			tmp, files, err := run.stageTree(d, node.dirs[n], append(clonePath(d.path), n))
			if err != nil {
				return false, err
			}
			d.steps = append(d.steps, restoreStep{name: n, tmp: tmp, files: files})
		}
	}
	sort.SliceStable(d.steps, func(i, j int) bool { return d.steps[i].name < d.steps[j].name })
	return false, nil
}

// stageFile writes the content of e to a new temporary file in d (mode perm when
// keepMode, else 0644) and returns its name; path is the entry's, for messages.
func (run *restoreRun) stageFile(d *restoreDirPlan, e SnapshotEntry, path []string, perm fs.FileMode, keepMode bool) (string, error) {
	tmp := tempName()
	if err := run.writeBlob(d.r, tmp, e, perm, keepMode); err != nil {
		return "", run.at(path, err)
	}
	r := d.r
	run.staged = append(run.staged, func() { r.Remove(tmp) })
	return tmp, nil
}

// writeBlob creates the file name in dir with the content of e, synced.
func (run *restoreRun) writeBlob(dir *os.Root, name string, e SnapshotEntry, perm fs.FileMode, keepMode bool) error {
	if !keepMode {
		perm = 0o644
	}
	f, err := dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = run.p.copyBlob(f, run.rec.ID, e, run.buf)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		dir.Remove(name)
	}
	return err
}

// stageTree builds the directory node in a new temporary directory in d and returns its
// name and the number of files in it; path is where it will go, for messages.
func (run *restoreRun) stageTree(d *restoreDirPlan, node *restoreNode, path []string) (string, int, error) {
	tmp := tempName()
	if err := d.r.Mkdir(tmp, 0o755); err != nil {
		return "", 0, run.at(path, err)
	}
	r := d.r
	run.staged = append(run.staged, func() { removeAllIn(r, tmp) })
	sub, err := openChild(d.r, tmp, path, false)
	if err != nil {
		return "", 0, run.at(path, err)
	}
	defer sub.Close()
	files, err := run.fillTree(sub, node, path)
	if err != nil {
		return "", 0, err
	}
	return tmp, files, nil
}

func (run *restoreRun) fillTree(dir *os.Root, node *restoreNode, path []string) (int, error) {
	if err := run.ctx.Err(); err != nil {
		return 0, err
	}
	files := 0
	for _, n := range sortedKeys(node.files) {
		if err := run.writeBlob(dir, n, node.files[n], 0, false); err != nil {
			return 0, run.at(append(clonePath(path), n), err)
		}
		files++
	}
	for _, n := range sortedKeys(node.dirs) {
		child := append(clonePath(path), n)
		if err := dir.Mkdir(n, 0o755); err != nil {
			return 0, run.at(child, err)
		}
		sub, err := openChild(dir, n, child, false)
		if err != nil {
			return 0, run.at(child, err)
		}
		k, err := run.fillTree(sub, node.dirs[n], child)
		sub.Close()
		if err != nil {
			return 0, err
		}
		files += k
	}
	if f, err := dir.Open("."); err == nil {
		f.Sync()
		f.Close()
	}
	return files, nil
}

// commit makes the staged changes of d and of its sub-directories, in path order.
func (run *restoreRun) commit(d *restoreDirPlan) error {
	for i := range d.steps {
		st := &d.steps[i]
		child := append(clonePath(d.path), st.name)
		var err error
		switch st.remove {
		case removeEntry:
			err = d.r.Remove(st.name)
		case removeTree:
			err = removeAllIn(d.r, st.name)
		}
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
		if err == nil && st.tmp != "" {
			err = d.r.Rename(st.tmp, st.name)
		}
		if err != nil {
			return run.stopped(child, err)
		}
		run.restored += st.files
		run.removed += st.removes
	}
	for _, sd := range d.subs {
		before := run.removed
		if err := run.commit(sd); err != nil {
			return err
		}
		if sd.rmdir && run.removed > before {
			// Not in the snapshot, and emptied by this restore: it goes too (it fails,
			// keeping it, unless it is empty). A snapshot records no directories, so one
			// that was already empty may have been there when it was taken: it stays.
			d.r.Remove(sd.name)
		}
	}
	d.dirf.Sync()
	return nil
}

// stopped is a failure of the commit phase.
func (run *restoreRun) stopped(path []string, err error) error {
	err = fsError(path, err)
	var oe *opError
	if errors.As(err, &oe) {
		c := *oe
		c.msg = capMessage(fmt.Sprintf("the restore of snapshot %s stopped at %s: %s; the entries before it (in path order) were restored, the others are as they were", run.rec.ID, show(path), oe.msg))
		return &c
	}
	return err
}

// removableTree reports whether the directory name in dir holds only regular files,
// temporary files and directories (so a restore may replace it by a file), and counts
// the files in it.
func removableTree(dir *os.Root, name string, path []string, ids frozenIDs) (int, bool, error) {
	sub, err := openChild(dir, name, path, false)
	if err != nil {
		return 0, false, err
	}
	defer sub.Close()
	names, err := readNames(sub)
	if err != nil {
		return 0, false, err
	}
	count := 0
	for _, n := range names {
		if isTempName(n) {
			continue
		}
		if hidden(n) {
			return 0, false, nil // .git, or a name no tool can address
		}
		fi, err := sub.Lstat(n)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		if ids.of(fi) != "" {
			return 0, false, nil // a frozen entry under another name
		}
		switch {
		case fi.Mode().IsRegular():
			count++
		case fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0:
			k, ok, err := removableTree(sub, n, append(clonePath(path), n), ids)
			if err != nil || !ok {
				return 0, ok, err
			}
			count += k
		default:
			return 0, false, nil // a link or special file the snapshot never saw
		}
	}
	return count, true, nil
}

// removeAllIn removes name in dir and, when it is a directory, everything in it (never
// following a link).
func removeAllIn(dir *os.Root, name string) error {
	fi, err := dir.Lstat(name)
	if err != nil {
		return err
	}
	if fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
		sub, err := openChild(dir, name, nil, false)
		if err != nil {
			return err
		}
		err = removeContents(context.Background(), sub, nil)
		sub.Close()
		if err != nil {
			return err
		}
	}
	err = dir.Remove(name)
	if errors.Is(err, syscall.ENOTEMPTY) {
		return fmt.Errorf("%s gained new entries meanwhile: %w", name, err)
	}
	return err
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
