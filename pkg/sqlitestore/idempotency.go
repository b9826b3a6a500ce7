package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sharedos/sharedos/pkg/store"
)

var _ store.Idempotency = (*Store)(nil)

// BeginIdempotent claims key in one immediate transaction (the database's write lock
// makes the read and the claim atomic across processes); expired records are deleted in
// the same transaction.
func (s *Store) BeginIdempotent(ctx context.Context, key store.IdempotencyKey, fp string, now time.Time, window time.Duration) (_ store.IdempotencyState, _ store.IdempotencyRecord, err error) {
	cutoff := now.Add(-window).UnixMilli()
	// The fast path reads without the write lock: a key that holds a live record (a
	// replay, a conflict, a request waiting for the first) never queues for it.
	var rec store.IdempotencyRecord
	var ms int64
	err = s.db.QueryRowContext(ctx, `SELECT fingerprint, claimed_ms, status, body FROM idempotency WHERE scope = ? AND key = ? AND claimed_ms >= ?`,
		key.Scope, key.Key, cutoff).Scan(&rec.Fingerprint, &ms, &rec.Status, &rec.Body)
	if err == nil {
		rec.ClaimedAt = time.UnixMilli(ms)
		return idempotencyState(rec, fp), rec, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, rec, fmt.Errorf("claim idempotency key: %w", err)
	}
	tx, err := s.db.BeginTx(ctx, nil) // immediate (see dsnParams)
	if err != nil {
		return 0, store.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err = tx.ExecContext(ctx, `DELETE FROM idempotency WHERE claimed_ms < ?`, cutoff); err != nil {
		return 0, store.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	err = tx.QueryRowContext(ctx, `SELECT fingerprint, claimed_ms, status, body FROM idempotency WHERE scope = ? AND key = ?`,
		key.Scope, key.Key).Scan(&rec.Fingerprint, &ms, &rec.Status, &rec.Body)
	switch {
	case err == nil:
		rec.ClaimedAt = time.UnixMilli(ms)
		if err = tx.Commit(); err != nil {
			return 0, rec, fmt.Errorf("claim idempotency key: %w", err)
		}
		return idempotencyState(rec, fp), rec, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, rec, fmt.Errorf("claim idempotency key: %w", err)
	}
	if _, err = tx.ExecContext(ctx, `INSERT INTO idempotency (scope, key, fingerprint, claimed_ms, status) VALUES (?, ?, ?, ?, 0)`,
		key.Scope, key.Key, fp, now.UnixMilli()); err != nil {
		return 0, store.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	if err = tx.Commit(); err != nil {
		return 0, store.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	return store.IdempotencyClaimed, store.IdempotencyRecord{Fingerprint: fp, ClaimedAt: time.UnixMilli(now.UnixMilli())}, nil
}

// CompleteIdempotent stores the response durably.
func (s *Store) CompleteIdempotent(ctx context.Context, key store.IdempotencyKey, fp string, status int, body []byte) error {
	if status == 0 {
		return errors.New("complete idempotency key: status 0 is not a response")
	}
	tx, err := s.beginDurable(ctx)
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE idempotency SET status = ?, body = ? WHERE scope = ? AND key = ? AND fingerprint = ? AND status = 0`,
		status, body, key.Scope, key.Key, fp)
	if err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		_ = tx.Rollback()
		return fmt.Errorf("complete idempotency key: %w", store.ErrNotFound)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	return nil
}

// AbandonIdempotent deletes a pending claim.
func (s *Store) AbandonIdempotent(ctx context.Context, key store.IdempotencyKey, fp string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM idempotency WHERE scope = ? AND key = ? AND fingerprint = ? AND status = 0`,
		key.Scope, key.Key, fp); err != nil {
		return fmt.Errorf("abandon idempotency key: %w", err)
	}
	return nil
}

// idempotencyState is what a live record of a key means to a request with fp.
func idempotencyState(rec store.IdempotencyRecord, fp string) store.IdempotencyState {
	switch {
	case rec.Fingerprint != fp:
		return store.IdempotencyConflict
	case rec.Status == 0:
		return store.IdempotencyPending
	}
	return store.IdempotencyDone
}
