package tokens

import (
	"bytes"
	"crypto/sha256"
	"os"
	"sync"
	"time"
)

// Watcher holds the current content of a tokens file: Current stats the file on every
// call and reads it again only when the stat changed or is too recent to trust (coarse
// timestamps), parsing it only when its content digest changed. So a `tokens revoke`
// from another process takes effect on the next request, at the cost of one stat.
//
// A file that becomes unreadable or invalid is an error until it is fixed (fail-closed:
// the previous content is not kept, so a revocation can never be undone by breaking the
// file). It is safe for concurrent use.
type Watcher struct {
	path string

	mu      sync.Mutex
	stamp   stamp
	checked time.Time
	sum     [32]byte
	file    *File
	err     error
	loaded  bool
}

type stamp struct {
	ok    bool
	size  int64
	mtime time.Time
	ino   uint64
}

// racyWindow: a file modified this recently may change again without its stat changing.
const racyWindow = 2 * time.Second

// NewWatcher returns a watcher of the tokens file at path; nothing is read yet.
func NewWatcher(path string) *Watcher { return &Watcher{path: path} }

// Path is the watched file.
func (w *Watcher) Path() string { return w.path }

// Current returns the file's current content, or why it cannot be used.
func (w *Watcher) Current() (*File, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	st := statFile(w.path)
	if w.loaded && st == w.stamp && st.ok && w.checked.Sub(st.mtime) > racyWindow {
		return w.file, w.err
	}
	data, err := readFile(w.path)
	w.stamp, w.checked, w.loaded = st, now, true
	if err != nil {
		w.file, w.err, w.sum = nil, err, [32]byte{}
		return nil, err
	}
	sum := sha256.Sum256(data)
	if sum == w.sum && w.err == nil && w.file != nil {
		return w.file, nil
	}
	f, perr := Parse(w.path, bytes.Clone(data))
	if perr != nil {
		w.file, w.err, w.sum = nil, perr, [32]byte{}
		return nil, perr
	}
	w.file, w.err, w.sum = f, nil, sum
	return f, nil
}

func statFile(p string) stamp {
	fi, err := os.Stat(p)
	if err != nil {
		return stamp{}
	}
	return stamp{ok: true, size: fi.Size(), mtime: fi.ModTime(), ino: inode(fi)}
}
