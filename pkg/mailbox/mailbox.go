// Package mailbox is the message transport and reply router of spec 80 §4 over a store's
// mailbox (store.Mailbox): Transport delivers an authorized envelope durably (the
// kernel's MessageTransport), Router resolves the reply to a request (the kernel's
// MessageRequestRouter) per recipient — wait (a person or another process answers with
// `sharedos messages reply`) or exec (sharedos runs the recipient's command as its own
// turn). It never authorizes: the kernel decided every send before it reaches here, the
// reply included (it is a send back under the replier's grants).
//
// A restarted requester re-attaches by id (`sharedos messages wait ID`: Reattach), not by
// a sweep at start-up, by design: a `tools call` or `mcp` process that starts cannot tell
// a request whose waiter died from one another live process of the same requester is
// waiting on right now — the mailbox records no waiter, and several `mcp` processes of
// one agent (an editor's windows, a CI matrix) share one state database — so a sweep
// would either fail live requests under their waiters or have to guess. What a dead
// waiter leaves behind is safe without one: the request stays pending and can still be
// answered (the recipient's reply is recorded once, ReplyMessage); the requester, which
// finds its id in its message.sent audit record (`sharedos audit list --type
// message.sent`) or the tool result it got before the restart, re-attaches and gets that
// reply, or — past the reply timeout counted from its acceptance — resolves it failed
// message_reply_resolution_failed, exactly once (FailMessage refuses a resolved request,
// and a reply that won that race is the answer). So no request is lost and none is
// answered twice; a pending request with no waiter only counts against its requester's
// in-flight bound until someone re-attaches to it.
package mailbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// The modes of a route.
const (
	ModeWait = "wait"
	ModeExec = "exec"
)

// Defaults and bounds of the configuration (issue 24).
const (
	DefaultReplyTimeout = 5 * time.Minute
	MaxReplyTimeout     = 24 * time.Hour
	DefaultMaxInFlight  = 10
	DefaultPoll         = 50 * time.Millisecond
	// FallbackPoll is the poll of a router with a Notifier: a lost hint costs at most it.
	FallbackPoll = time.Second
	// ExecGrace is how long an exec recipient's command may run on after its reply was
	// recorded (to write its own audit record and exit) before it is killed.
	ExecGrace = 10 * time.Second
)

// Route says how a recipient answers.
type Route struct {
	// Mode is ModeWait or ModeExec.
	Mode string
	// Command (exec) is the recipient's program and its arguments.
	Command []string
	// Grants (exec) are the recipient's own grant files.
	Grants []string
}

// Config is the configuration's messages: and agents: sections.
type Config struct {
	// Routes are the configured recipients; a recipient without one is unreachable.
	Routes map[kernel.Address]Route
	// ReplyTimeout bounds the wait for a reply (0: DefaultReplyTimeout).
	ReplyTimeout time.Duration
	// MaxInFlight bounds the pending requests of one requester in a world (0:
	// DefaultMaxInFlight).
	MaxInFlight int
	// NoStoreHints ignores the store's wake-up hints (pgstore's NOTIFY): a waiter then
	// finds a reply recorded by another process by polling every FallbackPoll only — what
	// a waiter does while notifications are lost. Not a setting of the configuration
	// file: the benchmark's "NOTIFY dropped" row and tests set it.
	NoStoreHints bool
}

// Validate checks the routes and bounds.
func (c *Config) Validate() error {
	if c.ReplyTimeout < 0 || c.ReplyTimeout > MaxReplyTimeout {
		return fmt.Errorf("messages.replyTimeout %s must be between 1s and %s", c.ReplyTimeout, MaxReplyTimeout)
	}
	if c.ReplyTimeout > 0 && c.ReplyTimeout < time.Second {
		return fmt.Errorf("messages.replyTimeout %s must be between 1s and %s", c.ReplyTimeout, MaxReplyTimeout)
	}
	if c.MaxInFlight < 0 {
		return fmt.Errorf("messages.maxInFlight %d must be positive", c.MaxInFlight)
	}
	addrs := make([]kernel.Address, 0, len(c.Routes))
	for a := range c.Routes {
		addrs = append(addrs, a)
	}
	sort.Slice(addrs, func(i, j int) bool { return addrs[i].String() < addrs[j].String() })
	for _, a := range addrs {
		r := c.Routes[a]
		switch r.Mode {
		case ModeWait:
			if len(r.Command) > 0 || len(r.Grants) > 0 {
				return fmt.Errorf("agents.%s: a wait recipient takes no command and no grants", a)
			}
		case ModeExec:
			if len(r.Command) == 0 || r.Command[0] == "" {
				return fmt.Errorf("agents.%s: an exec recipient needs a command", a)
			}
		default:
			return fmt.Errorf("agents.%s: mode %q must be wait or exec", a, r.Mode)
		}
	}
	return nil
}

func (c *Config) timeout() time.Duration {
	if c.ReplyTimeout > 0 {
		return c.ReplyTimeout
	}
	return DefaultReplyTimeout
}

func (c *Config) maxInFlight() int {
	if c.MaxInFlight > 0 {
		return c.MaxInFlight
	}
	return DefaultMaxInFlight
}

// Transport is the durable mailbox as the kernel's MessageTransport. A request is stored
// for its receiver (accepted, the receipt's timestamp the time it was first stored, so a
// repeated delivery of the same message gets an identical receipt); a reply (replyTo
// set) is recorded as the answer to its request (delivered).
type Transport struct {
	Box    store.Mailbox
	Config *Config
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Claims, when set (a store shared by several processes), claims a message id across
	// processes before a direct send spends its use (ClaimMessageID).
	Claims store.Idempotency
	// Notifier, when set, is told of each reply recorded (the waiter's wake-up hint).
	Notifier Notifier
	// Recorded says that the kernel's audit sink and usage store are Box's store: a
	// delivery is then written with its records, and a send's reserved use spent with
	// it, in one transaction (DeliverRecorded), when Box is a store.RecordedMailbox.
	Recorded bool
}

// ClaimLease is how long a claimed message id stays claimed by a send that neither
// released it nor delivered (its process died): far longer than a send takes.
const ClaimLease = time.Minute

// ClaimMessageID claims env's id in world across every process sharing the store
// (kernel.MessageIDClaimer), as an idempotency record of scope "message:<world>" keyed by
// the id, fingerprinted by the envelope's canonical encoding: claimed, busy (the same
// message, claimed by another send less than ClaimLease ago) or conflict (other content).
// The release abandons the claim: by then the delivered message answers the id itself.
// Without Claims every id is claimed at once (one process: the kernel's lock suffices).
//
// A reply (replyTo set) over a recording transport (RecordsDeliveries) is claimed at
// once too, writing nothing: the claim would cost the reply — a `sharedos messages
// reply` process, an exec recipient's turn — two write transactions (the claim and its
// release) and buys nothing there. A request is answered once (ReplyMessageRecorded
// refuses a resolved one inside its transaction), and over a recording transport the
// use is spent in that same transaction, so of two sends of one reply — under one id or
// two, in any processes — exactly one answers and spends, the other is denied
// message_already_resolved and spends nothing (TestConcurrentRepliesOneSpend); a
// reply's id answers nothing by itself (LookupReceipt does not look replies up). Without
// a recording transport the use is spent before the delivery, so a reply is claimed as
// any send is.
func (t *Transport) ClaimMessageID(ctx context.Context, actx kernel.AccessContext, env kernel.MessageEnvelope) (kernel.MessageClaimState, func(), error) {
	if t.Claims == nil || (env.ReplyTo != "" && t.RecordsDeliveries()) {
		return kernel.MessageIDClaimed, nil, nil
	}
	text, err := canonicalEnvelope(env)
	if err != nil {
		return 0, nil, err
	}
	sum := sha256.Sum256([]byte(text))
	fp := hex.EncodeToString(sum[:])
	key := store.IdempotencyKey{Scope: "message:" + actx.World, Key: env.ID}
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	state, _, err := t.Claims.BeginIdempotent(ctx, key, fp, now(), ClaimLease)
	if err != nil {
		return 0, nil, err
	}
	switch state {
	case store.IdempotencyClaimed:
		return kernel.MessageIDClaimed, func() { _ = t.Claims.AbandonIdempotent(context.WithoutCancel(ctx), key, fp) }, nil
	case store.IdempotencyConflict:
		return kernel.MessageIDConflict, nil, nil
	}
	return kernel.MessageIDBusy, nil, nil
}

func (t *Transport) now() string {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	return kernel.FormatTimestamp(now().UnixMilli())
}

func receipt(env kernel.MessageEnvelope, status kernel.MessageDeliveryStatus, at string, code kernel.ErrorCode, msg string) kernel.MessageDeliveryResult {
	r := kernel.MessageDeliveryResult{Status: status, MessageID: env.ID, Timestamp: at}
	if code != "" {
		r.Error = &kernel.ProtocolError{Code: code, Message: msg, Retryable: kernel.BoolPtr(false)}
	}
	return r
}

// Deliver stores env (see Transport). The recipient's route is checked at dispatch: a
// recipient not configured is denied recipient_unreachable (never no_matching_grant:
// the send was authorized). The same id with other content is failed
// message_id_conflict; a requester with too many pending requests is denied
// messages_in_flight_exceeded. A reply to an unknown request is denied
// message_not_found; to an answered or failed one, message_already_resolved.
func (t *Transport) Deliver(ctx context.Context, actx kernel.AccessContext, env kernel.MessageEnvelope) (kernel.MessageDeliveryResult, error) {
	return t.deliver(ctx, actx, env, nil, nil, nil)
}

var _ kernel.RecordingMessageTransport = (*Transport)(nil)

// RecordsDeliveries reports whether DeliverRecorded writes a delivery with its records
// (kernel.RecordingMessageTransport): Recorded is set and Box is a store.RecordedMailbox.
func (t *Transport) RecordsDeliveries() bool {
	_, ok := t.Box.(store.RecordedMailbox)
	return t.Recorded && ok
}

// DeliverRecorded is Deliver writing an accepted or delivered message with its records —
// the send's reserved use and decision record, when given, and its message.sent record —
// in the delivery's transaction (kernel.RecordingMessageTransport). A refusal writes
// nothing and releases use.
func (t *Transport) DeliverRecorded(ctx context.Context, actx kernel.AccessContext, env kernel.MessageEnvelope, use kernel.UsageReservation,
	decision *kernel.AuditEvent, record func(kernel.MessageDeliveryResult) (kernel.AuditEvent, error)) (kernel.MessageDeliveryResult, error) {
	if !t.RecordsDeliveries() {
		if use != nil {
			_ = use.Release()
		}
		return kernel.MessageDeliveryResult{}, errors.New("this mailbox cannot write a delivery with its records")
	}
	return t.deliver(ctx, actx, env, use, decision, record)
}

// deliver is Deliver, and DeliverRecorded when record is set.
func (t *Transport) deliver(ctx context.Context, actx kernel.AccessContext, env kernel.MessageEnvelope, use kernel.UsageReservation,
	decision *kernel.AuditEvent, record func(kernel.MessageDeliveryResult) (kernel.AuditEvent, error)) (kernel.MessageDeliveryResult, error) {
	now := t.now()
	box, _ := t.Box.(store.RecordedMailbox)
	// records are the events written with the delivery: decision, then message.sent
	// of the receipt r(rec) the delivery answers
	records := func(r func(store.MessageRecord) kernel.MessageDeliveryResult) func(store.MessageRecord) ([]kernel.AuditEvent, error) {
		if record == nil {
			return nil
		}
		return func(rec store.MessageRecord) ([]kernel.AuditEvent, error) {
			sent, err := record(r(rec))
			if err != nil {
				return nil, err
			}
			if decision != nil {
				return []kernel.AuditEvent{*decision, sent}, nil
			}
			return []kernel.AuditEvent{sent}, nil
		}
	}
	if env.ReplyTo != "" {
		var err error
		if record != nil {
			_, err = box.ReplyMessageRecorded(ctx, actx.World, env, now, use, records(func(store.MessageRecord) kernel.MessageDeliveryResult {
				return receipt(env, kernel.DeliveryDelivered, now, "", "")
			}))
		} else {
			_, err = t.Box.ReplyMessage(ctx, actx.World, env, now)
		}
		switch {
		case errors.Is(err, store.ErrNotFound):
			return receipt(env, kernel.DeliveryDenied, now, CodeMessageNotFound, "the message this replies to does not exist"), nil
		case errors.Is(err, store.ErrAlreadyResolved):
			return receipt(env, kernel.DeliveryDenied, now, CodeMessageAlreadyResolved, "the message this replies to was already answered or failed"), nil
		case err != nil:
			return kernel.MessageDeliveryResult{}, err
		}
		if t.Notifier != nil {
			t.Notifier.Notify(actx.World, env.ReplyTo)
		}
		return receipt(env, kernel.DeliveryDelivered, now, "", ""), nil
	}
	if _, ok := t.Config.Routes[env.Receiver]; !ok {
		if use != nil {
			_ = use.Release()
		}
		return receipt(env, kernel.DeliveryDenied, now, kernel.CodeRecipientUnreachable,
			"no route to "+env.Receiver.String()+": it is not configured under agents"), nil
	}
	var rec store.MessageRecord
	var err error
	if record != nil {
		rec, _, err = box.DeliverMessageRecorded(ctx, actx.World, env, now, t.Config.maxInFlight(), use,
			records(func(rec store.MessageRecord) kernel.MessageDeliveryResult {
				return receipt(env, kernel.DeliveryAccepted, rec.AcceptedAt, "", "")
			}))
	} else {
		rec, _, err = t.Box.DeliverMessage(ctx, actx.World, env, now, t.Config.maxInFlight())
	}
	switch {
	case errors.Is(err, store.ErrDuplicate):
		return receipt(env, kernel.DeliveryFailed, now, CodeMessageIDConflict, "another message was delivered under this id"), nil
	case errors.Is(err, store.ErrInFlightExceeded):
		return receipt(env, kernel.DeliveryDenied, now, kernel.CodeMessagesInFlightExceeded, inFlightMessage(t.Config.maxInFlight())), nil
	case err != nil:
		return kernel.MessageDeliveryResult{}, err
	}
	return receipt(env, kernel.DeliveryAccepted, rec.AcceptedAt, "", ""), nil
}

// AdmitMessage refuses a request (not a reply) whose requester already has the maximum
// number of requests pending in the world (kernel.MessageAdmission): the kernel asks it
// after the send would be authorized and before its use is spent, so the refusal
// (messages_in_flight_exceeded) spends nothing. It is a check, not a reservation: when
// two sends of one requester are admitted at once at the last free place, both spend
// and the store's count at delivery (DeliverMessage's maxInFlight, in the delivery's
// transaction) refuses the one that comes second — that one's use is spent and its
// receipt denied messages_in_flight_exceeded, so the bound itself is never exceeded.
//
// A reply is refused before its use is spent when its request is not there
// (message_not_found), the reply is not from its receiver (receiver_mismatch) or not
// addressed back to its sender with its purpose and trace (message_context_mismatch) —
// SendReply's checks, made here too for a reply sent directly (SendMessage) — or the
// request is already answered or failed (message_already_resolved). Also a check: of two replies admitted at once the delivery's
// transaction refuses the second (message_already_resolved), and over a recording
// transport (DeliverRecorded) that refusal spends nothing either.
func (t *Transport) AdmitMessage(ctx context.Context, actx kernel.AccessContext, env kernel.MessageEnvelope) (*kernel.MessageBoundError, error) {
	if env.ReplyTo != "" {
		return t.admitReply(ctx, actx, env)
	}
	max := t.Config.maxInFlight()
	pending, err := t.Box.ListMessages(ctx, store.MessageFilter{World: actx.World, Sender: env.Sender, Status: store.MessagePending, Limit: max})
	if err != nil {
		return nil, err
	}
	if len(pending) >= max {
		return &kernel.MessageBoundError{Code: kernel.CodeMessagesInFlightExceeded, Message: inFlightMessage(max)}, nil
	}
	return nil, nil
}

// admitReply is AdmitMessage of a reply (see there).
func (t *Transport) admitReply(ctx context.Context, actx kernel.AccessContext, env kernel.MessageEnvelope) (*kernel.MessageBoundError, error) {
	rec, err := t.Box.GetMessage(ctx, actx.World, env.ReplyTo)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &kernel.MessageBoundError{Code: CodeMessageNotFound, Message: "the message this replies to does not exist"}, nil
	case err != nil:
		return nil, err
	case rec.Envelope.Receiver != env.Sender:
		return &kernel.MessageBoundError{Code: kernel.CodeReceiverMismatch, Message: "only the message's receiver may answer it"}, nil
	case rec.Envelope.Sender != env.Receiver || rec.Envelope.Purpose != env.Purpose || rec.Envelope.TraceID != env.TraceID:
		return &kernel.MessageBoundError{Code: kernel.CodeMessageContextMismatch, Message: "the reply's purpose or trace is not its request's"}, nil
	case rec.Status != store.MessagePending:
		return &kernel.MessageBoundError{Code: CodeMessageAlreadyResolved, Message: "the message this replies to was already answered or failed"}, nil
	}
	return nil, nil
}

func inFlightMessage(max int) string {
	return fmt.Sprintf("the requester already has %d messages waiting for a reply", max)
}

// Host codes of the mailbox's own receipts.
const (
	CodeMessageIDConflict                       = kernel.CodeMessageIDConflict
	CodeMessageNotFound        kernel.ErrorCode = "message_not_found"
	CodeMessageAlreadyResolved kernel.ErrorCode = "message_already_resolved"
)

// LookupReceipt answers a message sent again under its id (kernel.MessageReceiptLookup):
// the same content gets the receipt of its first delivery (accepted, at its acceptance),
// other content is reported as not the same.
func (t *Transport) LookupReceipt(ctx context.Context, actx kernel.AccessContext, env kernel.MessageEnvelope) (kernel.MessageDeliveryResult, bool, bool, error) {
	if env.ReplyTo != "" {
		return kernel.MessageDeliveryResult{}, false, false, nil
	}
	rec, err := t.Box.GetMessage(ctx, actx.World, env.ID)
	if errors.Is(err, store.ErrNotFound) {
		return kernel.MessageDeliveryResult{}, false, false, nil
	}
	if err != nil {
		return kernel.MessageDeliveryResult{}, false, false, err
	}
	same, err := sameEnvelope(rec.Envelope, env)
	if err != nil {
		return kernel.MessageDeliveryResult{}, false, false, err
	}
	return receipt(env, kernel.DeliveryAccepted, rec.AcceptedAt, "", ""), same, true, nil
}

// sameEnvelope compares two envelopes by their encoding after a strict decode (the
// payload canonical).
func sameEnvelope(a, b kernel.MessageEnvelope) (bool, error) {
	x, err := canonicalEnvelope(a)
	if err != nil {
		return false, err
	}
	y, err := canonicalEnvelope(b)
	return x == y, err
}

// canonicalEnvelope is e's encoding after a strict decode (the payload canonical).
func canonicalEnvelope(e kernel.MessageEnvelope) (string, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return "", err
	}
	var back kernel.MessageEnvelope
	if err := json.Unmarshal(raw, &back); err != nil {
		return "", err
	}
	raw, err = json.Marshal(back)
	return string(raw), err
}

// Runner starts an exec recipient's turn for a request and returns when its command
// exited (its error: it failed to start or exited non-zero).
type Runner func(ctx context.Context, route Route, request kernel.MessageEnvelope, world string) error

// Router resolves replies from the mailbox (the kernel's MessageRequestRouter).
type Router struct {
	Box    store.Mailbox
	Config *Config
	// Run runs an exec recipient (nil: exec recipients fail every request).
	Run Runner
	// Poll is the interval at which the mailbox is read for the reply (0: DefaultPoll,
	// or FallbackPoll when a Notifier is set).
	Poll time.Duration
	// Notifier, when set, wakes the wait when the request may have been resolved, before
	// the next poll (see Notifier).
	Notifier Notifier
	// Now is the clock of a re-attached wait's deadline (nil: time.Now).
	Now func() time.Time
	// Report, when set, is told why a request got no reply (an exec recipient's command
	// that failed to start, exited non-zero or exited without answering; a timeout): the
	// operator's log, never the requester's result, which says only
	// message_reply_resolution_failed.
	Report func(world string, request kernel.MessageEnvelope, why error)
}

// ErrNoReply is matched by ResolveReply's error when no reply came.
var ErrNoReply = errors.New("no reply")

// ResolveReply waits for the reply to request: polls the mailbox (and, for an exec
// recipient, runs its command first) until the reply is there, the reply timeout passed,
// the context was cancelled or the exec command exited without one. A request that gets
// no reply is resolved failed message_reply_resolution_failed in the mailbox, so that it
// is never answered after its requester gave up; when a reply won that race, it is the
// answer. A read of the mailbox that fails (the database restarting) does not end the
// wait: it is tried again at the next poll or hint (see wait and giveUp).
func (r *Router) ResolveReply(ctx context.Context, actx kernel.AccessContext, request kernel.MessageEnvelope, _ kernel.MessageDeliveryResult) (kernel.MessageEnvelope, error) {
	route, ok := r.Config.Routes[request.Receiver]
	if !ok {
		return r.giveUp(ctx, actx.World, request.ID, fmt.Errorf("%w: no route to %s", ErrNoReply, request.Receiver))
	}
	ctx, cancel := context.WithTimeout(ctx, r.Config.timeout())
	defer cancel()
	var exited chan error
	if route.Mode == ModeExec {
		if r.Run == nil {
			return r.giveUp(ctx, actx.World, request.ID, fmt.Errorf("%w: exec recipients cannot be run here", ErrNoReply))
		}
		exited = make(chan error, 1)
		done := make(chan struct{})
		go func() { exited <- r.Run(ctx, route, request, actx.World); close(done) }()
		// The command's turn goes on after its reply is recorded (its message.sent record
		// is written after the delivery): cancelling ctx at return would kill it and lose
		// that record. So the wait returns only once the command exited — at most
		// ExecGrace after the reply (then it is killed) or when ctx ends.
		defer func() {
			grace := time.NewTimer(ExecGrace)
			defer grace.Stop()
			select {
			case <-done:
			case <-grace.C:
			case <-ctx.Done():
			}
		}()
	}
	reply, err := r.wait(ctx, actx.World, request.ID, exited)
	if err != nil && r.Report != nil {
		r.Report(actx.World, request, err)
	}
	return reply, err
}

// Reattach resumes waiting for the reply to request id of world, after the process that
// waited was restarted (`sharedos messages wait ID`, issue 24's re-attach): the reply when it is there; while the request is pending, the
// wait goes on until the reply timeout counted from its acceptance; past that (or when
// ctx ends first) the request is resolved failed message_reply_resolution_failed. A
// request already failed is ErrNoReply. It never answers a request itself.
func (r *Router) Reattach(ctx context.Context, world, id string) (kernel.MessageEnvelope, error) {
	rec, err := r.Box.GetMessage(ctx, world, id)
	if err != nil {
		return kernel.MessageEnvelope{}, err
	}
	if done, reply, err := settled(rec); done {
		return reply, err
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	accepted, err := kernel.ParseTimestamp(rec.AcceptedAt)
	if err != nil {
		return r.giveUp(ctx, world, id, fmt.Errorf("%w: the request's acceptance time is unreadable", ErrNoReply))
	}
	left := time.UnixMilli(accepted).Add(r.Config.timeout()).Sub(now())
	if left <= 0 {
		return r.giveUp(ctx, world, id, fmt.Errorf("%w: the reply timeout passed", ErrNoReply))
	}
	ctx, cancel := context.WithTimeout(ctx, left)
	defer cancel()
	return r.wait(ctx, world, id, nil)
}

func settled(rec store.MessageRecord) (bool, kernel.MessageEnvelope, error) {
	switch rec.Status {
	case store.MessageAnswered:
		if rec.Reply == nil {
			return true, kernel.MessageEnvelope{}, fmt.Errorf("%w: the answer of %s is missing", ErrNoReply, rec.Envelope.ID)
		}
		return true, *rec.Reply, nil
	case store.MessageFailed:
		return true, kernel.MessageEnvelope{}, fmt.Errorf("%w: message %s failed (%s)", ErrNoReply, rec.Envelope.ID, rec.FailedCode)
	}
	return false, kernel.MessageEnvelope{}, nil
}

func (r *Router) wait(ctx context.Context, world, id string, exited chan error) (kernel.MessageEnvelope, error) {
	poll := r.Poll
	if poll <= 0 {
		poll = DefaultPoll
		if r.Notifier != nil {
			poll = FallbackPoll
		}
	}
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var wake <-chan struct{} // nil without a notifier: only the poll
	if r.Notifier != nil {
		// subscribed before the first read: a reply recorded in between is not missed
		var cancel func()
		wake, cancel = r.Notifier.Subscribe(world, id)
		defer cancel()
	}
	for {
		rec, err := r.Box.GetMessage(ctx, world, id)
		switch {
		case err == nil:
			if done, reply, err := settled(rec); done {
				return reply, err
			}
		case errors.Is(err, store.ErrNotFound):
			return kernel.MessageEnvelope{}, err // a delivered message never goes away
		}
		// Any other failed read (the database unreachable for a while: a restart, a
		// failover) is tried again at the next poll or hint, until the reply timeout or
		// the caller's cancellation. Ending the wait here would tell the requester its
		// request failed while the mailbox keeps it pending, to be answered after all
		// (answered twice: failed, then the reply on re-attach).
		select {
		case <-ctx.Done():
			return r.giveUp(ctx, world, id, fmt.Errorf("%w: %v", ErrNoReply, context.Cause(ctx)))
		case runErr := <-exited:
			// the command exited: its reply, if it sent one, is in the mailbox now
			exited = nil
			if rec, err := r.Box.GetMessage(ctx, world, id); err == nil {
				if done, reply, err := settled(rec); done {
					return reply, err
				}
			}
			why := "the recipient's command exited without a reply"
			if runErr != nil {
				why += " (" + runErr.Error() + ")"
			}
			return r.giveUp(ctx, world, id, fmt.Errorf("%w: %s", ErrNoReply, why))
		case <-tick.C:
		case <-wake:
		}
	}
}

// ResolveRetry bounds how long giveUp keeps trying to record a request failed while the
// store cannot be written (the database restarting): the requester is told its request
// failed only once the mailbox says so, or once ResolveRetry passed — then the request
// stays pending (answerable, and a re-attach settles it), the one case where the
// requester's failure and the mailbox may disagree.
const ResolveRetry = time.Minute

// resolveRetryEvery is the interval of giveUp's tries (a shorter Router.Poll wins).
const resolveRetryEvery = 200 * time.Millisecond

// giveUp resolves request id failed; when a reply was recorded first, that reply is the
// answer. A failure to write the resolution (not a refusal) is tried again every 200 ms
// (or every Poll, when shorter), for ResolveRetry at most.
func (r *Router) giveUp(ctx context.Context, world, id string, why error) (kernel.MessageEnvelope, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	every := resolveRetryEvery
	if r.Poll > 0 && r.Poll < every {
		every = r.Poll
	}
	// the caller's context may be over: the resolution is written regardless
	var rec store.MessageRecord
	var err error
	for deadline := time.Now().Add(ResolveRetry); ; time.Sleep(every) {
		rec, err = r.Box.FailMessage(context.WithoutCancel(ctx), world, id, kernel.CodeMessageReplyResolutionFailed, kernel.FormatTimestamp(now().UnixMilli()))
		if err == nil || errors.Is(err, store.ErrAlreadyResolved) || errors.Is(err, store.ErrNotFound) || !time.Now().Before(deadline) {
			break
		}
	}
	if err == nil && r.Notifier != nil {
		r.Notifier.Notify(world, id) // another waiter of the id (a re-attached one) ends too
	}
	if errors.Is(err, store.ErrAlreadyResolved) {
		if done, reply, serr := settled(rec); done && serr == nil {
			return reply, nil
		}
	}
	return kernel.MessageEnvelope{}, why
}
