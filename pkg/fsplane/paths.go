package fsplane

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"syscall"
)

// dirRef is an open directory inside the root: either the root itself (not owned) or
// a sub-root opened from it (owned, closed by release).
type dirRef struct {
	r     *os.Root
	owned bool
}

func (d dirRef) release() {
	if d.owned {
		d.r.Close()
	}
}

// escapeErr is the refusal for a link in a path (or a path that changed under us).
func escapeErr(path []string, raced bool) error {
	if raced {
		return denied(CodePathEscape, "%s changed while it was being opened (a directory was replaced, possibly by a symbolic link); nothing was done", show(path))
	}
	return denied(CodePathEscape, "%s passes through a symbolic link; links are never followed by the files plane", show(path))
}

// openChild opens the directory name inside parent without following a link: it
// Lstats name, refuses a link, opens it through os.Root and checks the handle is the
// directory it examined. With mkdir, a missing directory is created first. path is
// the full path of the child, for messages.
func openChild(parent *os.Root, name string, path []string, mkdir bool) (*os.Root, error) {
	for attempt := 1; ; attempt++ {
		child, err := openChildOnce(parent, name, path, mkdir)
		if !errors.Is(err, errRaced) {
			return child, err
		}
		// The name was replaced between its examination and the open (a rename, or a
		// link swapped in and followed by os.Root): examine it again, which refuses a
		// link it finds.
		if attempt == openAttempts {
			return nil, escapeErr(path, true)
		}
	}
}

func openChildOnce(parent *os.Root, name string, path []string, mkdir bool) (*os.Root, error) {
	fi, err := parent.Lstat(name)
	if err != nil && mkdir && errors.Is(err, fs.ErrNotExist) {
		if err := parent.Mkdir(name, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		fi, err = parent.Lstat(name)
	}
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, failed(CodeNotFound, "%s does not exist", show(path))
		}
		return nil, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, escapeErr(path, false)
	case !fi.IsDir():
		return nil, failed(CodeNotFound, "%s is not a directory", show(path))
	}
	child, err := parent.OpenRoot(name)
	if err != nil {
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) || errors.Is(err, fs.ErrNotExist) ||
			strings.Contains(err.Error(), "path escapes") {
			return nil, errRaced
		}
		return nil, err
	}
	st, err := child.Stat(".")
	if err != nil {
		child.Close()
		return nil, err
	}
	if !os.SameFile(fi, st) {
		child.Close()
		return nil, errRaced
	}
	return child, nil
}

// openDir opens the directory at path (the root for an empty path), one verified
// segment at a time. With mkdir, missing directories are created.
func (p *Provider) openDir(path []string, mkdir bool) (dirRef, error) {
	cur := dirRef{r: p.root}
	for i, seg := range path {
		next, err := openChild(cur.r, seg, path[:i+1], mkdir)
		cur.release()
		if err != nil {
			return dirRef{}, err
		}
		cur = dirRef{r: next, owned: true}
	}
	return cur, nil
}

// openAttempts bounds how often openFileIn examines and opens a name that keeps being
// replaced under it (each replacement by a concurrent writer's rename costs one).
const openAttempts = 16

// openFileIn opens the regular file name inside dir for reading, refusing links and
// special files, and checks the handle is the file it examined. path is the full path.
func openFileIn(dir *os.Root, name string, path []string) (*os.File, os.FileInfo, error) {
	return openFileInHook(dir, name, path, nil)
}

// openFileInHook is openFileIn with a hook called between examining the name and
// opening it (tests use it to replace the file at that moment; nil in production).
//
// A writer replaces a file by renaming a new one over it, so the name may hold another
// regular file by the time it is opened. That is not an escape: the name is examined
// again and the new file opened (at most openAttempts times). Only a link seen by the
// examination is refused path_escape; an open that reached something other than what
// the name held when examined (os.Root follows links inside the root) is never used.
func openFileInHook(dir *os.Root, name string, path []string, hook func()) (*os.File, os.FileInfo, error) {
	for attempt := 1; ; attempt++ {
		fi, err := dir.Lstat(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil, failed(CodeNotFound, "%s does not exist", show(path))
			}
			return nil, nil, err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return nil, nil, escapeErr(path, false)
		}
		if !fi.Mode().IsRegular() {
			if fi.IsDir() {
				return nil, nil, failed(CodeNotAFile, "%s is a directory, not a file", show(path))
			}
			return nil, nil, failed(CodeNotAFile, "%s is not a regular file", show(path))
		}
		if hook != nil {
			hook()
		}
		f, st, err := openVerified(dir, name, fi)
		if err == nil {
			return f, st, nil
		}
		if !errors.Is(err, errRaced) {
			return nil, nil, err
		}
		if attempt == openAttempts {
			e := failed(CodeProviderError, "%s was replaced %d times while it was being opened (concurrent writes); nothing was read, try again", show(path), openAttempts)
			e.retryable = true
			return nil, nil, e
		}
	}
}

var errRaced = errors.New("file changed while it was being opened")

// openVerified opens name (read-only, non-blocking so a FIFO swapped in cannot hang
// us) and checks it is still the regular file fi describes.
func openVerified(dir *os.Root, name string, fi os.FileInfo) (*os.File, os.FileInfo, error) {
	f, err := dir.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) ||
			strings.Contains(err.Error(), "path escapes") {
			return nil, nil, errRaced // the name changed after it was examined
		}
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !st.Mode().IsRegular() || !os.SameFile(fi, st) {
		f.Close()
		return nil, nil, errRaced
	}
	return f, st, nil
}
