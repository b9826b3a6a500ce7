package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"time"
)

// readyTimeout bounds Ready: a store that does not answer within it is not ready.
const readyTimeout = 2 * time.Second

// Ready reports whether the state database is reachable and its schema at head: the
// file is still there and a query on it answers within 2 s with the latest schema
// version. It writes nothing.
func (s *Store) Ready(ctx context.Context) error {
	if _, err := os.Stat(s.path); err != nil {
		return fmt.Errorf("state database %s: %w", s.path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var v int
	if err := s.db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("state database %s: %w", s.path, err)
	}
	if v != len(migrations) {
		return fmt.Errorf("state database %s: schema version %d, want %d", s.path, v, len(migrations))
	}
	return nil
}
