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
	res, err := s.db.ExecContext(ctx, `INSERT INTO grant_usage (world, issuer, subject, grant_id, uses)
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
