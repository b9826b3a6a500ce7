package host

// This file holds messaging on the host (spec 80 §4): the configuration's agents: and
// messages: sections, the mailbox transport and router the kernel is given, the exec
// recipient's turn, and the embedded backend of api.Messaging.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/internal/procenv"
	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/store"
)

// ParseAgents reads the configuration's agents: section (a mapping of recipient address
// to {mode, command, grants}); grant paths and a command's relative program path are
// resolved against dir, the configuration file's folder.
func ParseAgents(file, dir string, n *yaml.Node) (map[kernel.Address]mailbox.Route, error) {
	if n.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: agents must be a mapping of recipient (kind:id) to its route", file, n.Line)
	}
	out := map[kernel.Address]mailbox.Route{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		a, err := kernel.ParseAddress(k.Value)
		if err == nil {
			err = a.Validate()
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: agents: %q is not an address (kind:id, e.g. agent:reviewer)", file, k.Line, k.Value)
		}
		if _, dup := out[a]; dup {
			return nil, fmt.Errorf("%s:%d: agents: %s is given twice", file, k.Line, a)
		}
		var raw struct {
			Mode    string   `yaml:"mode"`
			Command []string `yaml:"command"`
			Grants  []string `yaml:"grants"`
		}
		if v.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s:%d: agents.%s must be a mapping with mode (wait or exec)", file, v.Line, a)
		}
		for j := 0; j+1 < len(v.Content); j += 2 {
			switch key := v.Content[j].Value; key {
			case "mode", "command", "grants":
			default:
				return nil, fmt.Errorf("%s:%d: agents.%s: unknown key %q (want mode, command, grants)", file, v.Content[j].Line, a, key)
			}
		}
		if err := v.Decode(&raw); err != nil {
			return nil, fmt.Errorf("%s:%d: agents.%s: %v", file, v.Line, a, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		r := mailbox.Route{Mode: raw.Mode, Command: raw.Command, Grants: raw.Grants}
		for i, g := range r.Grants {
			if g != "" && !filepath.IsAbs(g) {
				r.Grants[i] = filepath.Join(dir, g)
			}
		}
		if len(r.Command) > 0 && strings.ContainsRune(r.Command[0], filepath.Separator) && !filepath.IsAbs(r.Command[0]) {
			r.Command[0] = filepath.Join(dir, r.Command[0])
		}
		out[a] = r
	}
	return out, nil
}

// MessagingConfig builds the messaging configuration from the agents: routes and the
// messages: section's values (replyTimeout a duration, maxInFlight a count; unset: the
// defaults). It is nil — messaging not configured — when routes is nil.
func MessagingConfig(routes map[kernel.Address]mailbox.Route, replyTimeout string, maxInFlight int) (*mailbox.Config, error) {
	if routes == nil {
		if replyTimeout != "" || maxInFlight != 0 {
			return nil, errors.New("messages: is set but no agents: are configured; messaging needs agents")
		}
		return nil, nil
	}
	c := &mailbox.Config{Routes: routes, MaxInFlight: maxInFlight}
	if replyTimeout != "" {
		d, err := time.ParseDuration(replyTimeout)
		if err != nil {
			return nil, fmt.Errorf("messages.replyTimeout %q is not a duration (e.g. 5m, 90s)", replyTimeout)
		}
		if d <= 0 {
			return nil, fmt.Errorf("messages.replyTimeout %s must be between 1s and %s", d, mailbox.MaxReplyTimeout)
		}
		c.ReplyTimeout = d
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// messagingPorts are the kernel's transport and router over st (nil, nil when messaging
// is not configured).
// With recorded (the kernel's audit sink and usage store are box's store), a delivery
// is written with its records in one transaction (mailbox.Transport.Recorded).
func (p *Prepared) messagingPorts(box store.Mailbox, recorded bool) (kernel.MessageTransport, kernel.MessageRequestRouter) {
	cfg := p.Settings.Messaging
	if cfg == nil || box == nil {
		return nil, nil
	}
	now := p.clock
	if now == nil {
		now = time.Now
	}
	claims, _ := box.(store.Idempotency)
	hints, poll := hintsFor(box, cfg)
	return &mailbox.Transport{Box: box, Config: cfg, Now: now, Claims: claims, Notifier: hints, Recorded: recorded},
		&mailbox.Router{Box: box, Config: cfg, Run: p.runRecipient, Report: reportNoReply, Notifier: hints, Poll: poll}
}

// mailboxHints is the process's wake-up hints of waiting requests (mailbox.Notifier) on
// a store without hints of its own (SQLite): a reply recorded by any turn of this
// process (serve's operator answering, an exec recipient answering through the same
// serve) wakes its waiter at once; a reply recorded by another process is found by the
// router's poll (hintPoll).
var mailboxHints = mailbox.NewHub()

// hintPoll is the routers' poll over a store without hints of its own: a reply by
// another process (`sharedos messages reply`, an exec recipient's command) is found by
// it.
const hintPoll = mailbox.DefaultPoll

// storeHints is a store with wake-up hints of its own (pgstore: LISTEN/NOTIFY).
type storeHints interface {
	MessageHints() mailbox.Notifier
}

// hintsFor returns the wake-up hints and the poll of the routers over box. A store with
// hints of its own (PostgreSQL: a reply or failure recorded by any process is announced
// by NOTIFY, and the store's listener wakes the waiters) gives them, and the poll is the
// fallback (0: mailbox.FallbackPoll, 1 s) — in every process on that store, `serve` and
// a CLI command that waits alike (the listener's connection is opened by the first
// wait). Otherwise (SQLite) the process's hub, and the poll every 50 ms. With
// cfg.NoStoreHints (the benchmark's "NOTIFY dropped") no hints: the fallback poll alone.
func hintsFor(box store.Mailbox, cfg *mailbox.Config) (mailbox.Notifier, time.Duration) {
	h, ok := box.(storeHints)
	switch {
	case !ok:
		return mailboxHints, hintPoll
	case cfg != nil && cfg.NoStoreHints:
		return nil, mailbox.FallbackPoll
	}
	return h.MessageHints(), 0
}

// runRecipient runs an exec recipient's command as its own turn: its environment names
// the request (SHAREDOS_MESSAGE_ID, SHAREDOS_REQUESTER), the recipient's context
// (SHAREDOS_AS the recipient, SHAREDOS_WORLD, SHAREDOS_PURPOSE and SHAREDOS_TRACE the
// request's, SHAREDOS_GRANTS its own grant files — never the requester's), the same state
// database and configuration (SHAREDOS_STATE, SHAREDOS_CONFIG, SHAREDOS_ROOT) and this
// program (SHAREDOS_BIN); the request envelope is its standard input. Every other
// SHAREDOS_ variable of this process is left out, so nothing of the requester's context
// reaches it. It answers with `sharedos messages reply "$SHAREDOS_MESSAGE_ID" …`.
func (p *Prepared) runRecipient(ctx context.Context, route mailbox.Route, req kernel.MessageEnvelope, world string) error {
	s := p.Settings
	environ := s.Environ
	if environ == nil {
		environ = procenv.Environ
	}
	env := []string{}
	for _, kv := range environ() {
		if !strings.HasPrefix(kv, "SHAREDOS_") {
			env = append(env, kv)
		}
	}
	bin, _ := os.Executable()
	env = append(env,
		"SHAREDOS_MESSAGE_ID="+req.ID,
		"SHAREDOS_REQUESTER="+req.Sender.String(),
		"SHAREDOS_AS="+req.Receiver.String(),
		"SHAREDOS_WORLD="+world,
		"SHAREDOS_PURPOSE="+req.Purpose,
		"SHAREDOS_TRACE="+req.TraceID,
		"SHAREDOS_GRANTS="+strings.Join(route.Grants, string(filepath.ListSeparator)),
		"SHAREDOS_STATE="+s.State,
		"SHAREDOS_ROOT="+s.Root,
		"SHAREDOS_BIN="+bin)
	if s.ConfigFile != "" {
		env = append(env, "SHAREDOS_CONFIG="+s.ConfigFile)
	}
	input, err := json.Marshal(req)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, route.Command[0], route.Command[1:]...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(input)
	if s.ConfigFile != "" {
		cmd.Dir = filepath.Dir(s.ConfigFile)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return fmt.Errorf("%s: %w: %s", route.Command[0], err, lastLine(msg))
		}
		return fmt.Errorf("%s: %w", route.Command[0], err)
	}
	return nil
}

// reportNoReply writes why a request got no reply to this process's standard error (the
// operator's log; under `sharedos mcp` the protocol is on standard output): the requester
// is told only message_reply_resolution_failed.
func reportNoReply(world string, req kernel.MessageEnvelope, why error) {
	fmt.Fprintf(os.Stderr, "sharedos: message %s to %s (world %s) got no reply: %s\n", req.ID, req.Receiver, world,
		strings.TrimPrefix(why.Error(), mailbox.ErrNoReply.Error()+": "))
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

var _ api.Messaging = (*Service)(nil)

// mailbox returns the opened host's store as a mailbox.
func (s *Service) mailbox(ctx context.Context) (*Host, store.Mailbox, error) {
	h, err := s.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	box := mailboxOf(h.Store)
	if box == nil {
		return nil, nil, &api.Error{Code: api.CodeStateUnavailable, Message: "the state store has no mailbox",
			Hint: "messages need a state store that keeps them (the SQLite state database)"}
	}
	return h, box, nil
}

// Mailbox is the host's mailbox, or nil when its store keeps no messages.
func (h *Host) Mailbox() store.Mailbox { return mailboxOf(h.Store) }

// mailboxOf is st's mailbox, or nil when st keeps no messages (a store.State need not
// be a store.Mailbox).
func mailboxOf(st store.State) store.Mailbox {
	box, _ := st.(store.Mailbox)
	return box
}

func payloadOf(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, &api.Error{Code: api.CodeInvalidRequest, Message: "the message has no payload", Hint: "pass --payload JSON or --payload-file FILE"}
	}
	p, err := kernel.CanonicalPayload(raw)
	if err != nil {
		return nil, &api.Error{Code: api.CodeInvalidRequest, Message: "the payload is not one JSON value: " + err.Error(),
			Hint: "pass a JSON value, e.g. --payload '{\"ask\":\"summarise\"}'", Err: err}
	}
	return p, nil
}

// SendMessage mints the envelope from the turn's context and sends it
// (kernel.Turn.SendMessage): the host's turn, or the service's own (TurnService).
func (s *Service) SendMessage(ctx context.Context, req api.SendMessageRequest) (api.MessageSent, error) {
	if err := req.To.Validate(); err != nil {
		return api.MessageSent{}, &api.Error{Code: api.CodeInvalidRequest, Message: "invalid recipient: " + err.Error(), Hint: "pass --to kind:id, e.g. --to agent:reviewer"}
	}
	payload, err := payloadOf(req.Payload)
	if err != nil {
		return api.MessageSent{}, err
	}
	h, err := s.open(ctx)
	if err != nil {
		return api.MessageSent{}, err
	}
	actx := s.context(h)
	env := kernel.MessageEnvelope{Version: kernel.MessageProtocolVersion, ID: kernel.NewMessageID(), Sender: actx.Actor, Receiver: req.To,
		Purpose: actx.Purpose, Payload: payload, TraceID: actx.TraceID, CreatedAt: actx.Now}
	res, err := s.turn(h).SendMessage(ctx, env)
	if err != nil {
		return api.MessageSent{}, &api.Error{Code: api.CodeInvalidRequest, Message: err.Error(), Err: err}
	}
	return api.MessageSent{Envelope: env, Receipt: res}, nil
}

func messageOf(r store.MessageRecord) api.Message {
	return api.Message{World: r.World, Envelope: r.Envelope, Status: r.Status, AcceptedAt: r.AcceptedAt, Reply: r.Reply,
		FailedCode: r.FailedCode, ResolvedAt: r.ResolvedAt}
}

// Inbox lists the messages to the context's actor in its world (the service's turn's
// context under TurnService).
func (s *Service) Inbox(ctx context.Context, q api.InboxQuery) ([]api.Message, error) {
	h, box, err := s.mailbox(ctx)
	if err != nil {
		return nil, err
	}
	actx := s.context(h)
	recs, err := box.ListMessages(ctx, store.MessageFilter{World: actx.World, Receiver: actx.Actor,
		Status: q.Status, Limit: q.Limit})
	if err != nil {
		return nil, s.stateErr(err)
	}
	out := make([]api.Message, len(recs))
	for i, r := range recs {
		out[i] = messageOf(r)
	}
	return out, nil
}

// ShowMessage returns message id of the context's world.
func (s *Service) ShowMessage(ctx context.Context, id string) (api.Message, error) {
	h, box, err := s.mailbox(ctx)
	if err != nil {
		return api.Message{}, err
	}
	world := s.context(h).World
	rec, err := box.GetMessage(ctx, world, id)
	if errors.Is(err, store.ErrNotFound) {
		return api.Message{}, &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("no message %s in world %s", id, world),
			Hint: "'sharedos messages inbox' lists the messages (check --world)", Err: err}
	}
	if err != nil {
		return api.Message{}, s.stateErr(err)
	}
	return messageOf(rec), nil
}

// ReplyMessage answers message req.ID: the reply carries the request's purpose and trace
// (the turn takes them when neither --purpose nor --trace named others, so a person
// answering needs neither), then kernel.Turn.SendReply checks and sends it. Under
// TurnService the reply always takes the request's purpose and trace, in a turn begun
// for them with the service's turn's options (its audit metadata): a driver's turn
// names who answers and when, not the conversation (a scenario's reply step, as
// `messages reply` without --purpose or --trace).
func (s *Service) ReplyMessage(ctx context.Context, req api.ReplyMessageRequest) (api.MessageSent, error) {
	payload, err := payloadOf(req.Payload)
	if err != nil {
		return api.MessageSent{}, err
	}
	msg, err := s.ShowMessage(ctx, req.ID)
	if err != nil {
		return api.MessageSent{}, err
	}
	h := s.h
	request := msg.Envelope
	turn, actx := s.turn(h), s.context(h)
	switch {
	case s.t != nil:
		actx.Purpose, actx.TraceID = request.Purpose, request.TraceID
		if turn, err = h.Kernel.BeginTurnWith(actx, s.t.Options()); err != nil {
			return api.MessageSent{}, &api.Error{Code: api.CodeInvalidRequest, Message: err.Error(), Err: err}
		}
	case h.Settings.Purpose == "" || h.Settings.Trace == "":
		if h.Settings.Purpose == "" {
			actx.Purpose = request.Purpose
		}
		if h.Settings.Trace == "" {
			actx.TraceID = request.TraceID
		}
		// the turn of the request's purpose and trace keeps the host turn's audit metadata
		// (serve's: its HTTP request's), as every other record of the operation has it
		var opts kernel.TurnOptions
		if turn != nil {
			opts.AuditMetadata = turn.Options().AuditMetadata
		}
		if turn, err = h.Kernel.BeginTurnWith(actx, opts); err != nil {
			return api.MessageSent{}, &api.Error{Code: api.CodeInvalidRequest, Message: err.Error(), Err: err}
		}
	}
	reply := kernel.MessageEnvelope{Version: kernel.MessageProtocolVersion, ID: kernel.NewMessageID(), Sender: actx.Actor,
		Receiver: request.Sender, Purpose: actx.Purpose, Payload: payload, TraceID: actx.TraceID, CreatedAt: actx.Now, ReplyTo: request.ID}
	res, err := turn.SendReply(ctx, request, reply)
	if err != nil {
		return api.MessageSent{}, &api.Error{Code: api.CodeInvalidRequest, Message: err.Error(), Err: err}
	}
	return api.MessageSent{Envelope: reply, Receipt: res}, nil
}

// WaitReply re-attaches to request id of the context's actor (mailbox.Router.Reattach).
func (s *Service) WaitReply(ctx context.Context, id string) (api.Message, error) {
	msg, err := s.ShowMessage(ctx, id)
	if err != nil {
		return api.Message{}, err
	}
	h := s.h
	cfg := h.Settings.Messaging
	if cfg == nil {
		return api.Message{}, &api.Error{Code: api.CodeInvalidRequest, Message: "messaging is not configured",
			Hint: "configure the recipients under agents: in the configuration file"}
	}
	if msg.Envelope.Sender != h.Prepared.Context.Actor {
		return api.Message{}, &api.Error{Code: api.CodeInvalidRequest,
			Message: fmt.Sprintf("message %s was sent by %s, not %s: only its requester waits for its reply", id, msg.Envelope.Sender, h.Prepared.Context.Actor),
			Hint:    "pass --as the requester"}
	}
	now := h.clock
	if now == nil {
		now = time.Now
	}
	box := h.Mailbox()
	if box == nil {
		return api.Message{}, &api.Error{Code: api.CodeStateUnavailable, Message: "the state store has no mailbox"}
	}
	hints, poll := hintsFor(box, cfg)
	r := &mailbox.Router{Box: box, Config: cfg, Now: now, Notifier: hints, Poll: poll}
	if _, err := r.Reattach(ctx, h.Prepared.Context.World, id); err != nil && !errors.Is(err, mailbox.ErrNoReply) {
		return api.Message{}, s.stateErr(err)
	}
	return s.ShowMessage(ctx, id)
}

// SortedRoutes lists the configured recipients, for a surface that shows them.
func SortedRoutes(c *mailbox.Config) []kernel.Address {
	if c == nil {
		return nil
	}
	out := make([]kernel.Address, 0, len(c.Routes))
	for a := range c.Routes {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
