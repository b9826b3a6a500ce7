package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// legacyUses is the frozen count of uses recorded before counters were keyed by grant
// identity (migration 4): it still counts against every grant of that (world, id).
const legacyUses = `COALESCE((SELECT uses FROM grant_usage_legacy WHERE world = ?1 AND grant_id = ?4), 0)`

// TryConsume spends one use of the grant key names when fewer than max were spent, and
// reports whether it did. It is one atomic statement, so concurrent callers in any
// number of processes never spend more than max uses. A max below 1 spends nothing.
func (s *Store) TryConsume(ctx context.Context, key kernel.UsageKey, max int64) (bool, error) {
	if err := checkUsageKey(key); err != nil {
		return false, fmt.Errorf("consume grant use: %w", err)
	}
	if max < 1 {
		return false, nil
	}
	db, err := s.durable()
	if err != nil {
		return false, fmt.Errorf("consume use of grant %s: %w", key.GrantID, err)
	}
	res, err := db.ExecContext(ctx, `INSERT INTO grant_usage (world, issuer, subject, grant_id, uses)
		SELECT ?1, ?2, ?3, ?4, 1 WHERE `+legacyUses+` < ?5
		ON CONFLICT (world, issuer, subject, grant_id) DO UPDATE SET uses = uses + 1 WHERE uses + `+legacyUses+` < ?5`,
		key.World, key.Issuer.String(), key.Subject.String(), key.GrantID, max)
	if err != nil {
		return false, fmt.Errorf("consume use of grant %s: %w", key.GrantID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("consume use of grant %s: %w", key.GrantID, err)
	}
	return n == 1, nil
}

// GetUsage returns how many uses of the grant key names were spent (0 when none was).
func (s *Store) GetUsage(ctx context.Context, key kernel.UsageKey) (int64, error) {
	if err := checkUsageKey(key); err != nil {
		return 0, fmt.Errorf("read grant usage: %w", err)
	}
	var uses int64
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE((SELECT uses FROM grant_usage
		WHERE world = ?1 AND issuer = ?2 AND subject = ?3 AND grant_id = ?4), 0) + `+legacyUses,
		key.World, key.Issuer.String(), key.Subject.String(), key.GrantID).Scan(&uses)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read usage of grant %s: %w", key.GrantID, err)
	}
	return uses, nil
}

func checkUsageKey(k kernel.UsageKey) error {
	if k.World == "" {
		return errors.New("world (namespaceId) is empty")
	}
	if k.GrantID == "" {
		return errors.New("grant id is empty")
	}
	if err := k.Issuer.Validate(); err != nil {
		return fmt.Errorf("issuer: %w", err)
	}
	if err := k.Subject.Validate(); err != nil {
		return fmt.Errorf("subject: %w", err)
	}
	return nil
}

var _ kernel.ReservingUsageStore = (*Store)(nil)

// ReserveUse reserves one use of the grant key names when fewer than max were spent, in
// an immediate transaction that holds the database's write lock until the reservation
// is committed (with its audit record) or released — the order of the reference's
// ADR 0029, so a process killed in between leaves both or neither.
func (s *Store) ReserveUse(ctx context.Context, key kernel.UsageKey, max int64) (kernel.UsageReservation, bool, error) {
	return s.reserveUse(ctx, key, max, nil)
}

var _ kernel.ClaimedUsageStore = (*Store)(nil)

// ReserveClaimedUse is ReserveUse fenced by claim (kernel.ClaimedUsageStore): in the
// reservation's immediate transaction it first marks claim's idempotency record spent,
// only while claim's epoch holds the key pending, and returns kernel.ErrSpendClaimLost,
// reserving nothing, when it does not. Releasing rolls the mark back with the use.
func (s *Store) ReserveClaimedUse(ctx context.Context, key kernel.UsageKey, max int64, claim kernel.SpendClaim) (kernel.UsageReservation, bool, error) {
	return s.reserveUse(ctx, key, max, &claim)
}

func (s *Store) reserveUse(ctx context.Context, key kernel.UsageKey, max int64, claim *kernel.SpendClaim) (kernel.UsageReservation, bool, error) {
	if err := checkUsageKey(key); err != nil {
		return nil, false, fmt.Errorf("reserve grant use: %w", err)
	}
	if max < 1 {
		return nil, false, nil
	}
	tx, err := s.beginDurable(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("reserve use of grant %s: begin: %w", key.GrantID, err)
	}
	if claim != nil {
		res, err := tx.ExecContext(ctx, `UPDATE idempotency SET spent = 1 WHERE scope = ? AND key = ? AND fingerprint = ? AND epoch = ? AND status = 0`,
			claim.Scope, claim.Key, claim.Fingerprint, claim.Epoch)
		n, err := affected(res, err)
		if err != nil || n != 1 {
			_ = tx.Rollback()
			if err != nil {
				return nil, false, fmt.Errorf("reserve use of grant %s: %w", key.GrantID, err)
			}
			return nil, false, fmt.Errorf("reserve use of grant %s: %w", key.GrantID, kernel.ErrSpendClaimLost)
		}
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO grant_usage (world, issuer, subject, grant_id, uses)
		SELECT ?1, ?2, ?3, ?4, 1 WHERE `+legacyUses+` < ?5
		ON CONFLICT (world, issuer, subject, grant_id) DO UPDATE SET uses = uses + 1 WHERE uses + `+legacyUses+` < ?5`,
		key.World, key.Issuer.String(), key.Subject.String(), key.GrantID, max)
	n, err := affected(res, err)
	if err != nil || n != 1 {
		_ = tx.Rollback()
		if err != nil {
			return nil, false, fmt.Errorf("reserve use of grant %s: %w", key.GrantID, err)
		}
		return nil, false, nil
	}
	return &reservation{tx: tx, grant: key.GrantID}, true, nil
}

// reservation is a reserved use: an open transaction.
type reservation struct {
	tx    *sql.Tx
	grant string
}

// Commit appends ev (when non-nil) and spends the use, in the reservation's transaction.
func (r *reservation) Commit(ctx context.Context, ev *kernel.AuditEvent) error {
	if ev != nil {
		if err := appendEvent(ctx, r.tx, nil, *ev); err != nil {
			_ = r.tx.Rollback()
			return fmt.Errorf("commit use of grant %s: audit: %w", r.grant, err)
		}
	}
	if err := r.tx.Commit(); err != nil {
		return fmt.Errorf("commit use of grant %s: %w", r.grant, err)
	}
	return nil
}

// Release gives the reserved use back.
func (r *reservation) Release() error { return r.tx.Rollback() }

// affected is the number of rows a statement that returned (res, err) changed, or err.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
