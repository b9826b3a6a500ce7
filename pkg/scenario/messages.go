package scenario

import (
	"context"
	"fmt"

	"github.com/sharedos/sharedos/pkg/api"
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

// message runs a send or reply step as `messages send` and `messages reply` do, through
// the api.Messaging of the step's turn (host.TurnService): the envelope is minted from
// the step's context and sent (SendMessage; ReplyMessage with the inbound checks), and
// the receipt is observed (status, code, exit 0 when accepted or delivered, 3 denied, 4
// failed) with the records the step wrote. A reply answers the step actor's newest
// pending message (its inbox), under that message's purpose and trace.
func (r *runner) message(ctx context.Context, t *kernel.Turn, s *Step, o *Observed) error {
	var msgs api.Messaging = r.h.TurnService(t, "")
	var sent api.MessageSent
	if s.Kind == KindSend {
		to, err := kernel.ParseAddress(s.To)
		if err != nil {
			return err
		}
		if sent, err = msgs.SendMessage(ctx, api.SendMessageRequest{To: to, Payload: s.Payload}); err != nil {
			return serviceCause(err)
		}
	} else {
		pending, err := msgs.Inbox(ctx, api.InboxQuery{Status: store.MessagePending, Limit: 1})
		if err != nil {
			return serviceCause(err)
		}
		if len(pending) == 0 {
			return fmt.Errorf("reply: %s has no pending message", t.Context().Actor)
		}
		if sent, err = msgs.ReplyMessage(ctx, api.ReplyMessageRequest{ID: pending[0].Envelope.ID, Payload: s.Payload}); err != nil {
			return serviceCause(err)
		}
	}
	res := sent.Receipt
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
