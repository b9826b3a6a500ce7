package kernel

import (
	"context"
	"encoding/json"
	"testing"
)

// TestMessageToolNotPrepared: Invoke handed no prepared envelope (a call it was never
// resolved for) fails message_request_not_prepared and delivers nothing.
func TestMessageToolNotPrepared(t *testing.T) {
	delivered := 0
	k := New(Config{MessageTransport: transportFunc(func() { delivered++ })})
	h := k.messageTool()
	actx := AccessContext{Now: "2026-08-03T09:00:00.000Z"}
	call := ParsedToolCall{ToolCall: ToolCall{ID: "c1", Tool: MessageToolName, Arguments: json.RawMessage(`{}`)}}
	for _, prepared := range []any{nil, "an envelope of another type", (*MessageEnvelope)(nil)} {
		call.Prepared = prepared
		res, err := h.Invoke(context.Background(), actx, call)
		if err != nil || res.Status != StatusFailed || res.Error.Code != CodeMessageRequestNotPrepared {
			t.Fatalf("prepared %v: %+v %v", prepared, res, err)
		}
	}
	if delivered != 0 {
		t.Fatalf("%d deliveries of an unprepared request", delivered)
	}
}

type transportFunc func()

func (f transportFunc) Deliver(_ context.Context, actx AccessContext, env MessageEnvelope) (MessageDeliveryResult, error) {
	f()
	return MessageDeliveryResult{Status: DeliveryAccepted, MessageID: env.ID, Timestamp: actx.Now}, nil
}
