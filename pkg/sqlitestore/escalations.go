package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// EscalationRecord is one recorded escalation and the context it was asked in.
type EscalationRecord struct {
	// ID numbers the escalations of the database (1, 2, …, in recording order); set by
	// ListEscalations and ResolveEscalation, ignored by RecordEscalation.
	ID         int64             `json:"id"`
	World      string            `json:"world"`
	Owner      kernel.Address    `json:"owner"`
	TraceID    string            `json:"traceId"`
	CallID     string            `json:"callId"`
	Escalation kernel.Escalation `json:"escalation"`
	// Resolution is the reviewer's decision, nil while the escalation is pending. When
	// set, Escalation.Status is its status.
	Resolution *EscalationResolution `json:"resolution,omitempty"`
}

// EscalationResolution is a reviewer's decision on an escalation. It grants nothing:
// authority still comes only from grant files.
type EscalationResolution struct {
	Status     string         `json:"status"` // EscalationApproved or EscalationDenied
	ResolvedBy kernel.Address `json:"resolvedBy"`
	ResolvedAt string         `json:"resolvedAt"`
	Note       string         `json:"note,omitempty"`
}

// Escalation statuses.
const (
	EscalationPending  = "pending"
	EscalationApproved = "approved"
	EscalationDenied   = "denied"
)

// ErrNotFound is wrapped when the record asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrAlreadyResolved is wrapped when an escalation that was already resolved is resolved
// again (a resolution is never changed).
var ErrAlreadyResolved = errors.New("already resolved")

// EscalationFilter selects escalations for ListEscalations. Zero fields select everything.
type EscalationFilter struct {
	// World keeps escalations of this namespaceId ("" : any).
	World string
	// Owner keeps escalations of this owner (zero Address: any).
	Owner kernel.Address
	// Status keeps escalations of this status: pending, approved or denied ("": any).
	Status string
	// Limit caps the number of records returned (0: no limit).
	Limit int
}

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
	var where []string
	var args []any
	if f.World != "" {
		where = append(where, "e.world = ?")
		args = append(args, f.World)
	}
	if !f.Owner.IsZero() {
		where = append(where, "e.owner = ?")
		args = append(args, f.Owner.String())
	}
	switch f.Status {
	case "":
	case EscalationPending:
		where = append(where, "r.status IS NULL")
	case EscalationApproved, EscalationDenied:
		where = append(where, "r.status = ?")
		args = append(args, f.Status)
	default:
		return nil, fmt.Errorf("list escalations: unknown status %q", f.Status)
	}
	q := escalationColumns
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY e.seq DESC"
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
	rec, err := scanEscalation(tx.QueryRowContext(ctx, escalationColumns+" WHERE e.seq = ?", id))
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
