package fsplane

import (
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
