package fsplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestSnapshotsBelongToOwnerAndWorld: another owner, or the same owner in another world,
// neither lists nor restores a snapshot (and so never reads its old content).
func TestSnapshotsBelongToOwnerAndWorld(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("d/f.txt", "alice's old secret")
	fileID := e.ok("files.snapshot.create", jobj{"path": pth("d", "f.txt")})["snapshotId"].(string)
	dirID := e.ok("files.snapshot.create", jobj{"path": pth("d")})["snapshotId"].(string)
	e.write("d/f.txt", "current")
	alice := e.actx
	bob := alice
	bob.Owner = kernel.Address{Kind: kernel.KindHuman, ID: "bob"}
	bob.Authority = bob.Owner
	otherWorld := alice
	otherWorld.World = "other-world"
	for name, ctx := range map[string]kernel.AccessContext{"other owner": bob, "other world": otherWorld} {
		e.actx = ctx
		for _, p := range [][]string{{"d", "f.txt"}, {"d"}} {
			out := mustJSON(t, e.ok("files.snapshot.list", jobj{"path": p}))
			if strings.Contains(string(out), fileID) || strings.Contains(string(out), dirID) {
				t.Errorf("%s lists alice's snapshots: %s", name, out)
			}
		}
		e.fail("files.snapshot.restore", jobj{"path": pth("d", "f.txt"), "snapshotId": fileID}, kernel.StatusFailed, CodeNotFound)
		e.fail("files.snapshot.restore", jobj{"path": pth("d"), "snapshotId": dirID}, kernel.StatusFailed, CodeNotFound)
		if got, _ := e.readFile("d/f.txt"); got != "current" {
			t.Fatalf("%s restored alice's snapshot: %q", name, got)
		}
	}
	e.actx = alice
	out := mustJSON(t, e.ok("files.snapshot.list", jobj{"path": pth("d")}))
	if !strings.Contains(string(out), dirID) {
		t.Errorf("alice does not see her own snapshot: %s", out)
	}
	e.ok("files.snapshot.restore", jobj{"path": pth("d", "f.txt"), "snapshotId": fileID})
	if got, _ := e.readFile("d/f.txt"); got != "alice's old secret" {
		t.Errorf("alice's restore: %q", got)
	}
}

// lyingIndex answers with what it is given, whatever is asked.
type lyingIndex struct {
	rec *SnapshotRecord
	err error
}

func (l lyingIndex) PutSnapshot(context.Context, SnapshotRecord) error { return l.err }
func (l lyingIndex) ListSnapshots(context.Context, SnapshotScope, int) ([]SnapshotRecord, error) {
	if l.rec == nil {
		return nil, l.err
	}
	return []SnapshotRecord{*l.rec}, l.err
}
func (l lyingIndex) GetSnapshot(context.Context, SnapshotScope, string) (*SnapshotRecord, error) {
	return l.rec, l.err
}

// TestBrokenSnapshotIndex: a damaged or lying index gives snapshot_damaged, never a
// generic provider fault, and nothing changes.
func TestBrokenSnapshotIndex(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("d/f.txt", "current")
	good := SnapshotRecord{SnapshotScope: SnapshotScope{World: e.actx.World, Owner: e.actx.Owner, Root: e.p.rootPath, Path: pth("d")},
		ID: "s1", Kind: SnapshotDirectory, Entries: []SnapshotEntry{{Path: pth("f.txt"), Blob: strings.Repeat("a", 64), Size: 1}}}
	otherOwner := good
	otherOwner.Owner = kernel.Address{Kind: kernel.KindHuman, ID: "mallory"}
	badBlob := good
	badBlob.Entries = []SnapshotEntry{{Path: pth("f.txt"), Blob: "../../etc/passwd", Size: 1}}
	badPath := good
	badPath.Entries = []SnapshotEntry{{Path: pth("..", "x"), Blob: strings.Repeat("a", 64)}}
	before := e.treeState()
	for name, idx := range map[string]lyingIndex{
		"undecodable record": {err: fmt.Errorf("get: %w: bad json", kernel.ErrSnapshotDamaged)},
		"another owner's":    {rec: &otherOwner},
		"bad blob name":      {rec: &badBlob},
		"bad entry path":     {rec: &badPath},
		"missing blob":       {rec: &good},
	} {
		e.reopen(func(o *ProviderOptions) { o.Index = idx })
		msg := e.fail("files.snapshot.restore", jobj{"path": pth("d"), "snapshotId": "s1"}, kernel.StatusFailed, CodeSnapshotDamaged)
		if !strings.Contains(msg, "s1") {
			t.Errorf("%s: the message does not name the snapshot: %s", name, msg)
		}
		if idx.rec == &otherOwner {
			e.fail("files.snapshot.list", jobj{"path": pth("d")}, kernel.StatusFailed, CodeSnapshotDamaged)
		}
	}
	e.sameTree(before, "restores from a broken index")
}

// TestSnapshotStoreUnwritable: a blob store that cannot be written fails
// snapshot_store_unavailable naming the reason, and records nothing.
func TestSnapshotStoreUnwritable(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("f.txt", "x")
	// A file where the blob directory should be (permissions would not stop root).
	os.MkdirAll(e.snaps, 0o700)
	os.WriteFile(filepath.Join(e.snaps, "blobs"), nil, 0o600)
	msg := e.fail("files.snapshot.create", jobj{"path": pth("f.txt")}, kernel.StatusFailed, CodeSnapshotStoreUnavailable)
	if !strings.Contains(msg, "not a directory") {
		t.Errorf("message does not say why: %s", msg)
	}
	if out := e.ok("files.snapshot.list", jobj{"path": pth("f.txt")}); len(out["snapshots"].([]any)) != 0 {
		t.Errorf("a failed snapshot was recorded: %v", out)
	}
}

// TestDirectorySnapshotIsCompleteOrFails: a file that cannot be captured fails the
// snapshot naming it, and nothing is recorded.
func TestDirectorySnapshotIsCompleteOrFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("d/a.txt", "small")
	e.write("d/sub/big.bin", "more than ten bytes")
	e.reopen(func(o *ProviderOptions) { o.MaxSnapshotBytes = 10 })
	msg := e.fail("files.snapshot.create", jobj{"path": pth("d")}, kernel.StatusFailed, CodeTooLarge)
	if !strings.Contains(msg, "d/sub/big.bin") {
		t.Errorf("the message does not name the file: %s", msg)
	}
	if out := e.ok("files.snapshot.list", jobj{"path": pth("d")}); len(out["snapshots"].([]any)) != 0 {
		t.Errorf("an incomplete snapshot was recorded: %v", out)
	}
	e.fail("files.snapshot.create", jobj{"path": pth("d", "sub", "big.bin")}, kernel.StatusFailed, CodeTooLarge)
	// The sum of the files counts too.
	e.reopen(func(o *ProviderOptions) { o.MaxSnapshotBytes = 20 })
	e.write("d/sub/c.txt", "0123456789")
	e.fail("files.snapshot.create", jobj{"path": pth("d")}, kernel.StatusFailed, CodeTooLarge)
}

// TestDirectorySnapshotUnreadable: an unreadable file or directory fails the snapshot
// naming it (it used to be left out, and a restore then deleted it as created since).
func TestDirectorySnapshotUnreadable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode")
	}
	e := newEnv(t)
	e.write("d/a.txt", "a")
	e.write("d/locked.txt", "secret")
	e.write("d/closed/in.txt", "in")
	os.Chmod(filepath.Join(e.root, "d", "locked.txt"), 0)
	t.Cleanup(func() { os.Chmod(filepath.Join(e.root, "d", "closed"), 0o755) })
	msg := e.fail("files.snapshot.create", jobj{"path": pth("d")}, kernel.StatusFailed, CodeProviderError)
	if !strings.Contains(msg, "d/locked.txt") || !strings.Contains(msg, "permission denied") {
		t.Errorf("message: %s", msg)
	}
	os.Chmod(filepath.Join(e.root, "d", "locked.txt"), 0o644)
	os.Chmod(filepath.Join(e.root, "d", "closed"), 0)
	msg = e.fail("files.snapshot.create", jobj{"path": pth("d")}, kernel.StatusFailed, CodeProviderError)
	if !strings.Contains(msg, "d/closed") {
		t.Errorf("message: %s", msg)
	}
}

// TestRestoreDeletesOnlyWhatTheSnapshotCouldHaveSeen: entries a snapshot never captures
// (links, unaddressable names, repositories) are not taken for files created since.
func TestRestoreDeletesOnlyWhatTheSnapshotCouldHaveSeen(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("ws/a.txt", "A")
	e.write("ws/x", "a file then")
	id := e.ok("files.snapshot.create", jobj{"path": pth("ws")})["snapshotId"].(string)
	e.write("ws/new.txt", "created since")
	e.write("ws/bad\nname.txt", "no tool can name me")
	e.symlink("a.txt", "ws/link")
	e.write("ws/repo/.git/HEAD", "ref")
	e.write("ws/repo/main.go", "package main")
	os.Remove(filepath.Join(e.root, "ws", "x"))
	e.write("ws/x/keep.txt", "beside a link")
	e.symlink("keep.txt", "ws/x/l")
	r := e.ok("files.snapshot.restore", jobj{"path": pth("ws"), "snapshotId": id})
	if r["removed"] != float64(1) || r["preserved"] != float64(2) {
		t.Errorf("restore = %v", r)
	}
	if _, ok := e.readFile("ws/new.txt"); ok {
		t.Error("a file created since survived")
	}
	for rel, want := range map[string]string{"ws/bad\nname.txt": "no tool can name me", "ws/repo/main.go": "package main",
		"ws/repo/.git/HEAD": "ref", "ws/x/keep.txt": "beside a link"} {
		if got, _ := e.readFile(rel); got != want {
			t.Errorf("%q = %q, want %q", rel, got, want)
		}
	}
	if fi, err := os.Lstat(filepath.Join(e.root, "ws", "link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the restore removed a link it never saw")
	}
}

// TestDirectoryRestoreIsAllOrNothing: a restore that cannot put back one file changes
// nothing, names the entry, and leaves no temporary file.
func TestDirectoryRestoreIsAllOrNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("d/1-first.txt", "first old")
	e.write("d/2-second.txt", "second old")
	e.write("d/sub/3-third.txt", "third old")
	id := e.ok("files.snapshot.create", jobj{"path": pth("d")})["snapshotId"].(string)
	e.write("d/1-first.txt", "first new")
	e.write("d/2-second.txt", "second new")
	e.write("d/sub/3-third.txt", "third new")
	e.write("d/4-created.txt", "created since")
	os.RemoveAll(filepath.Join(e.root, "d", "sub"))
	e.write("d/sub", "a file in the way")
	// The blob of a later file goes missing.
	sum := sha256.Sum256([]byte("third old"))
	if err := os.Remove(e.p.blobPath(hex.EncodeToString(sum[:]))); err != nil {
		t.Fatal(err)
	}
	before := e.treeState()
	msg := e.fail("files.snapshot.restore", jobj{"path": pth("d"), "snapshotId": id}, kernel.StatusFailed, CodeSnapshotDamaged)
	if !strings.Contains(msg, "d/sub") || !strings.Contains(msg, "nothing was changed") {
		t.Errorf("message: %s", msg)
	}
	e.sameTree(before, "a failed restore")
	// Put the blob back: the restore then goes through.
	os.WriteFile(e.p.blobPath(hex.EncodeToString(sum[:])), []byte("third old"), 0o600)
	r := e.ok("files.snapshot.restore", jobj{"path": pth("d"), "snapshotId": id})
	if r["restored"] != float64(3) || r["removed"] != float64(2) {
		t.Errorf("restore = %v", r)
	}
	for rel, want := range map[string]string{"d/1-first.txt": "first old", "d/2-second.txt": "second old", "d/sub/3-third.txt": "third old"} {
		if got, _ := e.readFile(rel); got != want {
			t.Errorf("%s = %q, want %q", rel, got, want)
		}
	}
	filepath.WalkDir(e.root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), TempPrefix) {
			t.Errorf("temporary entry left: %s", p)
		}
		return nil
	})
	// A damaged blob (right size, wrong bytes) is caught before anything moves too.
	e.write("d/1-first.txt", "first new")
	sum = sha256.Sum256([]byte("first old"))
	os.WriteFile(e.p.blobPath(hex.EncodeToString(sum[:])), []byte("first bad"), 0o600)
	before = e.treeState()
	e.fail("files.snapshot.restore", jobj{"path": pth("d"), "snapshotId": id}, kernel.StatusFailed, CodeSnapshotDamaged)
	e.sameTree(before, "a restore from a damaged blob")
}

// TestStaleStagingDirectoryIsCleaned: a directory a crashed restore was staging is
// removed by the next write in its directory.
func TestStaleStagingDirectoryIsCleaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("d/"+TempPrefix+"stale/deep/f.txt", "half staged")
	e.ok("files.create", jobj{"path": pth("d", "n.txt"), "content": "x"})
	if _, err := os.Lstat(filepath.Join(e.root, "d", TempPrefix+"stale")); err == nil {
		t.Error("the stale staging directory survived")
	}
}

// TestConcurrentRestoresAndWrites: restores of overlapping trees from several providers
// (as separate processes) and writers in the same directories never deadlock, never
// fail for anything but a lost race, and a last restore leaves exactly the snapshot.
func TestConcurrentRestoresAndWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 4; i++ {
		e.write(fmt.Sprintf("t/d%d/f.txt", i), fmt.Sprintf("old %d", i))
		e.write(fmt.Sprintf("t/d%d/sub/g.txt", i), fmt.Sprintf("old g %d", i))
	}
	top := e.ok("files.snapshot.create", jobj{"path": pth("t")})["snapshotId"].(string)
	sub := e.ok("files.snapshot.create", jobj{"path": pth("t", "d1")})["snapshotId"].(string)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		p, err := NewProvider(e.root, ProviderOptions{SnapshotDir: e.snaps, Index: e.p.index})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Add(1)
		go func(w int, p *Provider) {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				var rr kernel.ResourceResult
				var err error
				switch (w + i) % 3 {
				case 0:
					rr, err = p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o", Context: e.actx,
						Resource: kernel.ResourceRef{Namespace: "files", Path: pth("t")}, Action: ActionSnapshotRestore,
						Input: map[string]any{"snapshotId": top}})
				case 1:
					rr, err = p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o", Context: e.actx,
						Resource: kernel.ResourceRef{Namespace: "files", Path: pth("t", "d1")}, Action: ActionSnapshotRestore,
						Input: map[string]any{"snapshotId": sub}})
				default:
					rr, err = p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o", Context: e.actx,
						Resource: kernel.ResourceRef{Namespace: "files", Path: pth("t", fmt.Sprintf("d%d", i%4), "sub", fmt.Sprintf("new%d.txt", w))},
						Action:   ActionAppend, Input: map[string]any{"content": "x"}})
				}
				if err != nil {
					t.Error(err)
					return
				}
				if rr.Status != kernel.StatusSucceeded && rr.Error.Code != CodeNotEmpty && rr.Error.Code != CodeNotFound {
					t.Errorf("worker %d: %s %s: %s", w, rr.Status, rr.Error.Code, rr.Error.Message)
				}
			}
		}(w, p)
	}
	wg.Wait()
	e.ok("files.snapshot.restore", jobj{"path": pth("t"), "snapshotId": top})
	got := map[string]string{}
	filepath.WalkDir(filepath.Join(e.root, "t"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(e.root, p)
			got[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	})
	if len(got) != 8 {
		t.Errorf("after the last restore: %v", got)
	}
	for i := 0; i < 4; i++ {
		if got[fmt.Sprintf("t/d%d/f.txt", i)] != fmt.Sprintf("old %d", i) {
			t.Errorf("after the last restore: %v", got)
		}
	}
}
