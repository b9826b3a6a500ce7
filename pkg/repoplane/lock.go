package repoplane

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
)

// lockFile is one of git's own lock files ("index.lock", "refs/heads/main.lock"):
// created with O_CREATE|O_EXCL, so whoever creates it owns the file it guards until it
// renames the lock over the target (commit) or removes it (release). git, go-git-free
// sharedos processes and anything else following git's protocol exclude each other.
type lockFile struct {
	root   *os.Root
	target string
	f      *os.File
	done   bool
}

// acquireLock takes target's lock in root; an existing lock is repo_busy (retryable).
func acquireLock(root *os.Root, target string) (*lockFile, *opError) {
	if d := path.Dir(target); d != "." {
		if err := root.MkdirAll(d, 0o777); err != nil {
			return nil, failed(CodeProviderError, "create the directory of %s: %v", target, err)
		}
	}
	f, err := root.OpenFile(target+".lock", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, fs.ErrExist) {
		return nil, busy("another process is writing the repository (%s.lock exists); retry later", target)
	}
	if err != nil {
		return nil, failed(CodeProviderError, "lock %s: %v", target, err)
	}
	return &lockFile{root: root, target: target, f: f}, nil
}

// commit writes data to the lock file and renames it over the target.
func (l *lockFile) commit(data []byte) error {
	if l.done {
		return errors.New("lock already released")
	}
	if _, err := l.f.Write(data); err != nil {
		return fmt.Errorf("write %s.lock: %w", l.target, err)
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("close %s.lock: %w", l.target, err)
	}
	l.f = nil
	if err := l.root.Rename(l.target+".lock", l.target); err != nil {
		return fmt.Errorf("replace %s: %w", l.target, err)
	}
	l.done = true
	return nil
}

// release removes the lock unless it was committed. It is safe to call twice.
func (l *lockFile) release() {
	if l == nil || l.done {
		return
	}
	if l.f != nil {
		_ = l.f.Close()
	}
	_ = l.root.Remove(l.target + ".lock")
	l.done = true
}
