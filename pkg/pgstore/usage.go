package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// spendSQL spends one use of a grant when fewer than $5 were spent and returns the new
// count (no row when every use is spent). ON CONFLICT DO UPDATE locks the counter's row
// and evaluates its WHERE on the latest committed version, so concurrent spenders in any
// number of processes never spend more than the max.
const spendSQL = `INSERT INTO grant_usage AS g (world, issuer, subject, grant_id, uses) VALUES ($1, $2, $3, $4, 1)
	ON CONFLICT (world, issuer, subject, grant_id) DO UPDATE SET uses = g.uses + 1 WHERE g.uses < $5
	RETURNING uses`

// TryConsume spends one use of the grant key names when fewer than max were spent, and
// reports whether it did: one conditional statement, exact across processes. A max below
// 1 spends nothing.
func (s *Store) TryConsume(ctx context.Context, key kernel.UsageKey, max int64) (bool, error) {
	if err := checkUsageKey(key); err != nil {
		return false, fmt.Errorf("consume grant use: %w", err)
	}
	if max < 1 {
		return false, nil
	}
	var uses int64
	err := s.pool.QueryRow(ctx, spendSQL, key.World, key.Issuer.String(), key.Subject.String(), key.GrantID, max).Scan(&uses)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fail("consume use of grant "+key.GrantID, err)
	}
	return true, nil
}

// GetUsage returns how many uses of the grant key names were spent (0 when none was). A
// read that comes while another is in flight shares one statement with the reads that
// come meanwhile (usageread.go); it still sees every write committed before it was
// called.
func (s *Store) GetUsage(ctx context.Context, key kernel.UsageKey) (int64, error) {
	if err := checkUsageKey(key); err != nil {
		return 0, fmt.Errorf("read grant usage: %w", err)
	}
	uses, err := s.readUsageGrouped(ctx, key) // with the concurrent reads (usageread.go)
	if err != nil {
		return 0, fail("read usage of grant "+key.GrantID, err)
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

// ReserveUse reserves one use of the grant key names when fewer than max were spent: the
// spending statement runs in a transaction that stays open, holding the counter's row
// (other spenders of this grant wait), until Commit appends the decision record in it
// and commits, or Release rolls it back — ADR 0029's reserve → audit → commit order,
// across processes: a process killed at any point leaves both or neither. A deadlock or
// serialization failure of the statement is retried (the transaction was rolled back).
func (s *Store) ReserveUse(ctx context.Context, key kernel.UsageKey, max int64) (kernel.UsageReservation, bool, error) {
	return s.reserveUse(ctx, key, max, nil)
}

var _ kernel.ClaimedUsageStore = (*Store)(nil)

// reserveClaimedSQL is spendSQL fenced by an idempotency claim, in one statement: the
// fence marks the claim ($6-$9: scope, key, fingerprint, epoch) spent only while that
// epoch holds the key pending, locking its row until the reservation commits or rolls
// back (a takeover waits, then finds it spent); the use is spent only when the fence
// held. It returns whether the fence held and the new count (NULL: nothing spent).
const reserveClaimedSQL = `WITH fence AS (
		UPDATE idempotency SET spent = true WHERE scope = $6 AND key = $7 AND fingerprint = $8 AND epoch = $9 AND status = 0 RETURNING 1
	), spend AS (
		INSERT INTO grant_usage AS g (world, issuer, subject, grant_id, uses) SELECT $1, $2, $3, $4, 1 FROM fence
		ON CONFLICT (world, issuer, subject, grant_id) DO UPDATE SET uses = g.uses + 1 WHERE g.uses < $5
		RETURNING uses
	)
	SELECT EXISTS (SELECT 1 FROM fence), (SELECT uses FROM spend)`

// ReserveClaimedUse is ReserveUse fenced by claim (kernel.ClaimedUsageStore): one
// statement checks, in the reservation's transaction, that claim's epoch still holds its
// idempotency key and marks it spent, and spends the use; kernel.ErrSpendClaimLost, with
// nothing reserved, when the claim no longer holds the key. Releasing the reservation
// rolls the mark back with the use.
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
	op := "reserve use of grant " + key.GrantID
	var err error
	for range maxRetries {
		var r *reservation
		var ok bool
		r, ok, err = s.reserve1(ctx, key, max, claim)
		if errors.Is(err, kernel.ErrSpendClaimLost) {
			return nil, false, fmt.Errorf("%s: %w", op, err)
		}
		if err == nil {
			if !ok {
				return nil, false, nil
			}
			return r, true, nil
		}
		if !retryable(err) {
			break
		}
	}
	return nil, false, fail(op, err)
}

func (s *Store) reserve1(ctx context.Context, key kernel.UsageKey, max int64, claim *kernel.SpendClaim) (*reservation, bool, error) {
	// A connection of its own, not a pgx.Tx: Commit sends the audit lock, the record and
	// the COMMIT in one message (commitSQL). Committed with synchronous_commit off, then
	// waited for outside the audit lock (Commit, flush.go).
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, false, err
	}
	r := &reservation{s: s, c: c, grant: key.GrantID}
	if _, err := c.Exec(ctx, beginWriteAhead.BeginQuery); err != nil {
		r.abandon(ctx)
		return nil, false, err
	}
	var uses int64
	if claim != nil {
		var held bool
		var spent *int64
		err = c.QueryRow(ctx, reserveClaimedSQL, key.World, key.Issuer.String(), key.Subject.String(), key.GrantID, max,
			[]byte(claim.Scope), claim.Key, []byte(claim.Fingerprint), claim.Epoch).Scan(&held, &spent)
		switch {
		case err == nil && !held:
			r.abandon(ctx)
			return nil, false, kernel.ErrSpendClaimLost
		case err == nil && spent == nil:
			err = pgx.ErrNoRows
		}
	} else {
		err = c.QueryRow(ctx, spendSQL, key.World, key.Issuer.String(), key.Subject.String(), key.GrantID, max).Scan(&uses)
	}
	if err != nil {
		r.abandon(ctx)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return r, true, nil
}

// reservation is a reserved use: an open transaction on a connection of its own.
type reservation struct {
	s     *Store
	c     *pgxpool.Conn // nil once committed or rolled back
	grant string
}

// sameEventCheckSQL fails the transaction (an invalid integer, SQLSTATE 22P02, whose text
// holds dupMarker) when the event recorded under $1 is not $2: sent in the same message
// as the insert and the COMMIT, it keeps a spend from committing beside another event
// under its record's id. The failing cast reads a column, so the planner cannot fold it
// into an error when the branch is not taken.
const sameEventCheckSQL = `SELECT CASE WHEN event = $2 THEN 0 ELSE (id || ' ` + dupMarker + `')::int END
	FROM audit_events WHERE id = $1`

// dupMarker marks sameEventCheckSQL's error.
const dupMarker = "sharedos: recorded with other content"

// isDupCheck reports whether err is sameEventCheckSQL's.
func isDupCheck(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22P02" && strings.Contains(pe.Message, dupMarker)
}

// Commit appends ev (when non-nil) and spends the use, in the reservation's transaction:
// both or neither. The audit lock, the insert, its check and the COMMIT go in one
// message, so the lock that orders the trail is held only while the server runs them,
// never across a round trip to this process. It returns once both are durable: the
// transaction commits with synchronous_commit off, so the lock is not held through the
// log flush either, and Commit then waits for a flush that covers it (waitDurable,
// shared with the other commits of the moment). An error after the commit (the flush not
// proven) leaves the use spent with its record — never one without the other — and the
// caller acts on nothing.
func (r *reservation) Commit(ctx context.Context, ev *kernel.AuditEvent) error {
	op := "commit use of grant " + r.grant
	if r.c == nil {
		return fmt.Errorf("%s: %w", op, pgx.ErrTxClosed)
	}
	var b pgx.Batch
	if ev != nil {
		a, err := eventArgs(ev)
		if err != nil {
			r.abandon(ctx)
			return fmt.Errorf("%s: audit: %w", op, err)
		}
		b.Queue("SELECT pg_advisory_xact_lock($1)", int64(auditLock))
		b.Queue(insertAuditSQL, a...)
		b.Queue(sameEventCheckSQL, ev.ID, a[len(a)-1])
	}
	b.Queue("COMMIT")
	pid := r.c.Conn().PgConn().PID()
	if err := sendTx(ctx, r.c, &b); err != nil {
		r.abandon(ctx)
		if isDupCheck(err) {
			return fmt.Errorf("%s: audit: event id %s: %w with other content", op, ev.ID, store.ErrDuplicate)
		}
		if ev == nil {
			return fail(op, err)
		}
		// The answer lost after the COMMIT was sent: committed when its record is there
		// (ambiguous.go); the use is then spent with its record, and the call answered as
		// if the answer had come.
		if err := r.s.afterAmbiguousCommit(ctx, pid, err, eventsRecorded([]kernel.AuditEvent{*ev})); err != nil {
			return fail(op, err)
		}
	} else {
		r.c.Release()
		r.c = nil
	}
	var recorded func(ctx context.Context, q querier) (bool, error)
	if ev != nil {
		recorded = eventsRecorded([]kernel.AuditEvent{*ev})
	}
	if err := r.s.waitDurableChecked(ctx, recorded); err != nil {
		return fail(op, err)
	}
	return nil
}

// Release gives the reserved use back. Releasing a committed reservation does nothing.
func (r *reservation) Release() error {
	if r.c == nil {
		return nil
	}
	_, err := r.c.Exec(context.Background(), "ROLLBACK")
	r.c.Release() // a connection still in a transaction is closed, not reused
	r.c = nil
	return err
}

// abandon rolls the transaction back, if the connection is still in one, and gives the
// connection back (closed when it could not be rolled back).
func (r *reservation) abandon(ctx context.Context) {
	if r.c == nil {
		return
	}
	if st := r.c.Conn().PgConn().TxStatus(); st == 'T' || st == 'E' {
		_, _ = r.c.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	r.c.Release()
	r.c = nil
}
