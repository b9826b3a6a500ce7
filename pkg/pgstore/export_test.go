package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// WithoutListener keeps s's revision listener from starting (a test of what a store's
// own writes and reads do to its view, with no notification racing them).
func WithoutListener(s *Store) { s.rev.start.Do(func() {}) }

// SynchronousCommitIn reports the synchronous_commit setting inside a transaction of s
// begun as a write-ahead one (writeAhead) or a durable one.
func SynchronousCommitIn(ctx context.Context, s *Store, writeAhead bool) (string, error) {
	var v string
	err := s.tx1(ctx, writeAhead, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v)
	})
	return v, err
}
