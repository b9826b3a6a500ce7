package sqlitestore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// EscalationRecord is one recorded escalation and the context it was asked in.
type EscalationRecord struct {
	World      string            `json:"world"`
	Owner      kernel.Address    `json:"owner"`
	TraceID    string            `json:"traceId"`
	CallID     string            `json:"callId"`
	Escalation kernel.Escalation `json:"escalation"`
}

// EscalationFilter selects escalations for ListEscalations. Zero fields select everything.
type EscalationFilter struct {
	// World keeps escalations of this namespaceId ("" : any).
	World string
	// Owner keeps escalations of this owner (zero Address: any).
	Owner kernel.Address
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
	if _, err := s.db.ExecContext(ctx, `INSERT INTO escalations (world, owner, trace_id, call_id, escalation)
		VALUES (?, ?, ?, ?, ?)`, rec.World, rec.Owner.String(), rec.TraceID, rec.CallID, string(text)); err != nil {
		return fmt.Errorf("record escalation: write: %w", err)
	}
	return nil
}

// ListEscalations returns the escalations f selects, the most recently recorded first.
func (s *Store) ListEscalations(ctx context.Context, f EscalationFilter) ([]EscalationRecord, error) {
	var where []string
	var args []any
	if f.World != "" {
		where = append(where, "world = ?")
		args = append(args, f.World)
	}
	if !f.Owner.IsZero() {
		where = append(where, "owner = ?")
		args = append(args, f.Owner.String())
	}
	q := "SELECT seq, world, owner, trace_id, call_id, escalation FROM escalations"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY seq DESC"
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
		var seq int64
		var owner, text string
		var rec EscalationRecord
		if err := rows.Scan(&seq, &rec.World, &owner, &rec.TraceID, &rec.CallID, &text); err != nil {
			return nil, fmt.Errorf("list escalations: %w", err)
		}
		if rec.Owner, err = kernel.ParseAddress(owner); err != nil {
			return nil, fmt.Errorf("list escalations: record #%d: owner: %w", seq, err)
		}
		if err := json.Unmarshal([]byte(text), &rec.Escalation); err != nil {
			return nil, fmt.Errorf("list escalations: decode record #%d: %w", seq, err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list escalations: %w", err)
	}
	return out, nil
}
