package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// # Group commit of the audit records of work that changed nothing
//
// Every transaction that appends audit events holds the audit lock (auditLock) from its
// inserts to its commit, so the appends of one database are serialized: at one
// transaction per record, `serve`'s `POST /v1/authorize` (a decision record per request)
// was bounded by a few round trips per record. AppendWriteAhead and AppendWriteAheadBatch
// therefore join concurrent appends of this process into one transaction: while one
// batch commits, the appends that come join the next, which the first of them writes
// when the first is done — the whole transaction (BEGIN, the audit lock, each insert with
// its same-event check, COMMIT) in one message (writeGroup1), so the audit lock is never
// held across a round trip to this process and a group costs one round trip, not three.
// An append returns once the
// transaction holding its events committed, so the guarantees are the same as one
// transaction per append:
//
//   - committed and visible to every reader when the method returns; a batch's events
//     (AppendWriteAheadBatch) are inserted together, in order, all or none;
//   - a group holding a refusal's record is durable when the appends return (committed,
//     then its flush waited for outside the audit lock: flush.go), as a refusal's own
//     transaction is (see appendAll): it is answered once durable;
//   - when a group fails (an event under a recorded id with other content, a cancelled
//     context of the append that writes it, an outage), no event of it is recorded, and
//     each append of the group is tried again alone, under its own context, so that
//     each gets its own answer (ErrDuplicate only for the event that is one).
//
// Durable appends (Append, AppendBatch: the records of effects) and the records written
// inside another transaction (a spent use's, a selection's) are not grouped.

// auditGroup joins concurrent write-ahead appends.
type auditGroup struct {
	mu      sync.Mutex
	writing *auditBatch // the group being written, nil when none
	next    *auditBatch // the group appends join meanwhile, nil when none
	// hook, when set (tests), is called by the append that writes a group, before it
	// writes it.
	hook func()
}

type auditBatch struct {
	rows    [][]any // the rows of the events (eventArgs), in order
	members int
	durable bool // it holds a refusal's record
	done    chan struct{}
	err     error
}

// appendGrouped appends evs (checked already) in a group transaction; durable says the
// transaction must commit durably.
func (s *Store) appendGrouped(ctx context.Context, evs []kernel.AuditEvent, rows [][]any, durable bool) error {
	g := &s.group
	g.mu.Lock()
	if b := g.next; b != nil { // join the group waiting for the one being written
		b.rows = append(b.rows, rows...)
		b.members++
		b.durable = b.durable || durable
		g.mu.Unlock()
		<-b.done
		return s.groupResult(ctx, b, evs, durable)
	}
	b := &auditBatch{rows: append([][]any(nil), rows...), members: 1, durable: durable, done: make(chan struct{})}
	if w := g.writing; w != nil {
		// wait for that group, then write this one with whatever joined it: no other
		// group is written meanwhile (appends join g.next)
		g.next = b
		g.mu.Unlock()
		<-w.done
		g.mu.Lock()
		g.next = nil
	}
	g.writing = b
	hook := g.hook
	g.mu.Unlock()
	if hook != nil {
		hook()
	}
	b.err = s.writeGroup(ctx, b.rows, b.durable)
	g.mu.Lock()
	g.writing = nil
	g.mu.Unlock()
	close(b.done)
	return s.groupResult(ctx, b, evs, durable)
}

// groupResult is the answer of an append of group b: the group's, or, when the group of
// several failed, the append's own transaction's.
func (s *Store) groupResult(ctx context.Context, b *auditBatch, evs []kernel.AuditEvent, durable bool) error {
	if b.err == nil || (b.members == 1 && !isDupCheck(b.err)) {
		// (an event under a recorded id with other content: the append alone says which,
		// wrapping store.ErrDuplicate)
		return b.err
	}
	return s.inTxClassChecked(ctx, !durable, func(tx pgx.Tx) error { return appendEvents(ctx, tx, evs) }, eventsRecorded(evs))
}

// insertAuditCheckedSQL is insertAuditSQL and sameEventCheckSQL in one statement: it
// inserts the event and, when its id was recorded already (by an earlier transaction, or
// earlier in this one), fails the transaction (sameEventCheckSQL's error) unless the
// recorded event is this one. The check's scan runs only when nothing was inserted (an
// uncorrelated NOT EXISTS is a one-time filter); the row it reads is visible, because
// the statement runs after the audit lock is held, so every transaction that recorded an
// event has ended. The failing cast reads a column, so the planner cannot fold it into an
// error when the branch is not taken.
const insertAuditCheckedSQL = `WITH ins AS (` + insertAuditSQL + ` RETURNING 1)
	SELECT CASE WHEN event = $12 THEN 0 ELSE (id || ' ` + dupMarker + `')::int END
	FROM audit_events WHERE id = $1 AND NOT EXISTS (SELECT 1 FROM ins)`

// writeGroup writes the events of a group (rows: their eventArgs) in one transaction,
// retried like inTx on a serialization failure or a deadlock, and, when durable, returns
// once its commit is durable (waitDurable, outside the audit lock). A commit whose answer
// was lost is looked up by the group's rows (ambiguous.go): recorded ⇒ committed;
// provably not committed ⇒ written again, as a transaction the server rolled back; still
// unknown at ctx's end ⇒ the lost connection's error. The same lookup when the flush a
// durable group waits for cannot be proven (waitDurableChecked).
func (s *Store) writeGroup(ctx context.Context, rows [][]any, durable bool) error {
	recorded := rowsRecorded(rows)
	var err error
	for attempt := range maxRetries {
		if attempt > 0 {
			if werr := retryWait(ctx, attempt, err); werr != nil {
				return werr
			}
		}
		var pid uint32
		pid, err = s.writeGroup1(ctx, rows)
		if err != nil && pid != 0 {
			err = s.afterAmbiguousCommit(ctx, pid, err, recorded)
		}
		if err == nil && durable {
			err = s.waitDurableChecked(ctx, recorded)
		}
		if !retryable(err) && !errors.Is(err, errNotCommitted) {
			break
		}
	}
	return err
}

// writeGroup1 sends the whole transaction of a group in one message: BEGIN, synchronous
// commit off, the audit lock, each event's checked insert, COMMIT — as a spend's Commit
// does (usage.go). The audit lock, which orders every audit-appending transaction of
// every replica, is then held only while the server runs the inserts, never across a
// round trip to this process (it used to be held from the inserts' answer to the COMMIT
// that followed it; and BEGIN, the batch and COMMIT were three round trips, now one).
// A statement that fails skips the rest (COMMIT too) and the transaction is rolled back.
//
// It returns the backend's process id when the message was sent (0 when no connection
// was had: nothing was sent, so nothing can have committed).
func (s *Store) writeGroup1(ctx context.Context, rows [][]any) (uint32, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	pid := c.Conn().PgConn().PID()
	var b pgx.Batch
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit = off")
	b.Queue("SELECT pg_advisory_xact_lock($1)", int64(auditLock))
	for _, a := range rows {
		b.Queue(insertAuditCheckedSQL, a...)
	}
	b.Queue("COMMIT")
	if err := sendTx(ctx, c, &b); err != nil {
		if st := c.Conn().PgConn().TxStatus(); st == 'T' || st == 'E' {
			_, _ = c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
		c.Release() // a connection still in a transaction is closed, not reused
		return pid, err
	}
	c.Release()
	return 0, nil
}

// sendTx sends a transaction written as one batch (BEGIN … COMMIT) on c and reads every
// answer: the first error, or an error when the last answer is not COMMIT's (the server
// rolled it back).
func sendTx(ctx context.Context, c *pgxpool.Conn, b *pgx.Batch) error {
	br := c.SendBatch(ctx, b)
	var err error
	var tag pgconn.CommandTag
	for range b.Len() {
		if tag, err = br.Exec(); err != nil {
			break
		}
	}
	err = errors.Join(err, br.Close())
	if err == nil && tag.String() != "COMMIT" {
		err = fmt.Errorf("the transaction was rolled back (%s)", tag)
	}
	return err
}
