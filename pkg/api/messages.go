package api

import (
	"context"
	"encoding/json"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Messaging is the mailbox of the context's actor (spec 80 §4): send a message, list
// the inbox, show one message, answer one, re-attach to a request. Both backends
// implement it — the embedded host (host.Service) and the remote client (client.Client,
// over POST /v1/messages, /v1/messages/{id}/wait and the operator's /v1/admin/messages
// routes) — and serve's request backend includes it (httpapi.Backend).
//
// It stays an interface of its own beside Service, by decision: a surface that needs it
// asks for it (cmd's messaging type-asserts it, and every backend passes), while a
// program that implements Service — a test double, a driver of its own turns — is not
// made to grow five mailbox operations it has no store for.
//
// A refusal (no grant to send, an unreachable recipient, an answer by someone who is not
// the receiver) is a receipt that is not accepted, never an error; an unknown message id
// is an *Error with CodeNotFound, an invalid payload one with CodeInvalidRequest.
type Messaging interface {
	// SendMessage sends one message from the context's actor to req.To (the direct send,
	// kernel.Turn.SendMessage): the envelope is minted from the context, authorized,
	// delivered to the mailbox and audited. It does not wait for a reply.
	SendMessage(ctx context.Context, req SendMessageRequest) (MessageSent, error)
	// Inbox lists the messages to the context's actor, the most recently delivered first.
	Inbox(ctx context.Context, q InboxQuery) ([]Message, error)
	// ShowMessage returns one message of the context's world by id.
	ShowMessage(ctx context.Context, id string) (Message, error)
	// ReplyMessage answers message req.ID as the context's actor: the inbound checks
	// (kernel.Turn.SendReply), then the reply is sent back under the actor's own grants.
	ReplyMessage(ctx context.Context, req ReplyMessageRequest) (MessageSent, error)
	// WaitReply re-attaches to the context actor's request id (after the process that
	// waited for it was restarted, say): it returns the message once it is answered, or
	// once it is resolved failed — when its reply timeout, counted from its acceptance,
	// passes first, it is resolved failed message_reply_resolution_failed then. It never
	// answers a message.
	WaitReply(ctx context.Context, id string) (Message, error)
}

// SendMessageRequest is a message to send: its recipient and payload (any JSON value).
type SendMessageRequest struct {
	To      kernel.Address  `json:"to"`
	Payload json.RawMessage `json:"payload"`
}

// ReplyMessageRequest is an answer to message ID.
type ReplyMessageRequest struct {
	ID      string          `json:"id"`
	Payload json.RawMessage `json:"payload"`
}

// MessageSent is the envelope that was sent and its receipt.
type MessageSent struct {
	Envelope kernel.MessageEnvelope       `json:"envelope"`
	Receipt  kernel.MessageDeliveryResult `json:"receipt"`
}

// InboxQuery selects the actor's messages: pending, answered, failed or all ("").
type InboxQuery struct {
	Status string `json:"status,omitempty"`
	Limit  int    `json:"limit,omitempty"`
}

// Message is one message of a mailbox and what became of it.
type Message struct {
	World      string                  `json:"world"`
	Envelope   kernel.MessageEnvelope  `json:"envelope"`
	Status     string                  `json:"status"`
	AcceptedAt string                  `json:"acceptedAt"`
	Reply      *kernel.MessageEnvelope `json:"reply,omitempty"`
	FailedCode kernel.ErrorCode        `json:"failedCode,omitempty"`
	ResolvedAt string                  `json:"resolvedAt,omitempty"`
}
