package scenario

import (
	"context"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/store"
)

// messagingOf is the messaging configuration of a scenario's agents: each a wait
// recipient (a later step answers it); nil when the scenario names none.
func messagingOf(agents []string) *mailbox.Config {
	if agents == nil {
		return nil
	}
	c := &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{}}
	for _, a := range agents {
		addr, _ := kernel.ParseAddress(a) // checked by the parser
		c.Routes[addr] = mailbox.Route{Mode: mailbox.ModeWait}
	}
	return c
}

// message runs a send or reply step as `messages send` and `messages reply` do: the
// envelope is minted from the step's context and sent through the kernel (SendMessage;
// SendReply with the inbound checks), and the receipt is observed (status, code, exit 0
// when accepted or delivered, 3 denied, 4 failed) with the records the step wrote. A
// reply answers the step actor's newest pending message, under that message's purpose
// and trace.
func (r *runner) message(ctx context.Context, t *kernel.Turn, s *Step, o *Observed) error {
	actx := t.Context()
	payload, err := kernel.CanonicalPayload(s.Payload)
	if err != nil {
		return fmt.Errorf("payload: %v", err)
	}
	var res kernel.MessageDeliveryResult
	if s.Kind == KindSend {
		to, err := kernel.ParseAddress(s.To)
		if err != nil {
			return err
		}
		env := kernel.MessageEnvelope{Version: kernel.MessageProtocolVersion, ID: kernel.NewMessageID(), Sender: actx.Actor, Receiver: to,
			Purpose: actx.Purpose, Payload: payload, TraceID: actx.TraceID, CreatedAt: actx.Now}
		if res, err = t.SendMessage(ctx, env); err != nil {
			return err
		}
	} else {
		box := r.h.Mailbox()
		if box == nil {
			return fmt.Errorf("reply: the state store keeps no messages")
		}
		pending, err := box.ListMessages(ctx, store.MessageFilter{World: actx.World, Receiver: actx.Actor, Status: store.MessagePending, Limit: 1})
		if err != nil {
			return err
		}
		if len(pending) == 0 {
			return fmt.Errorf("reply: %s has no pending message", actx.Actor)
		}
		req := pending[0].Envelope
		actx.Purpose, actx.TraceID = req.Purpose, req.TraceID
		rt, err := r.h.Kernel.BeginTurnWith(actx, kernel.TurnOptions{AuditMetadata: map[string]any{"surface": "test"}})
		if err != nil {
			return err
		}
		reply := kernel.MessageEnvelope{Version: kernel.MessageProtocolVersion, ID: kernel.NewMessageID(), Sender: actx.Actor, Receiver: req.Sender,
			Purpose: req.Purpose, Payload: payload, TraceID: req.TraceID, CreatedAt: actx.Now, ReplyTo: req.ID}
		if res, err = rt.SendReply(ctx, req, reply); err != nil {
			return err
		}
	}
	o.Status = string(res.Status)
	o.Exit = exitOK
	if res.Error != nil {
		o.Code, o.Message = string(res.Error.Code), res.Error.Message
		o.Exit = exitToolFail
		if res.Status == kernel.DeliveryDenied {
			o.Exit = exitDenied
		}
	}
	recs, err := r.newRecords(ctx)
	o.Audit = recs
	return err
}
