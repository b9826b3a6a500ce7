package scenario

import (
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// initRepo makes dir a git repository with one commit of everything below it (the
// files the .gitignore files and .git/info/exclude leave in), at instant, by a fixed
// author, on branch master.
//
// It writes what go-git's PlainInit, Worktree.AddWithOptions(All) and Worktree.Commit
// wrote (gitfixture_test.go compares the two on the same trees: the same commit, tree
// and blob ids, index entries, HEAD and config), from go-git's storage and object
// packages only. Issue 28: go-git's top-level package, which nothing else of sharedos
// uses, links its network transports (SSH, HTTP, the git protocol and their
// dependencies, 37 packages), whose package initialisation every sharedos process paid.
func initRepo(dir string, instant time.Time) error {
	wt := osfs.New(dir)
	dot, err := wt.Chroot(".git")
	if err != nil {
		return err
	}
	s := filesystem.NewStorage(dot, cache.NewObjectLRUDefault())
	if err := s.Init(); err != nil {
		return err
	}
	if err := s.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, plumbing.Master)); err != nil {
		return err
	}
	cfg, err := s.Config()
	if err != nil {
		return err
	}
	if err := s.SetConfig(cfg); err != nil {
		return err
	}

	patterns, _ := gitignore.ReadPatterns(wt, nil)
	ignored := gitignore.NewMatcher(patterns)
	idx := &index.Index{Version: 2}
	var walk func(rel string) error
	walk = func(rel string) error {
		entries, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return err
		}
		for _, d := range entries {
			if d.Name() == ".git" {
				continue
			}
			name := path.Join(rel, d.Name())
			if d.IsDir() { // matched file by file, as go-git's status did (a "!" rule may re-include one)
				if err := walk(name); err != nil {
					return err
				}
				continue
			}
			if ignored.Match(strings.Split(name, "/"), false) {
				continue
			}
			if err := addFile(s, idx, dir, name); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return err
	}
	sort.Slice(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	if err := s.SetIndex(idx); err != nil {
		return err
	}

	tree, err := writeTree(s, idx)
	if err != nil {
		return err
	}
	sig := object.Signature{Name: "sharedos test", Email: "test@sharedos.invalid", When: instant}
	commit := &object.Commit{Author: sig, Committer: sig, Message: "scenario fixture", TreeHash: tree}
	obj := s.NewEncodedObject()
	if err := commit.Encode(obj); err != nil {
		return err
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return err
	}
	return s.SetReference(plumbing.NewHashReference(plumbing.Master, h))
}

// addFile stores the blob of the regular file or symbolic link name (its target) and
// adds its index entry, with the stat data git keeps.
func addFile(s *filesystem.Storage, idx *index.Index, dir, name string) error {
	p := filepath.Join(dir, filepath.FromSlash(name))
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	mode, err := filemode.NewFromOSFileMode(fi.Mode())
	if err != nil {
		return nil // sockets, devices: not part of a fixture (nor of go-git's status)
	}
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(fi.Size())
	w, err := obj.Writer()
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(p)
		if err != nil {
			return err
		}
		_, err = io.WriteString(w, target)
		if err != nil {
			return err
		}
	} else {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	h, err := s.SetEncodedObject(obj)
	if err != nil {
		return err
	}
	e := &index.Entry{Name: name, Hash: h, Mode: mode, ModifiedAt: fi.ModTime(), Size: uint32(fi.Size())}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.CreatedAt = time.Unix(st.Ctim.Unix())
		e.Dev = uint32(st.Dev)
		e.Inode = uint32(st.Ino)
		e.GID = st.Gid
		e.UID = st.Uid
	}
	idx.Entries = append(idx.Entries, e)
	return nil
}

// writeTree stores the trees of the index's entries and returns the root tree's id.
func writeTree(s *filesystem.Storage, idx *index.Index) (plumbing.Hash, error) {
	trees := map[string]*object.Tree{"": {}}
	for _, e := range idx.Entries {
		parts := strings.Split(e.Name, "/")
		parent := ""
		for i, part := range parts {
			full := path.Join(parent, part)
			if i == len(parts)-1 {
				trees[parent].Entries = append(trees[parent].Entries, object.TreeEntry{Name: part, Mode: e.Mode, Hash: e.Hash})
			} else if _, ok := trees[full]; !ok {
				trees[full] = &object.Tree{}
				trees[parent].Entries = append(trees[parent].Entries, object.TreeEntry{Name: part, Mode: filemode.Dir})
			}
			parent = full
		}
	}
	var store func(p string) (plumbing.Hash, error)
	store = func(p string) (plumbing.Hash, error) {
		t := trees[p]
		// git's order: by name, a directory's name as if it ended in "/"
		key := func(te object.TreeEntry) string {
			if te.Mode == filemode.Dir {
				return te.Name + "/"
			}
			return te.Name
		}
		sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
		for i, te := range t.Entries {
			if te.Mode == filemode.Dir {
				h, err := store(path.Join(p, te.Name))
				if err != nil {
					return plumbing.ZeroHash, err
				}
				t.Entries[i].Hash = h
			}
		}
		o := s.NewEncodedObject()
		if err := t.Encode(o); err != nil {
			return plumbing.ZeroHash, err
		}
		return s.SetEncodedObject(o)
	}
	return store("")
}
