package fsplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// FuzzRestoreRecord restores arbitrary snapshot records, as a damaged or hostile index
// could hand them over: never a panic or a provider fault, never a change outside the
// root or inside .git, and a record that fails validation is never restored. (A link
// where the record has an entry is replaced, as by design: the link itself, never its
// target.)
func FuzzRestoreRecord(f *testing.F) {
	p, root, outside := fuzzWorld(f)
	os.WriteFile(filepath.Join(root, "a", "c.txt"), []byte("current"), 0o644)
	blob, _, err := p.putBlobFrom(strings.NewReader("snap"), nil, 1<<20)
	if err != nil {
		f.Fatal(err)
	}
	sum := sha256.Sum256([]byte("snap"))
	if blob != hex.EncodeToString(sum[:]) {
		f.Fatal("blob name")
	}
	for _, seed := range []struct{ kind, entries string }{
		{"directory", `[{"path":["b","f.txt"],"blob":"` + blob + `","size":4}]`},
		{"directory", `[{"path":["c.txt"],"blob":"` + blob + `","size":4},{"path":["new","x"],"blob":"` + blob + `","size":4}]`},
		{"directory", `[{"path":[".git","config"],"blob":"` + blob + `","size":4}]`},
		{"directory", `[{"path":["..","x"],"blob":"` + blob + `","size":4}]`},
		{"directory", `[{"path":["up","x"],"blob":"` + blob + `","size":4}]`},
		{"directory", `[{"path":["c.txt"],"blob":"../../../etc/passwd","size":4}]`},
		{"directory", `[{"path":["c.txt"],"blob":"` + blob + `","size":3}]`},
		{"directory", `[{"path":["b"],"blob":"` + blob + `","size":4},{"path":["b","f.txt"],"blob":"` + blob + `","size":4}]`},
		{"file", `[{"path":[],"blob":"` + blob + `","size":4}]`},
		{"directory", `[]`},
	} {
		f.Add(seed.kind, seed.entries)
	}
	actx := kernel.AccessContext{World: "w", Owner: kernel.Address{Kind: kernel.KindHuman, ID: "alice"}}
	before := outsideState(outside)
	f.Fuzz(func(t *testing.T, kind, entries string) {
		var es []SnapshotEntry
		if json.Unmarshal([]byte(entries), &es) != nil {
			return
		}
		rec := SnapshotRecord{SnapshotScope: SnapshotScope{World: actx.World, Owner: actx.Owner, Root: p.rootPath, Path: []string{"a"}},
			ID: "fz", Kind: kind, Entries: es}
		p.index = lyingIndex{rec: &rec} // iterations run one at a time per process
		rr, err := p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o", Context: actx,
			Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a"}}, Action: ActionSnapshotRestore,
			Input: map[string]any{"snapshotId": "fz"}})
		if err != nil {
			t.Fatalf("provider fault: %v", err)
		}
		if rec.Validate() != nil && rr.Status == kernel.StatusSucceeded {
			t.Fatalf("an invalid record was restored: %+v", rec)
		}
		if got := outsideState(outside); got != before {
			t.Fatal("a restore changed something outside the root")
		}
		if b, err := os.ReadFile(filepath.Join(root, ".git", "config")); err != nil || string(b) != "GITSECRET" {
			t.Fatal("a restore touched .git")
		}
	})
}
