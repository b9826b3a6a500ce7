package fsplane

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Snapshot kinds (SnapshotRecord.Kind).
const (
	SnapshotFile      = "file"
	SnapshotDirectory = "directory"
)

// SnapshotCreateOutput is the output of snapshot:create. Label is null when none was
// given.
type SnapshotCreateOutput struct {
	Path       []string `json:"path"`
	SnapshotID string   `json:"snapshotId"`
	Label      *string  `json:"label"`
	Kind       string   `json:"kind"`
}

// SnapshotInfo describes one snapshot in a snapshot:list output.
type SnapshotInfo struct {
	SnapshotID string  `json:"snapshotId"`
	Label      *string `json:"label"`
	Kind       string  `json:"kind"`
	CreatedAt  string  `json:"createdAt"`
}

// SnapshotListOutput is the output of snapshot:list (newest first).
type SnapshotListOutput struct {
	Path      []string       `json:"path"`
	Snapshots []SnapshotInfo `json:"snapshots"`
}

// SnapshotRestoreOutput is the output of snapshot:restore. Version is the restored
// file's version (file snapshots only). Restored counts the files written (0 when the
// content was already equal), Removed the files removed (directory snapshots only).
type SnapshotRestoreOutput struct {
	Path       []string `json:"path"`
	SnapshotID string   `json:"snapshotId"`
	Kind       string   `json:"kind"`
	Version    string   `json:"version,omitempty"`
	Restored   int      `json:"restored"`
	Removed    int      `json:"removed"`
}

func (p *Provider) snapshotsOn() error {
	if p.blobDir == "" {
		return failed(CodeUnsupportedAction, "snapshots are not configured for this files root (no snapshot store)")
	}
	return nil
}

// ---- blob store (outside the root, content-addressed by SHA-256) ----

func blobNameOK(h string) bool {
	if len(h) != 64 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func (p *Provider) blobPath(h string) string {
	return filepath.Join(p.blobDir, h[:2], h)
}

// putBlob stores data durably and returns its SHA-256 (hex).
func (p *Provider) putBlob(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	h := hex.EncodeToString(sum[:])
	final := p.blobPath(h)
	if fi, err := os.Stat(final); err == nil && fi.Size() == int64(len(data)) {
		return h, nil
	}
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", storeErr(err)
	}
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", storeErr(err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, final)
	}
	if err != nil {
		os.Remove(tmp)
		return "", storeErr(err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return h, nil
}

// getBlob reads a blob and checks its digest.
func (p *Provider) getBlob(id string, e SnapshotEntry) ([]byte, error) {
	if !blobNameOK(e.Blob) {
		return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged (bad blob name)", id)
	}
	b, err := os.ReadFile(p.blobPath(e.Blob))
	if err != nil {
		return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged: its stored content is missing from the snapshot store", id)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != e.Blob {
		return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged: its stored content does not match its digest", id)
	}
	return b, nil
}

// ---- create ----

func newSnapshotID(ms int64, digest []byte) string {
	var r [2]byte
	rand.Read(r[:])
	return strconv.FormatInt(ms, 36) + "-" + hex.EncodeToString(digest[:4]) + "-" + hex.EncodeToString(r[:])
}

func (p *Provider) snapshotCreate(ctx context.Context, scope SnapshotScope, label *string) (any, error) {
	path := scope.Path
	if err := p.snapshotsOn(); err != nil {
		return nil, err
	}
	var entries []SnapshotEntry
	kind := SnapshotDirectory
	isFile := false
	if len(path) > 0 {
		parent, name, err := p.openParent(path, false)
		if err != nil {
			return nil, err
		}
		fi, err := parent.r.Lstat(name)
		parent.release()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, failed(CodeNotFound, "%s does not exist", show(path))
			}
			return nil, err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, escapeErr(path, false)
		case fi.Mode().IsRegular():
			isFile = true
		case !fi.IsDir():
			return nil, failed(CodeNotAFile, "%s is not a regular file or directory", show(path))
		}
	}
	if isFile {
		kind = SnapshotFile
		b, _, err := p.readWhole(path)
		if err != nil {
			return nil, err
		}
		h, err := p.putBlob(b)
		if err != nil {
			return nil, err
		}
		entries = []SnapshotEntry{{Path: []string{}, Blob: h, Size: int64(len(b))}}
	} else {
		var mu sync.Mutex
		var firstErr error
		type item struct {
			seq int
			e   SnapshotEntry
		}
		var items []item
		bufs := make([][]byte, p.workers+1)
		walkErr := p.runWorkers(ctx, path, func(w int, we walkEntry) {
			b, ok := readWalked(we, bufs[w], 1<<62)
			if !ok {
				return // vanished or replaced meanwhile: not part of the snapshot
			}
			h, err := p.putBlob(b)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			rel := append([]string{}, we.path[len(path):]...)
			items = append(items, item{we.seq, SnapshotEntry{Path: rel, Blob: h, Size: int64(len(b))}})
		})
		if walkErr != nil {
			return nil, walkErr
		}
		if firstErr != nil {
			return nil, firstErr
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sort.Slice(items, func(i, j int) bool { return items[i].seq < items[j].seq })
		entries = make([]SnapshotEntry, len(items))
		for i := range items {
			entries[i] = items[i].e
		}
	}
	manifest, _ := json.Marshal(entries)
	digest := sha256.Sum256(manifest)
	if isFile {
		digest, _ = hexDigest(entries[0].Blob)
	}
	ms := p.now().UnixMilli()
	rec := SnapshotRecord{SnapshotScope: scope, ID: newSnapshotID(ms, digest[:]),
		Kind: kind, Label: label, CreatedAt: ms, Entries: entries}
	if err := p.index.PutSnapshot(ctx, rec); err != nil {
		return nil, indexErr("record", rec.ID, err)
	}
	return SnapshotCreateOutput{Path: path, SnapshotID: rec.ID, Label: label, Kind: kind}, nil
}

func hexDigest(h string) ([32]byte, error) {
	var d [32]byte
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != 32 {
		return d, errors.New("bad digest")
	}
	copy(d[:], b)
	return d, nil
}

// ---- list ----

func (p *Provider) snapshotList(ctx context.Context, scope SnapshotScope, limit int) (any, error) {
	if err := p.snapshotsOn(); err != nil {
		return nil, err
	}
	path := scope.Path
	recs, err := p.index.ListSnapshots(ctx, scope, limit)
	if err != nil {
		return nil, indexErr("list", "", err)
	}
	out := SnapshotListOutput{Path: path, Snapshots: make([]SnapshotInfo, 0, len(recs))}
	for _, r := range recs {
		if indexKey(r.SnapshotScope) != indexKey(scope) {
			return nil, failed(CodeSnapshotDamaged, "the snapshot index listed a snapshot (%s) of another path, owner or world", r.ID)
		}
		if len(out.Snapshots) == limit {
			break
		}
		out.Snapshots = append(out.Snapshots, SnapshotInfo{SnapshotID: r.ID, Label: r.Label, Kind: r.Kind,
			CreatedAt: kernel.FormatTimestamp(r.CreatedAt)})
	}
	return out, nil
}

// ---- restore ----

func (p *Provider) snapshotRestore(ctx context.Context, scope SnapshotScope, in SnapshotRestoreInput) (any, error) {
	if err := p.snapshotsOn(); err != nil {
		return nil, err
	}
	path := scope.Path
	rec, err := p.index.GetSnapshot(ctx, scope, in.SnapshotID)
	if err != nil {
		return nil, indexErr("read", in.SnapshotID, err)
	}
	if rec == nil {
		return nil, failed(CodeNotFound, "there is no snapshot %s of %s; list them with files.snapshot.list", in.SnapshotID, show(path))
	}
	if indexKey(rec.SnapshotScope) != indexKey(scope) || rec.ID != in.SnapshotID {
		return nil, failed(CodeSnapshotDamaged, "the snapshot index answered for snapshot %s with a snapshot of another path, owner or world; nothing was restored", in.SnapshotID)
	}
	if err := rec.Validate(); err != nil {
		return nil, failed(CodeSnapshotDamaged, "%v; nothing was restored", err)
	}
	switch rec.Kind {
	case SnapshotFile:
		if len(path) == 0 || len(rec.Entries) != 1 {
			return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged (a file snapshot needs one entry)", rec.ID)
		}
		return p.restoreFile(ctx, path, rec, in.ExpectedVersion)
	case SnapshotDirectory:
		if in.ExpectedVersion != nil {
			return nil, failed(CodeInvalidInput, "snapshot %s is of a directory; expectedVersion applies to a single file, so omit it (a directory restore puts back every file of the snapshot)", rec.ID)
		}
		return p.restoreDir(ctx, path, rec)
	}
	return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged (unknown kind %q)", rec.ID, rec.Kind)
}

func (p *Provider) restoreFile(ctx context.Context, path []string, rec *SnapshotRecord, expected *string) (any, error) {
	data, err := p.getBlob(rec.ID, rec.Entries[0])
	if err != nil {
		return nil, err
	}
	parent, name, dirf, release, err := p.lockedParent(ctx, path, expected == nil, expected != nil)
	if err != nil {
		return nil, err
	}
	defer release()
	out := SnapshotRestoreOutput{Path: path, SnapshotID: rec.ID, Kind: SnapshotFile, Version: Version(data)}
	fi, err := parent.r.Lstat(name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
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
		old, st, err := readFileIn(parent.r, name, path)
		if err != nil {
			return nil, err
		}
		if expected != nil {
			if cur := Version(old); cur != *expected {
				return nil, versionConflict(path, cur)
			}
		}
		if string(old) == string(data) {
			return out, nil
		}
		mode = st.Mode().Perm()
	} else if expected != nil {
		return nil, versionConflict(path, "")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := atomicWrite(parent.r, dirf, name, data, mode, exists, false); err != nil {
		return nil, err
	}
	out.Restored = 1
	return out, nil
}

// restoreNode is the desired content of one directory of a directory snapshot.
type restoreNode struct {
	files map[string]SnapshotEntry
	dirs  map[string]*restoreNode
}

func newRestoreNode() *restoreNode {
	return &restoreNode{files: map[string]SnapshotEntry{}, dirs: map[string]*restoreNode{}}
}

func buildRestoreTree(rec *SnapshotRecord) (*restoreNode, error) {
	root := newRestoreNode()
	for _, e := range rec.Entries {
		if len(e.Path) == 0 || kernel.ValidatePath(e.Path) != nil || checkSegments(e.Path) != nil {
			return nil, failed(CodeSnapshotDamaged, "snapshot %s is damaged (bad entry path %q)", rec.ID, e.Path)
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

type restorer struct {
	p        *Provider
	ctx      context.Context
	rec      *SnapshotRecord
	restored int
	removed  int
}

func (p *Provider) restoreDir(ctx context.Context, path []string, rec *SnapshotRecord) (any, error) {
	tree, err := buildRestoreTree(rec)
	if err != nil {
		return nil, err
	}
	if len(path) > 0 {
		parent, name, err := p.openParent(path, true)
		if err != nil {
			return nil, err
		}
		fi, err := parent.r.Lstat(name)
		parent.release()
		if err == nil && fi.Mode()&fs.ModeSymlink == 0 && !fi.IsDir() {
			return nil, failed(CodeInvalidInput, "%s is now a file, but snapshot %s is of a directory; delete the file first", show(path), rec.ID)
		}
	}
	d, err := p.openDir(path, true)
	if err != nil {
		return nil, err
	}
	r := &restorer{p: p, ctx: ctx, rec: rec}
	node, _ := p.frozen.at(path)
	_, err = r.dir(d.r, path, tree, node)
	d.release()
	if err != nil {
		return nil, err
	}
	return SnapshotRestoreOutput{Path: path, SnapshotID: rec.ID, Kind: SnapshotDirectory,
		Restored: r.restored, Removed: r.removed}, nil
}

// dir makes the directory dir (at path) equal to node and reports whether it removed
// anything inside it.
func (r *restorer) dir(dir *os.Root, path []string, node *restoreNode, fnode *frozenNode) (bool, error) {
	if err := r.ctx.Err(); err != nil {
		return false, err
	}
	removedAny := false
	var subdirs []string // existing directories to recurse into
	err := func() error {
		dirf, unlock, err := lockDir(r.ctx, dir)
		if err != nil {
			return err
		}
		defer unlock()
		cleanTemps(dir, dirf)
		names, err := readNames(dir)
		if err != nil {
			return err
		}
		sort.Strings(names)
		present := map[string]bool{}
		for n := range node.files {
			if c := r.p.frozen.child(fnode, n); c != nil && c.frozen {
				present[n] = true // frozen: never written
			}
		}
		for _, n := range names {
			if hidden(n) {
				continue
			}
			if c := r.p.frozen.child(fnode, n); c != nil && c.frozen {
				continue // frozen: left as it is
			}
			fi, err := dir.Lstat(n)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				return err
			}
			child := append(clonePath(path), n)
			isLink := fi.Mode()&fs.ModeSymlink != 0
			isDir := fi.IsDir() && !isLink
			want, wantFile := node.files[n]
			_, wantDir := node.dirs[n]
			switch {
			case wantFile && fi.Mode().IsRegular():
				present[n] = true
				if err := r.putFile(dir, dirf, n, child, want, fi, true); err != nil {
					return err
				}
			case wantFile || (wantDir && !isDir):
				// Something else is in the way: remove it (a link is removed, never
				// followed; a directory only without a .git inside).
				if isDir {
					if r.p.frozen.below(child) != "" {
						present[n] = true // holds a frozen path: left as it is
						continue
					}
					if err := r.removeTree(dir, n, child); err != nil {
						return err
					}
				} else {
					if err := dir.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
						return err
					}
					r.removed++
				}
				removedAny = true
			case isDir:
				subdirs = append(subdirs, n)
			case fi.Mode().IsRegular():
				if err := dir.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				r.removed++
				removedAny = true
			}
			// Links and special files that are not in the way are left alone.
		}
		for _, n := range sortedKeys(node.files) {
			if present[n] {
				continue
			}
			if err := r.putFile(dir, dirf, n, append(clonePath(path), n), node.files[n], nil, false); err != nil {
				return err
			}
		}
		for _, n := range sortedKeys(node.dirs) {
			if c := r.p.frozen.child(fnode, n); c != nil && c.frozen {
				continue
			}
			if err := dir.Mkdir(n, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		}
		dirf.Sync()
		return nil
	}()
	if err != nil {
		return removedAny, err
	}
	// Recurse: wanted directories, and unwanted ones (to remove what was created since).
	for _, n := range sortedKeys(node.dirs) {
		if c := r.p.frozen.child(fnode, n); c == nil || !c.frozen {
			subdirs = append(subdirs, n)
		}
	}
	sort.Strings(subdirs)
	for i, n := range subdirs {
		if i > 0 && subdirs[i-1] == n {
			continue
		}
		child := append(clonePath(path), n)
		sub, err := openChild(dir, n, child, false)
		if err != nil {
			return removedAny, err
		}
		want := node.dirs[n]
		empty := want == nil
		if want == nil {
			want = newRestoreNode()
		}
		rm, err := r.dir(sub, child, want, r.p.frozen.child(fnode, n))
		sub.Close()
		if err != nil {
			return removedAny, err
		}
		if rm {
			removedAny = true
		}
		if empty && rm {
			// A directory the snapshot does not hold, emptied by this restore.
			if err := dir.Remove(n); err == nil {
				continue
			}
		}
	}
	return removedAny, nil
}

// putFile makes dir/name hold the entry's content (nothing is written when it already
// does).
func (r *restorer) putFile(dir *os.Root, dirf *os.File, name string, path []string, e SnapshotEntry, fi os.FileInfo, exists bool) error {
	var mode fs.FileMode
	if exists {
		mode = fi.Mode().Perm()
		if fi.Size() == e.Size {
			old, _, err := readFileIn(dir, name, path)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(old)
			if hex.EncodeToString(sum[:]) == e.Blob {
				return nil
			}
		}
	}
	data, err := r.p.getBlob(r.rec.ID, e)
	if err != nil {
		return err
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if err := atomicWrite(dir, dirf, name, data, mode, exists, false); err != nil {
		return err
	}
	r.restored++
	return nil
}

// removeTree removes the directory name in dir and everything in it, counting the
// files removed.
func (r *restorer) removeTree(dir *os.Root, name string, path []string) error {
	sub, err := openChild(dir, name, path, false)
	if err != nil {
		return err
	}
	if _, err := checkDeletable(r.ctx, sub, path); err != nil {
		sub.Close()
		return err
	}
	n := countFiles(sub)
	err = removeContents(r.ctx, sub, path)
	sub.Close()
	if err != nil {
		return err
	}
	r.removed += n
	return dir.Remove(name)
}

func countFiles(dir *os.Root) int {
	names, err := readNames(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, name := range names {
		fi, err := dir.Lstat(name)
		if err != nil {
			continue
		}
		if fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			if sub, err := openChild(dir, name, nil, false); err == nil {
				n += countFiles(sub)
				sub.Close()
			}
			continue
		}
		if !strings.HasPrefix(name, TempPrefix) {
			n++
		}
	}
	return n
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// indexErr is a failure of the snapshot index while it was asked to (what) the snapshot
// id ("" for a list). A record the index holds but cannot decode is snapshot_damaged;
// any other failure snapshot_index_unavailable, retryable.
func indexErr(what, id string, err error) error {
	name := "the snapshots"
	if id != "" {
		name = "snapshot " + id
	}
	if errors.Is(err, kernel.ErrSnapshotDamaged) {
		return failed(CodeSnapshotDamaged, "the snapshot index holds a damaged record for %s (%v); nothing was changed", name, err)
	}
	e := failed(CodeSnapshotIndexUnavailable, "the snapshot index could not %s %s (%v); nothing was changed", what, name, err)
	e.retryable = true
	return e
}

// storeErr is a failure to write the snapshot blob store.
func storeErr(err error) error {
	e := failed(CodeSnapshotStoreUnavailable, "the snapshot store could not be written (%v); no snapshot was recorded", errnoText(err))
	e.retryable = true
	return e
}
