package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// # A commit whose answer was lost
//
// When the connection fails after COMMIT was written to it (the server restarted, the
// network dropped), the transaction may have committed or not: the server may have
// received the COMMIT and committed before the connection went, or never received it.
// Answering "failed" then is wrong when it did commit (a call answered failed with its
// record in the trail), and retrying is wrong too (it would spend twice).
//
// The writes that append audit events know what they wrote: each event has an id that
// no other write records with the same content (a write of the same event again is the
// same write: Append is idempotent). So the outcome is looked up (resolveCommit):
//
//  1. over a new connection of the pool (the pool opens one; bounded by the caller's
//     context: the request's deadline), wait until the server no longer runs a
//     transaction on the old connection's backend (pg_stat_activity, by its process id):
//     a backend whose client is gone either ran the COMMIT it received or rolls back and
//     exits. A process id that names another backend (reused after a restart) is one
//     whose old backend is gone, so nothing is in progress for it; waiting on it is only
//     a delay, never a wrong answer. Our own lookup connection is not the old backend;
//  2. then, in a later statement (a later snapshot), read the events back: all recorded
//     with the same content ⇒ the transaction committed (the caller gets the answer it
//     would have had: its record is there, so it is answered from it); any one missing
//     or different ⇒ it did not commit (the transaction would have written every one),
//     and nothing of it is in the database: a failure that spent nothing, which an
//     audit append may retry (provably not committed);
//  3. the same lookup when the commit was answered but the flush that proves it durable
//     failed because the server went away (waitDurableChecked): still recorded ⇒ flushed
//     again; gone (lost with an immediate shutdown) ⇒ not committed;
//  4. still unknown when the context ends (the database unreachable until the
//     deadline) ⇒ the original error, store.ErrUnavailable, as before.
//
// Covered: a spent use's commit (reservation.Commit: the use and its decision record,
// the spending call's answer), every audit append (Append, AppendBatch, their write-ahead
// forms and the grouped transactions of auditgroup.go: a refusal's or an effect's record,
// authorize's records), and message deliveries and replies that append their records
// (store.RecordedMailbox; with or without a reserved use). Not covered (an ambiguous
// commit still fails as before, store.ErrUnavailable): writes without an audit event of
// their own (idempotency records and claims, a delivery without records, selections,
// escalations, caches) — nothing in them tells this transaction's write from another's.

// errNotCommitted marks the error of a transaction whose commit was ambiguous and which
// the lookup proved not committed: nothing of it is in the database.
var errNotCommitted = errors.New("the connection was lost during the commit, and the transaction did not commit")

// errNoRecord is a lookup's answer when the transaction wrote nothing it can be told by:
// the outcome stays unknown (the lost connection's error is returned at once).
var errNoRecord = errors.New("no record to look the commit up by")

// commitAmbiguous reports whether err, the error of a transaction's COMMIT (or of a
// message holding it), may leave its outcome unknown: the connection failed (a server's
// error other than a connection exception is an answer). pgconn's "safe to retry" is not
// trusted here: a read that fails after the COMMIT was written is reported by pgx v5's
// simple protocol as "conn closed", an error it calls safe to retry. Looking up a commit
// that was never sent costs a lookup and answers "not committed", which is true.
func commitAmbiguous(err error) bool {
	return isUnreachable(err)
}

// pollCommit is the first wait between two looks at the old backend; it doubles up to
// maxPollCommit.
const (
	pollCommit    = 5 * time.Millisecond
	maxPollCommit = 200 * time.Millisecond
)

// maxCommitLookup bounds a lookup (resolveCommit) when the caller's context does not end
// sooner: a caller without a deadline (a library user's context.Background, a command
// run by hand) whose database stays unreachable gets store.ErrUnavailable after it, as
// it did before lookups existed, instead of waiting for the database for ever. Long
// enough for a database restart (the usual cause of a lost answer) to be seen through.
var maxCommitLookup = 5 * time.Second

// resolveCommit finds out whether the transaction of backend pid, whose COMMIT's answer
// was lost, committed: it waits until that backend runs no transaction, then calls
// committed (see the comment at the top of this file). It returns cause (wrapped with
// store.ErrUnavailable by the caller's fail) when the context ends first, or when
// maxCommitLookup has passed.
func (s *Store) resolveCommit(ctx context.Context, pid uint32, cause error, committed func(ctx context.Context, q querier) (bool, error)) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, maxCommitLookup)
	defer cancel()
	wait := pollCommit
	var last error
	for {
		ok, err := s.resolve1(ctx, pid, committed)
		if err == nil && ok != nil {
			return *ok, nil
		}
		if errors.Is(err, errNoRecord) {
			return false, cause
		}
		if err != nil {
			last = err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			if last != nil {
				return false, fmt.Errorf("%w (its outcome could not be read: %w)", cause, last)
			}
			return false, cause
		case <-t.C:
		}
		wait = min(2*wait, maxPollCommit)
	}
}

// resolve1 is one look: nil, nil while the old backend still runs a transaction.
func (s *Store) resolve1(ctx context.Context, pid uint32, committed func(ctx context.Context, q querier) (bool, error)) (*bool, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Release()
	var busy bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND pid <> pg_backend_pid()
		AND (state IS NULL OR state <> 'idle'))`, int32(pid)).Scan(&busy); err != nil {
		return nil, err
	}
	if busy {
		return nil, nil
	}
	ok, err := committed(ctx, c)
	if err != nil {
		return nil, err
	}
	return &ok, nil
}

// eventsRecorded reports whether every event of evs is recorded with its content (the
// row eventArgs builds).
func eventsRecorded(evs []kernel.AuditEvent) func(ctx context.Context, q querier) (bool, error) {
	return func(ctx context.Context, q querier) (bool, error) {
		rows := make([][]any, len(evs))
		for i := range evs {
			a, err := eventArgs(&evs[i])
			if err != nil {
				return false, err
			}
			rows[i] = a
		}
		return rowsRecorded(rows)(ctx, q)
	}
}

// rowsRecorded is eventsRecorded for events already encoded by eventArgs (rows): the id
// is a row's first value, the event's JSON its last.
func rowsRecorded(rows [][]any) func(ctx context.Context, q querier) (bool, error) {
	return func(ctx context.Context, q querier) (bool, error) {
		ids := make([]string, len(rows))
		want := make(map[string]string, len(rows))
		for i, a := range rows {
			ids[i] = a[0].(string)
			want[ids[i]] = a[len(a)-1].(string)
		}
		rs, err := q.Query(ctx, `SELECT id, event FROM audit_events WHERE id = ANY($1)`, ids)
		if err != nil {
			return false, err
		}
		same := 0
		for rs.Next() {
			var id, ev string
			if err := rs.Scan(&id, &ev); err != nil {
				rs.Close()
				return false, err
			}
			if want[id] == ev {
				same++
			}
		}
		if err := rs.Err(); err != nil {
			return false, err
		}
		return same == len(want), nil
	}
}

// afterAmbiguousCommit is the answer of a transaction of backend pid whose COMMIT failed
// with err: err itself unless the commit was ambiguous and committed says how it ended
// (nil: committed; errNotCommitted, with err, when it provably did not).
func (s *Store) afterAmbiguousCommit(ctx context.Context, pid uint32, err error, committed func(ctx context.Context, q querier) (bool, error)) error {
	if committed == nil || !commitAmbiguous(err) {
		return err
	}
	ok, rerr := s.resolveCommit(ctx, pid, err, committed)
	switch {
	case rerr != nil:
		return rerr
	case ok:
		return nil
	default:
		return fmt.Errorf("%w: %w", errNotCommitted, err)
	}
}

// inTxChecked is inTx for a transaction whose commit's outcome, when its answer is lost,
// committed finds out (afterAmbiguousCommit). A transaction proved not committed is run
// again, as one the server rolled back.
func (s *Store) inTxChecked(ctx context.Context, writeAhead bool, fn func(tx pgx.Tx) error, committed func(ctx context.Context, q querier) (bool, error)) error {
	return s.inTxRetry(ctx, writeAhead, fn, committed)
}

// inTxClassChecked is inTx for a transaction that appends audit events, write-ahead or
// durable (as inTxDurable), with inTxChecked's lookup, also when the flush a durable
// commit waits for fails (waitDurableChecked); run again when it provably did not commit
// (at most maxRetries times in all).
func (s *Store) inTxClassChecked(ctx context.Context, writeAhead bool, fn func(tx pgx.Tx) error, committed func(ctx context.Context, q querier) (bool, error)) error {
	var err error
	for range maxRetries {
		if err = s.inTxChecked(ctx, true, fn, committed); err != nil || writeAhead {
			return err
		}
		if err = s.waitDurableChecked(ctx, committed); !errors.Is(err, errNotCommitted) {
			return err
		}
	}
	return err
}

// waitDurableChecked is waitDurable for a transaction that committed, whose records
// committed reads back: when the flush cannot be proven because the server went away
// (an immediate shutdown loses the commits not yet flushed), the records are looked up
// once it answers again (bounded by ctx, as resolveCommit): still there ⇒ flushed again,
// to prove them durable; gone ⇒ errNotCommitted (lost with the server's crash: nothing
// of the transaction is left).
func (s *Store) waitDurableChecked(ctx context.Context, committed func(ctx context.Context, q querier) (bool, error)) error {
	var err error
	for range maxRetries {
		err = s.waitDurable(ctx)
		if err == nil || committed == nil || !isUnreachable(err) {
			return err
		}
		ok, rerr := s.resolveCommit(ctx, 0, err, committed) // pid 0: no backend to wait for
		if rerr != nil {
			return rerr
		}
		if !ok {
			return fmt.Errorf("%w: %w", errNotCommitted, err)
		}
	}
	return err
}
