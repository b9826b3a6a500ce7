package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// The escalation types and errors are pkg/store's; these names keep the callers of
// sqlitestore compiling unchanged.
type (
	EscalationRecord     = store.EscalationRecord
	EscalationResolution = store.EscalationResolution
	EscalationFilter     = store.EscalationFilter
)

// Escalation statuses (store's).
const (
	EscalationPending  = store.EscalationPending
	EscalationApproved = store.EscalationApproved
	EscalationDenied   = store.EscalationDenied
)

// ErrNotFound is store.ErrNotFound: the record asked for does not exist.
var ErrNotFound = store.ErrNotFound

// ErrAlreadyResolved is store.ErrAlreadyResolved: a resolution is never changed.
var ErrAlreadyResolved = store.ErrAlreadyResolved

// RecordEscalation appends one escalation record. World and Owner are required.
func (s *Store) RecordEscalation(ctx context.Context, rec EscalationRecord) error {
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
	db, err := s.durable()
	if err != nil {
		return fmt.Errorf("record escalation: %w", err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO escalations (world, owner, trace_id, call_id, escalation)
		VALUES (?, ?, ?, ?, ?)`, rec.World, rec.Owner.String(), rec.TraceID, rec.CallID, string(text)); err != nil {
		return fmt.Errorf("record escalation: write: %w", err)
	}
	return nil
}

const escalationColumns = `SELECT e.seq, e.world, e.owner, e.trace_id, e.call_id, e.escalation,
	r.status, r.resolved_by, r.resolved_at, r.note
	FROM escalations e LEFT JOIN escalation_resolutions r ON r.escalation = e.seq`

// ListEscalations returns the escalations f selects, the most recently recorded first.
func (s *Store) ListEscalations(ctx context.Context, f EscalationFilter) ([]EscalationRecord, error) {
	var w where
	w.eq("e.world", f.World)
	w.eq("e.call_id", f.CallID)
	if !f.Owner.IsZero() {
		w.add("e.owner = ?", f.Owner.String())
	}
	switch f.Status {
	case "":
	case EscalationPending:
		w.add("r.status IS NULL")
	case EscalationApproved, EscalationDenied:
		w.add("r.status = ?", f.Status)
	default:
		return nil, fmt.Errorf("list escalations: unknown status %q", f.Status)
	}
	q := escalationColumns + w.String() + " ORDER BY e.seq DESC"
	args := w.args
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list escalations: %w", err)
	}
	defer rows.Close()
	var out []EscalationRecord
	for rows.Next() {
		rec, err := scanEscalation(rows)
		if err != nil {
			return nil, fmt.Errorf("list escalations: %w", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list escalations: %w", err)
	}
	return out, nil
}

// GetEscalation returns escalation id (looked up by its key), with its resolution if
// any. An unknown id is an error wrapping ErrNotFound.
func (s *Store) GetEscalation(ctx context.Context, id int64) (EscalationRecord, error) {
	rec, err := scanEscalation(s.db.QueryRowContext(ctx, escalationByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return EscalationRecord{}, fmt.Errorf("escalation %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return EscalationRecord{}, fmt.Errorf("read escalation %d: %w", id, err)
	}
	return rec, nil
}

// escalationByID selects one escalation by its primary key.
const escalationByID = escalationColumns + " WHERE e.seq = ?"

func scanEscalation(row interface{ Scan(...any) error }) (EscalationRecord, error) {
	var owner, text string
	var status, by, at, note sql.NullString
	var rec EscalationRecord
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
	if status.Valid {
		res := &EscalationResolution{Status: status.String, ResolvedAt: at.String, Note: note.String}
		if res.ResolvedBy, err = kernel.ParseAddress(by.String); err != nil {
			return rec, fmt.Errorf("record #%d: resolved by: %w", rec.ID, err)
		}
		rec.Resolution = res
		rec.Escalation.Status = res.Status
	}
	return rec, nil
}

// ResolveEscalation records the decision on escalation id and appends ev (its audit
// event) in the same immediate transaction: both or neither. An unknown id wraps
// ErrNotFound; an escalation already resolved wraps ErrAlreadyResolved (a resolution is
// never changed). It returns the resolved record. Resolving grants nothing.
func (s *Store) ResolveEscalation(ctx context.Context, id int64, res EscalationResolution, ev kernel.AuditEvent) (EscalationRecord, error) {
	if res.Status != EscalationApproved && res.Status != EscalationDenied {
		return EscalationRecord{}, fmt.Errorf("resolve escalation %d: status %q is neither approved nor denied", id, res.Status)
	}
	if err := res.ResolvedBy.Validate(); err != nil {
		return EscalationRecord{}, fmt.Errorf("resolve escalation %d: resolved by: %w", id, err)
	}
	tx, err := s.beginDurable(ctx)
	if err != nil {
		return EscalationRecord{}, fmt.Errorf("resolve escalation %d: begin: %w", id, err)
	}
	defer tx.Rollback()
	rec, err := scanEscalation(tx.QueryRowContext(ctx, escalationByID, id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return EscalationRecord{}, fmt.Errorf("escalation %d: %w", id, ErrNotFound)
	case err != nil:
		return EscalationRecord{}, fmt.Errorf("resolve escalation %d: %w", id, err)
	case rec.Resolution != nil:
		return rec, fmt.Errorf("escalation %d was %w (%s by %s at %s)", id, ErrAlreadyResolved,
			rec.Resolution.Status, rec.Resolution.ResolvedBy, rec.Resolution.ResolvedAt)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO escalation_resolutions (escalation, status, resolved_by, resolved_at, note)
		VALUES (?, ?, ?, ?, ?)`, id, res.Status, res.ResolvedBy.String(), res.ResolvedAt, res.Note); err != nil {
		return EscalationRecord{}, fmt.Errorf("resolve escalation %d: write: %w", id, err)
	}
	if err := appendEvent(ctx, tx, nil, ev); err != nil {
		return EscalationRecord{}, fmt.Errorf("resolve escalation %d: audit: %w", id, err)
	}
	if err := tx.Commit(); err != nil {
		return EscalationRecord{}, fmt.Errorf("resolve escalation %d: commit: %w", id, err)
	}
	rec.Resolution = &res
	rec.Escalation.Status = res.Status
	return rec, nil
}
