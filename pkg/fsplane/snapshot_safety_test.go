package fsplane

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
	otherWorld.NamespaceID = "other-world"
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
	good := SnapshotRecord{SnapshotScope: SnapshotScope{World: e.actx.NamespaceID, Owner: e.actx.Owner, Root: e.p.rootPath, Path: pth("d")},
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
