package kernel_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestStrictDecoders: every contract type round-trips through its strict decoder, and an
// unknown key, a case-variant key or a null is refused.
func TestStrictDecoders(t *testing.T) {
	actx := testContext()
	req := kernel.RequiredAuthority(actx, req("read", "a"))
	def := kernel.EscalationTool().Definition
	values := map[string]any{
		"ToolCall":              &kernel.ToolCall{ID: "c", Tool: "files.read", Arguments: json.RawMessage(`{"path":["a"]}`), TraceID: "t", RequestedAt: admitted},
		"ToolResult(succeeded)": &kernel.ToolResult{CallID: "c", Tool: "t", Status: kernel.StatusSucceeded, Output: map[string]any{"a": "b"}, CompletedAt: admitted},
		"ToolResult(denied)": &kernel.ToolResult{CallID: "c", Tool: "t", Status: kernel.StatusDenied, CompletedAt: admitted,
			Error: &kernel.ProtocolError{Code: "no_matching_grant", Message: "no", Retryable: kernel.BoolPtr(false)}},
		"ToolDefinition":        &def,
		"Escalation":            &kernel.Escalation{Reason: "r", Reviewer: alice, RequestedAt: admitted, Status: "pending", RequestedAuthority: req},
		"CapabilityRequest":     req,
		"AuthorizationDecision": &kernel.AuthorizationDecision{Allowed: false, ReasonCode: kernel.ReasonNoMatchingGrant, RequiredAuthority: req},
		"AccessContext":         &actx,
		"AuditEvent": &kernel.AuditEvent{Version: "1", ID: "e", Type: kernel.EventToolInvoked, Outcome: kernel.OutcomeDenied, At: admitted,
			TraceID: "t", NamespaceID: "w", Actor: bob, Authority: alice, Owner: alice, Purpose: "p", Reason: kernel.CodeToolUnavailable,
			Cause: kernel.CauseNotRegistered, Consumed: kernel.BoolPtr(false), RequestedAuthority: req},
		"ToolNamespaceCatalog": &kernel.ToolNamespaceCatalog{Namespaces: []kernel.ToolNamespaceDescriptor{{Namespace: "files", Sources: []string{"sharedos"}, ToolCount: 12, Enabled: true}},
			Summary: kernel.ToolNamespaceSummary{Total: 1, Enabled: 1}},
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			back := reflect.New(reflect.TypeOf(v).Elem()).Interface()
			if err := json.Unmarshal(b, back); err != nil {
				t.Fatalf("round trip of %s: %v", b, err)
			}
			b2, _ := json.Marshal(back)
			if string(b) != string(b2) {
				t.Fatalf("round trip changed the value:\n%s\n%s", b, b2)
			}
			var m map[string]json.RawMessage
			_ = json.Unmarshal(b, &m)
			for k := range m {
				for _, mutate := range []func(map[string]json.RawMessage){
					func(x map[string]json.RawMessage) { x["unknownKey"] = json.RawMessage(`1`) },
					func(x map[string]json.RawMessage) { x[strings.ToUpper(k)] = x[k]; delete(x, k) },
					func(x map[string]json.RawMessage) { x[k] = json.RawMessage(`null`) },
				} {
					c := map[string]json.RawMessage{}
					for kk, vv := range m {
						c[kk] = vv
					}
					mutate(c)
					bad, _ := json.Marshal(c)
					target := reflect.New(reflect.TypeOf(v).Elem()).Interface()
					if err := json.Unmarshal(bad, target); err == nil {
						t.Errorf("accepted %s", bad)
					}
				}
				break
			}
		})
	}
}

func FuzzToolCallJSON(f *testing.F) {
	f.Add([]byte(`{"id":"c","tool":"files.read","arguments":{"path":["a"]},"traceId":"t","requestedAt":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"c","tool":"t","arguments":[],"traceId":"t","requestedAt":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c kernel.ToolCall
		if err := json.Unmarshal(data, &c); err != nil {
			if c.ID != "" || c.Arguments != nil {
				t.Fatal("partial call beside an error")
			}
			return
		}
		if c.ID == "" || c.Tool == "" || !json.Valid(c.Arguments) || c.Arguments[0] != '{' {
			t.Fatalf("accepted %+v", c)
		}
	})
}
