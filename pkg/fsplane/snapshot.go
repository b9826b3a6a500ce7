package fsplane

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
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
// content was already equal), Removed the entries removed, and Preserved the entries left
// as they were because they are frozen, hold a Git repository, or hold what the
// snapshot never saw where it had a file (directory snapshots only; omitted when 0).
type SnapshotRestoreOutput struct {
	Path       []string `json:"path"`
	SnapshotID string   `json:"snapshotId"`
	Kind       string   `json:"kind"`
	Version    string   `json:"version,omitempty"`
	Restored   int      `json:"restored"`
	Removed    int      `json:"removed"`
	Preserved  int      `json:"preserved,omitempty"`
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

// copyBuf is the size of the buffer every streamed copy uses: what a files operation
// holds of a file at once.
const copyBuf = 64 << 10

// readError marks a failure to read the source of a copy (not of its destination).
type readError struct{ err error }

func (e *readError) Error() string { return e.err.Error() }
func (e *readError) Unwrap() error { return e.err }

// copyHashing copies src to dst through buf, feeding every byte to the hashes too, and
// fails once more than max bytes came (max < 0: no limit). A read failure is a
// *readError.
func copyHashing(dst io.Writer, src io.Reader, buf []byte, max int64, hs ...hash.Hash) (int64, error) {
	var n int64
	for {
		m, err := src.Read(buf)
		if m > 0 {
			n += int64(m)
			if max >= 0 && n > max {
				return n, errTooLarge
			}
			for _, h := range hs {
				h.Write(buf[:m])
			}
			if dst != nil {
				if _, werr := dst.Write(buf[:m]); werr != nil {
					return n, werr
				}
			}
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, &readError{err}
		}
	}
}

var errTooLarge = errors.New("too large")

// putBlobFrom streams src (at most max bytes) into the blob store, hashing it on the
// way, and returns its SHA-256 (hex) and size. path names the source for messages.
func (p *Provider) putBlobFrom(src io.Reader, path []string, max int64) (string, int64, error) {
	if err := os.MkdirAll(p.blobDir, 0o700); err != nil {
		return "", 0, storeErr(err)
	}
	f, err := os.CreateTemp(p.blobDir, ".tmp-*")
	if err != nil {
		return "", 0, storeErr(err)
	}
	tmp := f.Name()
	keep := false
	defer func() {
		if !keep {
			os.Remove(tmp)
		}
	}()
	h := sha256.New()
	n, err := copyHashing(f, src, make([]byte, copyBuf), max, h)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var re *readError
	switch {
	case errors.Is(err, errTooLarge):
		return "", 0, failed(CodeTooLarge, "%s is larger than the %d bytes a snapshot may hold; nothing was recorded", show(path), max)
	case errors.As(err, &re):
		return "", 0, failed(CodeProviderError, "%s cannot be read (%s), so it cannot be captured; nothing was recorded", show(path), errnoText(re.err))
	case err != nil:
		return "", 0, storeErr(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	final := p.blobPath(sum)
	if fi, err := os.Stat(final); err == nil && fi.Size() == n {
		return sum, n, nil
	}
	dir := filepath.Dir(final)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", 0, storeErr(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", 0, storeErr(err)
	}
	keep = true
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return sum, n, nil
}

// copyBlob streams the content of entry e of snapshot id into dst, checking its size and
// digest on the way: a missing, short, long or altered blob fails snapshot_damaged (after
// dst got some bytes, so dst must be a temporary file).
func (p *Provider) copyBlob(dst io.Writer, id string, e SnapshotEntry, buf []byte) error {
	if !blobNameOK(e.Blob) {
		return failed(CodeSnapshotDamaged, "snapshot %s is damaged (bad blob name)", id)
	}
	f, err := os.Open(p.blobPath(e.Blob))
	if err != nil {
		return failed(CodeSnapshotDamaged, "snapshot %s is damaged: its stored content is missing from the snapshot store", id)
	}
	defer f.Close()
	h := sha256.New()
	n, err := copyHashing(dst, f, buf, e.Size, h)
	var re *readError
	switch {
	case errors.Is(err, errTooLarge) || err == nil && n != e.Size:
		return failed(CodeSnapshotDamaged, "snapshot %s is damaged: its stored content does not have the size recorded", id)
	case errors.As(err, &re):
		return failed(CodeSnapshotDamaged, "snapshot %s: its stored content cannot be read (%s)", id, errnoText(re.err))
	case err != nil:
		return err // writing dst
	}
	if hex.EncodeToString(h.Sum(nil)) != e.Blob {
		return failed(CodeSnapshotDamaged, "snapshot %s is damaged: its stored content does not match its digest", id)
	}
	return nil
}

// hashFile streams the open file f and returns the SHA-256 of its content.
func hashFile(f io.Reader, buf []byte) ([]byte, error) {
	h := sha256.New()
	if _, err := copyHashing(nil, f, buf, -1, h); err != nil {
		var re *readError
		if errors.As(err, &re) {
			return nil, re.err
		}
		return nil, err
	}
	return h.Sum(nil), nil
}

// hashFileIn hashes the regular file name inside dir (with openFileIn's checks).
func hashFileIn(dir *os.Root, name string, path []string, buf []byte) ([]byte, os.FileInfo, error) {
	f, st, err := openFileIn(dir, name, path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sum, err := hashFile(f, buf)
	return sum, st, err
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
		parent, name, err := p.openParent(path, false)
		if err != nil {
			return nil, err
		}
		f, _, err := openFileIn(parent.r, name, path)
		parent.release()
		if err != nil {
			return nil, err
		}
		h, n, err := p.putBlobFrom(f, path, p.maxSnapshot)
		f.Close()
		if err != nil {
			return nil, err
		}
		entries = []SnapshotEntry{{Path: []string{}, Blob: h, Size: n}}
	} else {
		// Every file under path must be captured, or the snapshot fails naming the
		// first one that could not be: a restore must never take a file it did not see
		// for one created since.
		var mu sync.Mutex
		var firstErr error
		var total int64
		type item struct {
			seq int
			e   SnapshotEntry
		}
		var items []item
		walkCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		fail := func(err error) {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
			cancel()
		}
		walkErr := p.runWalk(walkCtx, path, walkOpts{strict: true}, func(w int, we walkEntry) {
			f, ok, err := openWalked(we)
			if err != nil {
				fail(failed(CodeProviderError, "%s cannot be read (%s), so it cannot be captured; nothing was recorded", show(we.path), errnoText(err)))
				return
			}
			if !ok {
				return // vanished, or replaced by a link or special file: not a file to capture
			}
			h, n, err := p.putBlobFrom(f, we.path, p.maxSnapshot)
			f.Close()
			if err != nil {
				fail(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if total += n; total > p.maxSnapshot && firstErr == nil {
				firstErr = failed(CodeTooLarge, "the files under %s hold more than the %d bytes a snapshot may hold (reached at %s); nothing was recorded", show(path), p.maxSnapshot, show(we.path))
				cancel()
			}
			rel := append([]string{}, we.path[len(path):]...)
			items = append(items, item{we.seq, SnapshotEntry{Path: rel, Blob: h, Size: n}})
		})
		if firstErr != nil {
			return nil, firstErr
		}
		if walkErr != nil {
			return nil, walkErr
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
