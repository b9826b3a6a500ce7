package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func msgContext() kernel.AccessContext {
	c := testContext()
	c.EnabledToolNamespaces = []string{"messages"}
	return c
}

func requestCall(id string, to kernel.Address, payload string) kernel.ToolCall {
	b, _ := json.Marshal(to)
	return kernel.ToolCall{ID: id, Tool: kernel.MessageToolName, Arguments: json.RawMessage(`{"recipient":` + string(b) + `,"payload":` + payload + `}`),
		TraceID: "trace-1", RequestedAt: admitted}
}

type msgHarness struct {
	k     *kernel.Kernel
	tr    *fakeTransport
	audit *memAudit
	usage *memUsage
}

func newMsgHarness(t *testing.T, grants []kernel.CapabilityGrant, reply func(kernel.MessageEnvelope) (kernel.MessageEnvelope, error)) *msgHarness {
	t.Helper()
	h := &msgHarness{tr: &fakeTransport{}, audit: &memAudit{}, usage: newMemUsage()}
	if reply == nil {
		reply = func(r kernel.MessageEnvelope) (kernel.MessageEnvelope, error) { return answer(r), nil }
	}
	h.k = kernel.New(kernel.Config{Grants: &grantStore{grants: grants}, Usage: h.usage, Audit: h.audit,
		MessageTransport: h.tr, MessageRouter: &fakeRouter{reply: reply}})
	return h
}

// TestMessageToolRegisteredOnlyWithTransportAndRouter: messages.request exists only when
// both ports are configured.
func TestMessageToolRegisteredOnlyWithTransportAndRouter(t *testing.T) {
	g := []kernel.CapabilityGrant{sendGrantTo("g", carol, 0)}
	for _, c := range []struct {
		tr   kernel.MessageTransport
		r    kernel.MessageRequestRouter
		want bool
	}{{nil, nil, false}, {&fakeTransport{}, nil, false}, {nil, &fakeRouter{}, false}, {&fakeTransport{}, &fakeRouter{reply: func(r kernel.MessageEnvelope) (kernel.MessageEnvelope, error) { return answer(r), nil }}, true}} {
		k := kernel.New(kernel.Config{Grants: &grantStore{grants: g}, Usage: newMemUsage(), MessageTransport: c.tr, MessageRouter: c.r})
		tools, err := mustTurn(t, k, msgContext()).ListTools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := len(tools) == 1 && tools[0].Name == kernel.MessageToolName; got != c.want {
			t.Fatalf("transport %v router %v: catalogue %+v", c.tr != nil, c.r != nil, tools)
		}
		res := k.InvokeTool(context.Background(), msgContext(), requestCall("c1", carol, `1`))
		if (res.Cause == kernel.CauseNotRegistered) == c.want {
			t.Fatalf("transport %v router %v: call %+v", c.tr != nil, c.r != nil, res)
		}
	}
}

// TestMessageToolMintsDeliversAndChecksTheReply: the envelope is minted from the trusted
// context with a fresh id (not the call id), the use is spent once, the transport gets
// exactly that envelope and the caller the reply's payload.
func TestMessageToolMintsDeliversAndChecksTheReply(t *testing.T) {
	g := sendGrantTo("g-send", carol, 5)
	h := newMsgHarness(t, []kernel.CapabilityGrant{g}, nil)
	turn := mustTurn(t, h.k, msgContext())
	var ids []string
	for i := 0; i < 2; i++ {
		res := turn.InvokeTool(context.Background(), requestCall("same-call", carol, `{"ask":"summarise"}`))
		if res.Status != kernel.StatusSucceeded || string(res.Output.(json.RawMessage)) != `{"summary":"done"}` {
			t.Fatalf("result %+v", res)
		}
		ids = append(ids, res.Metadata["messageId"].(string))
	}
	if h.tr.count() != 2 {
		t.Fatalf("%d deliveries", h.tr.count())
	}
	for i, env := range h.tr.delivered {
		if env.ID == "same-call" || env.ID != ids[i] || env.Sender != bob || env.Receiver != carol || env.Purpose != "prepare-update" ||
			env.TraceID != "trace-1" || env.CreatedAt != admitted || string(env.Payload) != `{"ask":"summarise"}` {
			t.Fatalf("delivered %+v", env)
		}
	}
	if ids[0] == ids[1] {
		t.Fatalf("two calls sharing an id got one message id %s", ids[0])
	}
	if used := h.usage.used[usageKey(kernel.UsageKeyOf(&g))]; used != 2 {
		t.Fatalf("%d uses spent for 2 calls", used)
	}
	n := 0
	for _, ev := range h.audit.all() {
		if ev.Type == kernel.EventAuthorizationChecked && ev.Consumed != nil && *ev.Consumed {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d consuming decisions for 2 calls (delivery authorized again?)", n)
	}
}

// TestMessageToolFailureCodes: spec 80 §3's failures after delivery, and the bounds
// refused before anything is spent.
func TestMessageToolFailureCodes(t *testing.T) {
	g := sendGrantTo("g-send", carol, 5)
	mutate := func(f func(*kernel.MessageEnvelope)) func(kernel.MessageEnvelope) (kernel.MessageEnvelope, error) {
		return func(r kernel.MessageEnvelope) (kernel.MessageEnvelope, error) { a := answer(r); f(&a); return a, nil }
	}
	cases := []struct {
		name    string
		to      kernel.Address
		payload string
		receipt func(kernel.MessageEnvelope) kernel.MessageDeliveryResult
		reply   func(kernel.MessageEnvelope) (kernel.MessageEnvelope, error)
		status  kernel.ToolStatus
		code    kernel.ErrorCode
		spent   int64
	}{
		{name: "not accepted", receipt: func(e kernel.MessageEnvelope) kernel.MessageDeliveryResult {
			return kernel.MessageDeliveryResult{Status: kernel.DeliveryDenied, MessageID: e.ID, Timestamp: admitted,
				Error: &kernel.ProtocolError{Code: kernel.CodeRecipientUnreachable, Message: "no route"}}
		}, status: kernel.StatusFailed, code: kernel.CodeMessageRequestNotAccepted, spent: 1},
		{name: "router fails", reply: func(kernel.MessageEnvelope) (kernel.MessageEnvelope, error) {
			return kernel.MessageEnvelope{}, errors.New("timed out")
		}, status: kernel.StatusFailed, code: kernel.CodeMessageReplyResolutionFailed, spent: 1},
		{name: "reply to another message", reply: mutate(func(a *kernel.MessageEnvelope) { a.ReplyTo = "other" }),
			status: kernel.StatusFailed, code: kernel.CodeInvalidMessageReply, spent: 1},
		{name: "reply not swapped", reply: mutate(func(a *kernel.MessageEnvelope) { a.Receiver = alice }),
			status: kernel.StatusFailed, code: kernel.CodeInvalidMessageReply, spent: 1},
		{name: "reply from another sender", reply: mutate(func(a *kernel.MessageEnvelope) { a.Sender = alice }),
			status: kernel.StatusFailed, code: kernel.CodeInvalidMessageReply, spent: 1},
		{name: "reply of another purpose", reply: mutate(func(a *kernel.MessageEnvelope) { a.Purpose = "other" }),
			status: kernel.StatusFailed, code: kernel.CodeInvalidMessageReply, spent: 1},
		{name: "reply of another trace", reply: mutate(func(a *kernel.MessageEnvelope) { a.TraceID = "trace-9" }),
			status: kernel.StatusFailed, code: kernel.CodeInvalidMessageReply, spent: 1},
		{name: "reply not an envelope", reply: mutate(func(a *kernel.MessageEnvelope) { a.Version = "" }),
			status: kernel.StatusFailed, code: kernel.CodeInvalidMessageReply, spent: 1},
		{name: "to oneself", to: bob, status: kernel.StatusDenied, code: kernel.CodeMessageRecipientIsSender},
		{name: "payload too large", payload: `"` + strings.Repeat("x", kernel.DefaultMaxMessagePayload) + `"`,
			status: kernel.StatusDenied, code: kernel.CodeMessagePayloadTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newMsgHarness(t, []kernel.CapabilityGrant{g, sendGrantTo("g-self", bob, 5)}, c.reply)
			h.tr.receipt = c.receipt
			to, payload := c.to, c.payload
			if to.IsZero() {
				to = carol
			}
			if payload == "" {
				payload = `{"q":1}`
			}
			res := h.k.InvokeTool(context.Background(), msgContext(), requestCall("c1", to, payload))
			if res.Status != c.status || res.Error == nil || res.Error.Code != c.code || res.Output != nil {
				t.Fatalf("result %+v, want %s %s", res, c.status, c.code)
			}
			if used := h.usage.used[usageKey(kernel.UsageKeyOf(&g))]; used != c.spent {
				t.Fatalf("%d uses spent, want %d", used, c.spent)
			}
			var invoked []kernel.AuditEvent
			for _, ev := range h.audit.all() {
				if ev.Type == kernel.EventToolInvoked {
					invoked = append(invoked, ev)
				}
			}
			if len(invoked) != 1 || invoked[0].Reason != c.code {
				t.Fatalf("tool.invoked records %+v, want one with %s", invoked, c.code)
			}
			if c.name == "not accepted" {
				evs := messageEvents(h.audit.all())
				if len(evs) != 1 || evs[0].Reason != kernel.CodeRecipientUnreachable || evs[0].OperationID != "c1" {
					t.Fatalf("message.sent %+v: the transport's code belongs on the record", evs)
				}
			}
		})
	}
}

// TestMessageToolInvalidMintFailsBeforeDelivery: an envelope minted with an id that fails
// the contract fails the call before anything is delivered.
func TestMessageToolInvalidMintFailsBeforeDelivery(t *testing.T) {
	h := newMsgHarness(t, []kernel.CapabilityGrant{sendGrantTo("g", carol, 5)}, nil)
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{sendGrantTo("g", carol, 5)}}, Usage: newMemUsage(),
		MessageTransport: h.tr, MessageRouter: &fakeRouter{reply: func(r kernel.MessageEnvelope) (kernel.MessageEnvelope, error) { return answer(r), nil }},
		NewMessageID: func() string { return " " }})
	res := k.InvokeTool(context.Background(), msgContext(), requestCall("c1", carol, `1`))
	if res.Status != kernel.StatusFailed || h.tr.count() != 0 {
		t.Fatalf("an envelope with an invalid minted id: %+v, %d deliveries", res, h.tr.count())
	}
}

// TestExplainMessageRequestMintsNothing: explain resolves the exact send requirement of
// the recipient (what a fix must grant) without minting, spending or delivering.
func TestExplainMessageRequestMintsNothing(t *testing.T) {
	minted := 0
	tr := &fakeTransport{}
	usage := newMemUsage()
	g := sendGrantTo("g-dave", kernel.Address{Kind: kernel.KindAgent, ID: "dave"}, 5)
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{g}}, Usage: usage, MessageTransport: tr,
		MessageRouter: &fakeRouter{reply: func(r kernel.MessageEnvelope) (kernel.MessageEnvelope, error) { return answer(r), nil }},
		NewMessageID:  func() string { minted++; return "m" }})
	ex := mustTurn(t, k, msgContext()).ExplainCall(context.Background(), requestCall("c1", carol, `1`))
	if ex.Allowed || ex.Code != kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant) || ex.Requirement == nil {
		t.Fatalf("explain %+v", ex)
	}
	r := ex.Requirement
	if r.Resource.Namespace != kernel.MessagingNamespace || fmt.Sprint(r.Resource.Path) != "[human carol]" || r.Action != "send" ||
		r.Resource.Owner == nil || *r.Resource.Owner != alice {
		t.Fatalf("requirement %+v", r)
	}
	if minted != 0 || tr.count() != 0 || len(usage.used) != 0 {
		t.Fatalf("explain minted %d, delivered %d, spent %v", minted, tr.count(), usage.used)
	}
}

// TestTwentyFiveRecipientRace is the reference's race: 25 concurrent messages.request
// calls to 25 recipients, each on its own single-use ticket ⇒ each ticket spent exactly
// once, every call delivered once; the replays are refused tool_unavailable with
// grant_exhausted on the record.
func TestTwentyFiveRecipientRace(t *testing.T) {
	var grants []kernel.CapabilityGrant
	var to []kernel.Address
	for i := 0; i < 25; i++ {
		a := kernel.Address{Kind: kernel.KindAgent, ID: fmt.Sprintf("r%02d", i)}
		to = append(to, a)
		grants = append(grants, sendGrantTo(fmt.Sprintf("ticket-%02d", i), a, 1))
	}
	h := newMsgHarness(t, grants, nil)
	run := func(prefix string) []kernel.ToolResult {
		out := make([]kernel.ToolResult, 25)
		var wg sync.WaitGroup
		for i := range to {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				out[i] = h.k.InvokeTool(context.Background(), msgContext(), requestCall(fmt.Sprintf("%s-%d", prefix, i), to[i], `{"n":1}`))
			}(i)
		}
		wg.Wait()
		return out
	}
	for i, res := range run("first") {
		if res.Status != kernel.StatusSucceeded {
			t.Fatalf("first call %d: %+v", i, res)
		}
	}
	for i, res := range run("replay") {
		if res.Status != kernel.StatusDenied || res.Error.Code != kernel.CodeToolUnavailable {
			t.Fatalf("replay %d: %+v, want tool_unavailable", i, res)
		}
	}
	for i := range grants {
		if used := h.usage.used[usageKey(kernel.UsageKeyOf(&grants[i]))]; used != 1 {
			t.Fatalf("ticket %d spent %d times", i, used)
		}
	}
	if h.tr.count() != 25 {
		t.Fatalf("%d deliveries, want 25", h.tr.count())
	}
	exhausted := 0
	for _, ev := range h.audit.all() {
		if ev.Type == kernel.EventToolInvoked && strings.HasPrefix(ev.OperationID, "replay") &&
			ev.Reason == kernel.CodeToolUnavailable && ev.Cause == kernel.CauseOf(kernel.ReasonGrantExhausted) {
			exhausted++
		}
	}
	if exhausted != 25 {
		t.Fatalf("%d replays recorded grant_exhausted, want 25", exhausted)
	}
}
