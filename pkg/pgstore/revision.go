package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// # The revision (freshness across replicas)
//
// Migration 00003 keeps one number, the revision of the shared state a replica may cache
// or a client may read back: every transaction that changes a namespace selection, an
// escalation or its resolution, or a token of `--tokens store:` bumps it (a statement
// trigger, so no write path can forget it) and announces the new value on commit with
// NOTIFY sharedos_revision. The bump locks the revision's one row until the transaction
// ends, so revisions are numbered in the order of commit: a reader that has seen
// revision N has seen every change numbered N or less. The use counters, the audit trail,
// the mailbox and the idempotency keys do not bump it: none is cached by a replica (each
// is read from the database at every call), and bumping one row at every spend would
// serialize them.
//
// A process's view of the revision (Revision) starts at 0 and only grows. A listener (one
// connection of its own, started by the first Revision or AwaitRevision) advances it on
// every notification, and polls the row every RevisionPoll (500 ms by default) as well: a
// notification is only a wake-up hint — it is lost while the listener reconnects, and
// the poll catches up. The listener reconnects by itself (backing off up to the poll
// interval), and polls through the pool meanwhile. A cache of shared state (the tokens
// of `--tokens store:`, the namespace selections: selCache) keeps the revision it was
// loaded at and is stale once the view is past it.

// DefaultRevisionPoll is how often the listener reads the revision when no
// notification came: the bound on how late a replica learns of a change whose
// notification was lost (a reconnect).
const DefaultRevisionPoll = 500 * time.Millisecond

// revisionChannel is the NOTIFY channel of the revision (its payload the new value).
const revisionChannel = "sharedos_revision"

// revisions is a process's view of the revision and its listener.
type revisions struct {
	cur atomic.Int64

	mu      sync.Mutex
	changed chan struct{} // closed (and replaced) whenever cur advances

	start   sync.Once
	closing sync.Once
	running atomic.Bool
	stop    chan struct{}
	done    chan struct{}
	pid     atomic.Uint32 // the listener's backend process id (0: not connected)
	poll    time.Duration
	// heard is when the listener last read the revision on its connection (Unix ns; 0
	// while it is not connected): a cache validated by the view trusts it only while
	// the listener is connected and has polled recently (see selCache).
	heard atomic.Int64
}

// current reports whether the view is being kept current by a connected listener that
// read the revision within two poll intervals (and a second): only then may a cache
// validated by the view be used instead of the database.
func (r *revisions) current() bool {
	h := r.heard.Load()
	return h != 0 && time.Since(time.Unix(0, h)) < 2*r.poll+time.Second
}

func newRevisions(poll time.Duration) *revisions {
	if poll <= 0 {
		poll = DefaultRevisionPoll
	}
	return &revisions{changed: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}), poll: poll}
}

// advance raises the view to n (a lower n changes nothing).
func (r *revisions) advance(n int64) {
	for {
		c := r.cur.Load()
		if n <= c {
			return
		}
		if r.cur.CompareAndSwap(c, n) {
			break
		}
	}
	r.mu.Lock()
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// wait returns a channel closed when the view next advances.
func (r *revisions) wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// readRevision reads the revision from the database (committed changes only).
func readRevision(ctx context.Context, q querier) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, "SELECT rev FROM sharedos_revision").Scan(&n); err != nil {
		return 0, fmt.Errorf("read the revision: %w", err)
	}
	return n, nil
}

// Revision returns this process's view of the revision: every change of the shared state
// numbered up to it is visible to this process's caches. It starts the listener on first
// use and never blocks.
func (s *Store) Revision() int64 {
	s.listen()
	return s.rev.cur.Load()
}

// RefreshRevision reads the revision from the database, raises this process's view to
// it and returns the view: after it returns, every change committed before it was called
// is within the view.
func (s *Store) RefreshRevision(ctx context.Context) (int64, error) {
	s.listen()
	n, err := readRevision(ctx, s.pool)
	if err != nil {
		return s.rev.cur.Load(), fail("read the revision", err)
	}
	s.rev.advance(n)
	return s.rev.cur.Load(), nil
}

// AwaitRevision waits until this process's view of the revision is at least n and
// returns it: at once when it is, else it reads the database's revision, and then waits
// for the listener (re-reading the database every 50 ms) until ctx ends — the caller's
// bound. An n the database has not reached (a revision of another database, or of a
// lagging one) is an error once ctx ends, as is an unreachable database (wrapping
// store.ErrUnavailable).
func (s *Store) AwaitRevision(ctx context.Context, n int64) (int64, error) {
	if v := s.Revision(); v >= n {
		return v, nil
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var lastErr error // of a read that failed before ctx ended: an outage
	for {
		changed := s.rev.wait()
		v, err := s.RefreshRevision(ctx)
		if v >= n {
			return v, nil
		}
		if err != nil && ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return v, lastErr
			}
			return v, fmt.Errorf("revision %d not reached (this replica is at %d): %w", n, v, ctx.Err())
		case <-changed:
		case <-tick.C:
		}
	}
}

// ListenerPID is the process id of the listener's backend (0 while it is not connected):
// a test ends that backend (pg_terminate_backend) to lose notifications.
func (s *Store) ListenerPID() uint32 {
	s.listen()
	return s.rev.pid.Load()
}

// listen starts the listener once.
func (s *Store) listen() {
	s.rev.start.Do(func() {
		s.rev.running.Store(true)
		go s.runListener()
	})
}

// stopListener stops the listener, if it was started, and waits for it (once).
func (s *Store) stopListener() {
	s.rev.closing.Do(func() {
		s.rev.start.Do(func() {}) // none starts after this
		if s.rev.running.Load() {
			close(s.rev.stop)
			<-s.rev.done
		}
	})
}

// runListener is the listener: LISTEN on a connection of its own, advancing the view on
// each notification and polling at every quiet interval; reconnecting (and polling
// through the pool meanwhile) when the connection is lost.
func (s *Store) runListener() {
	defer close(s.rev.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.rev.stop
		cancel()
	}()
	backoff := 20 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx)
		s.rev.heard.Store(0)
		s.rev.pid.Store(0)
		if ctx.Err() != nil {
			return
		}
		_ = err // the connection was lost or refused: poll, back off, reconnect
		if n, err := readRevision(ctx, s.pool); err == nil {
			s.rev.advance(n)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, s.rev.poll)
	}
}

// listenOnce connects, listens and serves notifications until the connection fails or
// ctx ends.
func (s *Store) listenOnce(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	conn, err := pgx.ConnectConfig(cctx, s.pool.Config().ConnConfig.Copy())
	cancel()
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range []string{revisionChannel, messageChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return err
		}
	}
	// a resolution whose notification came before this LISTEN (while disconnected, or
	// before the first connection) is read by every waiter now, not at its next poll;
	// the pid is published after it (a test that sees it knows the wake-up is done)
	s.hints.NotifyAll()
	s.rev.pid.Store(conn.PgConn().PID())
	for {
		// catch up (what was committed before LISTEN, or while no notification came),
		// then wait for notifications until the next poll is due
		n, err := readRevision(ctx, conn)
		if err != nil {
			return err
		}
		s.rev.advance(n)
		s.rev.heard.Store(time.Now().UnixNano())
		for next := time.Now().Add(s.rev.poll); time.Now().Before(next); {
			wctx, cancel := context.WithDeadline(ctx, next)
			note, err := conn.WaitForNotification(wctx)
			cancel()
			switch {
			case note == nil:
			case note.Channel == messageChannel:
				s.messageNoted(note.Payload)
			default:
				if v, perr := strconv.ParseInt(note.Payload, 10, 64); perr == nil {
					s.rev.advance(v)
				}
			}
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if errors.Is(err, context.DeadlineExceeded) && !conn.IsClosed() {
					break // the poll is due
				}
				return err
			}
		}
	}
}

// wroteRevision reads, inside the transaction of a write, the revision its trigger
// bumped the count to (0 when it bumped nothing, or on a schema without revisions); the
// caller raises the view to it once the transaction committed, so a response reflecting
// the write names a revision that includes it without waiting for its notification.
func wroteRevision(ctx context.Context, tx pgx.Tx) (int64, error) {
	var v *string
	if err := tx.QueryRow(ctx, "SELECT current_setting('sharedos.revision', true)").Scan(&v); err != nil {
		return 0, fmt.Errorf("read the revision: %w", err)
	}
	if v == nil || *v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(*v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read the revision: %q: %w", *v, err)
	}
	return n, nil
}
