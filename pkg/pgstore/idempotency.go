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
			ON CONFLICT (scope, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, claimed_ms = EXCLUDED.claimed_ms, status = 0, body = NULL,
				epoch = i.epoch + 1, held_ms = NULL, spent = false
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
		return sweepExpired(ctx, tx, cutoff)
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

var _ store.LeasedIdempotency = (*Store)(nil)

// claimSQL claims a key with a lease in one conditional upsert: a free key gets epoch 1; a
// record older than the window ($5) is replaced, and a pending claim of the same request
// that spent nothing and whose lease ran out (renewed last before $6) is taken over —
// both with the next epoch. PostgreSQL decides on the row's latest committed version
// under its lock, so of concurrent claims exactly one wins, and a spend that holds the
// row (its fence, reserveClaimedSQL) is waited for: a claim it marked spent is not taken
// over.
const claimSQL = `INSERT INTO idempotency AS i (scope, key, fingerprint, claimed_ms, status, epoch, held_ms, spent) VALUES ($1, $2, $3, $4, 0, 1, $4, false)
	ON CONFLICT (scope, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint, claimed_ms = EXCLUDED.claimed_ms, status = 0, body = NULL,
		epoch = i.epoch + 1, held_ms = EXCLUDED.held_ms, spent = false
	WHERE i.claimed_ms < $5
		OR (i.status = 0 AND i.fingerprint = EXCLUDED.fingerprint AND NOT i.spent AND COALESCE(i.held_ms, i.claimed_ms) < $6)
	RETURNING epoch`

// ClaimIdempotent claims key with a lease (store.LeasedIdempotency): claimSQL, then, when
// the key is held, the record it holds, read in the same transaction. Write-ahead like
// BeginIdempotent (a claim records no effect).
func (s *Store) ClaimIdempotent(ctx context.Context, key store.IdempotencyKey, fp string, now time.Time, window, lease time.Duration) (store.IdempotencyState, store.IdempotencyRecord, error) {
	cutoff := now.Add(-window).UnixMilli()
	leaseCutoff := now.Add(-lease).UnixMilli()
	var state store.IdempotencyState
	var rec store.IdempotencyRecord
	err := s.inTx(ctx, true, func(tx pgx.Tx) error {
		var epoch int64
		err := tx.QueryRow(ctx, claimSQL, []byte(key.Scope), key.Key, []byte(fp), now.UnixMilli(), cutoff, leaseCutoff).Scan(&epoch)
		switch {
		case err == nil:
			state = store.IdempotencyClaimed
			rec = store.IdempotencyRecord{Fingerprint: fp, ClaimedAt: time.UnixMilli(now.UnixMilli()), Epoch: epoch}
		case errors.Is(err, pgx.ErrNoRows):
			var ms, held int64
			var fp0 []byte
			if err := tx.QueryRow(ctx, `SELECT fingerprint, claimed_ms, status, body, epoch, COALESCE(held_ms, claimed_ms), spent FROM idempotency WHERE scope = $1 AND key = $2`,
				[]byte(key.Scope), key.Key).Scan(&fp0, &ms, &rec.Status, &rec.Body, &rec.Epoch, &held, &rec.Spent); err != nil {
				return err
			}
			rec.Fingerprint = string(fp0)
			rec.ClaimedAt = time.UnixMilli(ms)
			state = idempotencyState(rec, fp)
			if state == store.IdempotencyPending && rec.Spent && held < leaseCutoff {
				state = store.IdempotencyInterrupted
			}
		default:
			return err
		}
		return sweepExpired(ctx, tx, cutoff)
	})
	if err != nil {
		return 0, store.IdempotencyRecord{}, fail("claim idempotency key", err)
	}
	return state, rec, nil
}

// RenewIdempotent moves c's lease on to now (never back), write-ahead: a renewal lost in
// a crash only shortens a lease whose claimant is gone.
func (s *Store) RenewIdempotent(ctx context.Context, c store.IdempotencyClaim, now time.Time) error {
	var n int64
	err := s.inTx(ctx, true, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE idempotency SET held_ms = GREATEST(COALESCE(held_ms, claimed_ms), $5)
			WHERE scope = $1 AND key = $2 AND fingerprint = $3 AND epoch = $4 AND status = 0`,
			[]byte(c.Key.Scope), c.Key.Key, []byte(c.Fingerprint), c.Epoch, now.UnixMilli())
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return fail("renew idempotency claim", err)
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
	tag, err := s.pool.Exec(ctx, `UPDATE idempotency SET status = $1, body = $2 WHERE scope = $3 AND key = $4 AND fingerprint = $5 AND epoch = $6 AND status = 0`,
		status, body, []byte(c.Key.Scope), c.Key.Key, []byte(c.Fingerprint), c.Epoch)
	if err != nil {
		return fail("complete idempotency key", err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("complete idempotency key: %w", store.ErrNotFound)
	}
	return nil
}

// AbandonClaim deletes claim c while its epoch holds the key pending and spent nothing (a
// claim that spent a use keeps the key: the request must not run again).
func (s *Store) AbandonClaim(ctx context.Context, c store.IdempotencyClaim) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM idempotency WHERE scope = $1 AND key = $2 AND fingerprint = $3 AND epoch = $4 AND status = 0 AND NOT spent`,
		[]byte(c.Key.Scope), c.Key.Key, []byte(c.Fingerprint), c.Epoch); err != nil {
		return fail("abandon idempotency key", err)
	}
	return nil
}

// sweepExpired deletes up to expiredBatch records claimed before cutoff (in ms), skipping
// rows another transaction holds.
func sweepExpired(ctx context.Context, tx pgx.Tx, cutoff int64) error {
	_, err := tx.Exec(ctx, `DELETE FROM idempotency WHERE ctid IN
		(SELECT ctid FROM idempotency WHERE claimed_ms < $1 LIMIT $2 FOR UPDATE SKIP LOCKED)`, cutoff, expiredBatch)
	return err
}
