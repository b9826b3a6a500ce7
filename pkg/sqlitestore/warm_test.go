package sqlitestore

import (
	"os"
	"testing"
)

// TestWarmUpTouchesNoFile: the warm-up runs against a database in memory: it works, and
// creates nothing in the working directory (or anywhere else).
func TestWarmUpTouchesNoFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	if err := warmUp(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("the warm-up created %v", ents)
	}
}
