//go:build linux

package repoplane

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// A real listing gives the types the file system reports.
func TestListGivesTypes(t *testing.T) {
	dir := t.TempDir()
	must(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644))
	must(t, os.Symlink("d", filepath.Join(dir, "l")))
	root, err := os.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	d, err := openDirHandle(root)
	must(t, err)
	defer d.close()
	types := map[string]fs.FileMode{}
	must(t, d.list(make([]byte, 4096), func(name string, typ fs.FileMode) { types[name] = typ }))
	for name, want := range map[string]fs.FileMode{"d": fs.ModeDir, "f": 0, "l": fs.ModeSymlink} {
		if got, ok := types[name]; !ok || got != want && got != typeUnknown {
			t.Errorf("%s listed as %v (present %v), want %v", name, got, ok, want)
		}
	}
}

// openSub opens a child directory on a plain descriptor, but never through a link
// (even one to a directory inside the tree: "not a directory"), and never by a name
// that is not one component: ".." from the top of the tree is refused by the root.
func TestOpenSubNeverFollowsOrEscapes(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "tree")
	must(t, os.MkdirAll(filepath.Join(dir, "real"), 0o755))
	must(t, os.WriteFile(filepath.Join(top, "outside"), []byte("secret"), 0o644))
	must(t, os.Symlink("real", filepath.Join(dir, "link")))
	root, err := os.OpenRoot(dir)
	must(t, err)
	defer root.Close()
	d, err := openDirHandle(root)
	must(t, err)
	defer d.close()

	sub, err := d.openSub("real")
	must(t, err)
	sub.close()
	if sub, err := d.openSub("link"); err == nil || !isNotDir(err) {
		if sub != nil {
			sub.close()
		}
		t.Fatalf("openSub(link) = %v, want a not-a-directory error", err)
	}
	if sub, err := d.openSub(".."); err == nil {
		sub.close()
		t.Fatal("openSub(\"..\") opened the parent of the tree")
	}
	if _, err := d.readFileLimited("../outside", 100); err == nil {
		t.Fatal("readFileLimited(\"../outside\") read outside the tree")
	}
	if _, err := d.readFileLimited("link", 100); err == nil {
		t.Fatal("readFileLimited followed a link")
	}
}

// rootOf opens, on first use, the very directory the descriptor holds, even after it
// was renamed, and files are read through the descriptor only if they are still the
// file lstat described.
func TestRootOfAndOpenCheckedFollowTheDescriptor(t *testing.T) {
	top := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(top, "a"), 0o755))
	must(t, os.WriteFile(filepath.Join(top, "a", "f"), []byte("first"), 0o644))
	root, err := os.OpenRoot(top)
	must(t, err)
	defer root.Close()
	d, err := openDirHandle(root)
	must(t, err)
	defer d.close()
	sub, err := d.openSub("a")
	must(t, err)
	defer sub.close()
	must(t, os.Rename(filepath.Join(top, "a"), filepath.Join(top, "b")))
	must(t, os.MkdirAll(filepath.Join(top, "a"), 0o755)) // a decoy under the old name
	r, err := sub.rootOf()
	must(t, err)
	if _, err := r.Stat("f"); err != nil {
		t.Fatalf("rootOf is not the renamed directory: %v", err)
	}

	st, err := sub.lstat("f")
	must(t, err)
	f, err := sub.openChecked("f", st)
	must(t, err)
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(data) != "first" {
		t.Fatalf("read %q, %v", data, err)
	}
	// another file renamed over it (created while f exists: another inode)
	must(t, os.WriteFile(filepath.Join(top, "b", "g"), []byte("other"), 0o644))
	must(t, os.Rename(filepath.Join(top, "b", "g"), filepath.Join(top, "b", "f")))
	if f, err := sub.openChecked("f", st); err == nil {
		f.Close()
		t.Fatal("openChecked read a file swapped in after lstat")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
