package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// TryConsume spends one use of grant grantID in world namespaceID when fewer than max were
// spent, and reports whether it did. It is one atomic statement, so concurrent callers in
// any number of processes never spend more than max uses. A max below 1 spends nothing.
func (s *Store) TryConsume(ctx context.Context, namespaceID, grantID string, max int64) (bool, error) {
	if err := checkUsageKey(namespaceID, grantID); err != nil {
		return false, fmt.Errorf("consume grant use: %w", err)
	}
	if max < 1 {
		return false, nil
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO grant_usage (world, grant_id, uses) VALUES (?, ?, 1)
		ON CONFLICT (world, grant_id) DO UPDATE SET uses = uses + 1 WHERE uses < ?`,
		namespaceID, grantID, max)
	if err != nil {
		return false, fmt.Errorf("consume use of grant %s: %w", grantID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("consume use of grant %s: %w", grantID, err)
	}
	return n == 1, nil
}

// GetUsage returns how many uses of grant grantID in world namespaceID were spent (0 when
// none was).
func (s *Store) GetUsage(ctx context.Context, namespaceID, grantID string) (int64, error) {
	if err := checkUsageKey(namespaceID, grantID); err != nil {
		return 0, fmt.Errorf("read grant usage: %w", err)
	}
	var uses int64
	err := s.db.QueryRowContext(ctx, `SELECT uses FROM grant_usage WHERE world = ? AND grant_id = ?`,
		namespaceID, grantID).Scan(&uses)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read usage of grant %s: %w", grantID, err)
	}
	return uses, nil
}

func checkUsageKey(world, grantID string) error {
	if world == "" {
		return errors.New("world (namespaceId) is empty")
	}
	if grantID == "" {
		return errors.New("grant id is empty")
	}
	return nil
}
