package scenario

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// goGitInitRepo is how a fixture repository was made before issue 28, with go-git's
// top-level package (linked by this test only, not by sharedos).
func goGitInitRepo(dir string, instant time.Time) error {
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		return err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return err
	}
	sig := &object.Signature{Name: "sharedos test", Email: "test@sharedos.invalid", When: instant}
	_, err = wt.Commit("scenario fixture", &git.CommitOptions{Author: sig, Committer: sig, AllowEmptyCommits: true})
	return err
}

// TestInitRepoMatchesGoGit: initRepo makes the repository go-git's PlainInit, Add(All)
// and Commit made, on trees with nested directories, names whose git order differs from
// a plain sort, an executable, a symbolic link, empty files and directories, ignore
// rules (nested, negated, directory-only) and a nested repository: the same commit id
// (so the same tree and blobs), index entries, HEAD, refs and config.
func TestInitRepoMatchesGoGit(t *testing.T) {
	instant := time.Date(2026, 3, 4, 5, 6, 7, 0, time.FixedZone("x", 3600))
	trees := map[string]map[string]string{
		"empty": {},
		"plain": {"README.md": "hello\n", "notes/todo.md": "- a\n", "notes/done.md": ""},
		"order": {"a-b": "1", "a.b": "2", "a/b": "3", "a/c/d": "4", "a0": "5", "ab": "6", "a b/c": "7", "Z": "8"},
		"ignore": {
			".gitignore": "*.log\nbuild/\n!keep.log\n/top.txt\n",
			"app.log":    "x", "keep.log": "k", "top.txt": "t", "sub/top.txt": "s",
			"build/out.bin": "o", "sub/build/x": "y", "sub/.gitignore": "*.tmp\n!important.tmp\n",
			"sub/a.tmp": "1", "sub/important.tmp": "2", "sub/b.txt": "3",
			"build2/build": "file named build",
		},
		"nested": {"outer.txt": "o", "inner/.git/HEAD": "ref: refs/heads/master\n", "inner/file.txt": "i"},
	}
	for name, files := range trees {
		t.Run(name, func(t *testing.T) {
			dirs := [2]string{filepath.Join(t.TempDir(), "ours"), filepath.Join(t.TempDir(), "gogit")}
			for _, d := range dirs {
				for p, content := range files {
					full := filepath.Join(d, filepath.FromSlash(p))
					gitMust(t, os.MkdirAll(filepath.Dir(full), 0o755))
					gitMust(t, os.WriteFile(full, []byte(content), 0o644))
				}
				gitMust(t, os.MkdirAll(filepath.Join(d, "emptydir", "deeper"), 0o755))
				if name == "plain" {
					gitMust(t, os.WriteFile(filepath.Join(d, "run.sh"), []byte("#!/bin/sh\n"), 0o755))
					gitMust(t, os.Symlink("notes/todo.md", filepath.Join(d, "link")))
					gitMust(t, os.Symlink("../missing", filepath.Join(d, "notes", "dangling")))
				}
			}
			gitMust(t, initRepo(dirs[0], instant))
			gitMust(t, goGitInitRepo(dirs[1], instant))
			var heads [2]plumbing.Hash
			var entries [2][]string
			var texts [2][]string
			for i, d := range dirs {
				r, err := git.PlainOpen(d)
				gitMust(t, err)
				ref, err := r.Head()
				gitMust(t, err)
				heads[i] = ref.Hash()
				if ref.Name() != plumbing.Master {
					t.Errorf("%s: HEAD is on %s", d, ref.Name())
				}
				idx, err := r.Storer.Index()
				gitMust(t, err)
				if idx.Version != 2 {
					t.Errorf("%s: index version %d", d, idx.Version)
				}
				for _, e := range idx.Entries {
					entries[i] = append(entries[i], e.Name+" "+e.Mode.String()+" "+e.Hash.String()+" "+time.Duration(e.Size).String())
				}
				for _, f := range []string{"HEAD", "config", "refs/heads/master"} {
					b, err := os.ReadFile(filepath.Join(d, ".git", f))
					gitMust(t, err)
					texts[i] = append(texts[i], f+":\n"+string(b))
				}
			}
			if heads[0] != heads[1] {
				t.Errorf("commit %s; go-git made %s", heads[0], heads[1])
			}
			if !slices.Equal(entries[0], entries[1]) {
				t.Errorf("index entries\n%q\ngo-git's\n%q", entries[0], entries[1])
			}
			if !slices.Equal(texts[0], texts[1]) {
				t.Errorf(".git files\n%q\ngo-git's\n%q", texts[0], texts[1])
			}
		})
	}
}

func gitMust(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
