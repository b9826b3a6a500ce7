package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The shared spool: a short-lived process (a CLI command) writes its write-ahead audit
// records — a listing's, a refusal's, a read's — by appending them to one file that all
// such processes share, STATE-spool/shared.log, instead of opening a write transaction:
// a command that changes nothing then writes nothing to the database, so SQLite has no
// log to create, sync and checkpoint when the process exits (that was ~1 ms, four
// fsyncs, of every `tools list`). The records are as durable as a write-ahead commit's
// (the page cache; see Store) and as visible: every reader of the trail copies the shared
// spool in first (syncSpools), and so does the process before any durable write of its
// own (its records first), and an appender that finds the file over sharedSpoolMax.
//
// Every append and every copy holds an exclusive flock(2) on the file: an append is one
// write of whole lines, each "\n"-led (a line torn by a process that died mid-write ends
// there), and a copy reads the file, commits its records and truncates it while no
// append can come between. Lines are those of the per-process spools (checksummed; a
// damaged one is ignored); their order is the file's.

// sharedSpoolMax is the size past which an appender copies the shared spool in itself.
const sharedSpoolMax = 1 << 20

// sharedLockWait bounds the wait for the shared spool's lock (as busy_timeout bounds
// SQLite's).
const sharedLockWait = 10 * time.Second

type sharedSpool struct {
	mu    sync.Mutex
	f     *os.File // opened on first append
	wrote bool     // this process appended records not yet known to be copied in
}

// SharedSpoolPath is the shared spool of the database at path (see EnableSharedSpool).
func SharedSpoolPath(path string) string { return filepath.Join(SpoolDir(path), "shared.log") }

// EnableSharedSpool makes this store append its write-ahead audit records to the shared
// spool (see the comment above) instead of committing each: for a short-lived process.
// Durable writes are unchanged. Where flock(2) is not available it does nothing. It is
// not combined with EnableSpool (that one wins).
func (s *Store) EnableSharedSpool() {
	if !spoolSupported {
		return
	}
	s.spoolMu.Lock()
	defer s.spoolMu.Unlock()
	if s.shared == nil {
		s.shared = &sharedSpool{}
	}
}

func (s *Store) sharedSpool() *sharedSpool {
	s.spoolMu.Lock()
	defer s.spoolMu.Unlock()
	if s.sp != nil {
		return nil
	}
	return s.shared
}

// sharedAppend appends the rows' lines to the shared spool in one write.
func (s *Store) sharedAppend(ctx context.Context, sh *sharedSpool, rows [][]any) error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.f == nil {
		f, err := openShared(s.path, true)
		if err != nil {
			return err
		}
		sh.f = f
	}
	b := appendSpoolBatch(make([]byte, 0, 1024*len(rows)), 0, rows) // ordered by the file
	unlock, err := lockShared(ctx, sh.f)
	if err != nil {
		return err
	}
	defer unlock()
	n, err := sh.f.Write(b)
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		return fmt.Errorf("audit spool %s: %w", sh.f.Name(), err)
	}
	sh.wrote = true
	if fi, err := sh.f.Stat(); err == nil && fi.Size() > sharedSpoolMax {
		if err := s.ingestSharedLocked(ctx, sh.f); err == nil {
			sh.wrote = false
		}
	}
	return nil
}

// openShared opens the shared spool for reading and appending, never through a link;
// create makes the directory and the file when missing. A missing file without create
// is (nil, nil).
func openShared(path string, create bool) (*os.File, error) {
	if _, ok, err := spoolDir(path, create); err != nil || !ok {
		return nil, err
	}
	flags := os.O_RDWR | os.O_APPEND
	if create {
		flags |= os.O_CREATE
	}
	f, err := openAppendNoFollow(SharedSpoolPath(path), flags)
	if errors.Is(err, os.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("audit spool of %s: %w", path, err)
	}
	return f, nil
}

// lockShared takes the shared spool's exclusive lock, waiting at most sharedLockWait.
func lockShared(ctx context.Context, f *os.File) (unlock func(), err error) {
	deadline := time.Now().Add(sharedLockWait)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		if err = lockFile(f); err == nil {
			return func() { unlockFile(f) }, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("audit spool %s: locked by another process for over %s: %w", f.Name(), sharedLockWait, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(delay):
		}
	}
}

// ingestShared copies the shared spool's records into audit_events and empties it.
func (s *Store) ingestShared(ctx context.Context) error {
	if !spoolSupported {
		return nil
	}
	if sh := s.sharedSpool(); sh != nil {
		sh.mu.Lock()
		defer sh.mu.Unlock()
		if sh.f != nil {
			unlock, err := lockShared(ctx, sh.f)
			if err != nil {
				return err
			}
			defer unlock()
			err = s.ingestSharedLocked(ctx, sh.f)
			if err == nil {
				sh.wrote = false
			}
			return err
		}
	}
	if fi, err := os.Stat(SharedSpoolPath(s.path)); err != nil || fi.Size() == 0 {
		return nil // nothing spooled (or no spool at all)
	}
	f, err := openShared(s.path, false)
	if err != nil || f == nil {
		return err
	}
	defer f.Close()
	unlock, err := lockShared(ctx, f)
	if err != nil {
		return err
	}
	defer unlock()
	return s.ingestSharedLocked(ctx, f)
}

// ingestSharedLocked is ingestShared with the lock held on f.
func (s *Store) ingestSharedLocked(ctx context.Context, f *os.File) error {
	data, err := readAt0(f)
	if err != nil {
		return fmt.Errorf("read the audit spool %s: %w", f.Name(), err)
	}
	if len(data) == 0 {
		return nil
	}
	if err := s.ingestLines(ctx, spoolLines(data)); err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("empty the audit spool %s: %w", f.Name(), err)
	}
	return nil
}

// flushOwnShared copies the shared spool in before a durable write when this process
// appended to it (its records come first in the trail).
func (s *Store) flushOwnShared(ctx context.Context) error {
	sh := s.sharedSpool()
	if sh == nil {
		return nil
	}
	sh.mu.Lock()
	wrote := sh.wrote
	sh.mu.Unlock()
	if !wrote {
		return nil
	}
	return s.ingestShared(ctx)
}

func (s *Store) closeShared() error {
	s.spoolMu.Lock()
	sh := s.shared
	s.shared = nil // no append after Close reopens the spool
	s.spoolMu.Unlock()
	if sh == nil {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.f != nil {
		err := sh.f.Close()
		sh.f = nil
		return err
	}
	return nil
}
