package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// # Durable commits outside the audit lock (group flush)
//
// Every transaction that appends audit events holds the audit lock (auditLock) until it
// ends, so that seq is assigned in commit order and a reader that keeps LastAuditSeq
// misses nothing (audit.go). A durable commit used to wait for its write-ahead log flush
// while holding that lock: every spend, refusal and effect record of the whole cluster
// was serialized at one WAL flush each (about 500/s with fsync on, whatever the number
// of distinct grants).
//
// Such a transaction now commits with synchronous_commit off (inside the lock: the lock
// is released at commit, so the lock is held only while the rows are written), and the
// method waits, OUTSIDE the lock and before it returns, until the log is flushed past its
// commit (waitDurable). Nothing acts on the write before that: a spend's Commit, a
// refusal's or an effect's Append, a resolution or a selection change return only once
// durable, exactly as before; the tool runs, and the caller is answered, after they
// return.
//
// How the wait is done: PostgreSQL's log is one sequence, and flushing it up to a record
// flushes everything before it. A transaction that begins after a commit returned writes
// its own commit record after that commit's, so a durable commit of it proves the earlier
// commit durable. waitDurable therefore joins the waiters of this process into rounds:
// one round is one tiny durable transaction (pg_logical_emit_message, transactional: it
// takes a transaction id and writes a log record, so its commit is flushed; it needs no
// table and no privilege, and no logical decoding reads it), begun after every member of
// the round had committed. While a round flushes, the commits that finish join the next
// round, so many commits share one flush — and the server itself also shares one flush
// among the rounds of several replicas that commit at the same moment.
//
// Visible before durable: between its commit and the flush, a write is visible to other
// transactions (other replicas) although a crash of the server could still lose it.
// Nothing acts on it wrongly, because everything that acts is itself a durable commit
// later in the log (or waits for one), so it cannot survive a crash that loses what it
// read:
//
//   - another spend of the same grant sees the count raised and may be refused
//     grant_exhausted: the refusal's record is committed durably (waited for), after the
//     spend in the log, so once the refusal is answered the spend is durable too;
//   - a call allowed by a selection or a resolution not yet durable runs only after its
//     own spend and record are durable, which makes them durable;
//   - an audit reader (a follower keeping LastAuditSeq, `audit list`, `audit export
//     --since`) may read a record a moment before it is durable. If the server crashes in
//     that moment, the record is lost with its spend, and the call it records was never
//     run nor answered (its writer was still waiting for the flush). Write-ahead records
//     (kernel.WriteAheadAuditSink) were already visible before durable: nothing new in
//     kind. The order readers rely on is unchanged: seq is still assigned under the lock
//     and becomes visible in commit order.

// flushTimeout bounds one flush round (a server that does not answer).
const flushTimeout = 30 * time.Second

// flushSQL is one durable transaction that writes a log record: its commit flushes the
// log up to it.
const flushSQL = `SELECT pg_logical_emit_message(true, 'sharedos.flush', '')`

// flusher joins the waits for durability of this process into rounds.
type flusher struct {
	mu      sync.Mutex
	running bool        // a round is being flushed
	next    *flushRound // the round waiters join meanwhile, nil when none
	rounds  int64       // rounds flushed (tests)
	// hook, when set (tests), is called before each round is flushed.
	hook func()
}

type flushRound struct {
	done chan struct{}
	err  error
}

// waitDurable returns once every transaction this process committed before the call is
// durable (flushed to the server's log), or the error of the round that was to prove it.
func (s *Store) waitDurable(ctx context.Context) error {
	f := &s.flush
	f.mu.Lock()
	r := f.next
	if r == nil {
		r = &flushRound{done: make(chan struct{})}
		if f.running {
			f.next = r // flushed once the running round is done: it begins after this commit
		} else {
			f.running = true
			go s.flushRounds(r)
		}
	}
	f.mu.Unlock()
	select {
	case <-r.done:
		if r.err != nil {
			return fmt.Errorf("wait for the commit to reach the disk: %w", r.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// flushRounds flushes r, then each round that waiters joined meanwhile, until none is
// left.
func (s *Store) flushRounds(r *flushRound) {
	f := &s.flush
	for r != nil {
		f.mu.Lock()
		hook := f.hook
		f.mu.Unlock()
		if hook != nil {
			hook()
		}
		ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
		_, r.err = s.pool.Exec(ctx, flushSQL, pgx.QueryExecModeSimpleProtocol)
		cancel()
		f.mu.Lock()
		f.rounds++
		close(r.done)
		r = f.next
		f.next = nil
		f.running = r != nil
		f.mu.Unlock()
	}
}

// inTxDurable is inTx for a durable transaction that appends audit events: it commits
// with synchronous_commit off, so that the audit lock is not held through the log flush,
// and returns once the commit is durable (waitDurable). A commit that succeeded but whose
// flush could not be proven is an error (the caller acts on nothing).
func (s *Store) inTxDurable(ctx context.Context, fn func(tx pgx.Tx) error) error {
	if err := s.inTx(ctx, true, fn); err != nil {
		return err
	}
	return s.waitDurable(ctx)
}

// inTxClassChecked (ambiguous.go) is inTx for a transaction that appends audit events:
// write-ahead, or durable as inTxDurable, with the lookup of an ambiguous commit.
