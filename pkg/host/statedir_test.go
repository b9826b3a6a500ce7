package host_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/host"
)

// TestStateDirApartFromTheStore: with StateDir set, the grant cache and the snapshot
// blobs are made there and nothing of them beside the state database; a StateDir inside
// the root is refused like the state database's folder. Without it they stay beside the
// database (LocalDir).
func TestStateDirApartFromTheStore(t *testing.T) {
	dir, root, grants := escFixture(t)
	dbDir, local := filepath.Join(dir, "db"), filepath.Join(dir, "local")
	s := &host.Settings{Root: root, State: filepath.Join(dbDir, "state.db"), StateDir: local, Grants: []string{grants},
		DefaultNamespaces: []string{"files"}}
	if s.LocalDir() != local {
		t.Fatalf("LocalDir %s", s.LocalDir())
	}
	p, err := host.Prepare(s, time.Now, host.Needs{Planes: true, Actor: true})
	must(t, err)
	if _, err := p.Open(ctx); err != nil {
		t.Fatal(err)
	}
	must(t, p.Close())
	for _, want := range []string{filepath.Join(local, "snapshots"), filepath.Join(local, "cache", "grants"), filepath.Join(local, "cache", "grants.key")} {
		if _, err := os.Stat(want); err != nil {
			t.Errorf("%s: %v", want, err)
		}
	}
	entries, err := os.ReadDir(dbDir)
	must(t, err)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "state.db") {
			t.Errorf("%s was made beside the state database, not in StateDir", e.Name())
		}
	}

	inside := *s
	inside.StateDir = filepath.Join(root, "local")
	if _, err := host.Prepare(&inside, time.Now, host.Needs{Planes: true, Actor: true}); err == nil ||
		!strings.Contains(err.Error(), "lies inside the root") {
		t.Fatalf("a StateDir inside the root: %v", err)
	}
	if _, err := os.Stat(inside.StateDir); !os.IsNotExist(err) {
		t.Fatalf("the refused StateDir was created: %v", err)
	}

	def := host.Settings{State: filepath.Join(dbDir, "state.db")}
	if def.LocalDir() != dbDir {
		t.Fatalf("default LocalDir %s, want the database's folder", def.LocalDir())
	}
}
