package store

import (
	"context"
	"time"
)

// AuditPruner is implemented by a store that deletes old audit events (audit
// retention, `audit.retention` and `sharedos store prune`). Pruning is the one deletion
// of the trail: every other UPDATE or DELETE of an event is still refused.
type AuditPruner interface {
	// PruneAudit deletes the audit events whose instant (at) is before before, and
	// returns how many it deleted. It never deletes an event of an escalation still
	// pending: one of the escalation's world and trace and, when the escalation names
	// a call, of that call (the events of the call that asked it). An event whose
	// instant does not parse is kept (its age is unknown). It deletes in batches, each
	// its own transaction: an error leaves the batches before it deleted.
	PruneAudit(ctx context.Context, before time.Time) (int64, error)
}
