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

var _ store.Mailbox = (*Store)(nil)

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

// DeliverMessage stores env for its receiver in one immediate transaction (see
// store.Mailbox).
func (s *Store) DeliverMessage(ctx context.Context, world string, env kernel.MessageEnvelope, acceptedAt string, maxInFlight int) (store.MessageRecord, bool, error) {
	return s.DeliverMessageRecorded(ctx, world, env, acceptedAt, maxInFlight, nil, nil)
}

var _ store.RecordedMailbox = (*Store)(nil)

// messageTx is the transaction of a message's write: use's (a reservation of this
// store: its immediate transaction) or a new immediate one. A foreign use is released.
func (s *Store) messageTx(ctx context.Context, use kernel.UsageReservation) (*sql.Tx, error) {
	if use == nil {
		return s.beginDurable(ctx)
	}
	r, ok := use.(*reservation)
	if !ok {
		_ = use.Release()
		return nil, store.ErrForeignReservation
	}
	return r.tx, nil
}

// finishMessageTx appends the events records returns for rec and commits tx when there
// is something to keep (events, or a reserved use to spend); otherwise it leaves tx to
// its deferred rollback (nothing was written).
func finishMessageTx(ctx context.Context, tx *sql.Tx, use kernel.UsageReservation, rec store.MessageRecord,
	records func(store.MessageRecord) ([]kernel.AuditEvent, error), wrote bool) error {
	var evs []kernel.AuditEvent
	if records != nil {
		var err error
		if evs, err = records(rec); err != nil {
			return err
		}
	}
	for _, ev := range evs {
		if err := appendEvent(ctx, tx, nil, ev); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	if !wrote && use == nil && len(evs) == 0 {
		return nil
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// DeliverMessageRecorded is DeliverMessage with its records, in use's transaction when
// use is set (see store.RecordedMailbox).
func (s *Store) DeliverMessageRecorded(ctx context.Context, world string, env kernel.MessageEnvelope, acceptedAt string, maxInFlight int,
	use kernel.UsageReservation, records func(store.MessageRecord) ([]kernel.AuditEvent, error)) (store.MessageRecord, bool, error) {
	release := func() {
		if use != nil {
			_ = use.Release()
		}
	}
	if world == "" {
		release()
		return store.MessageRecord{}, false, errors.New("deliver message: the world is required")
	}
	if env.ReplyTo != "" {
		release()
		return store.MessageRecord{}, false, errors.New("deliver message: a reply is recorded with ReplyMessage")
	}
	text, env, err := encodeEnvelope(env)
	if err != nil {
		release()
		return store.MessageRecord{}, false, fmt.Errorf("deliver message: %w", err)
	}
	if _, err := kernel.ParseTimestamp(acceptedAt); err != nil {
		release()
		return store.MessageRecord{}, false, fmt.Errorf("deliver message: accepted at %q is not a timestamp", acceptedAt)
	}
	tx, err := s.messageTx(ctx, use)
	if err != nil {
		return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: begin: %w", env.ID, err)
	}
	defer tx.Rollback()
	rec, err := scanMessage(tx.QueryRowContext(ctx, messageByID, world, env.ID))
	switch {
	case err == nil:
		var stored string
		if err := tx.QueryRowContext(ctx, `SELECT envelope FROM messages WHERE world = ? AND id = ?`, world, env.ID).Scan(&stored); err != nil {
			return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: %w", env.ID, err)
		}
		if stored != text {
			return store.MessageRecord{}, false, fmt.Errorf("message %s is %w with other content", env.ID, store.ErrDuplicate)
		}
		if err := finishMessageTx(ctx, tx, use, rec, records, false); err != nil {
			return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: %w", env.ID, err)
		}
		return rec, false, nil
	case !errors.Is(err, sql.ErrNoRows):
		return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: %w", env.ID, err)
	}
	if maxInFlight > 0 {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM messages WHERE world = ? AND sender = ? AND status = 'pending'`,
			world, env.Sender.String()).Scan(&n); err != nil {
			return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: %w", env.ID, err)
		}
		if n >= maxInFlight {
			return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: %s has %d pending: %w", env.ID, env.Sender, n, store.ErrInFlightExceeded)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO messages (world, id, sender, receiver, envelope, accepted_at) VALUES (?, ?, ?, ?, ?, ?)`,
		world, env.ID, env.Sender.String(), env.Receiver.String(), text, acceptedAt); err != nil {
		return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: write: %w", env.ID, err)
	}
	rec = store.MessageRecord{World: world, Envelope: env, Status: store.MessagePending, AcceptedAt: acceptedAt}
	if err := finishMessageTx(ctx, tx, use, rec, records, true); err != nil {
		return store.MessageRecord{}, false, fmt.Errorf("deliver message %s: %w", env.ID, err)
	}
	return rec, true, nil
}

const messageColumns = `SELECT world, envelope, accepted_at, status, reply, failed_code, resolved_at FROM messages`

const messageByID = messageColumns + ` WHERE world = ? AND id = ?`

func scanMessage(row interface{ Scan(...any) error }) (store.MessageRecord, error) {
	var rec store.MessageRecord
	var env string
	var reply, code, at sql.NullString
	if err := row.Scan(&rec.World, &env, &rec.AcceptedAt, &rec.Status, &reply, &code, &at); err != nil {
		return rec, err
	}
	if err := json.Unmarshal([]byte(env), &rec.Envelope); err != nil {
		return rec, fmt.Errorf("decode message: %w", err)
	}
	if reply.Valid {
		var r kernel.MessageEnvelope
		if err := json.Unmarshal([]byte(reply.String), &r); err != nil {
			return rec, fmt.Errorf("decode the reply to %s: %w", rec.Envelope.ID, err)
		}
		rec.Reply = &r
	}
	rec.FailedCode = kernel.ErrorCode(code.String)
	rec.ResolvedAt = at.String
	return rec, nil
}

// GetMessage returns message id of world.
func (s *Store) GetMessage(ctx context.Context, world, id string) (store.MessageRecord, error) {
	rec, err := scanMessage(s.db.QueryRowContext(ctx, messageByID, world, id))
	if errors.Is(err, sql.ErrNoRows) {
		return store.MessageRecord{}, fmt.Errorf("message %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return store.MessageRecord{}, fmt.Errorf("read message %s: %w", id, err)
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
	args := w.args
	if f.Limit > 0 {
		q += " LIMIT ?"
		args = append(args, f.Limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	defer rows.Close()
	var out []store.MessageRecord
	for rows.Next() {
		rec, err := scanMessage(rows)
		if err != nil {
			return nil, fmt.Errorf("list messages: %w", err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list messages: %w", err)
	}
	return out, nil
}

// resolveMessage sets the outcome of pending message id in one immediate transaction
// (use's, when set), with the events records returns.
func (s *Store) resolveMessage(ctx context.Context, world, id, status, reply string, code kernel.ErrorCode, at string,
	use kernel.UsageReservation, records func(store.MessageRecord) ([]kernel.AuditEvent, error)) (store.MessageRecord, error) {
	tx, err := s.messageTx(ctx, use)
	if err != nil {
		return store.MessageRecord{}, fmt.Errorf("resolve message %s: begin: %w", id, err)
	}
	defer tx.Rollback()
	rec, err := scanMessage(tx.QueryRowContext(ctx, messageByID, world, id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return store.MessageRecord{}, fmt.Errorf("message %s: %w", id, store.ErrNotFound)
	case err != nil:
		return store.MessageRecord{}, fmt.Errorf("resolve message %s: %w", id, err)
	case rec.Status != store.MessagePending:
		return rec, fmt.Errorf("message %s was %w (%s at %s)", id, store.ErrAlreadyResolved, rec.Status, rec.ResolvedAt)
	}
	var replyArg, codeArg any
	if reply != "" {
		replyArg = reply
	}
	if code != "" {
		codeArg = string(code)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE messages SET status = ?, reply = ?, failed_code = ?, resolved_at = ? WHERE world = ? AND id = ?`,
		status, replyArg, codeArg, at, world, id); err != nil {
		return store.MessageRecord{}, fmt.Errorf("resolve message %s: write: %w", id, err)
	}
	rec.Status, rec.FailedCode, rec.ResolvedAt = status, code, at
	if reply != "" {
		var r kernel.MessageEnvelope
		_ = json.Unmarshal([]byte(reply), &r)
		rec.Reply = &r
	}
	if err := finishMessageTx(ctx, tx, use, rec, records, true); err != nil {
		return store.MessageRecord{}, fmt.Errorf("resolve message %s: %w", id, err)
	}
	return rec, nil
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
		if use != nil {
			_ = use.Release()
		}
		return store.MessageRecord{}, errors.New("reply message: the reply names no request (replyTo)")
	}
	text, _, err := encodeEnvelope(reply)
	if err != nil {
		if use != nil {
			_ = use.Release()
		}
		return store.MessageRecord{}, fmt.Errorf("reply message: %w", err)
	}
	return s.resolveMessage(ctx, world, reply.ReplyTo, store.MessageAnswered, text, "", at, use, records)
}

// FailMessage resolves pending message id failed with code.
func (s *Store) FailMessage(ctx context.Context, world, id string, code kernel.ErrorCode, at string) (store.MessageRecord, error) {
	if code == "" {
		return store.MessageRecord{}, fmt.Errorf("fail message %s: a code is required", id)
	}
	return s.resolveMessage(ctx, world, id, store.MessageFailed, "", code, at, nil, nil)
}
