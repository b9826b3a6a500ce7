package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/store"
)

var _ store.Idempotency = (*Store)(nil)

// expiredBatch bounds how many expired idempotency records one claim deletes: the table
// is swept a little at every claim (rows another transaction holds are skipped), never all
// at once on a request's path.
const expiredBatch = 64

// BeginIdempotent claims key with one conditional upsert (INSERT … ON CONFLICT DO UPDATE
// … WHERE the stored record has expired): PostgreSQL locks the key's row and decides on
// its latest committed version, so of concurrent claims in any processes exactly one
// inserts or replaces it. A loser reads the record it found in the same transaction
// (the upsert locked the row, so it is still there). The claim is write-ahead
// (synchronous_commit off); it also deletes up to expiredBatch expired records.
func (s *Store) BeginIdempotent(ctx context.Context, key store.IdempotencyKey, fp string, now time.Time, window time.Duration) (store.IdempotencyState, store.IdempotencyRecord, error) {
	cutoff := now.Add(-window).UnixMilli()
	var state store.IdempotencyState
	var rec store.IdempotencyRecord
	err := s.inTx(ctx, true, func(tx pgx.Tx) error {
		var claimed bool
		err := tx.QueryRow(ctx, `INSERT INTO idempotency AS i (scope, key, fingerprint, claimed_ms, status) VALUES ($1, $2, $3, $4, 0)
			ON CONFLICT (scope, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, claimed_ms = EXCLUDED.claimed_ms, status = 0, body = NULL
			WHERE i.claimed_ms < $5
			RETURNING true`, []byte(key.Scope), key.Key, []byte(fp), now.UnixMilli(), cutoff).Scan(&claimed)
		switch {
		case err == nil:
			state, rec = store.IdempotencyClaimed, store.IdempotencyRecord{Fingerprint: fp, ClaimedAt: time.UnixMilli(now.UnixMilli())}
		case errors.Is(err, pgx.ErrNoRows):
			var ms int64
			var fp0 []byte
			if err := tx.QueryRow(ctx, `SELECT fingerprint, claimed_ms, status, body FROM idempotency WHERE scope = $1 AND key = $2`,
				[]byte(key.Scope), key.Key).Scan(&fp0, &ms, &rec.Status, &rec.Body); err != nil {
				return err
			}
			rec.Fingerprint = string(fp0)
			rec.ClaimedAt = time.UnixMilli(ms)
			state = idempotencyState(rec, fp)
		default:
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM idempotency WHERE ctid IN
			(SELECT ctid FROM idempotency WHERE claimed_ms < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, cutoff, expiredBatch)
		return err
	})
	if err != nil {
		return 0, store.IdempotencyRecord{}, fail("claim idempotency key", err)
	}
	return state, rec, nil
}

// CompleteIdempotent stores the response durably (synchronous_commit on).
func (s *Store) CompleteIdempotent(ctx context.Context, key store.IdempotencyKey, fp string, status int, body []byte) error {
	if status == 0 {
		return errors.New("complete idempotency key: status 0 is not a response")
	}
	if body == nil {
		body = []byte{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE idempotency SET status = $1, body = $2 WHERE scope = $3 AND key = $4 AND fingerprint = $5 AND status = 0`,
		status, body, []byte(key.Scope), key.Key, []byte(fp))
	if err != nil {
		return fail("complete idempotency key", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("complete idempotency key: %w", store.ErrNotFound)
	}
	return nil
}

// AbandonIdempotent deletes a pending claim of fp; anything else is left as it is.
func (s *Store) AbandonIdempotent(ctx context.Context, key store.IdempotencyKey, fp string) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency WHERE scope = $1 AND key = $2 AND fingerprint = $3 AND status = 0`,
		[]byte(key.Scope), key.Key, []byte(fp)); err != nil {
		return fail("abandon idempotency key", err)
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
