package fsplane

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestFileOperationsStream: no operation holds a whole file in memory. Each one on a
// 64 MiB (sparse) file allocates far less than the file's size. Not parallel, so that
// no other test allocates meanwhile.
func TestFileOperationsStream(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 64 MiB snapshot blob")
	}
	const size = 64 << 20
	const budget = 8 << 20
	e := newEnv(t)
	big := filepath.Join(e.root, "d", "big.bin")
	os.MkdirAll(filepath.Dir(big), 0o755)
	if err := os.WriteFile(big, []byte("head"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, size); err != nil {
		t.Fatal(err)
	}
	var version, fileSnap, dirSnap string
	measure := func(what string, f func()) {
		t.Helper()
		runtime.GC()
		var a, b runtime.MemStats
		runtime.ReadMemStats(&a)
		f()
		runtime.ReadMemStats(&b)
		if got := b.TotalAlloc - a.TotalAlloc; got > budget {
			t.Errorf("%s allocated %d MiB for a %d MiB file", what, got>>20, size>>20)
		}
	}
	bigPath, dir := pth("d", "big.bin"), pth("d")
	// The provider is called directly: the test harness's schema checks of a tool's
	// output allocate on their own.
	op := func(action string, path []string, in any) any {
		t.Helper()
		rr := e.op(action, path, in)
		if rr.Status != kernel.StatusSucceeded {
			t.Fatalf("%s: %s %+v", action, rr.Status, rr.Error)
		}
		return rr.Output
	}
	measure("read", func() { version = op(ActionRead, bigPath, nil).(ReadOutput).Version })
	measure("stat", func() { op(ActionStat, bigPath, nil) })
	measure("snapshot.create (file)", func() { fileSnap = op(ActionSnapshotCreate, bigPath, nil).(SnapshotCreateOutput).SnapshotID })
	measure("snapshot.create (directory)", func() { dirSnap = op(ActionSnapshotCreate, dir, nil).(SnapshotCreateOutput).SnapshotID })
	measure("append with expectedVersion", func() {
		version = op(ActionAppend, bigPath, map[string]any{"content": "tail", "expectedVersion": version}).(WriteOutput).Version
	})
	measure("snapshot.restore (file, expectedVersion)", func() {
		op(ActionSnapshotRestore, bigPath, map[string]any{"snapshotId": fileSnap, "expectedVersion": version})
	})
	op(ActionAppend, bigPath, map[string]any{"content": "tail"})
	measure("snapshot.restore (directory)", func() { op(ActionSnapshotRestore, dir, map[string]any{"snapshotId": dirSnap}) })
	measure("snapshot.restore (directory, unchanged)", func() { op(ActionSnapshotRestore, dir, map[string]any{"snapshotId": dirSnap}) })
	measure("replace with a stale expectedVersion", func() {
		if rr := e.op(ActionReplace, bigPath, map[string]any{"content": "x", "expectedVersion": version}); rr.Error == nil || rr.Error.Code != CodeVersionConflict {
			t.Fatalf("replace: %+v", rr)
		}
	})
	measure("delete with a stale expectedVersion", func() {
		if rr := e.op(ActionDelete, bigPath, map[string]any{"expectedVersion": version}); rr.Error == nil || rr.Error.Code != CodeVersionConflict {
			t.Fatalf("delete: %+v", rr)
		}
	})
	if fi, err := os.Stat(big); err != nil || fi.Size() != size {
		t.Fatalf("big.bin after the restores: %v %v", fi, err)
	}
}
