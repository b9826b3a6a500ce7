package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/sharedos/sharedos/pkg/store"
)

var _ store.AuditPruner = (*Store)(nil)

// pruneBatch is how many events one transaction of PruneAudit deletes.
const pruneBatch = 5000

// pruneSQL deletes up to ? events older than ? that belong to no pending escalation.
const pruneSQL = `DELETE FROM audit_events WHERE seq IN (
	SELECT a.seq FROM audit_events a WHERE a.at_ms < ? AND NOT EXISTS (
		SELECT 1 FROM escalations e
		WHERE e.world = a.world AND e.trace_id = a.trace_id AND (e.call_id = '' OR e.call_id = a.operation_id)
			AND NOT EXISTS (SELECT 1 FROM escalation_resolutions r WHERE r.escalation = e.seq))
	LIMIT ?)`

// noDeleteTrigger is the append-only trigger of the trail's deletes (schema version 1).
const noDeleteTrigger = `CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END`

// PruneAudit deletes old audit events (store.AuditPruner): the same rule as PostgreSQL's,
// so that `audit.retention` means one thing whichever the store. The audit spools are
// copied into the trail first (a spooled event is pruned like any other). Each batch is
// one durable write transaction that drops the append-only trigger of deletes, deletes
// and creates the trigger again: SQLite's schema changes are transactional, so no other
// connection ever sees the trail without it.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	if err := s.syncSpools(ctx); err != nil {
		return 0, fmt.Errorf("prune audit events: %w", err)
	}
	var total int64
	for {
		n, err := s.pruneBatch(ctx, before.UnixMilli())
		if err != nil {
			return total, fmt.Errorf("prune audit events: %w", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}

func (s *Store) pruneBatch(ctx context.Context, beforeMS int64) (int64, error) {
	tx, err := s.beginDurable(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `DROP TRIGGER audit_events_no_delete`); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, pruneSQL, beforeMS, pruneBatch)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, noDeleteTrigger); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}
