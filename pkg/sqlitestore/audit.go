package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// AuditFilter is store.AuditFilter (the name keeps sqlitestore's callers compiling).
type AuditFilter = store.AuditFilter

type execQuerier interface {
	queryRower
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

var _ kernel.WriteAheadAuditSink = (*Store)(nil)
var _ store.AuditCursor = (*Store)(nil)

// Append records one audit event durably (see Store: the write-ahead log is fsynced
// before Append returns). The event must have an id and must survive a JSON round trip
// through kernel.AuditEvent (so the trail can always be read back). Appending the same
// event again is a no-op; another event with a recorded id is an error wrapping
// ErrDuplicate. Events are never updated or deleted.
func (s *Store) Append(ctx context.Context, ev kernel.AuditEvent) error {
	db, err := s.durable()
	if err == nil {
		err = s.ingestOwn(ctx) // the records spooled before this one come first
	}
	if err == nil {
		err = s.flushOwnShared(ctx)
	}
	if err == nil {
		err = appendEvent(ctx, db, nil, ev)
	}
	if err != nil {
		// name the database: a full disk or a read-only file must be traceable to it
		return fmt.Errorf("append audit event to %s: %w", s.path, err)
	}
	return nil
}

// AppendWriteAhead records one audit event like Append, atomically and visibly to every
// reader, but without forcing it to the disk (see Store): for the records of work that
// changed nothing (kernel.WriteAheadAuditSink).
func (s *Store) AppendWriteAhead(ctx context.Context, ev kernel.AuditEvent) error {
	if sp, sh := s.spool(), s.sharedSpool(); sp != nil || sh != nil {
		row, err := eventArgs(&ev)
		if err == nil && sp != nil {
			err = s.spoolAppend(ctx, sp, [][]any{row})
		} else if err == nil {
			err = s.sharedAppend(ctx, sh, [][]any{row})
		}
		if err != nil {
			return fmt.Errorf("append audit event to %s: %w", s.path, err)
		}
		return nil
	}
	ins, err := s.lightInsert(ctx)
	if err == nil {
		err = appendEvent(ctx, s.db, ins, ev)
	}
	if err != nil {
		return fmt.Errorf("append audit event to %s: %w", s.path, err)
	}
	return nil
}

var _ kernel.WriteAheadBatchAuditSink = (*Store)(nil)

// AppendWriteAheadBatch records several audit events like AppendWriteAhead, in one
// transaction: all of them or none. The common case is one multi-row INSERT statement
// (atomic on its own, no BEGIN/COMMIT round trips); when an id is recorded already it is
// done again in a transaction that tells a repeated event (a no-op) from another event
// with a recorded id (ErrDuplicate, nothing written).
func (s *Store) AppendWriteAheadBatch(ctx context.Context, evs []kernel.AuditEvent) error {
	if len(evs) == 0 {
		return nil
	}
	if sp, sh := s.spool(), s.sharedSpool(); sp != nil || sh != nil {
		rows := make([][]any, len(evs))
		for i := range evs {
			r, err := eventArgs(&evs[i])
			if err != nil {
				return fmt.Errorf("append audit events to %s: event %d: %w", s.path, i, err)
			}
			rows[i] = r
		}
		if sp != nil {
			return s.spoolAppend(ctx, sp, rows)
		}
		if err := s.sharedAppend(ctx, sh, rows); err != nil {
			return fmt.Errorf("append audit events to %s: %w", s.path, err)
		}
		return nil
	}
	args := make([]any, 0, len(evs)*auditColumns)
	for i := range evs {
		a, err := eventArgs(&evs[i])
		if err != nil {
			return fmt.Errorf("append audit events to %s: event %d: %w", s.path, i, err)
		}
		args = append(args, a...)
	}
	if len(evs) <= maxMultiInsert {
		ins, err := s.prepared(ctx, multiInsertSQL(len(evs)))
		if err == nil {
			if _, err = ins.ExecContext(ctx, args...); err == nil {
				return nil
			}
			if !isConstraint(err) {
				return fmt.Errorf("append audit events to %s: %w", s.path, err)
			}
		}
	}
	ins, err := s.lightInsert(ctx)
	if err != nil {
		return fmt.Errorf("append audit events to %s: %w", s.path, err)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("append audit events to %s: begin: %w", s.path, err)
	}
	defer tx.Rollback()
	txIns := tx.StmtContext(ctx, ins)
	defer txIns.Close()
	for i, ev := range evs {
		if err := appendEvent(ctx, tx, txIns, ev); err != nil {
			return fmt.Errorf("append audit events to %s: event %d: %w", s.path, i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append audit events to %s: commit: %w", s.path, err)
	}
	return nil
}

// maxMultiInsert bounds the rows of one multi-row audit insert (the kernel batches two).
const maxMultiInsert = 4

const auditColumns = 10

// multiInsertSQL inserts n audit events in one statement; a recorded id fails it whole
// (a constraint error: no ON CONFLICT clause).
func multiInsertSQL(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO audit_events (id, type, outcome, at, at_ms, tool, operation_id, trace_id, world, event) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
	}
	return b.String()
}

// isConstraint reports whether err is SQLite's SQLITE_CONSTRAINT (any extended code).
func isConstraint(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_CONSTRAINT
}

// AppendBatch records several audit events durably in one transaction: all of them or
// none.
func (s *Store) AppendBatch(ctx context.Context, evs []kernel.AuditEvent) error {
	if len(evs) == 0 {
		return nil
	}
	tx, err := s.beginDurable(ctx)
	if err != nil {
		return fmt.Errorf("append audit events: begin: %w", err)
	}
	defer tx.Rollback()
	for i, ev := range evs {
		if err := appendEvent(ctx, tx, nil, ev); err != nil {
			return fmt.Errorf("append audit events: event %d: %w", i, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("append audit events: commit: %w", err)
	}
	return nil
}

// eventArgs checks ev and returns the values of its audit_events row, in insertAuditSQL's
// order (the encoded event last).
func eventArgs(ev *kernel.AuditEvent) ([]any, error) {
	if ev.ID == "" {
		return nil, errors.New("event has no id")
	}
	buf := encodeBufs.Get().(*[]byte)
	defer encodeBufs.Put(buf)
	text, err := kernel.AppendAuditEvent((*buf)[:0], ev)
	if cap(text) <= maxPooledEncoding {
		*buf = text
	}
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	if err := kernel.CheckAuditEventDecodes(ev); err != nil {
		return nil, fmt.Errorf("event %s would not read back: %w", ev.ID, err)
	}
	return rowOf(ev, string(text)), nil
}

// encodeBufs are eventArgs' encoding buffers: the row keeps the event's text as a string
// (one copy), so the buffer it was encoded in is reused, not left to the collector.
var encodeBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledEncoding bounds the buffers kept in encodeBufs and spoolBufs: an unusually large
// event's buffer is left to the collector.
const maxPooledEncoding = 64 << 10

// insertAuditSQL inserts one audit event (a no-op when its id is recorded already).
const insertAuditSQL = `INSERT INTO audit_events
		(id, type, outcome, at, at_ms, tool, operation_id, trace_id, world, event)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`

// appendEvent writes ev through q, with ins (insertAuditSQL prepared on q's pool) when
// not nil.
func appendEvent(ctx context.Context, q execQuerier, ins *sql.Stmt, ev kernel.AuditEvent) error {
	args, err := eventArgs(&ev)
	if err != nil {
		return err
	}
	text := []byte(args[auditColumns-1].(string))
	var res sql.Result
	if ins != nil {
		res, err = ins.ExecContext(ctx, args...)
	} else {
		res, err = q.ExecContext(ctx, insertAuditSQL, args...)
	}
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
	evs, _, err := s.listAudit(ctx, f)
	return evs, err
}

// ListAuditAfter returns the next page of the trail (store.AuditCursor): at most f.Limit
// events recorded after f.AfterSeq, oldest first, read by the primary key's range (one
// writer at a time: seq is the order of commit).
func (s *Store) ListAuditAfter(ctx context.Context, f AuditFilter) ([]kernel.AuditEvent, int64, error) {
	return store.ListAfter(ctx, f, s.listAudit)
}

// listAudit is ListAudit that also returns the sequence number of the last event read.
func (s *Store) listAudit(ctx context.Context, f AuditFilter) ([]kernel.AuditEvent, int64, error) {
	if err := s.syncSpools(ctx); err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	var w where
	w.in("type", f.Types)
	w.in("outcome", f.Outcomes)
	w.eq("tool", f.Tool)
	w.eq("operation_id", f.OperationID)
	w.eq("trace_id", f.TraceID)
	w.eq("world", f.World)
	if err := w.jsonAddress("event", "$.owner", f.Owner); err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	if err := w.jsonAddress("event", "$.actor", f.Actor); err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	if f.SinceMillis != 0 {
		w.add("at_ms >= ?", f.SinceMillis)
	}
	if f.AfterSeq != 0 {
		w.add("seq > ?", f.AfterSeq)
	}
	q := "SELECT seq, event FROM audit_events" + w.String()
	switch {
	case f.ByInstant:
		q += " ORDER BY at_ms DESC, seq DESC"
	case f.Oldest:
		q += " ORDER BY seq ASC"
	default:
		q += " ORDER BY seq DESC"
	}
	args := w.args
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	defer rows.Close()
	var out []kernel.AuditEvent
	var seq int64
	for rows.Next() {
		var text string
		if err := rows.Scan(&seq, &text); err != nil {
			return nil, 0, fmt.Errorf("list audit events: %w", err)
		}
		var ev kernel.AuditEvent
		if err := json.Unmarshal([]byte(text), &ev); err != nil {
			return nil, 0, fmt.Errorf("list audit events: decode event #%d: %w", seq, err)
		}
		if f.WithSeq {
			ev.Seq = seq
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list audit events: %w", err)
	}
	return out, seq, nil
}

// LastAuditSeq returns the sequence number of the newest audit event (0 when there is
// none): a reader that keeps it reads only what was recorded since (AuditFilter.AfterSeq).
func (s *Store) LastAuditSeq(ctx context.Context) (int64, error) {
	if err := s.syncSpools(ctx); err != nil {
		return 0, fmt.Errorf("read the audit sequence: %w", err)
	}
	var seq sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT max(seq) FROM audit_events`).Scan(&seq); err != nil {
		return 0, fmt.Errorf("read the audit sequence: %w", err)
	}
	return seq.Int64, nil
}
