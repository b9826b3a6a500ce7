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

var _ store.Mailbox = (*Store)(nil)

// mailboxLock is the first key of the transaction-level advisory lock a delivery takes on
// (world, sender), the second a hash of the pair: the count of the sender's pending
// messages and the insert are then one step for every process, so the in-flight bound
// holds across replicas. Two pairs whose hashes collide only wait for each other.
const mailboxLock = 0x73684f4d // "shOM"

// encodeEnvelope is the stored text of env: its encoding after a strict decode (so the
// payload is canonical and two envelopes of the same content store the same text).
func encodeEnvelope(env kernel.MessageEnvelope) (string, kernel.MessageEnvelope, error) {
	if err := env.Validate(); err != nil {
		return "", env, err
	}
	b, err := json.Marshal(env)
	if err != nil {
		return "", env, err
	}
	var back kernel.MessageEnvelope
	if err := json.Unmarshal(b, &back); err != nil {
		return "", env, fmt.Errorf("it would not read back: %w", err)
	}
	b, err = json.Marshal(back)
	return string(b), back, err
}

// DeliverMessage stores env for its receiver in one durable transaction (see
// store.Mailbox).
func (s *Store) DeliverMessage(ctx context.Context, world string, env kernel.MessageEnvelope, acceptedAt string, maxInFlight int) (store.MessageRecord, bool, error) {
	return s.DeliverMessageRecorded(ctx, world, env, acceptedAt, maxInFlight, nil, nil)
}

var _ store.RecordedMailbox = (*Store)(nil)

// inMessageTx runs fn in use's transaction (a reservation of this store, its connection
// still in the transaction that reserved the use), committing it when fn succeeds and
// rolling it back (the use released) otherwise — once: a reserved use cannot be retried
// — or, without use, in a durable transaction of its own (retried on a serialization
// failure, as every write). Either way it returns once the commit is durable: the
// reservation's transaction commits with synchronous_commit off (it takes the audit lock
// when fn appends records) and waits for a flush outside the lock, as Commit does
// (flush.go). A foreign use is released.
//
// When the connection is lost after its COMMIT was sent, the outcome is looked up by the
// records fn appended (ambiguous.go): committed ⇒ success; not committed ⇒ run again
// without a use, a failure that spent nothing with one. A transaction that appended no
// record keeps the lost connection's error.
func (s *Store) inMessageTx(ctx context.Context, use kernel.UsageReservation, fn func(tx txQuerier) error) error {
	rt := &recordingTx{}
	if use == nil {
		return s.inTxClassChecked(ctx, false, func(tx pgx.Tx) error {
			rt.txQuerier, rt.wrote = tx, rt.wrote[:0]
			return fn(rt)
		}, rt.committed)
	}
	r, ok := use.(*reservation)
	if !ok {
		_ = use.Release()
		return store.ErrForeignReservation
	}
	if r.c == nil {
		return fmt.Errorf("the reservation of grant %s: %w", r.grant, pgx.ErrTxClosed)
	}
	rt.txQuerier = r.c
	if err := fn(rt); err != nil {
		r.abandon(ctx)
		return err
	}
	pid := r.c.Conn().PgConn().PID()
	tag, err := r.c.Exec(ctx, "COMMIT")
	if err == nil && tag.String() != "COMMIT" {
		err = fmt.Errorf("the transaction was rolled back (%s)", tag)
	}
	if err != nil {
		r.abandon(ctx)
		if err := r.s.afterAmbiguousCommit(ctx, pid, err, rt.committed); err != nil {
			return err
		}
	} else {
		r.c.Release()
		r.c = nil
	}
	return r.s.waitDurableChecked(ctx, rt.committed)
}

// recordingTx is a message transaction that keeps the records appendRecords appended in
// it: what an ambiguous commit's lookup reads back.
type recordingTx struct {
	txQuerier
	wrote []kernel.AuditEvent
}

// committed is the lookup of an ambiguous commit: errNoRecord when nothing was appended.
func (rt *recordingTx) committed(ctx context.Context, q querier) (bool, error) {
	if len(rt.wrote) == 0 {
		return false, errNoRecord
	}
	return eventsRecorded(rt.wrote)(ctx, q)
}

// appendRecords appends the events records returns for rec in tx.
func appendRecords(ctx context.Context, tx txQuerier, rec store.MessageRecord, records func(store.MessageRecord) ([]kernel.AuditEvent, error)) error {
	if records == nil {
		return nil
	}
	evs, err := records(rec)
	if err != nil || len(evs) == 0 {
		return err
	}
	if rt, ok := tx.(*recordingTx); ok {
		rt.wrote = append(rt.wrote, evs...)
	}
	return appendEvents(ctx, tx, evs)
}

func releaseUse(use kernel.UsageReservation) {
	if use != nil {
		_ = use.Release()
	}
}

// DeliverMessageRecorded is DeliverMessage with its records, in use's transaction when
// use is set (see store.RecordedMailbox).
func (s *Store) DeliverMessageRecorded(ctx context.Context, world string, env kernel.MessageEnvelope, acceptedAt string, maxInFlight int,
	use kernel.UsageReservation, records func(store.MessageRecord) ([]kernel.AuditEvent, error)) (store.MessageRecord, bool, error) {
	if world == "" {
		releaseUse(use)
		return store.MessageRecord{}, false, errors.New("deliver message: the world is required")
	}
	if env.ReplyTo != "" {
		releaseUse(use)
		return store.MessageRecord{}, false, errors.New("deliver message: a reply is recorded with ReplyMessage")
	}
	text, env, err := encodeEnvelope(env)
	if err != nil {
		releaseUse(use)
		return store.MessageRecord{}, false, fmt.Errorf("deliver message: %w", err)
	}
	if _, err := kernel.ParseTimestamp(acceptedAt); err != nil {
		releaseUse(use)
		return store.MessageRecord{}, false, fmt.Errorf("deliver message: accepted at %q is not a timestamp", acceptedAt)
	}
	var rec store.MessageRecord
	var created bool
	sender := env.Sender.String()
	err = s.inMessageTx(ctx, use, func(tx txQuerier) error {
		created = false
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2 || ' ' || $3))", int32(mailboxLock), world, sender); err != nil {
			return err
		}
		found, err := existingMessage(ctx, tx, world, env.ID, text)
		if err != nil {
			return err
		}
		if found {
			if rec, err = scanMessage(tx.QueryRow(ctx, messageByID, world, env.ID)); err != nil {
				return err
			}
			return appendRecords(ctx, tx, rec, records)
		}
		if maxInFlight > 0 {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM messages WHERE world = $1 AND sender = $2 AND status = 'pending'`,
				world, sender).Scan(&n); err != nil {
				return err
			}
			if n >= maxInFlight {
				return fmt.Errorf("%s has %d pending: %w", env.Sender, n, store.ErrInFlightExceeded)
			}
		}
		tag, err := tx.Exec(ctx, `INSERT INTO messages (world, id, sender, receiver, envelope, accepted_at) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (world, id) DO NOTHING`, world, env.ID, sender, env.Receiver.String(), text, acceptedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			// Another sender's delivery of this id committed meanwhile: compare with it.
			if _, err := existingMessage(ctx, tx, world, env.ID, text); err != nil {
				return err
			}
			if rec, err = scanMessage(tx.QueryRow(ctx, messageByID, world, env.ID)); err != nil {
				return err
			}
			return appendRecords(ctx, tx, rec, records)
		}
		created = true
		rec = store.MessageRecord{World: world, Envelope: env, Status: store.MessagePending, AcceptedAt: acceptedAt}
		return appendRecords(ctx, tx, rec, records)
	})
	if err != nil {
		if errors.Is(err, store.ErrDuplicate) || errors.Is(err, store.ErrInFlightExceeded) || errors.Is(err, store.ErrForeignReservation) {
			return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: %w", env.ID, err)
		}
		return store.MessageRecord{}, false, fail("deliver message "+env.ID, err)
	}
	return rec, created, nil
}

// existingMessage reports whether message id of world is stored; stored with another
// envelope than text, it is an error wrapping store.ErrDuplicate.
func existingMessage(ctx context.Context, q querier, world, id, text string) (bool, error) {
	var stored string
	err := q.QueryRow(ctx, `SELECT envelope FROM messages WHERE world = $1 AND id = $2`, world, id).Scan(&stored)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	case stored != text:
		return true, fmt.Errorf("message %s is %w with other content", id, store.ErrDuplicate)
	}
	return true, nil
}

const messageColumns = `SELECT world, envelope, accepted_at, status, reply, failed_code, resolved_at FROM messages`

const messageByID = messageColumns + ` WHERE world = $1 AND id = $2`

func scanMessage(row pgx.Row) (store.MessageRecord, error) {
	var rec store.MessageRecord
	var env string
	var reply, code, at *string
	if err := row.Scan(&rec.World, &env, &rec.AcceptedAt, &rec.Status, &reply, &code, &at); err != nil {
		return rec, err
	}
	if err := json.Unmarshal([]byte(env), &rec.Envelope); err != nil {
		return rec, fmt.Errorf("decode message: %w", err)
	}
	if reply != nil {
		var r kernel.MessageEnvelope
		if err := json.Unmarshal([]byte(*reply), &r); err != nil {
			return rec, fmt.Errorf("decode the reply to %s: %w", rec.Envelope.ID, err)
		}
		rec.Reply = &r
	}
	if code != nil {
		rec.FailedCode = kernel.ErrorCode(*code)
	}
	if at != nil {
		rec.ResolvedAt = *at
	}
	return rec, nil
}

// GetMessage returns message id of world.
func (s *Store) GetMessage(ctx context.Context, world, id string) (store.MessageRecord, error) {
	rec, err := scanMessage(s.pool.QueryRow(ctx, messageByID, world, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.MessageRecord{}, fmt.Errorf("message %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.MessageRecord{}, fail("read message "+id, err)
	}
	return rec, nil
}

// ListMessages returns the messages f selects, the most recently delivered first.
func (s *Store) ListMessages(ctx context.Context, f store.MessageFilter) ([]store.MessageRecord, error) {
	var w where
	w.eq("world", f.World)
	if !f.Receiver.IsZero() {
		w.add("receiver = ?", f.Receiver.String())
	}
	if !f.Sender.IsZero() {
		w.add("sender = ?", f.Sender.String())
	}
	switch f.Status {
	case "":
	case store.MessagePending, store.MessageAnswered, store.MessageFailed:
		w.add("status = ?", f.Status)
	default:
		return nil, fmt.Errorf("list messages: unknown status %q (want pending, answered or failed)", f.Status)
	}
	q := messageColumns + w.String() + " ORDER BY seq DESC"
	if f.Limit > 0 {
		q += " LIMIT " + w.next(f.Limit)
	}
	rows, err := s.pool.Query(ctx, q, w.args...)
	if err != nil {
		return nil, fail("list messages", err)
	}
	defer rows.Close()
	var out []store.MessageRecord
	for rows.Next() {
		rec, err := scanMessage(rows)
		if err != nil {
			return nil, fail("list messages", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list messages", err)
	}
	return out, nil
}

// resolveSQL sets the outcome of a pending message with one conditional update
// (status = 'pending') and notifies the mailbox channel (world, id) in its transaction
// (sent when, and only if, it commits: see MessageHints).
const resolveSQL = `WITH r AS (UPDATE messages SET status = $3, reply = $4, failed_code = $5, resolved_at = $6
			WHERE world = $1 AND id = $2 AND status = 'pending'
			RETURNING world, id, envelope, accepted_at, status, reply, failed_code, resolved_at)
		SELECT r.world, r.envelope, r.accepted_at, r.status, r.reply, r.failed_code, r.resolved_at
		FROM r, pg_notify('` + messageChannel + `', json_build_array(r.world, r.id)::text)`

// errNotPending ends a resolution's transaction when its message was not pending.
var errNotPending = errors.New("not pending")

// resolveMessage sets the outcome of pending message id, durable: of concurrent
// resolutions in any processes one wins. Without records and use it is one statement;
// with them, that statement and the records in one transaction (use's, when set).
func (s *Store) resolveMessage(ctx context.Context, world, id, status string, reply *string, code *string, at string,
	use kernel.UsageReservation, records func(store.MessageRecord) ([]kernel.AuditEvent, error)) (store.MessageRecord, error) {
	var rec store.MessageRecord
	var err error
	if use == nil && records == nil {
		rec, err = scanMessage(s.pool.QueryRow(ctx, resolveSQL, world, id, status, reply, code, at))
		if errors.Is(err, pgx.ErrNoRows) {
			err = errNotPending
		}
	} else {
		err = s.inMessageTx(ctx, use, func(tx txQuerier) error {
			var err error
			rec, err = scanMessage(tx.QueryRow(ctx, resolveSQL, world, id, status, reply, code, at))
			if errors.Is(err, pgx.ErrNoRows) {
				return errNotPending
			}
			if err != nil {
				return err
			}
			return appendRecords(ctx, tx, rec, records)
		})
	}
	switch {
	case err == nil:
		return rec, nil
	case errors.Is(err, store.ErrForeignReservation):
		return store.MessageRecord{}, fmt.Errorf("resolve message %s: %w", id, err)
	case !errors.Is(err, errNotPending):
		return store.MessageRecord{}, fail("resolve message "+id, err)
	}
	rec, err = s.GetMessage(ctx, world, id)
	if err != nil {
		return store.MessageRecord{}, err
	}
	return rec, fmt.Errorf("message %s was %w (%s at %s)", id, store.ErrAlreadyResolved, rec.Status, rec.ResolvedAt)
}

// ReplyMessage records reply as the answer to its request (see store.Mailbox).
func (s *Store) ReplyMessage(ctx context.Context, world string, reply kernel.MessageEnvelope, at string) (store.MessageRecord, error) {
	return s.ReplyMessageRecorded(ctx, world, reply, at, nil, nil)
}

// ReplyMessageRecorded is ReplyMessage with its records, in use's transaction when use is
// set (see store.RecordedMailbox).
func (s *Store) ReplyMessageRecorded(ctx context.Context, world string, reply kernel.MessageEnvelope, at string,
	use kernel.UsageReservation, records func(store.MessageRecord) ([]kernel.AuditEvent, error)) (store.MessageRecord, error) {
	if reply.ReplyTo == "" {
		releaseUse(use)
		return store.MessageRecord{}, errors.New("reply message: the reply names no request (replyTo)")
	}
	text, _, err := encodeEnvelope(reply)
	if err != nil {
		releaseUse(use)
		return store.MessageRecord{}, fmt.Errorf("reply message: %w", err)
	}
	return s.resolveMessage(ctx, world, reply.ReplyTo, store.MessageAnswered, &text, nil, at, use, records)
}

// FailMessage resolves pending message id failed with code.
func (s *Store) FailMessage(ctx context.Context, world, id string, code kernel.ErrorCode, at string) (store.MessageRecord, error) {
	if code == "" {
		return store.MessageRecord{}, fmt.Errorf("fail message %s: a code is required", id)
	}
	c := string(code)
	return s.resolveMessage(ctx, world, id, store.MessageFailed, nil, &c, at, nil, nil)
}
