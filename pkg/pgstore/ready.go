package pgstore

import (
	"context"
	"fmt"
	"time"
)

// readyTimeout bounds Ready: a database that does not answer within it is not ready.
const readyTimeout = 2 * time.Second

// Ready reports whether the database is reachable and its schema this build's: one
// query of the schema version, answered within 2 s. A schema behind wraps
// store.ErrMigrationPending and names the pending migrations (a message fit for an
// unauthenticated /readyz: it holds no DSN); a newer one wraps ErrSchemaNewer. It writes
// nothing, so it follows the database — unreachable, then back — without reopening the
// store.
func (s *Store) Ready(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	v, err := schemaVersion(ctx, s.pool)
	if err != nil {
		return fail("state database "+s.name, err)
	}
	switch {
	case v < SchemaVersion:
		return pendingError(v)
	case v > SchemaVersion:
		return fmt.Errorf("state database %s: %w", s.name, newerError(v))
	}
	return nil
}
