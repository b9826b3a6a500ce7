package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// sendGrantTo allows send to one receiver (max uses; 0 = unbounded).
func sendGrantTo(id string, to kernel.Address, max int64) kernel.CapabilityGrant {
	g := grant(id, []string{"send"}, kernel.ScopeExact)
	g.Capabilities[0].Resource = kernel.ResourceRef{Namespace: kernel.MessagingNamespace, Path: []string{string(to.Kind), to.ID}}
	if max > 0 {
		g.Constraints.MaxUses = &max
	}
	return g
}

// fakeTransport records deliveries and answers with a scripted receipt.
type fakeTransport struct {
	mu        sync.Mutex
	delivered []kernel.MessageEnvelope
	fail      bool
	receipt   func(env kernel.MessageEnvelope) kernel.MessageDeliveryResult
}

func (f *fakeTransport) Deliver(_ context.Context, actx kernel.AccessContext, env kernel.MessageEnvelope) (kernel.MessageDeliveryResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delivered = append(f.delivered, env)
	if f.fail {
		return kernel.MessageDeliveryResult{}, errors.New("secret transport outage")
	}
	if f.receipt != nil {
		return f.receipt(env), nil
	}
	return kernel.MessageDeliveryResult{Status: kernel.DeliveryAccepted, MessageID: env.ID, Timestamp: actx.Now}, nil
}

func (f *fakeTransport) count() int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.delivered) }

// fakeRouter answers each request with reply(request).
type fakeRouter struct {
	reply func(req kernel.MessageEnvelope) (kernel.MessageEnvelope, error)
}

func (r *fakeRouter) ResolveReply(_ context.Context, _ kernel.AccessContext, req kernel.MessageEnvelope, _ kernel.MessageDeliveryResult) (kernel.MessageEnvelope, error) {
	return r.reply(req)
}

// answer is the reply a well-behaved recipient gives.
func answer(req kernel.MessageEnvelope) kernel.MessageEnvelope {
	return kernel.MessageEnvelope{Version: "1", ID: "reply-" + req.ID, Sender: req.Receiver, Receiver: req.Sender,
		Purpose: req.Purpose, Payload: json.RawMessage(`{"summary":"done"}`), TraceID: req.TraceID, CreatedAt: req.CreatedAt, ReplyTo: req.ID}
}

func envelopeTo(to kernel.Address) kernel.MessageEnvelope {
	return kernel.MessageEnvelope{Version: "1", ID: "m-1", Sender: bob, Receiver: to, Purpose: "prepare-update",
		Payload: json.RawMessage(`{"q":1}`), TraceID: "trace-1", CreatedAt: admitted}
}

func messageEvents(events []kernel.AuditEvent) []kernel.AuditEvent {
	var out []kernel.AuditEvent
	for _, ev := range events {
		if ev.Type == kernel.EventMessageSent {
			out = append(out, ev)
		}
	}
	return out
}

// TestSendMessageCodes is spec 80 §2 in order: every refusal and failure code of the
// direct send, each with one message.sent record, and a use spent only when the send was
// authorized (a refusal spends nothing).
func TestSendMessageCodes(t *testing.T) {
	type tc struct {
		name     string
		grants   []kernel.CapabilityGrant
		mode     string // grant store mode
		resolver kernel.MessageCapabilityResolver
		edit     func(*kernel.MessageEnvelope)
		tr       *fakeTransport
		noTr     bool
		status   kernel.MessageDeliveryStatus
		code     kernel.ErrorCode
		spent    int64
		reached  bool // the transport was called
	}
	bounded := []kernel.CapabilityGrant{sendGrantTo("g-send", carol, 5)}
	cases := []tc{
		{name: "sender mismatch", grants: bounded, edit: func(e *kernel.MessageEnvelope) { e.Sender = carol; e.Receiver = bob },
			status: kernel.DeliveryDenied, code: kernel.CodeMessageContextMismatch},
		{name: "purpose mismatch", grants: bounded, edit: func(e *kernel.MessageEnvelope) { e.Purpose = "other" },
			status: kernel.DeliveryDenied, code: kernel.CodeMessageContextMismatch},
		{name: "trace mismatch", grants: bounded, edit: func(e *kernel.MessageEnvelope) { e.TraceID = "trace-2" },
			status: kernel.DeliveryDenied, code: kernel.CodeMessageContextMismatch},
		{name: "to oneself", grants: bounded, edit: func(e *kernel.MessageEnvelope) { e.Receiver = bob },
			status: kernel.DeliveryDenied, code: kernel.CodeMessageRecipientIsSender},
		{name: "payload too large", grants: bounded, edit: func(e *kernel.MessageEnvelope) {
			e.Payload = json.RawMessage(`"` + strings.Repeat("x", kernel.DefaultMaxMessagePayload) + `"`)
		}, status: kernel.DeliveryDenied, code: kernel.CodeMessagePayloadTooLarge},
		{name: "resolver fails", grants: bounded, resolver: func(kernel.AccessContext, kernel.MessageEnvelope) (kernel.CapabilityRequirement, error) {
			return kernel.CapabilityRequirement{}, errors.New("directory down")
		}, status: kernel.DeliveryFailed, code: kernel.CodeMessageRequirementResolutionFailed},
		{name: "receiver id not a path segment", grants: bounded, edit: func(e *kernel.MessageEnvelope) { e.Receiver.ID = "a/b" },
			status: kernel.DeliveryFailed, code: kernel.CodeMessageRequirementResolutionFailed},
		{name: "authority unavailable", grants: bounded, mode: "throws",
			status: kernel.DeliveryDenied, code: kernel.ErrorCodeOf(kernel.ReasonAuthorityUnavailable)},
		{name: "no grant for this receiver", grants: []kernel.CapabilityGrant{sendGrantTo("g-send", kernel.Address{Kind: kernel.KindAgent, ID: "dave"}, 5)},
			status: kernel.DeliveryDenied, code: kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant)},
		{name: "grant exhausted", grants: []kernel.CapabilityGrant{sendGrantTo("g-send", carol, 1)}, spent: 1,
			status: kernel.DeliveryDenied, code: kernel.ErrorCodeOf(kernel.ReasonGrantExhausted)},
		{name: "no transport", grants: bounded, noTr: true, spent: 1,
			status: kernel.DeliveryFailed, code: kernel.CodeMessageTransportNotConfigured},
		{name: "transport errors", grants: bounded, tr: &fakeTransport{fail: true}, spent: 1, reached: true,
			status: kernel.DeliveryFailed, code: kernel.CodeMessageDeliveryFailed},
		{name: "receipt names another message", grants: bounded, spent: 1, reached: true, tr: &fakeTransport{receipt: func(e kernel.MessageEnvelope) kernel.MessageDeliveryResult {
			return kernel.MessageDeliveryResult{Status: kernel.DeliveryAccepted, MessageID: "other", Timestamp: admitted}
		}}, status: kernel.DeliveryFailed, code: kernel.CodeInvalidMessageReceipt},
		{name: "receipt fails the schema", grants: bounded, spent: 1, reached: true, tr: &fakeTransport{receipt: func(e kernel.MessageEnvelope) kernel.MessageDeliveryResult {
			return kernel.MessageDeliveryResult{Status: kernel.DeliveryDenied, MessageID: e.ID, Timestamp: admitted}
		}}, status: kernel.DeliveryFailed, code: kernel.CodeInvalidMessageReceipt},
		{name: "the transport's own denial, verbatim", grants: bounded, spent: 1, reached: true, tr: &fakeTransport{receipt: func(e kernel.MessageEnvelope) kernel.MessageDeliveryResult {
			return kernel.MessageDeliveryResult{Status: kernel.DeliveryDenied, MessageID: e.ID, Timestamp: admitted,
				Error: &kernel.ProtocolError{Code: kernel.CodeRecipientUnreachable, Message: "no route to agent:carol"}}
		}}, status: kernel.DeliveryDenied, code: kernel.CodeRecipientUnreachable},
		{name: "accepted", grants: bounded, spent: 1, reached: true, status: kernel.DeliveryAccepted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			audit, usage := &memAudit{}, newMemUsage()
			if c.name == "grant exhausted" {
				usage.used[usageKey(kernel.UsageKeyOf(&c.grants[0]))] = 1
			}
			tr := c.tr
			if tr == nil {
				tr = &fakeTransport{}
			}
			cfg := kernel.Config{Grants: &grantStore{grants: c.grants, mode: c.mode}, Usage: usage, Audit: audit,
				MessageTransport: tr, MessageResolver: c.resolver}
			if c.noTr {
				cfg.MessageTransport = nil
			}
			k := kernel.New(cfg)
			env := envelopeTo(carol)
			if c.edit != nil {
				c.edit(&env)
			}
			res, err := mustTurn(t, k, testContext()).SendMessage(context.Background(), env)
			if err != nil {
				t.Fatalf("SendMessage: %v", err)
			}
			if res.Status != c.status || (c.code == "") != (res.Error == nil) || (res.Error != nil && res.Error.Code != c.code) || res.MessageID != env.ID {
				t.Fatalf("result %+v (error %+v), want %s %s", res, res.Error, c.status, c.code)
			}
			if res.Error != nil && strings.Contains(res.Error.Message, "secret") {
				t.Fatalf("the transport's error text reached the result: %q", res.Error.Message)
			}
			evs := messageEvents(audit.all())
			if len(evs) != 1 || evs[0].Reason != c.code || evs[0].Metadata["messageId"] != env.ID {
				t.Fatalf("message.sent records %+v, want one with reason %q", evs, c.code)
			}
			if got := usage.used[usageKey(kernel.UsageKeyOf(&c.grants[0]))]; got != c.spent {
				t.Fatalf("%d uses spent, want %d", got, c.spent)
			}
			if (tr.count() > 0) != c.reached {
				t.Fatalf("transport called %d times, reached want %v", tr.count(), c.reached)
			}
		})
	}
}

// TestSendMessageInvalidEnvelopeIsARequestError: an envelope that fails the contract is an
// error (ErrInvalidMessage), before anything is decided, spent or delivered.
func TestSendMessageInvalidEnvelopeIsARequestError(t *testing.T) {
	tr, audit, usage := &fakeTransport{}, &memAudit{}, newMemUsage()
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{sendGrantTo("g", carol, 5)}}, Usage: usage, Audit: audit, MessageTransport: tr})
	for _, edit := range []func(*kernel.MessageEnvelope){
		func(e *kernel.MessageEnvelope) { e.Version = "2" },
		func(e *kernel.MessageEnvelope) { e.ID = "" },
		func(e *kernel.MessageEnvelope) { e.Purpose = " padded " },
		func(e *kernel.MessageEnvelope) { e.Payload = json.RawMessage(`{`) },
		func(e *kernel.MessageEnvelope) { e.CreatedAt = "yesterday" },
	} {
		env := envelopeTo(carol)
		edit(&env)
		if _, err := mustTurn(t, k, testContext()).SendMessage(context.Background(), env); !errors.Is(err, kernel.ErrInvalidMessage) {
			t.Fatalf("%+v: err %v, want ErrInvalidMessage", env, err)
		}
	}
	if tr.count() != 0 || len(messageEvents(audit.all())) != 0 || len(usage.used) != 0 {
		t.Fatalf("an invalid envelope reached the transport (%d), the trail or the usage store", tr.count())
	}
}

func TestMessageEnvelopeDecodesStrictly(t *testing.T) {
	good := `{"version":"1","id":"m-1","sender":{"kind":"agent","agentId":"bob"},"receiver":{"kind":"agent","agentId":"carol"},` +
		`"purpose":"p","payload":{"b":1, "a":[true,null]},"traceId":"t","createdAt":"2026-08-03T09:00:00.000Z"}`
	var e kernel.MessageEnvelope
	if err := json.Unmarshal([]byte(good), &e); err != nil {
		t.Fatal(err)
	}
	if string(e.Payload) != `{"a":[true,null],"b":1}` {
		t.Fatalf("payload %s not canonical", e.Payload)
	}
	for _, bad := range []string{
		strings.Replace(good, `"traceId"`, `"intent":"x","traceId"`, 1),
		strings.Replace(good, `"version":"1",`, ``, 1),
		strings.Replace(good, `"id":"m-1"`, `"id":null`, 1),
		strings.Replace(good, `"traceId"`, `"replyTo":"","traceId"`, 1),
		strings.Replace(good, `{"b":1, "a":[true,null]}`, `{"a":1,"a":2}`, 1),
	} {
		if err := json.Unmarshal([]byte(bad), &e); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func TestMessageRequestArgumentsAreStrict(t *testing.T) {
	ok := `{"recipient":{"kind":"human","userId":"carol"},"payload":[1]}`
	a, err := kernel.ParseMessageRequestArguments(json.RawMessage(ok))
	if err != nil || a.Recipient != carol || string(a.Payload) != `[1]` {
		t.Fatalf("%+v %v", a, err)
	}
	for _, key := range []string{"sender", "purpose", "traceId", "messageId", "intent", "replyTo"} {
		bad := strings.Replace(ok, `"payload"`, `"`+key+`":"x","payload"`, 1)
		if _, err := kernel.ParseMessageRequestArguments(json.RawMessage(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	for _, bad := range []string{`{"recipient":{"kind":"agent","agentId":"carol"}}`, `{"payload":1}`,
		`{"recipient":{"kind":"agent","agentId":" carol"},"payload":1}`, `{"recipient":{"kind":"agent","userId":"carol"},"payload":1}`,
		`{"recipient":{"kind":"robot","agentId":"carol"},"payload":1}`, `{"recipient":{"kind":"agent","agentId":"` + strings.Repeat("é", 257) + `"},"payload":1}`} {
		if _, err := kernel.ParseMessageRequestArguments(json.RawMessage(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if _, err := kernel.ParseMessageRequestArguments(json.RawMessage(`{"recipient":{"kind":"agent","agentId":"` + strings.Repeat("é", 256) + `"},"payload":1}`)); err != nil {
		t.Errorf("256 code points refused: %v", err)
	}
}

// TestSendReplyInboundChecks: only the receiver answers (receiver_mismatch), the reply
// keeps the request's purpose and trace (message_context_mismatch), and the answer is a
// send back authorized under the replier's own grants (no grant: no_matching_grant).
func TestSendReplyInboundChecks(t *testing.T) {
	request := kernel.MessageEnvelope{Version: "1", ID: "req-1", Sender: alice, Receiver: bob, Purpose: "prepare-update",
		Payload: json.RawMessage(`1`), TraceID: "trace-1", CreatedAt: admitted}
	back := func() kernel.MessageEnvelope {
		return kernel.MessageEnvelope{Version: "1", ID: "rep-1", Sender: bob, Receiver: alice, Purpose: "prepare-update",
			Payload: json.RawMessage(`2`), TraceID: "trace-1", CreatedAt: admitted, ReplyTo: "req-1"}
	}
	other := request
	other.Receiver = carol
	purpose := back()
	purpose.Purpose = "elsewhere"
	wrongTo := back()
	wrongTo.ReplyTo = "req-2"
	for _, c := range []struct {
		name    string
		request kernel.MessageEnvelope
		reply   kernel.MessageEnvelope
		grants  []kernel.CapabilityGrant
		code    kernel.ErrorCode
		spent   bool
	}{
		{"not the receiver", other, back(), []kernel.CapabilityGrant{sendGrantTo("g", alice, 5)}, kernel.CodeReceiverMismatch, false},
		{"another purpose", request, purpose, []kernel.CapabilityGrant{sendGrantTo("g", alice, 5)}, kernel.CodeMessageContextMismatch, false},
		{"another request", request, wrongTo, []kernel.CapabilityGrant{sendGrantTo("g", alice, 5)}, kernel.CodeMessageContextMismatch, false},
		{"no grant to answer", request, back(), []kernel.CapabilityGrant{sendGrantTo("g", carol, 5)}, kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant), false},
		{"answered", request, back(), []kernel.CapabilityGrant{sendGrantTo("g", alice, 5)}, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, audit, usage := &fakeTransport{}, &memAudit{}, newMemUsage()
			k := kernel.New(kernel.Config{Grants: &grantStore{grants: c.grants}, Usage: usage, Audit: audit, MessageTransport: tr})
			res, err := mustTurn(t, k, testContext()).SendReply(context.Background(), c.request, c.reply)
			if err != nil {
				t.Fatal(err)
			}
			if (c.code == "") != res.Ok() || (res.Error != nil && res.Error.Code != c.code) {
				t.Fatalf("result %+v %+v, want %q", res, res.Error, c.code)
			}
			if evs := messageEvents(audit.all()); len(evs) != 1 || evs[0].Reason != c.code {
				t.Fatalf("message.sent %+v", evs)
			}
			if spent := len(usage.used) > 0; spent != c.spent || (tr.count() > 0) != c.spent {
				t.Fatalf("spent %v, delivered %d; want %v", usage.used, tr.count(), c.spent)
			}
		})
	}
}
