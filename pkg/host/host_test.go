package host

import (
	"os"
	"path/filepath"
	"testing"
)

func TestResolveExistingAndWithin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(root)
	for p, want := range map[string]bool{
		filepath.Join(dir, "link", "new", "state.db"): true,
		filepath.Join(root, "sub", "x"):               true,
		filepath.Join(dir, "rootx", "state.db"):       false,
		filepath.Join(dir, "state.db"):                false,
	} {
		if got := within(real, resolveExisting(p)); got != want {
			t.Errorf("within(root, %s) = %v, want %v", p, got, want)
		}
	}
}
