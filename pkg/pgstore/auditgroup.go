package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

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
// (all its inserts sent at once) when the first is done. An append returns once the
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
	evs     []kernel.AuditEvent
	members int
	durable bool // it holds a refusal's record
	done    chan struct{}
	err     error
}

// appendGrouped appends evs (checked already) in a group transaction; durable says the
// transaction must commit durably.
func (s *Store) appendGrouped(ctx context.Context, evs []kernel.AuditEvent, durable bool) error {
	g := &s.group
	g.mu.Lock()
	if b := g.next; b != nil { // join the group waiting for the one being written
		b.evs = append(b.evs, evs...)
		b.members++
		b.durable = b.durable || durable
		g.mu.Unlock()
		<-b.done
		return s.groupResult(ctx, b, evs, durable)
	}
	b := &auditBatch{evs: append([]kernel.AuditEvent(nil), evs...), members: 1, durable: durable, done: make(chan struct{})}
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
	b.err = s.inTxClassChecked(ctx, !b.durable, func(tx pgx.Tx) error { return appendEventsPipelined(ctx, tx, b.evs) }, eventsRecorded(b.evs))
	g.mu.Lock()
	g.writing = nil
	g.mu.Unlock()
	close(b.done)
	return s.groupResult(ctx, b, evs, durable)
}

// groupResult is the answer of an append of group b: the group's, or, when the group of
// several failed, the append's own transaction's.
func (s *Store) groupResult(ctx context.Context, b *auditBatch, evs []kernel.AuditEvent, durable bool) error {
	if b.err == nil || b.members == 1 {
		return b.err
	}
	return s.inTxClassChecked(ctx, !durable, func(tx pgx.Tx) error { return appendEvents(ctx, tx, evs) }, eventsRecorded(evs))
}

// appendEventsPipelined is appendEvents with the lock and every insert sent at once (one
// round trip instead of one per event).
func appendEventsPipelined(ctx context.Context, tx pgx.Tx, evs []kernel.AuditEvent) error {
	if len(evs) == 1 {
		return appendEvents(ctx, tx, evs)
	}
	rows := make([][]any, len(evs))
	for i := range evs {
		a, err := eventArgs(&evs[i])
		if err != nil {
			return fmt.Errorf("event %d: %w", i, err)
		}
		rows[i] = a
	}
	var batch pgx.Batch
	batch.Queue("SELECT pg_advisory_xact_lock($1)", int64(auditLock))
	for _, a := range rows {
		batch.Queue(insertAuditSQL, a...)
	}
	br := tx.SendBatch(ctx, &batch)
	if _, err := br.Exec(); err != nil {
		return errors.Join(fmt.Errorf("lock the audit trail: %w", err), br.Close())
	}
	var again []int // events whose id was recorded already
	for i := range rows {
		tag, err := br.Exec()
		if err != nil {
			return errors.Join(fmt.Errorf("write event %s: %w", evs[i].ID, err), br.Close())
		}
		if tag.RowsAffected() != 1 {
			again = append(again, i)
		}
	}
	if err := br.Close(); err != nil {
		return err
	}
	for _, i := range again {
		if err := sameEvent(ctx, tx, &evs[i], rows[i]); err != nil {
			return err
		}
	}
	return nil
}
