package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/store"
)

var _ store.AuditPruner = (*Store)(nil)

// pruneBatch is how many events one transaction of PruneAudit deletes.
const pruneBatch = 5000

// pruneSQL deletes up to $2 events older than $1 (by the at index) that belong to no
// pending escalation (store.AuditPruner).
const pruneSQL = `DELETE FROM audit_events WHERE seq IN (
	SELECT a.seq FROM audit_events a WHERE a.at_ms < $1 AND NOT EXISTS (
		SELECT 1 FROM escalations e
		WHERE e.world = a.world AND e.trace_id = a.trace_id AND (e.call_id = '' OR e.call_id = a.operation_id)
			AND NOT EXISTS (SELECT 1 FROM escalation_resolutions r WHERE r.escalation = e.seq))
	ORDER BY a.at_ms DESC NULLS LAST, a.seq DESC LIMIT $2)`

// PruneAudit deletes old audit events (store.AuditPruner), pruneBatch at a time, each
// batch a transaction that sets sharedos.audit_prune (the one DELETE the append-only
// trigger of migration 00004 lets through). Deleting rows, not dropping partitions: the
// trail is not partitioned (see the migration); a batch walks the at index.
func (s *Store) PruneAudit(ctx context.Context, before time.Time) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.inTx(ctx, false, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "SET LOCAL sharedos.audit_prune = 'on'"); err != nil {
				return err
			}
			tag, err := tx.Exec(ctx, pruneSQL, before.UnixMilli(), pruneBatch)
			n = tag.RowsAffected()
			return err
		})
		if err != nil {
			return total, fail("prune audit events", err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}
