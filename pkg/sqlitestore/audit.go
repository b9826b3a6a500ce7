package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// AuditFilter selects audit events for ListAudit. Zero fields select everything.
type AuditFilter struct {
	// Types keeps events whose type is one of these (empty: any type).
	Types []string
	// Outcomes keeps events whose outcome is one of these (empty: any outcome).
	Outcomes []string
	// Tool keeps events of this tool ("" : any).
	Tool string
	// OperationID keeps events of this operation (call id) ("" : any).
	OperationID string
	// TraceID keeps events of this trace ("" : any).
	TraceID string
	// World keeps events of this namespaceId ("" : any).
	World string
	// SinceMillis keeps events whose at is at or after this Unix millisecond (0: no bound).
	SinceMillis int64
	// AfterSeq keeps events recorded after the one of this sequence number (0: from the
	// first); see LastAuditSeq.
	AfterSeq int64
	// Limit caps the number of events returned (0: no limit).
	Limit int
	// Oldest returns the oldest events first; by default the newest come first. Order is
	// the order of recording.
	Oldest bool
}

type execQuerier interface {
	queryRower
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Append records one audit event. The event must have an id and must survive a JSON round
// trip through kernel.AuditEvent (so the trail can always be read back). Appending the
// same event again is a no-op; another event with a recorded id is an error wrapping
// ErrDuplicate. Events are never updated or deleted.
func (s *Store) Append(ctx context.Context, ev kernel.AuditEvent) error {
	if err := appendEvent(ctx, s.db, ev); err != nil {
		// name the database: a full disk or a read-only file must be traceable to it
		return fmt.Errorf("append audit event to %s: %w", s.path, err)
	}
	return nil
}

// AppendBatch records several audit events in one transaction: all of them or none.
func (s *Store) AppendBatch(ctx context.Context, evs []kernel.AuditEvent) error {
	if len(evs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append audit events: begin: %w", err)
	}
	defer tx.Rollback()
	for i, ev := range evs {
		if err := appendEvent(ctx, tx, ev); err != nil {
			return fmt.Errorf("append audit events: event %d: %w", i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append audit events: commit: %w", err)
	}
	return nil
}

func appendEvent(ctx context.Context, q execQuerier, ev kernel.AuditEvent) error {
	if ev.ID == "" {
		return errors.New("event has no id")
	}
	text, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	var back kernel.AuditEvent
	if err := json.Unmarshal(text, &back); err != nil {
		return fmt.Errorf("event %s would not read back: %w", ev.ID, err)
	}
	var atMS sql.NullInt64
	if ms, err := kernel.ParseTimestamp(ev.At); err == nil {
		atMS = sql.NullInt64{Int64: ms, Valid: true}
	}
	res, err := q.ExecContext(ctx, `INSERT INTO audit_events
		(id, type, outcome, at, at_ms, tool, operation_id, trace_id, world, event)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		ev.ID, string(ev.Type), string(ev.Outcome), ev.At, atMS, ev.Tool, ev.OperationID,
		ev.TraceID, ev.NamespaceID, string(text))
	if err != nil {
		return fmt.Errorf("write event %s: %w", ev.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("write event %s: %w", ev.ID, err)
	}
	if n == 1 {
		return nil
	}
	var prev string
	if err := q.QueryRowContext(ctx, `SELECT event FROM audit_events WHERE id = ?`, ev.ID).Scan(&prev); err != nil {
		return fmt.Errorf("read event %s: %w", ev.ID, err)
	}
	if !bytes.Equal([]byte(prev), text) {
		return fmt.Errorf("event id %s: %w with other content", ev.ID, ErrDuplicate)
	}
	return nil
}

// ListAudit returns the audit events f selects, newest first unless f.Oldest.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]kernel.AuditEvent, error) {
	var where []string
	var args []any
	in := func(col string, vals []string) {
		if len(vals) == 0 {
			return
		}
		where = append(where, col+" IN ("+strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ")+")")
		for _, v := range vals {
			args = append(args, v)
		}
	}
	eq := func(col, val string) {
		if val != "" {
			where = append(where, col+" = ?")
			args = append(args, val)
		}
	}
	in("type", f.Types)
	in("outcome", f.Outcomes)
	eq("tool", f.Tool)
	eq("operation_id", f.OperationID)
	eq("trace_id", f.TraceID)
	eq("world", f.World)
	if f.SinceMillis != 0 {
		where = append(where, "at_ms >= ?")
		args = append(args, f.SinceMillis)
	}
	if f.AfterSeq != 0 {
		where = append(where, "seq > ?")
		args = append(args, f.AfterSeq)
	}
	q := "SELECT seq, event FROM audit_events"
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if f.Oldest {
		q += " ORDER BY seq ASC"
	} else {
		q += " ORDER BY seq DESC"
	}
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	defer rows.Close()
	var out []kernel.AuditEvent
	for rows.Next() {
		var seq int64
		var text string
		if err := rows.Scan(&seq, &text); err != nil {
			return nil, fmt.Errorf("list audit events: %w", err)
		}
		var ev kernel.AuditEvent
		if err := json.Unmarshal([]byte(text), &ev); err != nil {
			return nil, fmt.Errorf("list audit events: decode event #%d: %w", seq, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit events: %w", err)
	}
	return out, nil
}

// LastAuditSeq returns the sequence number of the newest audit event (0 when there is
// none): a reader that keeps it reads only what was recorded since (AuditFilter.AfterSeq).
func (s *Store) LastAuditSeq(ctx context.Context) (int64, error) {
	var seq sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT max(seq) FROM audit_events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read the audit sequence: %w", err)
	}
	return seq.Int64, nil
}
