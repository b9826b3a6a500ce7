package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// auditLock is the key of the transaction-level advisory lock every transaction that
// appends audit events takes before it inserts them and holds until it ends: seq (an
// identity) is then assigned in the order transactions commit, so the order of recording
// is the order of seq and a reader that keeps LastAuditSeq misses no record committed
// later with a smaller seq. It is taken last in every transaction (after a counter's or
// a selection's lock), so it adds no deadlock. The cost: commits that append audit events
// are serialized. So that this costs a commit's round trips and not its log flush, such a
// transaction commits with synchronous_commit off and a durable one waits for its flush
// after the lock is released, sharing the flush with the other commits of the moment
// (flush.go).
const auditLock = 0x73684f53 // "shOS"

// insertAuditSQL inserts one audit event (no row when its id is recorded already).
const insertAuditSQL = `INSERT INTO audit_events
	(id, type, outcome, at, at_ms, tool, operation_id, trace_id, world, owner, actor, event)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (id) DO NOTHING`

// eventArgs checks ev and returns the values of its row, in insertAuditSQL's order (the
// encoded event last).
func eventArgs(ev *kernel.AuditEvent) ([]any, error) {
	if ev.ID == "" {
		return nil, errors.New("event has no id")
	}
	text, err := kernel.MarshalAuditEvent(ev)
	if err != nil {
		return nil, fmt.Errorf("encode event %s: %w", ev.ID, err)
	}
	if err := kernel.CheckAuditEventDecodes(ev); err != nil {
		return nil, fmt.Errorf("event %s would not read back: %w", ev.ID, err)
	}
	var atMS *int64
	if ms, err := kernel.ParseTimestamp(ev.At); err == nil {
		atMS = &ms
	}
	return []any{ev.ID, string(ev.Type), string(ev.Outcome), ev.At, atMS, ev.Tool, ev.OperationID,
		ev.TraceID, ev.NamespaceID, addressKey(ev.Owner), addressKey(ev.Actor), string(text)}, nil
}

// addressKey is the stored form of an address: "kind:id" ("" for the zero address).
func addressKey(a kernel.Address) string {
	if a.IsZero() && a.ID == "" {
		return ""
	}
	return a.String()
}

// appendEvents writes evs in tx, in order, after taking the audit lock: a recorded event
// again is a no-op, another event under a recorded id an error wrapping
// store.ErrDuplicate (the caller rolls back).
func appendEvents(ctx context.Context, tx txQuerier, evs []kernel.AuditEvent) error {
	rows := make([][]any, len(evs))
	for i := range evs {
		a, err := eventArgs(&evs[i])
		if err != nil {
			if len(evs) > 1 {
				return fmt.Errorf("event %d: %w", i, err)
			}
			return err
		}
		rows[i] = a
	}
	// the lock and the inserts go in one round trip (a batch), so the lock that
	// serializes every audit-appending transaction is not held across client round trips
	// between them
	b := &pgx.Batch{}
	b.Queue("SELECT pg_advisory_xact_lock($1)", int64(auditLock))
	for _, a := range rows {
		b.Queue(insertAuditSQL, a...)
	}
	br := tx.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return fmt.Errorf("lock the audit trail: %w", err)
	}
	tags := make([]int64, len(rows))
	for i := range rows {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return fmt.Errorf("write event %s: %w", evs[i].ID, err)
		}
		tags[i] = tag.RowsAffected()
	}
	if err := br.Close(); err != nil {
		return fmt.Errorf("write events: %w", err)
	}
	for i, a := range rows {
		if tags[i] == 1 {
			continue
		}
		if err := sameEvent(ctx, tx, &evs[i], a); err != nil {
			return err
		}
	}
	return nil
}

// sameEvent checks that the event recorded under ev's id is ev (row a, eventArgs'): an
// append again is a no-op, another event under a recorded id an error wrapping
// store.ErrDuplicate.
func sameEvent(ctx context.Context, tx querier, ev *kernel.AuditEvent, a []any) error {
	var prev string
	if err := tx.QueryRow(ctx, `SELECT event FROM audit_events WHERE id = $1`, ev.ID).Scan(&prev); err != nil {
		return fmt.Errorf("read event %s: %w", ev.ID, err)
	}
	if prev != a[len(a)-1].(string) {
		return fmt.Errorf("event id %s: %w with other content", ev.ID, store.ErrDuplicate)
	}
	return nil
}

// Append records one audit event durably. The event must have an id and must survive a
// JSON round trip through kernel.AuditEvent. Appending the same event again is a no-op;
// another event with a recorded id is an error wrapping store.ErrDuplicate.
func (s *Store) Append(ctx context.Context, ev kernel.AuditEvent) error {
	return s.appendAll(ctx, false, "append audit event", []kernel.AuditEvent{ev})
}

// AppendBatch records several audit events durably in one transaction: all or none.
func (s *Store) AppendBatch(ctx context.Context, evs []kernel.AuditEvent) error {
	return s.appendAll(ctx, false, "append audit events", evs)
}

// AppendWriteAhead records one audit event like Append, committed and visible at once,
// without waiting for the commit to reach the disk (kernel.WriteAheadAuditSink).
func (s *Store) AppendWriteAhead(ctx context.Context, ev kernel.AuditEvent) error {
	return s.appendAll(ctx, true, "append audit event", []kernel.AuditEvent{ev})
}

// AppendWriteAheadBatch records several events like AppendWriteAhead, in one
// transaction: all or none (kernel.WriteAheadBatchAuditSink).
func (s *Store) AppendWriteAheadBatch(ctx context.Context, evs []kernel.AuditEvent) error {
	return s.appendAll(ctx, true, "append audit events", evs)
}

func (s *Store) appendAll(ctx context.Context, writeAhead bool, op string, evs []kernel.AuditEvent) error {
	if len(evs) == 0 {
		return nil
	}
	// Check every event before a connection is taken: a refusal costs no round trip.
	rows := make([][]any, len(evs))
	for i := range evs {
		var err error
		if rows[i], err = eventArgs(&evs[i]); err != nil {
			if len(evs) > 1 {
				return fmt.Errorf("%s: event %d: %w", op, i, err)
			}
			return fmt.Errorf("%s: %w", op, err)
		}
	}
	grouped := writeAhead
	if writeAhead && hasRefusal(evs) {
		// A refusal is answered once its record is written, so its record must survive
		// a crash of the server: committed durably, never write-ahead (an immediate
		// shutdown loses the commits not yet flushed; TestServeSurvivesDatabaseRestart).
		writeAhead = false
	}
	var err error
	if grouped {
		err = s.appendGrouped(ctx, evs, rows, !writeAhead) // see auditgroup.go
	} else {
		err = s.inTxClassChecked(ctx, writeAhead, func(tx pgx.Tx) error { return appendEvents(ctx, tx, evs) }, eventsRecorded(evs))
	}
	if err != nil {
		return fail(op, err)
	}
	return nil
}

// hasRefusal reports whether evs hold the record of a refusal (an event denied).
func hasRefusal(evs []kernel.AuditEvent) bool {
	for i := range evs {
		if evs[i].Outcome == kernel.OutcomeDenied {
			return true
		}
	}
	return false
}

// where builds the WHERE clause of a listing: each condition added with its arguments
// ($n placeholders numbered in order), ANDed.
type where struct {
	conds []string
	args  []any
}

// add adds cond, in which each "?" is the next argument.
func (w *where) add(cond string, args ...any) {
	for _, a := range args {
		w.args = append(w.args, a)
		cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(w.args)), 1)
	}
	w.conds = append(w.conds, cond)
}

// eq adds col = val when val is not empty.
func (w *where) eq(col, val string) {
	if val != "" {
		w.add(col+" = ?", val)
	}
}

// in adds col = ANY(vals) when vals is not empty.
func (w *where) in(col string, vals []string) {
	if len(vals) > 0 {
		w.add(col+" = ANY(?)", vals)
	}
}

// next is the placeholder of the next argument.
func (w *where) next(arg any) string {
	w.args = append(w.args, arg)
	return "$" + strconv.Itoa(len(w.args))
}

func (w *where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// maxBranches bounds the branches auditQuery splits a listing into (one per pair of
// values of Types × Outcomes); past it, one query with = ANY.
const maxBranches = 16

// auditQuery is the query of ListAudit for f and its arguments.
//
// A listing with a limit stays O(limit) whatever the size of the trail (migration 00004):
// each filter of `audit list` (type, outcome, tool, owner, actor) has an index
// (filter, at_ms DESC NULLS LAST, seq DESC), so an equality on it walks the events of
// that value in the listing's order and stops at the limit, and since is a range of the
// same walk. A list of several types or outcomes would be an = ANY, which no index walks
// in order (PostgreSQL would sort every match), so a listing by instant with a limit is
// split into one branch per value (each its own index walk, limited), merged and cut to
// the limit. Two filters at once walk one of them and check the other on the way.
func auditQuery(f store.AuditFilter) (string, []any) {
	types, outcomes := f.Types, f.Outcomes
	if len(types) == 0 {
		types = []string{""}
	}
	if len(outcomes) == 0 {
		outcomes = []string{""}
	}
	if f.ByInstant && f.Limit > 0 && len(types)*len(outcomes) > 1 && len(types)*len(outcomes) <= maxBranches {
		var w where
		var branches []string
		for _, t := range types {
			for _, o := range outcomes {
				b := f
				b.Types, b.Outcomes = nil, nil
				if t != "" {
					b.Types = []string{t}
				}
				if o != "" {
					b.Outcomes = []string{o}
				}
				branches = append(branches, "(SELECT seq, event, at_ms FROM audit_events"+auditWhere(&w, b)+
					" ORDER BY at_ms DESC NULLS LAST, seq DESC LIMIT "+w.next(f.Limit)+")")
			}
		}
		return "SELECT seq, event FROM (" + strings.Join(branches, " UNION ALL ") +
			") AS b ORDER BY at_ms DESC NULLS LAST, seq DESC LIMIT " + w.next(f.Limit), w.args
	}
	var w where
	q := "SELECT seq, event FROM audit_events" + auditWhere(&w, f)
	switch {
	case f.ByInstant:
		q += " ORDER BY at_ms DESC NULLS LAST, seq DESC"
	case f.Oldest:
		q += " ORDER BY seq ASC"
	default:
		q += " ORDER BY seq DESC"
	}
	if f.Limit > 0 {
		q += " LIMIT " + w.next(f.Limit)
	}
	return q, w.args
}

// auditWhere adds f's conditions to w and returns the WHERE clause of those it added
// (one value of Types or Outcomes is an equality, several an = ANY).
func auditWhere(w *where, f store.AuditFilter) string {
	n := len(w.conds)
	for _, l := range []struct {
		col  string
		vals []string
	}{{"type", f.Types}, {"outcome", f.Outcomes}} {
		if len(l.vals) == 1 {
			w.eq(l.col, l.vals[0])
		} else {
			w.in(l.col, l.vals)
		}
	}
	w.eq("tool", f.Tool)
	w.eq("operation_id", f.OperationID)
	w.eq("trace_id", f.TraceID)
	w.eq("world", f.World)
	if !f.Owner.IsZero() {
		w.add("owner = ?", addressKey(f.Owner))
	}
	if !f.Actor.IsZero() {
		w.add("actor = ?", addressKey(f.Actor))
	}
	if f.SinceMillis != 0 {
		w.add("at_ms >= ?", f.SinceMillis)
	}
	if f.AfterSeq != 0 {
		w.add("seq > ?", f.AfterSeq)
	}
	if len(w.conds) == n {
		return ""
	}
	return " WHERE " + strings.Join(w.conds[n:], " AND ")
}

// ListAudit returns the audit events f selects, newest first unless f.Oldest (every
// field applied by the query, before its limit).
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]kernel.AuditEvent, error) {
	evs, _, err := s.listAudit(ctx, f)
	return evs, err
}

// ListAuditAfter returns the next page of the trail (store.AuditCursor): at most f.Limit
// events recorded after f.AfterSeq, oldest first, read by the primary key's range (seq
// is assigned in the order of commit, so a page read later misses nothing committed
// before it).
func (s *Store) ListAuditAfter(ctx context.Context, f store.AuditFilter) ([]kernel.AuditEvent, int64, error) {
	return store.ListAfter(ctx, f, s.listAudit)
}

// listAudit is ListAudit that also returns the sequence number of the last event read.
func (s *Store) listAudit(ctx context.Context, f store.AuditFilter) ([]kernel.AuditEvent, int64, error) {
	q, args := auditQuery(f)
	// One round trip (an unnamed statement, parameter types from the Go values): a
	// listing's text depends on its filter, and a command lists once, so preparing it
	// (a round trip of its own, a cached statement never used again) costs more than
	// the planning it would save.
	rows, err := s.pool.Query(ctx, q, append([]any{pgx.QueryExecModeExec}, args...)...)
	if err != nil {
		return nil, 0, fail("list audit events", err)
	}
	defer rows.Close()
	var out []kernel.AuditEvent
	var seq int64
	for rows.Next() {
		var text string
		if err := rows.Scan(&seq, &text); err != nil {
			return nil, 0, fail("list audit events", err)
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
		return nil, 0, fail("list audit events", err)
	}
	return out, seq, nil
}

// LastAuditSeq returns the sequence number of the newest audit event (0 when there is
// none).
func (s *Store) LastAuditSeq(ctx context.Context) (int64, error) {
	var seq *int64
	if err := s.pool.QueryRow(ctx, `SELECT max(seq) FROM audit_events`).Scan(&seq); err != nil {
		return 0, fail("read the audit sequence", err)
	}
	if seq == nil {
		return 0, nil
	}
	return *seq, nil
}
