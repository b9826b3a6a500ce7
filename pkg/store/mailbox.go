package store

import (
	"context"
	"errors"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// ErrInFlightExceeded is wrapped by DeliverMessage when the sender already has the
// maximum number of messages in flight (pending) in the world; nothing was written.
var ErrInFlightExceeded = errors.New("too many messages in flight")

// Mailbox is the durable transport of messages between principals (spec 80 §4): each
// message is one row, pending until its recipient answers it (ReplyMessage) or it is
// resolved failed (FailMessage); an answer or a failure is never changed. It is not part
// of State (a store adds it beside State; a host type-asserts it), so that a store
// without a mailbox still opens; storetest checks it on every store that has one.
//
// Every write is durable before its method returns (a delivered message is an effect
// the sender is told about; so is its answer).
type Mailbox interface {
	// DeliverMessage stores env (valid; env.ReplyTo empty) for its receiver in world, in
	// one transaction, and returns the stored record with created=true. A message of the
	// same (world, id) already stored with the same envelope is idempotent: the stored
	// record, created=false, nothing written. With another envelope the error wraps
	// ErrDuplicate and nothing is written. When maxInFlight > 0 and the sender already
	// has maxInFlight pending messages in world, the error wraps ErrInFlightExceeded and
	// nothing is written. acceptedAt is the record's AcceptedAt (the receipt's time).
	DeliverMessage(ctx context.Context, world string, env kernel.MessageEnvelope, acceptedAt string, maxInFlight int) (rec MessageRecord, created bool, err error)
	// GetMessage returns message id of world. An unknown id wraps ErrNotFound.
	GetMessage(ctx context.Context, world, id string) (MessageRecord, error)
	// ListMessages returns the messages f selects, the most recently delivered first.
	// An unknown status is an error.
	ListMessages(ctx context.Context, f MessageFilter) ([]MessageRecord, error)
	// ReplyMessage records reply (valid; reply.ReplyTo the request's id) as the answer to
	// its request in world, in one transaction, and returns the answered record. An
	// unknown request wraps ErrNotFound; a request already answered or failed wraps
	// ErrAlreadyResolved and returns the record as it is (an answer is never changed).
	// The caller has checked that the reply answers the request
	// (kernel.ReplyMatchesRequest).
	ReplyMessage(ctx context.Context, world string, reply kernel.MessageEnvelope, at string) (MessageRecord, error)
	// FailMessage resolves pending message id of world failed with code at the instant
	// at (a waiter that gave up, or that restarted and could not re-attach). Unknown:
	// ErrNotFound; already answered or failed: ErrAlreadyResolved with the record as it is.
	FailMessage(ctx context.Context, world, id string, code kernel.ErrorCode, at string) (MessageRecord, error)
}

// MessageRecord is one stored message and what became of it.
type MessageRecord struct {
	World    string                 `json:"world"`
	Envelope kernel.MessageEnvelope `json:"envelope"`
	// Status is MessagePending, MessageAnswered or MessageFailed.
	Status     string `json:"status"`
	AcceptedAt string `json:"acceptedAt"`
	// Reply is the answer (status answered); FailedCode the code (status failed).
	Reply      *kernel.MessageEnvelope `json:"reply,omitempty"`
	FailedCode kernel.ErrorCode        `json:"failedCode,omitempty"`
	ResolvedAt string                  `json:"resolvedAt,omitempty"`
}

// Message statuses.
const (
	MessagePending  = "pending"
	MessageAnswered = "answered"
	MessageFailed   = "failed"
)

// MessageFilter selects messages for ListMessages. Zero fields select everything.
type MessageFilter struct {
	// World keeps messages of this world ("": any).
	World string
	// Receiver keeps messages to this address (zero: any).
	Receiver kernel.Address
	// Sender keeps messages from this address (zero: any).
	Sender kernel.Address
	// Status keeps messages of this status: pending, answered or failed ("": any).
	Status string
	// Limit caps the number of records returned (0: no limit).
	Limit int
}

// RecordedMailbox is what a mailbox whose store also keeps the audit trail adds so that
// a delivery and its records are one write (issue 24): a process killed at any point
// leaves the message (or its answer) with its message.sent record — and, with a reserved
// use, the spent use with its decision record — or none of them.
//
// Each method is its Mailbox counterpart that also, in the same transaction and only when
// the write succeeds (a message stored, or the same message already stored; a reply
// recorded), appends the events records returns for the resulting record (an error from
// records writes nothing). With use non-nil (a use reserved on this store,
// kernel.ReservingUsageStore), the work runs in the reservation's transaction and
// commits it, spending the use, on success; on any refusal or error the reservation is
// released: nothing is spent, nothing written. A use reserved by another store is an
// error (released, nothing written).
type RecordedMailbox interface {
	Mailbox
	DeliverMessageRecorded(ctx context.Context, world string, env kernel.MessageEnvelope, acceptedAt string, maxInFlight int,
		use kernel.UsageReservation, records func(MessageRecord) ([]kernel.AuditEvent, error)) (rec MessageRecord, created bool, err error)
	ReplyMessageRecorded(ctx context.Context, world string, reply kernel.MessageEnvelope, at string,
		use kernel.UsageReservation, records func(MessageRecord) ([]kernel.AuditEvent, error)) (MessageRecord, error)
}

// ErrForeignReservation is wrapped by RecordedMailbox's methods given a use reserved by
// another store: nothing was written and the use was released.
var ErrForeignReservation = errors.New("the use was reserved on another store")
