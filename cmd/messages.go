package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

var messageStatuses = []string{"pending", "answered", "failed"}

func newMessagesCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "messages",
		Short: "Send, list and answer messages between agents and people (the mailbox)",
		Long: `A message carries data and a purpose, never authority: each send is authorized by a grant
on sharedos.messaging / [<kind>, <id>] of the receiver / send, and the receiver acts under
its own grants. Recipients are configured under agents: in the configuration file (mode
wait: a person or another process answers with 'messages reply'; mode exec: sharedos runs
the recipient's command, which answers the same way).`,
		Example: `  sharedos --as agent:writer messages send --to agent:reviewer --payload '{"ask":"may I deploy?"}'
  sharedos --as agent:reviewer messages inbox --status pending
  sharedos --as agent:reviewer messages reply 0b6c… --payload '{"answer":"yes"}'`,
		Args: noArgs,
	}
	c.AddCommand(newMessagesInboxCmd(f, nil), newMessagesShowCmd(f, nil), newMessagesReplyCmd(f, nil), newMessagesSendCmd(f, nil),
		newMessagesWaitCmd(f, nil))
	return c
}

// messaging is the service's mailbox, or a usage error when the backend has none.
func messaging(get func() (api.Service, error)) (api.Messaging, error) {
	svc, err := get()
	if err != nil {
		return nil, err
	}
	m, ok := svc.(api.Messaging)
	if !ok {
		return nil, usageError("run the messages commands against the embedded backend", "this backend has no mailbox")
	}
	return m, nil
}

// MessagesInboxOptions are the options of `messages inbox`.
type MessagesInboxOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)
	Status  string
	Limit   int
}

// newMessagesInboxCmd builds `messages inbox`; runF, when set, replaces the run.
func newMessagesInboxCmd(f *Factory, runF func(*MessagesInboxOptions) error) *cobra.Command {
	opts := &MessagesInboxOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
	c := &cobra.Command{
		Use:   "inbox",
		Short: "List the messages to the context's actor (--as), newest first",
		Example: `  sharedos --as agent:reviewer messages inbox
  sharedos --as agent:reviewer messages inbox --status pending -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Status != "" {
				if err := checkVocabulary("status", []string{opts.Status}, messageStatuses); err != nil {
					return err
				}
			}
			if opts.Limit < 0 {
				return usageError("pass --limit 0 (all) or a positive number", "invalid --limit %d", opts.Limit)
			}
			if runF != nil {
				return runF(opts)
			}
			return runMessagesInbox(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Status, "status", "", "only messages of this status: "+strings.Join(messageStatuses, ", "))
	c.Flags().IntVar(&opts.Limit, "limit", 0, "at most this many (0: all)")
	_ = c.RegisterFlagCompletionFunc("status", completeList(messageStatuses))
	return c
}

func runMessagesInbox(ctx context.Context, opts *MessagesInboxOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	m, err := messaging(opts.Service)
	if err != nil {
		return err
	}
	msgs, err := m.Inbox(ctx, api.InboxQuery{Status: opts.Status, Limit: opts.Limit})
	if err != nil {
		return serviceError(err)
	}
	if msgs == nil {
		msgs = []api.Message{}
	}
	if p.format != FormatTable {
		return p.data(msgs)
	}
	if len(msgs) == 0 {
		return p.empty("No messages.")
	}
	t := p.table("ID", "FROM", "STATUS", "PURPOSE", "ACCEPTED", "PAYLOAD")
	for _, msg := range msgs {
		t.row(msg.Envelope.ID, msg.Envelope.Sender.String(), msg.Status, msg.Envelope.Purpose, msg.AcceptedAt, clip(string(msg.Envelope.Payload), 60))
	}
	return t.render()
}

func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// MessagesShowOptions are the options of `messages show`.
type MessagesShowOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)
	ID      string
}

// newMessagesShowCmd builds `messages show`; runF, when set, replaces the run.
func newMessagesShowCmd(f *Factory, runF func(*MessagesShowOptions) error) *cobra.Command {
	opts := &MessagesShowOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
	return &cobra.Command{
		Use:     "show ID",
		Short:   "Show one message of the context's world: its envelope, status and reply",
		Example: `  sharedos messages show 0b6c2f1e-… -o json`,
		Args:    exactArgs(1, "the message id"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runMessagesShow(c.Context(), opts)
		},
	}
}

func runMessagesShow(ctx context.Context, opts *MessagesShowOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	m, err := messaging(opts.Service)
	if err != nil {
		return err
	}
	msg, err := m.ShowMessage(ctx, opts.ID)
	if err != nil {
		return serviceError(err)
	}
	if p.format != FormatTable {
		return p.data(msg)
	}
	e := msg.Envelope
	t := p.table("FIELD", "VALUE")
	t.row("id", e.ID)
	t.row("from", e.Sender.String())
	t.row("to", e.Receiver.String())
	t.row("purpose", e.Purpose)
	t.row("trace", e.TraceID)
	t.row("status", msg.Status)
	t.row("accepted", msg.AcceptedAt)
	t.row("payload", string(e.Payload))
	if msg.Reply != nil {
		t.row("reply", string(msg.Reply.Payload))
		t.row("answered", msg.ResolvedAt)
	}
	if msg.FailedCode != "" {
		t.row("failed", string(msg.FailedCode)+" at "+msg.ResolvedAt)
	}
	return t.render()
}

// MessagesSendOptions are the options of `messages send` and, with ID, `messages reply`.
type MessagesSendOptions struct {
	IO          *IOStreams
	Printer     func() (*printer, error)
	Service     func() (api.Service, error)
	To          string
	ID          string
	Payload     string
	PayloadFile string
}

// payload reads the message payload of --payload or --payload-file ("-": stdin).
func (o *MessagesSendOptions) payload() (json.RawMessage, error) {
	raw := []byte(o.Payload)
	if o.PayloadFile != "" {
		var err error
		if o.PayloadFile == "-" {
			raw, err = io.ReadAll(io.LimitReader(o.IO.In, kernel.DefaultMaxMessagePayload+1))
		} else {
			raw, err = os.ReadFile(o.PayloadFile)
		}
		if err != nil {
			return nil, usageError("name a readable file", "read --payload-file %s: %v", o.PayloadFile, unwrapPathErr(err))
		}
	}
	if !json.Valid(raw) {
		return nil, usageError(`the payload is one JSON value, e.g. --payload '{"ask":"summarise"}'`, "the payload is not valid JSON")
	}
	return raw, nil
}

func checkPayloadFlags(o *MessagesSendOptions) error {
	switch {
	case o.Payload != "" && o.PayloadFile != "":
		return usageError("pass one of them", "--payload and --payload-file are exclusive")
	case o.Payload == "" && o.PayloadFile == "":
		return usageError(`pass --payload JSON or --payload-file FILE`, "no payload")
	}
	return nil
}

// newMessagesSendCmd builds `messages send`; runF, when set, replaces the run.
func newMessagesSendCmd(f *Factory, runF func(*MessagesSendOptions) error) *cobra.Command {
	opts := &MessagesSendOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{Actor: true}) }}
	c := &cobra.Command{
		Use:   "send --to ADDR --payload JSON",
		Short: "Send one message as the context's actor (authorized, delivered, audited; no wait for a reply)",
		Long: `Send one message as the context's actor. The send is authorized by a grant on
sharedos.messaging / [<kind>, <id>] of the recipient / send and recorded (message.sent).
Exit 0 when accepted, 3 when denied (no grant, an unreachable recipient), 4 when failed.`,
		Example: `  sharedos --as agent:writer messages send --to agent:reviewer --payload '{"ask":"may I deploy?"}'`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.To == "" {
				return usageError("pass --to kind:id, e.g. --to agent:reviewer", "no recipient")
			}
			if _, err := host.ParseAddressFlag("to", opts.To); err != nil {
				return err
			}
			if err := checkPayloadFlags(opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runMessagesSend(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.To, "to", "", "the recipient, kind:id")
	c.Flags().StringVar(&opts.Payload, "payload", "", "the payload, one JSON value")
	c.Flags().StringVar(&opts.PayloadFile, "payload-file", "", "read the payload from this file (- for stdin)")
	return c
}

// newMessagesReplyCmd builds `messages reply`; runF, when set, replaces the run.
func newMessagesReplyCmd(f *Factory, runF func(*MessagesSendOptions) error) *cobra.Command {
	opts := &MessagesSendOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{Actor: true}) }}
	c := &cobra.Command{
		Use:   "reply ID --payload JSON",
		Short: "Answer one message as its receiver (a send back, authorized under the receiver's own grants)",
		Long: `Answer one message as its receiver (--as). The answer keeps the request's purpose and
trace, and is a send back to the requester: it needs a grant on sharedos.messaging /
[<kind>, <id>] of the requester / send. Exit 0 when delivered, 3 when denied (not the
receiver: receiver_mismatch; no grant), 4 when failed.`,
		Example: `  sharedos --as agent:reviewer messages reply 0b6c2f1e-… --payload '{"answer":"yes"}'
  sharedos --as agent:reviewer messages reply "$SHAREDOS_MESSAGE_ID" --payload-file answer.json`,
		Args: exactArgs(1, "the message id"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if err := checkPayloadFlags(opts); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runMessagesSend(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Payload, "payload", "", "the answer's payload, one JSON value")
	c.Flags().StringVar(&opts.PayloadFile, "payload-file", "", "read the payload from this file (- for stdin)")
	return c
}

// runMessagesSend sends (opts.ID empty) or answers (opts.ID) and exits by the receipt.
func runMessagesSend(ctx context.Context, opts *MessagesSendOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	payload, err := opts.payload()
	if err != nil {
		return err
	}
	m, err := messaging(opts.Service)
	if err != nil {
		return err
	}
	var sent api.MessageSent
	if opts.ID != "" {
		sent, err = m.ReplyMessage(ctx, api.ReplyMessageRequest{ID: opts.ID, Payload: payload})
	} else {
		to, _ := host.ParseAddressFlag("to", opts.To)
		sent, err = m.SendMessage(ctx, api.SendMessageRequest{To: to, Payload: payload})
	}
	if err != nil {
		return serviceError(err)
	}
	r := sent.Receipt
	if p.format != FormatTable {
		if err := p.data(sent); err != nil {
			return err
		}
	} else if r.Ok() {
		p.line("%s %s to %s (%s)", r.Status, r.MessageID, sent.Envelope.Receiver, map[bool]string{true: "reply", false: "message"}[opts.ID != ""])
	} else {
		fmt.Fprintf(opts.IO.ErrOut, "sharedos: message %s %s: %s (%s)\n", r.MessageID, r.Status, r.Error.Message, r.Error.Code)
	}
	switch r.Status {
	case kernel.DeliveryAccepted, kernel.DeliveryDelivered:
		return nil
	case kernel.DeliveryDenied:
		return &resultExit{code: ExitDenied}
	}
	return &resultExit{code: ExitToolFailed}
}

// newMessagesWaitCmd builds `messages wait`; runF, when set, replaces the run.
func newMessagesWaitCmd(f *Factory, runF func(*MessagesShowOptions) error) *cobra.Command {
	opts := &MessagesShowOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{Actor: true}) }}
	return &cobra.Command{
		Use:   "wait ID",
		Short: "Wait for the reply to one of the actor's requests (re-attach after a restart)",
		Long: `Wait for the reply to request ID sent by the context's actor (--as): what a requester
does after the process that waited was restarted. It prints the message once answered
(exit 0) or resolved failed (exit 4): when the reply timeout (messages.replyTimeout,
counted from the request's acceptance) passes first, the request is resolved failed
message_reply_resolution_failed and can no longer be answered.`,
		Example: `  sharedos --as agent:writer messages wait 0b6c2f1e-…`,
		Args:    exactArgs(1, "the message id"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runMessagesWait(c.Context(), opts)
		},
	}
}

func runMessagesWait(ctx context.Context, opts *MessagesShowOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	m, err := messaging(opts.Service)
	if err != nil {
		return err
	}
	msg, err := m.WaitReply(ctx, opts.ID)
	if err != nil {
		return serviceError(err)
	}
	if p.format != FormatTable {
		err = p.data(msg)
	} else if msg.Reply != nil {
		p.line("answered %s: %s", msg.Envelope.ID, msg.Reply.Payload)
	} else {
		p.line("%s %s: %s", msg.Status, msg.Envelope.ID, msg.FailedCode)
	}
	if err != nil {
		return err
	}
	if msg.Status != "answered" {
		return &resultExit{code: ExitToolFailed}
	}
	return nil
}
