package fsplane

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestLastSegmentLinkInsideTheGrantedFolder: a link as the last segment is refused
// path_escape by read, stat and snapshot.create even when it points to a sibling in
// the same folder or below its own folder — an exact grant on public/shared.md must
// never reach public/private.md through a link. Nothing is snapshotted.
func TestLastSegmentLinkInsideTheGrantedFolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("public/private.md", "PRIVATE sibling")
	e.write("public/sub/deep.md", "PRIVATE below")
	e.symlink("private.md", "public/shared.md")         // sibling, relative
	e.symlink("sub/deep.md", "public/down.md")          // below its own folder
	e.symlink("./private.md", "public/dot.md")          // sibling through "."
	e.symlink("../public/private.md", "public/back.md") // sibling through ".."
	e.symlink(filepath.Join(e.root, "public", "private.md"), "public/abs.md")
	for _, name := range []string{"shared.md", "down.md", "dot.md", "back.md", "abs.md"} {
		for _, tool := range []string{"files.read", "files.stat", "files.snapshot.create"} {
			msg := e.fail(tool, jobj{"path": pth("public", name)}, kernel.StatusDenied, CodePathEscape)
			if strings.Contains(msg, "PRIVATE") {
				t.Fatalf("%s %s leaked: %s", tool, name, msg)
			}
		}
		if l := e.ok("files.snapshot.list", jobj{"path": pth("public", name)}); len(l["snapshots"].([]any)) != 0 {
			t.Fatalf("a refused snapshot of %s was recorded: %v", name, l)
		}
	}
	blobs, _ := filepath.Glob(filepath.Join(e.snaps, "blobs", "*", "*"))
	if len(blobs) != 0 {
		t.Fatalf("refused snapshots stored blobs: %v", blobs)
	}
	// The links themselves are untouched and still links.
	for _, name := range []string{"shared.md", "down.md", "dot.md", "back.md", "abs.md"} {
		if fi, err := os.Lstat(filepath.Join(e.root, "public", name)); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("%s changed: %v %v", name, fi, err)
		}
	}
	if s, _ := e.readFile("public/private.md"); s != "PRIVATE sibling" {
		t.Fatalf("private.md = %q", s)
	}
}

// treeState records every entry under dir (path → kind and content), links included.
func treeState(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "link:" + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = "file:" + string(b)
		default:
			m[rel] = fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRefusedRecursiveDeleteChangesNothing: a recursive delete refused because the tree
// holds a .git (in any letter case, at any depth, after many deletable entries in path
// order) leaves every entry of the tree in place — nothing is deleted before the refusal.
func TestRefusedRecursiveDeleteChangesNothing(t *testing.T) {
	t.Parallel()
	for _, git := range []string{"zz/deep/.git", "zz/.GIT", ".Git"} {
		t.Run(git, func(t *testing.T) {
			e := newEnv(t)
			for i := 0; i < 30; i++ {
				e.write(fmt.Sprintf("tree/a%02d/f.txt", i), fmt.Sprintf("file %d", i))
			}
			e.write("tree/top.txt", "top")
			e.mkdir("tree/empty")
			e.symlink("../top.txt", "tree/a00/lnk")
			e.write("tree/"+git+"/HEAD", "ref: refs/heads/main")
			e.write("tree/zz/deep/last.txt", "last")
			before := treeState(t, filepath.Join(e.root, "tree"))
			e.fail("files.delete", jobj{"path": pth("tree"), "recursive": true}, kernel.StatusDenied, CodeNotPermitted)
			after := treeState(t, filepath.Join(e.root, "tree"))
			if fmt.Sprint(before) != fmt.Sprint(after) {
				for k, v := range before {
					if after[k] != v {
						t.Errorf("%s: %q before, %q after", k, v, after[k])
					}
				}
				t.Fatalf("the refused delete changed the tree (%d entries before, %d after)", len(before), len(after))
			}
			if len(before) < 60 {
				t.Fatalf("tree too small: %d entries", len(before))
			}
		})
	}
}
