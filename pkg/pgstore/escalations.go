package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// RecordEscalation appends one escalation record. World and Owner are required; its ID
// is assigned by the store.
func (s *Store) RecordEscalation(ctx context.Context, rec store.EscalationRecord) error {
	if err := checkKey(rec.World, rec.Owner); err != nil {
		return fmt.Errorf("record escalation: %w", err)
	}
	text, err := json.Marshal(rec.Escalation)
	if err != nil {
		return fmt.Errorf("record escalation: encode: %w", err)
	}
	var back kernel.Escalation
	if err := json.Unmarshal(text, &back); err != nil {
		return fmt.Errorf("record escalation: it would not read back: %w", err)
	}
	var rev int64
	if err := s.inTx(ctx, false, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO escalations (world, owner, trace_id, call_id, escalation)
			VALUES ($1, $2, $3, $4, $5)`, rec.World, rec.Owner.String(), rec.TraceID, rec.CallID, string(text)); err != nil {
			return err
		}
		rev, err = wroteRevision(ctx, tx)
		return err
	}); err != nil {
		return fail("record escalation", err)
	}
	s.rev.advance(rev)
	return nil
}

const escalationColumns = `SELECT e.seq, e.world, e.owner, e.trace_id, e.call_id, e.escalation,
	r.status, r.resolved_by, r.resolved_at, r.note
	FROM escalations e LEFT JOIN escalation_resolutions r ON r.escalation = e.seq`

// escalationByID selects one escalation by its key.
const escalationByID = escalationColumns + " WHERE e.seq = $1"

// ListEscalations returns the escalations f selects, the most recently recorded first.
func (s *Store) ListEscalations(ctx context.Context, f store.EscalationFilter) ([]store.EscalationRecord, error) {
	var w where
	w.eq("e.world", f.World)
	w.eq("e.call_id", f.CallID)
	if !f.Owner.IsZero() {
		w.add("e.owner = ?", f.Owner.String())
	}
	switch f.Status {
	case "":
	case store.EscalationPending:
		w.add("r.status IS NULL")
	case store.EscalationApproved, store.EscalationDenied:
		w.add("r.status = ?", f.Status)
	default:
		return nil, fmt.Errorf("list escalations: unknown status %q", f.Status)
	}
	q := escalationColumns + w.String() + " ORDER BY e.seq DESC"
	if f.Limit > 0 {
		q += " LIMIT " + w.next(f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, fail("list escalations", err)
	}
	defer rows.Close()
	var out []store.EscalationRecord
	for rows.Next() {
		rec, err := scanEscalation(rows)
		if err != nil {
			return nil, fail("list escalations", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list escalations", err)
	}
	return out, nil
}

// GetEscalation returns escalation id, with its resolution if any. An unknown id is an
// error wrapping store.ErrNotFound.
func (s *Store) GetEscalation(ctx context.Context, id int64) (store.EscalationRecord, error) {
	rec, err := scanEscalation(s.pool.QueryRow(ctx, escalationByID, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.EscalationRecord{}, fmt.Errorf("escalation %d: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.EscalationRecord{}, fail(fmt.Sprintf("read escalation %d", id), err)
	}
	return rec, nil
}

func scanEscalation(row pgx.Row) (store.EscalationRecord, error) {
	var owner, text string
	var status, by, at, note *string
	var rec store.EscalationRecord
	if err := row.Scan(&rec.ID, &rec.World, &owner, &rec.TraceID, &rec.CallID, &text, &status, &by, &at, &note); err != nil {
		return rec, err
	}
	var err error
	if rec.Owner, err = kernel.ParseAddress(owner); err != nil {
		return rec, fmt.Errorf("record #%d: owner: %w", rec.ID, err)
	}
	if err := json.Unmarshal([]byte(text), &rec.Escalation); err != nil {
		return rec, fmt.Errorf("decode record #%d: %w", rec.ID, err)
	}
	if status != nil {
		res := &store.EscalationResolution{Status: *status, ResolvedAt: deref(at), Note: deref(note)}
		if res.ResolvedBy, err = kernel.ParseAddress(deref(by)); err != nil {
			return rec, fmt.Errorf("record #%d: resolved by: %w", rec.ID, err)
		}
		rec.Resolution = res
		rec.Escalation.Status = res.Status
	}
	return rec, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// ResolveEscalation records the decision on escalation id and appends ev (its audit
// event) in one transaction: both or neither. The resolution is inserted only when there
// is none (its key is the escalation), so of concurrent resolvers in any processes one
// wins and the others get ErrAlreadyResolved with the record as it is. An unknown id
// wraps store.ErrNotFound. It returns the resolved record.
func (s *Store) ResolveEscalation(ctx context.Context, id int64, res store.EscalationResolution, ev kernel.AuditEvent) (store.EscalationRecord, error) {
	if res.Status != store.EscalationApproved && res.Status != store.EscalationDenied {
		return store.EscalationRecord{}, fmt.Errorf("resolve escalation %d: status %q is neither approved nor denied", id, res.Status)
	}
	if err := res.ResolvedBy.Validate(); err != nil {
		return store.EscalationRecord{}, fmt.Errorf("resolve escalation %d: resolved by: %w", id, err)
	}
	if _, err := eventArgs(&ev); err != nil {
		return store.EscalationRecord{}, fmt.Errorf("resolve escalation %d: audit: %w", id, err)
	}
	var rec store.EscalationRecord
	var rev int64
	var refusal error // not found, already resolved: not an outage
	err := s.inTxDurable(ctx, func(tx pgx.Tx) error {
		var err error
		rec, err = scanEscalation(tx.QueryRow(ctx, escalationByID, id))
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			refusal = fmt.Errorf("escalation %d: %w", id, store.ErrNotFound)
			return refusal
		case err != nil:
			return err
		case rec.Resolution != nil:
			refusal = alreadyResolved(rec)
			return refusal
		}
		tag, err := tx.Exec(ctx, `INSERT INTO escalation_resolutions (escalation, status, resolved_by, resolved_at, note)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (escalation) DO NOTHING`, id, res.Status, res.ResolvedBy.String(), res.ResolvedAt, res.Note)
		if err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if tag.RowsAffected() == 0 { // resolved by another transaction meanwhile
			if rec, err = scanEscalation(tx.QueryRow(ctx, escalationByID, id)); err != nil {
				return err
			}
			refusal = alreadyResolved(rec)
			return refusal
		}
		if err := appendEvents(ctx, tx, []kernel.AuditEvent{ev}); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		rev, err = wroteRevision(ctx, tx)
		return err
	})
	switch {
	case refusal != nil && errors.Is(refusal, store.ErrAlreadyResolved):
		return rec, refusal
	case refusal != nil:
		return store.EscalationRecord{}, refusal
	case err != nil:
		return store.EscalationRecord{}, fail(fmt.Sprintf("resolve escalation %d", id), err)
	}
	s.rev.advance(rev)
	rec.Resolution = &res
	rec.Escalation.Status = res.Status
	return rec, nil
}

func alreadyResolved(rec store.EscalationRecord) error {
	return fmt.Errorf("escalation %d was %w (%s by %s at %s)", rec.ID, store.ErrAlreadyResolved,
		rec.Resolution.Status, rec.Resolution.ResolvedBy, rec.Resolution.ResolvedAt)
}
