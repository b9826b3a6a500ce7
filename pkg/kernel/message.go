package kernel

// This file holds messaging (spec 80, spec 10 §6.1): the message contracts, the send
// capability, the direct send (Turn.SendMessage) and the messages.request tool the kernel
// registers when a host configures a transport and a router. A message carries data and
// one purpose, never authority: the recipient acts under its own grants.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// Messaging constants (spec 10 §6.1, spec 80 §1).
const (
	MessagingNamespace     = "sharedos.messaging"
	MessageSendAction      = "send"
	MessageToolName        = "messages.request"
	MessageToolNamespace   = "messages"
	MessageProtocolVersion = "1"
	// DefaultMaxMessagePayload bounds a message's payload, its JSON encoding in bytes
	// (256 KiB, issue 24).
	DefaultMaxMessagePayload = 256 << 10
	messagePurposeMax        = 512
	messageParentIDsMax      = 64
)

// MessageProvenance is hop provenance a host may attach to an envelope; the kernel
// neither sets nor reads it.
type MessageProvenance struct {
	Source    string         `json:"source"`
	ParentIDs []string       `json:"parentIds"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// MessageEnvelope is one message (spec 80 §1). Payload is any JSON value, kept in its
// canonical encoding (object keys sorted, no insignificant space) once decoded, so two
// envelopes of the same content encode to the same bytes.
type MessageEnvelope struct {
	Version    string             `json:"version"`
	ID         string             `json:"id"`
	Sender     Address            `json:"sender"`
	Receiver   Address            `json:"receiver"`
	Purpose    string             `json:"purpose"`
	Payload    json.RawMessage    `json:"payload"`
	TraceID    string             `json:"traceId"`
	CreatedAt  string             `json:"createdAt"`
	ReplyTo    string             `json:"replyTo,omitempty"`
	Provenance *MessageProvenance `json:"provenance,omitempty"`
}

// Validate checks an envelope built in Go against the contract.
func (e *MessageEnvelope) Validate() error {
	if e.Version != MessageProtocolVersion {
		return contractErr("version", "must be %q", MessageProtocolVersion)
	}
	if err := validIdent("id", e.ID); err != nil {
		return err
	}
	if err := e.Sender.Validate(); err != nil {
		return prefixErr("sender", err)
	}
	if err := e.Receiver.Validate(); err != nil {
		return prefixErr("receiver", err)
	}
	if err := validTrimmed("purpose", e.Purpose, messagePurposeMax); err != nil {
		return err
	}
	if len(e.Payload) == 0 || !json.Valid(e.Payload) {
		return contractErr("payload", "must be a JSON value")
	}
	if err := validIdent("traceId", e.TraceID); err != nil {
		return err
	}
	if _, err := ParseTimestamp(e.CreatedAt); err != nil {
		return contractErr("createdAt", "must be an RFC 3339 date-time with an offset")
	}
	if e.ReplyTo != "" {
		if err := validIdent("replyTo", e.ReplyTo); err != nil {
			return err
		}
	}
	if p := e.Provenance; p != nil {
		if err := validIdent("provenance.source", p.Source); err != nil {
			return err
		}
		if len(p.ParentIDs) > messageParentIDsMax {
			return contractErr("provenance.parentIds", "must hold at most %d ids", messageParentIDsMax)
		}
		for i, id := range p.ParentIDs {
			if err := validIdent(fmt.Sprintf("provenance.parentIds.%d", i), id); err != nil {
				return err
			}
		}
	}
	return nil
}

// UnmarshalJSON decodes a strict envelope: unknown keys, nulls and missing fields are
// refused; the payload is canonicalised.
func (e *MessageEnvelope) UnmarshalJSON(data []byte) error {
	keys := []string{"version", "id", "sender", "receiver", "purpose", "payload", "traceId", "createdAt", "replyTo", "provenance"}
	o, err := parseObject(data, keys...)
	if err != nil {
		return err
	}
	for _, r := range keys[:8] {
		if !o.has(r) {
			return contractErr(r, "is required")
		}
	}
	var out MessageEnvelope
	for k, raw := range o.fields {
		if isNull(raw) && k != "payload" {
			return contractErr(k, "must not be null")
		}
	}
	str := func(key string, dst *string) error {
		s, _, err := o.str(key, false)
		*dst = s
		return err
	}
	for key, dst := range map[string]*string{"version": &out.Version, "id": &out.ID, "purpose": &out.Purpose,
		"traceId": &out.TraceID, "createdAt": &out.CreatedAt, "replyTo": &out.ReplyTo} {
		if err := str(key, dst); err != nil {
			return err
		}
	}
	if o.has("replyTo") && out.ReplyTo == "" {
		return contractErr("replyTo", "must be 1 to 256 characters without surrounding white space")
	}
	if err := json.Unmarshal(o.raw("sender"), &out.Sender); err != nil {
		return prefixErr("sender", err)
	}
	if err := json.Unmarshal(o.raw("receiver"), &out.Receiver); err != nil {
		return prefixErr("receiver", err)
	}
	if out.Payload, err = CanonicalPayload(o.raw("payload")); err != nil {
		return prefixErr("payload", err)
	}
	if o.has("provenance") {
		po, err := parseObject(o.raw("provenance"), "source", "parentIds", "metadata")
		if err != nil {
			return prefixErr("provenance", err)
		}
		var p MessageProvenance
		if p.Source, _, err = po.str("source", true); err != nil {
			return prefixErr("provenance", err)
		}
		ids, ok, err := po.strs("parentIds")
		if err != nil || !ok {
			return contractErr("provenance.parentIds", "must be an array of ids")
		}
		p.ParentIDs = ids
		if po.has("metadata") {
			if p.Metadata, err = decodeJSONObject(po.raw("metadata")); err != nil {
				return contractErr("provenance.metadata", "must be a JSON object")
			}
		}
		out.Provenance = &p
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*e = out
	return nil
}

// CanonicalPayload is a message payload's canonical encoding (CanonicalJSON), as an
// envelope keeps it; it refuses anything that is not exactly one JSON value, and an
// object that names a key twice.
func CanonicalPayload(raw []byte) (json.RawMessage, error) {
	if err := checkDuplicateKeys(raw, true); err != nil {
		return nil, err
	}
	b, err := CanonicalJSON(raw)
	if err != nil {
		return nil, contractErr("", "must be one JSON value")
	}
	return b, nil
}

// MessageRequestArguments are the arguments of messages.request (strict: only these two).
type MessageRequestArguments struct {
	Recipient Address         `json:"recipient"`
	Payload   json.RawMessage `json:"payload"`
}

// ParseMessageRequestArguments decodes messages.request's arguments strictly: recipient
// (one of the four address shapes, its id 1..256 code points without surrounding white
// space, never trimmed) and payload (any JSON value), both required; any other key —
// sender, purpose, traceId, messageId, intent, replyTo — is refused.
func ParseMessageRequestArguments(raw json.RawMessage) (MessageRequestArguments, error) {
	o, err := parseObject(raw, "recipient", "payload")
	if err != nil {
		return MessageRequestArguments{}, err
	}
	if !o.has("recipient") {
		return MessageRequestArguments{}, contractErr("recipient", "is required")
	}
	if !o.has("payload") {
		return MessageRequestArguments{}, contractErr("payload", "is required")
	}
	v, err := decodeValue(o.raw("recipient"))
	if err != nil {
		return MessageRequestArguments{}, prefixErr("recipient", err)
	}
	m, err := valueObject(v, "kind", "userId", "agentId", "conversationId", "serviceId")
	if err != nil {
		return MessageRequestArguments{}, prefixErr("recipient", err)
	}
	kind, _, err := valueStr(m, "kind", true)
	if err != nil {
		return MessageRequestArguments{}, prefixErr("recipient", err)
	}
	a := Address{Kind: AddressKind(kind)}
	key := a.Kind.idKey()
	if key == "" {
		return MessageRequestArguments{}, contractErr("recipient.kind", "must be one of human, agent, group, service")
	}
	if len(m) != 2 {
		return MessageRequestArguments{}, contractErr("recipient", "must name kind and %s only", key)
	}
	id, _, err := valueStr(m, key, true)
	if err != nil {
		return MessageRequestArguments{}, prefixErr("recipient", err)
	}
	if !utf8.ValidString(id) || id == "" || jscompat.JSTrim(id) != id || utf8.RuneCountInString(id) > 256 {
		return MessageRequestArguments{}, contractErr("recipient."+key, "must be 1 to 256 characters without surrounding white space")
	}
	a.ID = id
	payload, err := CanonicalPayload(o.raw("payload"))
	if err != nil {
		return MessageRequestArguments{}, prefixErr("payload", err)
	}
	return MessageRequestArguments{Recipient: a, Payload: payload}, nil
}

// MessageDeliveryStatus is the status of a MessageDeliveryResult.
type MessageDeliveryStatus string

// The four delivery statuses.
const (
	DeliveryAccepted  MessageDeliveryStatus = "accepted"
	DeliveryDelivered MessageDeliveryStatus = "delivered"
	DeliveryDenied    MessageDeliveryStatus = "denied"
	DeliveryFailed    MessageDeliveryStatus = "failed"
)

// MessageDeliveryResult is the transport-neutral outcome of submitting a message: a
// receipt. Error is set exactly when the status is denied or failed.
type MessageDeliveryResult struct {
	Status    MessageDeliveryStatus `json:"status"`
	MessageID string                `json:"messageId"`
	Timestamp string                `json:"timestamp"`
	Metadata  map[string]any        `json:"metadata,omitempty"`
	Error     *ProtocolError        `json:"error,omitempty"`
}

// Ok reports whether the message was accepted or delivered.
func (r *MessageDeliveryResult) Ok() bool {
	return r.Status == DeliveryAccepted || r.Status == DeliveryDelivered
}

// Validate checks a receipt against the contract.
func (r *MessageDeliveryResult) Validate() error {
	if err := validIdent("messageId", r.MessageID); err != nil {
		return err
	}
	if _, err := ParseTimestamp(r.Timestamp); err != nil {
		return contractErr("timestamp", "must be an RFC 3339 date-time with an offset")
	}
	switch r.Status {
	case DeliveryAccepted, DeliveryDelivered:
		if r.Error != nil {
			return contractErr("error", "is not allowed on an %s receipt", r.Status)
		}
	case DeliveryDenied, DeliveryFailed:
		if r.Error == nil {
			return contractErr("error", "is required on a %s receipt", r.Status)
		}
		if err := validIdent("error.code", string(r.Error.Code)); err != nil {
			return err
		}
		if n := jscompat.UTF16Len(r.Error.Message); n < 1 || n > 4096 {
			return contractErr("error.message", "must be 1 to 4096 characters")
		}
	default:
		return contractErr("status", "must be accepted, delivered, denied or failed")
	}
	return nil
}

// UnmarshalJSON decodes a strict receipt.
func (r *MessageDeliveryResult) UnmarshalJSON(data []byte) error {
	type plain MessageDeliveryResult
	var p plain
	if err := decodeStrict(data, &p, []string{"status", "messageId", "timestamp", "metadata", "error"}, "status", "messageId", "timestamp"); err != nil {
		return err
	}
	out := MessageDeliveryResult(p)
	if err := out.Validate(); err != nil {
		return err
	}
	*r = out
	return nil
}

func deliveryResult(env *MessageEnvelope, now string, status MessageDeliveryStatus, code ErrorCode, msg string) MessageDeliveryResult {
	return MessageDeliveryResult{Status: status, MessageID: env.ID, Timestamp: now,
		Error: &ProtocolError{Code: code, Message: msg, Retryable: BoolPtr(false)}}
}

// MessageRequirement is the send capability of spec 80 §1: sharedos.messaging /
// [<kind>, <id>] of the receiver / send, owned by the context's owner. It fails when the
// receiver's id is not a path segment (it has a "/", say).
func MessageRequirement(actx AccessContext, receiver Address) (CapabilityRequirement, error) {
	owner := actx.Owner
	req := CapabilityRequirement{Resource: ResourceRef{Namespace: MessagingNamespace,
		Path: []string{string(receiver.Kind), receiver.ID}, Owner: &owner}, Action: MessageSendAction}
	if err := req.Validate(); err != nil {
		return CapabilityRequirement{}, err
	}
	return req, nil
}

// MessageCapabilityResolver derives the send requirement of an envelope. An error fails
// the send message_requirement_resolution_failed.
type MessageCapabilityResolver func(actx AccessContext, env MessageEnvelope) (CapabilityRequirement, error)

// RecipientScopedMessageCapability is the default resolver: MessageRequirement of the
// envelope's receiver.
func RecipientScopedMessageCapability(actx AccessContext, env MessageEnvelope) (CapabilityRequirement, error) {
	return MessageRequirement(actx, env.Receiver)
}

// MessageTransport delivers an authorized envelope (a durable mailbox, say). A returned
// error is a transport fault (message_delivery_failed); an expected refusal (an
// unreachable recipient) is a denied or failed receipt. It never authorizes: the kernel
// has.
type MessageTransport interface {
	Deliver(ctx context.Context, actx AccessContext, env MessageEnvelope) (MessageDeliveryResult, error)
}

// RecordingMessageTransport is what a transport whose store also keeps the kernel's
// audit trail and counts its uses may add, so that a delivery and its records are one
// write (issue 24): a process killed at any point leaves the message (or the answer)
// with its message.sent record — and the spent use with its decision record, when the
// kernel hands the transport its reserved use — or none of them.
type RecordingMessageTransport interface {
	MessageTransport
	// RecordsDeliveries reports whether DeliverRecorded may be used: the transport's
	// store is the kernel's audit sink and its usage store.
	RecordsDeliveries() bool
	// DeliverRecorded delivers env as Deliver does and, only when the receipt is accepted
	// or delivered, in the delivery's transaction: spends use (when not nil, a use the
	// kernel's usage store reserved; ReservingUsageStore), appends decision (when not
	// nil: the use's authorization.checked record) and record(receipt) (message.sent).
	// Otherwise — a refusal receipt, an error, an error from record — it writes nothing
	// and releases use; the kernel then records the outcome itself.
	DeliverRecorded(ctx context.Context, actx AccessContext, env MessageEnvelope, use UsageReservation, decision *AuditEvent,
		record func(MessageDeliveryResult) (AuditEvent, error)) (MessageDeliveryResult, error)
}

// MessageReceiptLookup is what a transport may add so that a message sent again under
// the same id (a retried direct send) is answered with its first receipt instead of being
// authorized, spent and delivered again: found reports a stored message of the context's
// world with env's id, same whether its content is env's. SendMessage asks it before
// authorizing; messages.request mints a fresh id and never needs it.
type MessageReceiptLookup interface {
	LookupReceipt(ctx context.Context, actx AccessContext, env MessageEnvelope) (receipt MessageDeliveryResult, same, found bool, err error)
}

// MessageAdmission is what a transport may add to refuse a message before its send
// use is spent: AdmitMessage returns the bound env breaks (a requester with too many
// messages in flight: messages_in_flight_exceeded; a reply to a message that does not
// exist or was already resolved) or nil; an error is a transport fault.
// It is a check, not a reservation: two sends admitted at once may both spend, and the
// transport's Deliver enforces the bound again, exactly, where the message is stored.
type MessageAdmission interface {
	AdmitMessage(ctx context.Context, actx AccessContext, env MessageEnvelope) (*MessageBoundError, error)
}

// admitMessage asks the transport's admission, when it has one.
func (k *Kernel) admitMessage(ctx context.Context, actx AccessContext, env MessageEnvelope) (b *MessageBoundError, err error) {
	a, ok := k.cfg.MessageTransport.(MessageAdmission)
	if !ok {
		return nil, nil
	}
	defer func() {
		if r := recover(); r != nil {
			b, err = nil, fmt.Errorf("message admission panicked: %v", r)
		}
	}()
	return a.AdmitMessage(ctx, cloneContext(actx), env)
}

// MessageClaimState is what MessageIDClaimer.ClaimMessageID found under a message id.
type MessageClaimState int

// The states of a claim.
const (
	// MessageIDClaimed: the id is this send's until it calls the claim's release.
	MessageIDClaimed MessageClaimState = iota
	// MessageIDBusy: another send of the same message holds the id right now.
	MessageIDBusy
	// MessageIDConflict: another message (other content) holds the id.
	MessageIDConflict
)

// MessageIDClaimer is what a transport whose store is shared by several processes may
// add so that one message id is sent — authorized, its use spent, delivered — once
// across all of them (the kernel's per-id lock serializes the sends of one process
// only). SendMessage claims env's id before it looks the message up and spends, and
// releases the claim once the send is over (the delivered message then answers the id by
// itself, MessageReceiptLookup). Of concurrent claims of one id, in any processes, exactly
// one gets MessageIDClaimed; a busy id is failed message_send_in_progress (retryable: a
// retry gets the first send's receipt), a conflicting one message_id_conflict, both
// before anything is spent. A claim left by a process that died lapses after the
// transport's lease; a send that had spent its use and died before delivering it is the
// one case where the retry spends again (the first use bought no message).
type MessageIDClaimer interface {
	ClaimMessageID(ctx context.Context, actx AccessContext, env MessageEnvelope) (state MessageClaimState, release func(), err error)
}

// keyedLocks serializes work per key (a message id), holding an entry only while in use.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	mu   sync.Mutex
	refs int
}

func (l *keyedLocks) lock(key string) (unlock func()) {
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*keyedLock{}
	}
	e := l.locks[key]
	if e == nil {
		e = &keyedLock{}
		l.locks[key] = e
	}
	e.refs++
	l.mu.Unlock()
	e.mu.Lock()
	return func() {
		e.mu.Unlock()
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.locks, key)
		}
		l.mu.Unlock()
	}
}

// MessageRequestRouter resolves the reply to a delivered request: it waits for it, or runs
// the recipient. An error (a timeout, a cancellation, a recipient that exited without a
// reply) fails the request message_reply_resolution_failed.
type MessageRequestRouter interface {
	ResolveReply(ctx context.Context, actx AccessContext, request MessageEnvelope, delivery MessageDeliveryResult) (MessageEnvelope, error)
}

// NewMessageID mints a message id: a random (version 4) UUID.
func NewMessageID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// ErrInvalidMessage is matched by SendMessage's error for an envelope that does not match
// the contract (a request error: CLI exit 2, HTTP 400 invalid_request).
var ErrInvalidMessage = errors.New("the message envelope does not match the SharedOS contract")

// SendMessage is the direct send of spec 80 §2, in order: an invalid envelope is an error
// matching ErrInvalidMessage (nothing audited: there is no message to name); a sender,
// purpose or trace that is not the context's is denied message_context_mismatch; a
// resolver that fails, failed message_requirement_resolution_failed; no authority, denied
// authority_unavailable; a request the transport's admission refuses (MessageAdmission:
// too many in flight) is denied with its code before anything is spent; then the exact
// send is authorized, consuming a use (denied with the decision's code); no transport is failed message_transport_not_configured; a
// transport error, failed message_delivery_failed; a receipt that fails the contract or
// names another message, failed invalid_message_receipt; otherwise the transport's
// receipt verbatim. Every outcome writes one message.sent audit record; a refusal spends
// nothing.
func (t *Turn) SendMessage(ctx context.Context, env MessageEnvelope) (MessageDeliveryResult, error) {
	if err := env.Validate(); err != nil {
		return MessageDeliveryResult{}, fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	k, actx := t.k, t.actx
	if env.Sender != actx.Actor || env.Purpose != actx.Purpose || env.TraceID != actx.TraceID {
		res := deliveryResult(&env, actx.Now, DeliveryDenied, CodeMessageContextMismatch,
			"the message's sender, purpose or trace does not match its access context")
		t.recordMessage(ctx, &env, res, "", "")
		return res, nil
	}
	if cerr := t.checkMessageBounds(&env); cerr != nil {
		res := deliveryResult(&env, actx.Now, DeliveryDenied, cerr.Code, cerr.Message)
		t.recordMessage(ctx, &env, res, "", "")
		return res, nil
	}
	// A repeated send of a delivered message (the same id) is answered from the
	// transport, without authorizing or spending again; one id is sent once at a time.
	unlock := k.sending.lock(actx.World + "\x00" + env.ID)
	defer unlock()
	if claimer, ok := k.cfg.MessageTransport.(MessageIDClaimer); ok {
		state, release, err := claimer.ClaimMessageID(ctx, cloneContext(actx), env)
		switch {
		case err != nil:
			res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageDeliveryFailed, "the message transport failed while claiming the message id")
			t.recordMessage(ctx, &env, res, "", "")
			return res, nil
		case state == MessageIDConflict:
			res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageIDConflict, "another message was sent under this id")
			t.recordMessage(ctx, &env, res, "", "")
			return res, nil
		case state != MessageIDClaimed:
			res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageSendInProgress, "the same message is being sent by another process; retry to get its receipt")
			res.Error.Retryable = BoolPtr(true)
			t.recordMessage(ctx, &env, res, "", "")
			return res, nil
		}
		if release != nil {
			defer release()
		}
	}
	if lookup, ok := k.cfg.MessageTransport.(MessageReceiptLookup); ok {
		prior, same, found, err := lookup.LookupReceipt(ctx, cloneContext(actx), env)
		switch {
		case err != nil:
			res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageDeliveryFailed, "the message transport failed while looking the message up")
			t.recordMessage(ctx, &env, res, "", "")
			return res, nil
		case found && !same:
			res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageIDConflict, "another message was sent under this id")
			t.recordMessage(ctx, &env, res, "", "")
			return res, nil
		case found && prior.Validate() == nil && prior.MessageID == env.ID:
			t.recordMessage(ctx, &env, prior, "", "")
			return prior, nil
		}
	}
	resolve := k.cfg.MessageResolver
	if resolve == nil {
		resolve = RecipientScopedMessageCapability
	}
	req, err := resolveMessageSafely(resolve, cloneContext(actx), env)
	if err != nil {
		res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageRequirementResolutionFailed,
			"the message capability requirement could not be resolved")
		t.recordMessage(ctx, &env, res, "", "")
		return res, nil
	}
	st := t.state(ctx, true)
	if st.auth.unavailable != "" || st.auditErr != nil {
		res := deliveryResult(&env, actx.Now, DeliveryDenied, ErrorCodeOf(ReasonAuthorityUnavailable),
			"authority could not be loaded from its trusted source")
		t.recordMessage(ctx, &env, res, "", "")
		return res, nil
	}
	var eval Evaluation
	evaluateInto(&eval, st.auth, &t.actx, t.instant, t.instant, st.wall, req, false)
	{
		// a bound only the transport can count (too many requests in flight; a reply to a
		// message that is unknown or already resolved), refused before the use is spent
		// (a send that would be refused anyway is settled below, its refusal audited)
		if d, _ := k.authz.Settle(ctx, st.auth, t.actx, &eval, false); d.Allowed {
			b, err := k.admitMessage(ctx, actx, env)
			switch {
			case err != nil:
				res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageDeliveryFailed, "the message transport failed while admitting the message")
				t.recordMessage(ctx, &env, res, "", "")
				return res, nil
			case b != nil:
				res := deliveryResult(&env, actx.Now, DeliveryDenied, b.Code, b.Message)
				t.recordMessage(ctx, &env, res, "", "")
				return res, nil
			}
		}
	}
	d, use, decision, aerr := t.settleSend(ctx, st.auth, &eval)
	if aerr != nil {
		res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeAuditUnavailable, "the decision could not be audited; the message was not sent")
		t.recordMessage(ctx, &env, res, "", "")
		return res, nil
	}
	if !d.Allowed {
		res := deliveryResult(&env, actx.Now, DeliveryDenied, ErrorCodeOf(d.ReasonCode),
			"the access context does not grant permission to send this message")
		t.recordMessage(ctx, &env, res, "", "")
		return res, nil
	}
	return t.k.deliverReserved(ctx, t.actx, t.meta, env, d.MatchedGrantID, "", use, decision), nil
}

// settleSend settles a send's consuming authorization. Over a recording transport
// (RecordingMessageTransport) a use that is reserved is not committed here: it is
// returned with its decision record, unwritten, for the transport to spend and write
// with the delivery — so a send the transport refuses (a reply to a message already
// answered, say) spends nothing, and a process killed before the delivery commits
// leaves no spent use without its message. Otherwise it is settleConsuming: the use is
// spent with its record before the delivery (ADR 0029's reserve → audit → commit).
func (t *Turn) settleSend(ctx context.Context, auth *Authority, ev *Evaluation) (AuthorizationDecision, UsageReservation, *AuditEvent, error) {
	call := ToolCall{Tool: MessageToolName}
	if t.k.recordingTransport() == nil {
		d, _, _, err := t.settleConsuming(ctx, auth, call, ev, false)
		return d, nil, nil, err
	}
	d, diag, reservation := t.k.authz.settle(ctx, auth, t.actx, ev, true, true)
	if diag.ClaimLost {
		return d, nil, nil, ErrSpendClaimLost
	}
	rec := t.decisionEvent(auth, call, ev.Requirement, d, diag, true)
	if reservation != nil {
		e := t.k.prepare(t.withMeta(rec))
		return d, reservation, &e, nil
	}
	if diag.Consumed {
		return d, nil, nil, t.audit(ctx, rec) // a spent use: durable before the effect
	}
	return d, nil, nil, t.auditWriteAhead(ctx, rec)
}

// MessageBoundError is a bound a message broke (too large a payload, a message to
// oneself): a typed refusal, before anything is authorized or spent.
type MessageBoundError struct {
	Code    ErrorCode
	Message string
}

func (e *MessageBoundError) Error() string { return e.Message }

// checkMessageBounds refuses a payload over the configured maximum and a message whose
// receiver is its sender.
func (t *Turn) checkMessageBounds(env *MessageEnvelope) *MessageBoundError {
	return messageBounds(t.k.maxPayload(), env.Sender, env.Receiver, env.Payload)
}

func messageBounds(max int, sender, receiver Address, payload []byte) *MessageBoundError {
	if sender == receiver {
		return &MessageBoundError{Code: CodeMessageRecipientIsSender, Message: "a message cannot be addressed to its sender"}
	}
	if len(payload) > max {
		return &MessageBoundError{Code: CodeMessagePayloadTooLarge,
			Message: fmt.Sprintf("the message payload is %d bytes; at most %d are allowed", len(payload), max)}
	}
	return nil
}

func (k *Kernel) maxPayload() int {
	if k.cfg.MaxMessagePayload > 0 {
		return k.cfg.MaxMessagePayload
	}
	return DefaultMaxMessagePayload
}

func resolveMessageSafely(resolve MessageCapabilityResolver, actx AccessContext, env MessageEnvelope) (req CapabilityRequirement, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("message capability resolver panicked: %v", r)
		}
	}()
	req, err = resolve(actx, env)
	if err == nil {
		err = req.Validate()
	}
	return req, err
}

// deliverAuthorized hands an envelope whose send was authorized to the transport, checks
// the receipt and records it (message.sent). It never authorizes.
func (k *Kernel) deliverAuthorized(ctx context.Context, actx AccessContext, meta map[string]any, env MessageEnvelope, grantID, operationID string) MessageDeliveryResult {
	return k.deliverReserved(ctx, actx, meta, env, grantID, operationID, nil, nil)
}

// recordingTransport is the kernel's transport when it writes deliveries with their
// records (RecordingMessageTransport) into the kernel's own audit trail.
func (k *Kernel) recordingTransport() RecordingMessageTransport {
	rt, ok := k.cfg.MessageTransport.(RecordingMessageTransport)
	if !ok || k.cfg.Audit == nil || !rt.RecordsDeliveries() {
		return nil
	}
	return rt
}

// errMismatchedReceipt is what deliverReserved's record function answers for a receipt
// that fails the contract or names another message: the delivery is then not written.
var errMismatchedReceipt = errors.New("the message transport returned a mismatched receipt")

// deliverReserved is deliverAuthorized with the send's reserved use and its unwritten
// decision record (both nil when the use was spent, or the grant is unbounded): over a
// recording transport the delivery, its message.sent record and the use with its record
// are one write; otherwise use is nil and the records follow the delivery.
func (k *Kernel) deliverReserved(ctx context.Context, actx AccessContext, meta map[string]any, env MessageEnvelope, grantID, operationID string,
	use UsageReservation, decision *AuditEvent) MessageDeliveryResult {
	if rt := k.recordingTransport(); rt != nil {
		record := func(r MessageDeliveryResult) (AuditEvent, error) {
			if r.Validate() != nil || r.MessageID != env.ID {
				return AuditEvent{}, errMismatchedReceipt
			}
			return k.prepare(k.messageEvent(actx, meta, &env, r, grantID, operationID)), nil
		}
		receipt, err := deliverRecordedSafely(ctx, rt, cloneContext(actx), env, use, decision, record)
		var res MessageDeliveryResult
		switch {
		case errors.Is(err, errMismatchedReceipt):
			res = deliveryResult(&env, actx.Now, DeliveryFailed, CodeInvalidMessageReceipt, "the message transport returned a mismatched receipt")
		case err != nil:
			res = deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageDeliveryFailed, "the message transport failed while delivering the message")
		case receipt.Validate() != nil || receipt.MessageID != env.ID:
			res = deliveryResult(&env, actx.Now, DeliveryFailed, CodeInvalidMessageReceipt, "the message transport returned a mismatched receipt")
		case receipt.Ok():
			return receipt // written with its records
		default:
			res = receipt
		}
		k.recordMessage(ctx, actx, meta, &env, res, grantID, operationID)
		return res
	}
	if use != nil {
		// not reached: the kernel reserves for a recording transport only
		_ = use.Release()
		res := deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageDeliveryFailed, "the message transport cannot spend a reserved use")
		k.recordMessage(ctx, actx, meta, &env, res, grantID, operationID)
		return res
	}
	var res MessageDeliveryResult
	if k.cfg.MessageTransport == nil {
		res = deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageTransportNotConfigured, "no message transport is configured")
	} else {
		receipt, err := deliverSafely(ctx, k.cfg.MessageTransport, cloneContext(actx), env)
		switch {
		case err != nil:
			res = deliveryResult(&env, actx.Now, DeliveryFailed, CodeMessageDeliveryFailed, "the message transport failed while delivering the message")
		case receipt.Validate() != nil || receipt.MessageID != env.ID:
			res = deliveryResult(&env, actx.Now, DeliveryFailed, CodeInvalidMessageReceipt, "the message transport returned a mismatched receipt")
		default:
			res = receipt
		}
	}
	k.recordMessage(ctx, actx, meta, &env, res, grantID, operationID)
	return res
}

func deliverSafely(ctx context.Context, tr MessageTransport, actx AccessContext, env MessageEnvelope) (res MessageDeliveryResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("message transport panicked: %v", r)
		}
	}()
	return tr.Deliver(ctx, actx, env)
}

func deliverRecordedSafely(ctx context.Context, tr RecordingMessageTransport, actx AccessContext, env MessageEnvelope, use UsageReservation,
	decision *AuditEvent, record func(MessageDeliveryResult) (AuditEvent, error)) (res MessageDeliveryResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			if use != nil {
				_ = use.Release()
			}
			err = fmt.Errorf("message transport panicked: %v", r)
		}
	}()
	return tr.DeliverRecorded(ctx, actx, env, use, decision, record)
}

func (t *Turn) recordMessage(ctx context.Context, env *MessageEnvelope, res MessageDeliveryResult, grantID, operationID string) {
	t.k.recordMessage(ctx, t.actx, t.meta, env, res, grantID, operationID)
}

// recordMessage writes the message.sent record of one outcome: outcome succeeded for an
// accepted or delivered receipt, else the receipt's status with its code as the reason;
// metadata names the message id, the receiver and the receipt's status. A record of a
// delivered message is durable; a refusal's, write-ahead.
func (k *Kernel) recordMessage(ctx context.Context, actx AccessContext, meta map[string]any, env *MessageEnvelope, res MessageDeliveryResult, grantID, operationID string) {
	if k.cfg.Audit == nil {
		return
	}
	k.auditAfter(ctx, k.messageEvent(actx, meta, env, res, grantID, operationID), res.Ok())
}

// messageEvent is the message.sent record of one outcome (see recordMessage).
func (k *Kernel) messageEvent(actx AccessContext, meta map[string]any, env *MessageEnvelope, res MessageDeliveryResult, grantID, operationID string) AuditEvent {
	outcome := OutcomeSucceeded
	switch res.Status {
	case DeliveryDenied:
		outcome = OutcomeDenied
	case DeliveryFailed:
		outcome = OutcomeFailed
	}
	ev := k.event(actx, EventMessageSent, outcome)
	ev.GrantID, ev.OperationID, ev.Tool = grantID, operationID, ""
	if operationID != "" {
		ev.Tool = MessageToolName
	}
	if res.Error != nil {
		ev.Reason = res.Error.Code
	}
	ev.Metadata = map[string]any{}
	for key, v := range meta {
		ev.Metadata[key] = v
	}
	ev.Metadata["source"] = "kernel"
	ev.Metadata["messageId"] = env.ID
	ev.Metadata["receiver"] = env.Receiver
	ev.Metadata["status"] = string(res.Status)
	if env.ReplyTo != "" {
		ev.Metadata["replyTo"] = env.ReplyTo
	}
	return ev
}

// ReplyMatchesRequest reports whether reply answers request: replyTo is the request's id,
// sender and receiver swapped, the same purpose and trace.
func ReplyMatchesRequest(reply, request *MessageEnvelope) bool {
	return reply.ReplyTo == request.ID && reply.Sender == request.Receiver && reply.Receiver == request.Sender &&
		reply.Purpose == request.Purpose && reply.TraceID == request.TraceID
}

// MessageToolDefinition is messages.request's definition (spec 10 §6.1).
func MessageToolDefinition() ToolDefinition {
	id := func(kind, key string) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": false, "required": []any{"kind", key},
			"properties": map[string]any{"kind": map[string]any{"const": kind},
				key: map[string]any{"type": "string", "minLength": 1, "maxLength": 256, "pattern": `^(?!\s)[\s\S]*\S$`}}}
	}
	return ToolDefinition{
		Name:        MessageToolName,
		Description: "Send an authorized request to another agent and wait for its durable reply",
		Namespace:   MessageToolNamespace, Source: "sharedos", ReadWrite: ClassWrite,
		InputSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"recipient", "payload"},
			"properties": map[string]any{
				"recipient": map[string]any{"oneOf": []any{id("human", "userId"), id("agent", "agentId"),
					id("group", "conversationId"), id("service", "serviceId")}},
				"payload": map[string]any{}}},
		OutputSchema:       map[string]any{"type": "object"},
		RequiredCapability: CapabilityRequirement{Resource: ResourceRef{Namespace: MessagingNamespace, Path: []string{}}, Action: MessageSendAction},
		Annotations:        &ToolAnnotations{ReadOnly: BoolPtr(false), Destructive: BoolPtr(true), Idempotent: BoolPtr(false)},
	}
}

// messageTool is the messages.request handler (spec 80 §3). ResolveCall derives the
// recipient-scoped send requirement from the arguments and the trusted context (pure; a
// broken bound is refused there with its typed code, before anything is spent); its
// Admit asks the transport's admission (MessageAdmission: too many requests in flight is
// denied messages_in_flight_exceeded before the use is spent); its Prepare mints the envelope — a fresh id (never the call id), sender the actor, the
// context's purpose and trace, createdAt its instant — after the call's use was spent,
// and Invoke delivers exactly that envelope without authorizing again, resolves the reply
// through the router and checks it against the request before the caller sees its
// payload.
func (k *Kernel) messageTool() ToolHandler {
	return ToolHandler{
		Definition: MessageToolDefinition(),
		ParseArguments: func(raw json.RawMessage) (any, error) {
			return ParseMessageRequestArguments(raw)
		},
		ResolveCall: func(actx AccessContext, call ParsedToolCall) (Resolution, error) {
			args := call.Parsed.(MessageRequestArguments)
			env := MessageEnvelope{Version: MessageProtocolVersion, ID: "unminted", Sender: actx.Actor, Receiver: args.Recipient,
				Purpose: actx.Purpose, Payload: args.Payload, TraceID: actx.TraceID, CreatedAt: actx.Now}
			if b := messageBounds(k.maxPayload(), env.Sender, env.Receiver, env.Payload); b != nil {
				return Resolution{}, &ResolutionRefusedError{Code: b.Code, Message: b.Message}
			}
			resolve := k.cfg.MessageResolver
			if resolve == nil {
				resolve = RecipientScopedMessageCapability
			}
			req, err := resolveMessageSafely(resolve, cloneContext(actx), env)
			if err != nil {
				return Resolution{}, err
			}
			newID := k.cfg.NewMessageID
			if newID == nil {
				newID = NewMessageID
			}
			admit := func(ctx context.Context) error {
				b, err := k.admitMessage(ctx, actx, env)
				if b != nil {
					return &ResolutionRefusedError{Code: b.Code, Message: b.Message}
				}
				return err
			}
			return Resolution{Requirement: req, Admit: admit, Prepare: func(context.Context) (any, error) {
				minted := env
				minted.ID = newID()
				if err := minted.Validate(); err != nil {
					return nil, err
				}
				return &minted, nil
			}}, nil
		},
		Invoke: func(ctx context.Context, actx AccessContext, call ParsedToolCall) (ToolResult, error) {
			request, ok := call.Prepared.(*MessageEnvelope)
			if !ok || request == nil {
				return FailedResult(call.ToolCall, actx.Now, CodeMessageRequestNotPrepared,
					"the message request was not prepared for authorization"), nil
			}
			delivery := k.deliverAuthorized(ctx, actx, nil, *request, "", call.ID)
			if !delivery.Ok() {
				res := FailedResult(call.ToolCall, actx.Now, CodeMessageRequestNotAccepted, "the message request was not accepted for delivery")
				res.Metadata = map[string]any{"messageId": request.ID}
				return res, nil
			}
			reply, err := resolveReplySafely(ctx, k.cfg.MessageRouter, cloneContext(actx), *request, delivery)
			if err != nil {
				res := FailedResult(call.ToolCall, actx.Now, CodeMessageReplyResolutionFailed, "the message router could not resolve a reply")
				res.Metadata = map[string]any{"messageId": request.ID}
				return res, nil
			}
			if reply.Validate() != nil || !ReplyMatchesRequest(&reply, request) {
				res := FailedResult(call.ToolCall, actx.Now, CodeInvalidMessageReply, "the message router returned an invalid reply")
				res.Metadata = map[string]any{"messageId": request.ID}
				return res, nil
			}
			return ToolResult{CallID: call.ID, Tool: call.Tool, Status: StatusSucceeded, Output: reply.Payload,
				CompletedAt: actx.Now, Metadata: map[string]any{"messageId": request.ID, "replyId": reply.ID}}, nil
		},
	}
}

func resolveReplySafely(ctx context.Context, r MessageRequestRouter, actx AccessContext, req MessageEnvelope, d MessageDeliveryResult) (reply MessageEnvelope, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("message router panicked: %v", p)
		}
	}()
	return r.ResolveReply(ctx, actx, req, d)
}

// ResolutionRefusedError is returned by a tool's ResolveCall or ResolveRequirement to
// refuse a call with a typed code of its own (a message over its bounds) instead of
// tool_requirement_resolution_failed: the call is denied at the requirement stage with
// Code and Message, audited, and nothing is spent.
type ResolutionRefusedError struct {
	Code    ErrorCode
	Message string
}

func (e *ResolutionRefusedError) Error() string { return e.Message }

// SendReply is the inbound check of spec 80 §4 and the reply's send: the turn's actor
// must be request's receiver (else denied receiver_mismatch); the reply must answer the
// request — replyTo its id, to its sender, its purpose and trace — (else denied
// message_context_mismatch); then the reply is sent as SendMessage sends (the context's
// purpose and trace must be the reply's, and the send back to the requester is authorized
// under the replier's own grants). Every outcome writes one message.sent record; an
// invalid reply is an error matching ErrInvalidMessage.
func (t *Turn) SendReply(ctx context.Context, request, reply MessageEnvelope) (MessageDeliveryResult, error) {
	if err := reply.Validate(); err != nil {
		return MessageDeliveryResult{}, fmt.Errorf("%w: %v", ErrInvalidMessage, err)
	}
	actx := t.actx
	if actx.Actor != request.Receiver {
		res := deliveryResult(&reply, actx.Now, DeliveryDenied, CodeReceiverMismatch,
			"only the message's receiver may answer it")
		t.recordMessage(ctx, &reply, res, "", "")
		return res, nil
	}
	if reply.ReplyTo != request.ID || reply.Receiver != request.Sender || reply.Purpose != request.Purpose || reply.TraceID != request.TraceID {
		res := deliveryResult(&reply, actx.Now, DeliveryDenied, CodeMessageContextMismatch,
			"the reply's purpose or trace is not its request's")
		t.recordMessage(ctx, &reply, res, "", "")
		return res, nil
	}
	return t.SendMessage(ctx, reply)
}
