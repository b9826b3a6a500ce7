package tokens

import (
	"bytes"
	"crypto/sha256"
	"os"
	"sync"
	"sync/atomic"
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

	// last is what the last read found, for the lock-free path of Current: a server
	// calls Current on every request, and a mutex held across the stat(2) of every
	// request convoys them (the stat is taken outside any lock).
	last atomic.Pointer[watched]

	mu      sync.Mutex // serializes reads of the file; guards the fields below
	stamp   stamp
	checked time.Time
	sum     [32]byte
	file    *File
	err     error
	loaded  bool
}

// watched is one read of the file: its stamp before the read, when it was read, and
// what it held.
type watched struct {
	stamp   stamp
	checked time.Time
	file    *File
	err     error
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
	if l := w.last.Load(); l != nil {
		// The file is unchanged since that read when its stat now is the one taken before
		// it and the read came after the racy window of its modification.
		if st := statFile(w.path); st == l.stamp && st.ok && l.checked.Sub(st.mtime) > racyWindow {
			return l.file, l.err
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	f, err := w.read()
	w.last.Store(&watched{stamp: w.stamp, checked: w.checked, file: w.file, err: w.err})
	return f, err
}

// read is Current under w.mu.
func (w *Watcher) read() (*File, error) {
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
