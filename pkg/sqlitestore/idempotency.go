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

var _ store.LeasedIdempotency = (*Store)(nil)

// ClaimIdempotent claims key with a lease (store.LeasedIdempotency) in one immediate
// transaction: a free key gets epoch 1; a record older than the window is replaced, and a
// pending claim of the same request that spent nothing and whose lease ran out is taken
// over, both with the next epoch. The write lock serializes it with every spend (whose
// fence marks the claim spent in the spend's own transaction).
func (s *Store) ClaimIdempotent(ctx context.Context, key store.IdempotencyKey, fp string, now time.Time, window, lease time.Duration) (_ store.IdempotencyState, _ store.IdempotencyRecord, err error) {
	cutoff := now.Add(-window).UnixMilli()
	leaseCutoff := now.Add(-lease).UnixMilli()
	tx, err := s.beginDurable(ctx)
	if err != nil {
		return 0, store.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if _, err = tx.ExecContext(ctx, `DELETE FROM idempotency WHERE claimed_ms < ? AND NOT (scope = ? AND key = ?)`, cutoff, key.Scope, key.Key); err != nil {
		return 0, store.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	var rec store.IdempotencyRecord
	var ms, held int64
	var spent int
	err = tx.QueryRowContext(ctx, `SELECT fingerprint, claimed_ms, status, body, epoch, COALESCE(held_ms, claimed_ms), spent FROM idempotency WHERE scope = ? AND key = ?`,
		key.Scope, key.Key).Scan(&rec.Fingerprint, &ms, &rec.Status, &rec.Body, &rec.Epoch, &held, &spent)
	epoch := int64(1)
	switch {
	case err == nil:
		rec.ClaimedAt, rec.Spent = time.UnixMilli(ms), spent != 0
		expired := ms < cutoff
		lapsed := rec.Status == 0 && rec.Fingerprint == fp && !rec.Spent && held < leaseCutoff
		if !expired && !lapsed {
			if err = tx.Commit(); err != nil {
				return 0, rec, fmt.Errorf("claim idempotency key: %w", err)
			}
			state := idempotencyState(rec, fp)
			if state == store.IdempotencyPending && rec.Spent && held < leaseCutoff {
				state = store.IdempotencyInterrupted
			}
			return state, rec, nil
		}
		epoch = rec.Epoch + 1
	case !errors.Is(err, sql.ErrNoRows):
		return 0, rec, fmt.Errorf("claim idempotency key: %w", err)
	}
	if _, err = tx.ExecContext(ctx, `INSERT INTO idempotency (scope, key, fingerprint, claimed_ms, status, epoch, held_ms, spent) VALUES (?1, ?2, ?3, ?4, 0, ?5, ?4, 0)
		ON CONFLICT (scope, key) DO UPDATE SET fingerprint = ?3, claimed_ms = ?4, status = 0, body = NULL, epoch = ?5, held_ms = ?4, spent = 0`,
		key.Scope, key.Key, fp, now.UnixMilli(), epoch); err != nil {
		return 0, store.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	if err = tx.Commit(); err != nil {
		return 0, store.IdempotencyRecord{}, fmt.Errorf("claim idempotency key: %w", err)
	}
	return store.IdempotencyClaimed, store.IdempotencyRecord{Fingerprint: fp, ClaimedAt: time.UnixMilli(now.UnixMilli()), Epoch: epoch}, nil
}

// RenewIdempotent moves c's lease on to now (never back).
func (s *Store) RenewIdempotent(ctx context.Context, c store.IdempotencyClaim, now time.Time) error {
	res, err := s.db.ExecContext(ctx, `UPDATE idempotency SET held_ms = MAX(COALESCE(held_ms, claimed_ms), ?)
		WHERE scope = ? AND key = ? AND fingerprint = ? AND epoch = ? AND status = 0`,
		now.UnixMilli(), c.Key.Scope, c.Key.Key, c.Fingerprint, c.Epoch)
	n, err := affected(res, err)
	if err != nil {
		return fmt.Errorf("renew idempotency claim: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("renew idempotency claim: %w", store.ErrNotFound)
	}
	return nil
}

// CompleteClaim stores the response of claim c durably, only while c's epoch holds the
// key pending.
func (s *Store) CompleteClaim(ctx context.Context, c store.IdempotencyClaim, status int, body []byte) error {
	if status == 0 {
		return errors.New("complete idempotency key: status 0 is not a response")
	}
	if body == nil {
		body = []byte{}
	}
	tx, err := s.beginDurable(ctx)
	if err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE idempotency SET status = ?, body = ? WHERE scope = ? AND key = ? AND fingerprint = ? AND epoch = ? AND status = 0`,
		status, body, c.Key.Scope, c.Key.Key, c.Fingerprint, c.Epoch)
	n, err := affected(res, err)
	if err != nil || n != 1 {
		_ = tx.Rollback()
		if err != nil {
			return fmt.Errorf("complete idempotency key: %w", err)
		}
		return fmt.Errorf("complete idempotency key: %w", store.ErrNotFound)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("complete idempotency key: %w", err)
	}
	return nil
}

// AbandonClaim deletes claim c while its epoch holds the key pending and spent nothing.
func (s *Store) AbandonClaim(ctx context.Context, c store.IdempotencyClaim) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM idempotency WHERE scope = ? AND key = ? AND fingerprint = ? AND epoch = ? AND status = 0 AND spent = 0`,
		c.Key.Scope, c.Key.Key, c.Fingerprint, c.Epoch); err != nil {
		return fmt.Errorf("abandon idempotency key: %w", err)
	}
	return nil
}
