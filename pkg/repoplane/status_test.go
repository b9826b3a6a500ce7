package repoplane

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestStatusScenarios(t *testing.T) {
	e := newEnv(t)
	// unborn HEAD, empty repository
	s := e.status()
	if !s.Clean || s.Head != nil || s.Branch == nil || *s.Branch != "main" || s.Detached || len(s.Entries) != 0 ||
		!reflect.DeepEqual(s.Path, []string{"repo"}) {
		t.Fatalf("empty repository: %+v", s)
	}
	// unborn HEAD with staged files
	e.write("a.txt", "a\n")
	e.write("dir/b.txt", "b\n")
	e.stage("a.txt")
	sameLines(t, porcelain(e.status()), []string{"A. a.txt", "?? dir/b.txt"})
	if haveGit() {
		sameLines(t, gitPorcelain(t, e.dir), porcelain(e.status()))
	}

	e.write(".gitignore", "*.log\nbuild/\n!keep.log\n")
	e.write("dir/.gitignore", "local-*\n")
	e.write("c.txt", "c\n")
	e.write("bin.dat", "\x00\x01\x02")
	e.write("sub/deep/d.txt", "d\n")
	e.write("exec.sh", "#!/bin/sh\n")
	commitAll(t, e.dir, "init")
	s = e.status()
	if !s.Clean || s.Head == nil || len(*s.Head) != 40 || *s.Branch != "main" {
		t.Fatalf("clean: %+v", s)
	}

	// every kind of change
	e.write("a.txt", "a changed\n")                       // modified
	os.Remove(filepath.Join(e.dir, "c.txt"))              // deleted
	e.write("new.txt", "new\n")                           // untracked
	e.write("x.log", "ignored\n")                         // ignored
	e.write("keep.log", "not ignored\n")                  // re-included
	e.write("dir/local-x", "ignored by dir/.gitignore\n") // ignored
	e.write("build/out/o.bin", "ignored dir\n")           // ignored directory
	e.write("newdir/n1.txt", "n1\n")                      // untracked directory
	os.Chmod(filepath.Join(e.dir, "exec.sh"), 0o755)      // mode change
	os.Rename(filepath.Join(e.dir, "sub/deep/d.txt"), filepath.Join(e.dir, "sub/deep/e.txt"))
	e.stage("sub") // staged rename
	e.write("staged-new.txt", "s\n")
	e.stage("staged-new.txt")
	e.write("staged-new.txt", "s2\n") // staged, then modified again
	got := porcelain(e.status())
	want := []string{".M a.txt", ".D c.txt", ".M exec.sh", "AM staged-new.txt", "R. sub/deep/d.txt -> sub/deep/e.txt",
		"?? keep.log", "?? new.txt", "?? newdir/n1.txt"}
	sameLines(t, got, want)
	if haveGit() {
		sameLines(t, gitPorcelain(t, e.dir), got)
	}
}

func TestStatusTrackedFileInIgnoredDirectory(t *testing.T) {
	e := newEnv(t)
	e.write("vendor/lib/tracked.go", "package lib\n")
	commitAll(t, e.dir, "init")
	e.write(".gitignore", "vendor/\n")
	e.write("vendor/lib/tracked.go", "package lib // changed\n")
	e.write("vendor/lib/untracked.go", "package lib\n")
	sameLines(t, porcelain(e.status()), []string{".M vendor/lib/tracked.go", "?? .gitignore"})
}

func TestStatusInfoExcludeAndNoGlobalExcludes(t *testing.T) {
	e := newEnv(t)
	home := os.Getenv("HOME")
	// hostile global settings git would honour: an excludes file ignoring everything
	writeFile(t, filepath.Join(home, ".gitconfig"), "[core]\n\texcludesFile = ~/.ignore-all\n")
	writeFile(t, filepath.Join(home, ".ignore-all"), "*\n")
	writeFile(t, filepath.Join(home, ".config", "git", "ignore"), "*\n")
	e.write("seen.txt", "x")
	e.write("excluded.tmp", "x")
	writeFile(t, filepath.Join(e.dir, ".git", "info", "exclude"), "*.tmp\n")
	sameLines(t, porcelain(e.status()), []string{"?? seen.txt"})
}

func TestStatusDetachedHead(t *testing.T) {
	e := newEnv(t)
	e.write("f", "1")
	commitAll(t, e.dir, "one")
	head := *e.status().Head
	writeFile(t, filepath.Join(e.dir, ".git", "HEAD"), head+"\n")
	s := e.status()
	if !s.Detached || s.Branch != nil || *s.Head != head || !s.Clean {
		t.Fatalf("detached: %+v", s)
	}
}

func TestStatusTypeChangeAndNestedRepo(t *testing.T) {
	e := newEnv(t)
	e.write("link-me", "content\n")
	e.write("keep", "k\n")
	commitAll(t, e.dir, "init")
	os.Remove(filepath.Join(e.dir, "link-me"))
	if err := os.Symlink("keep", filepath.Join(e.dir, "link-me")); err != nil {
		t.Skip("no symlinks:", err)
	}
	initRepo(t, filepath.Join(e.dir, "nested"))
	writeFile(t, filepath.Join(e.dir, "nested", "inner.txt"), "x")
	os.Symlink("/etc/passwd", filepath.Join(e.dir, "untracked-link"))
	got := porcelain(e.status())
	sameLines(t, got, []string{".T link-me", "?? nested", "?? untracked-link"})
	if haveGit() {
		sameLines(t, gitPorcelain(t, e.dir), []string{".T link-me", "?? nested/", "?? untracked-link"})
	}
}

// A file rewritten with the same size in the same second its index entry was recorded
// must still be seen as modified (git's racy-timestamp rule).
func TestStatusRacyClean(t *testing.T) {
	e := newEnv(t)
	e.write("f.txt", "aaaa\n")
	e.stage("f.txt")
	idx := filepath.Join(e.dir, ".git", "index")
	fi, _ := os.Stat(idx)
	// same size, same mtime as recorded, content changed
	e.write("f.txt", "bbbb\n")
	st, _ := os.Stat(filepath.Join(e.dir, "f.txt"))
	_ = st
	mt := fi.ModTime()
	os.Chtimes(filepath.Join(e.dir, "f.txt"), mt, mt)
	sameLines(t, porcelain(e.status()), []string{"AM f.txt"})
	// and once the index is older than the file, stat data are trusted again
	e.write("f.txt", "aaaa\n")
	e.stage("f.txt")
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(e.dir, "f.txt"), old, old)
	e.stage("f.txt") // records the old mtime
	sameLines(t, porcelain(e.status()), []string{"A. f.txt"})
}

func TestStatusManyEntriesTruncated(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 10001 files")
	}
	e := newEnv(t)
	for i := range maxStatusEntries + 1 {
		writeFile(t, filepath.Join(e.dir, "u", string(rune('a'+i%26)), itoa(i)), "")
	}
	s := e.status()
	if !s.Truncated || len(s.Entries) != maxStatusEntries || s.Clean {
		t.Fatalf("truncated=%v entries=%d", s.Truncated, len(s.Entries))
	}
}

func itoa(i int) string {
	return string([]byte{byte('0' + i/10000%10), byte('0' + i/1000%10), byte('0' + i/100%10), byte('0' + i/10%10), byte('0' + i%10)})
}
