package host

import (
	"context"
	"fmt"
	"time"

	"github.com/sharedos/sharedos/pkg/store"
)

// PruneAudit applies audit retention to the store of s: it deletes the audit events
// recorded (by their instant) before before, except those of a pending escalation
// (store.AuditPruner), and returns how many it deleted. A store that cannot prune is an
// *Error of KindState. The state database must lie outside the root (the one
// trust-boundary check of every command that opens it).
func PruneAudit(ctx context.Context, s *Settings, before time.Time) (int64, error) {
	if err := CheckStateBoundary(s); err != nil {
		return 0, err
	}
	st, err := OpenState(ctx, s, WorkloadEach)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	pr, ok := st.(store.AuditPruner)
	if !ok {
		return 0, &Error{Kind: KindState, Message: fmt.Sprintf("the state database %s cannot prune its audit trail", s.State)}
	}
	n, err := pr.PruneAudit(ctx, before)
	if err != nil {
		return n, stateError(err, s.State)
	}
	return n, nil
}
