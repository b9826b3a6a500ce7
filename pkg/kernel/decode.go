package kernel

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// decodeStrict decodes a JSON object into v (a pointer to a plain struct type without
// custom decoding) after checking that every key is in allowed, exactly, and that every
// key in required is present. Nested contract types decode strictly through their own
// UnmarshalJSON methods.
func decodeStrict(data []byte, v any, allowed []string, required ...string) error {
	o, err := parseObject(data, allowed...)
	if err != nil {
		return err
	}
	for _, r := range required {
		if !o.has(r) {
			return contractErr(r, "is required")
		}
	}
	for k, raw := range o.fields {
		if isNull(raw) {
			return contractErr(k, "must not be null")
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return contractErr("", "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// UnmarshalJSON decodes a strict ToolCall: all five fields, arguments a JSON object.
func (c *ToolCall) UnmarshalJSON(data []byte) error {
	type plain ToolCall
	var p plain
	keys := []string{"id", "tool", "arguments", "traceId", "requestedAt"}
	if err := decodeStrict(data, &p, keys, keys...); err != nil {
		return err
	}
	if err := validIdent("id", p.ID); err != nil {
		return err
	}
	if err := validIdent("tool", p.Tool); err != nil {
		return err
	}
	if err := validIdent("traceId", p.TraceID); err != nil {
		return err
	}
	if _, err := ParseTimestamp(p.RequestedAt); err != nil {
		return contractErr("requestedAt", "must be an RFC 3339 date-time with an offset")
	}
	if _, err := decodeJSONObject(p.Arguments); err != nil {
		return contractErr("arguments", "must be a JSON object")
	}
	*c = ToolCall(p)
	return nil
}

// UnmarshalJSON decodes a strict ProtocolError.
func (e *ProtocolError) UnmarshalJSON(data []byte) error {
	type plain ProtocolError
	var p plain
	if err := decodeStrict(data, &p, []string{"code", "message", "retryable", "details"}, "code", "message"); err != nil {
		return err
	}
	if err := validIdent("code", string(p.Code)); err != nil {
		return err
	}
	if n := jscompat.UTF16Len(p.Message); n < 1 || n > 4096 {
		return contractErr("message", "must be 1 to 4096 characters")
	}
	*e = ProtocolError(p)
	return nil
}

// UnmarshalJSON decodes a strict ToolResult (the union on status).
func (r *ToolResult) UnmarshalJSON(data []byte) error {
	o, err := parseObject(data, "callId", "tool", "status", "output", "error", "completedAt", "metadata")
	if err != nil {
		return err
	}
	status, _, err := o.str("status", true)
	if err != nil {
		return err
	}
	type plain struct {
		CallID      string          `json:"callId"`
		Tool        string          `json:"tool"`
		Status      ToolStatus      `json:"status"`
		Output      json.RawMessage `json:"output"`
		Error       *ProtocolError  `json:"error"`
		CompletedAt string          `json:"completedAt"`
		Metadata    map[string]any  `json:"metadata"`
	}
	var p plain
	allowed := []string{"callId", "tool", "status", "completedAt", "metadata"}
	var extra string
	if ToolStatus(status) == StatusSucceeded {
		extra = "output"
	} else {
		extra = "error"
	}
	if err := decodeStrict(data, &p, append(allowed, extra), "callId", "tool", "status", "completedAt", extra); err != nil {
		return err
	}
	out := ToolResult{CallID: p.CallID, Tool: p.Tool, Status: p.Status, Error: p.Error, CompletedAt: p.CompletedAt, Metadata: p.Metadata}
	if extra == "output" {
		var v any
		if err := json.Unmarshal(p.Output, &v); err != nil {
			return contractErr("output", "must be JSON")
		}
		out.Output = v
	}
	if err := out.Check(); err != nil {
		return err
	}
	*r = out
	return nil
}

// UnmarshalJSON decodes strict annotations.
func (a *ToolAnnotations) UnmarshalJSON(data []byte) error {
	type plain ToolAnnotations
	var p plain
	if err := decodeStrict(data, &p, []string{"readOnly", "destructive", "idempotent"}); err != nil {
		return err
	}
	*a = ToolAnnotations(p)
	return nil
}

// UnmarshalJSON decodes a strict ToolDefinition and applies its cross-field rules.
func (d *ToolDefinition) UnmarshalJSON(data []byte) error {
	type plain ToolDefinition
	var p plain
	if err := decodeStrict(data, &p, []string{"name", "description", "namespace", "source", "readWrite", "inputSchema",
		"outputSchema", "requiredCapability", "annotations", "metadata"},
		"name", "description", "namespace", "source", "readWrite", "inputSchema", "requiredCapability"); err != nil {
		return err
	}
	out := ToolDefinition(p)
	if err := out.Validate(); err != nil {
		return err
	}
	*d = out
	return nil
}

// UnmarshalJSON decodes a strict Escalation.
func (e *Escalation) UnmarshalJSON(data []byte) error {
	type plain Escalation
	var p plain
	if err := decodeStrict(data, &p, []string{"reason", "reviewer", "requestedAt", "status", "requestedAuthority"},
		"reason", "reviewer", "requestedAt", "status"); err != nil {
		return err
	}
	if _, err := ParseTimestamp(p.RequestedAt); err != nil {
		return contractErr("requestedAt", "must be an RFC 3339 date-time with an offset")
	}
	*e = Escalation(p)
	return nil
}

// UnmarshalJSON decodes an EscalationRecord: its own keys, and the strict Escalation of
// the rest (without it, Escalation's UnmarshalJSON, promoted, would take the whole
// object and refuse the record's keys as unknown).
func (r *EscalationRecord) UnmarshalJSON(data []byte) error {
	var own struct {
		ID         int64                 `json:"id"`
		World      string                `json:"world"`
		Owner      Address               `json:"owner"`
		TraceID    string                `json:"traceId"`
		CallID     string                `json:"callId"`
		Resolution *EscalationResolution `json:"resolution"`
	}
	if err := json.Unmarshal(data, &own); err != nil {
		return err
	}
	var rest map[string]json.RawMessage
	if err := json.Unmarshal(data, &rest); err != nil {
		return err
	}
	for _, k := range []string{"id", "world", "owner", "traceId", "callId", "resolution"} {
		delete(rest, k)
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return err
	}
	var e Escalation
	if err := json.Unmarshal(b, &e); err != nil {
		return err
	}
	*r = EscalationRecord{ID: own.ID, Escalation: e, World: own.World, Owner: own.Owner, TraceID: own.TraceID,
		CallID: own.CallID, Resolution: own.Resolution}
	return nil
}

// UnmarshalJSON decodes a strict CapabilityRequest.
func (r *CapabilityRequest) UnmarshalJSON(data []byte) error {
	type plain CapabilityRequest
	var p plain
	if err := decodeStrict(data, &p, []string{"id", "namespaceId", "requester", "owner", "capabilities", "purpose",
		"constraints", "requestedAt", "metadata"}, "id", "namespaceId", "requester", "owner", "capabilities", "purpose", "requestedAt"); err != nil {
		return err
	}
	if len(p.Capabilities) < 1 || len(p.Capabilities) > 64 {
		return contractErr("capabilities", "must list 1 to 64 capabilities")
	}
	*r = CapabilityRequest(p)
	return nil
}

// UnmarshalJSON decodes a strict AuthorizationDecision.
func (d *AuthorizationDecision) UnmarshalJSON(data []byte) error {
	type plain AuthorizationDecision
	var p plain
	if err := decodeStrict(data, &p, []string{"allowed", "reasonCode", "matchedGrantId", "requiredAuthority", "metadata"},
		"allowed", "reasonCode"); err != nil {
		return err
	}
	if p.Allowed != (p.ReasonCode == ReasonAllowed) {
		return contractErr("allowed", "must be true exactly when reasonCode is \"allowed\"")
	}
	*d = AuthorizationDecision(p)
	return nil
}

// UnmarshalJSON decodes a strict AuditEvent (version "1").
func (e *AuditEvent) UnmarshalJSON(data []byte) error {
	type plain AuditEvent
	var p plain
	if err := decodeStrict(data, &p, []string{"version", "id", "type", "outcome", "at", "recordedAt", "traceId", "namespaceId", "actor",
		"authority", "owner", "purpose", "resource", "action", "grantId", "authorityHash", "operationId", "tool", "reason",
		"source", "cause", "failClosed", "consumed", "endedBy", "requestedAuthority", "metadata", "seq"},
		"version", "id", "type", "outcome", "at", "traceId", "namespaceId", "actor", "authority", "owner", "purpose"); err != nil {
		return err
	}
	if p.Version != "1" {
		return contractErr("version", "must be \"1\"")
	}
	*e = AuditEvent(p)
	return nil
}

// UnmarshalJSON decodes a strict namespace catalogue and checks that its summary matches
// its entries.
func (c *ToolNamespaceCatalog) UnmarshalJSON(data []byte) error {
	type plain ToolNamespaceCatalog
	var p plain
	if err := decodeStrict(data, &p, []string{"namespaces", "summary"}, "namespaces", "summary"); err != nil {
		return err
	}
	var s ToolNamespaceSummary
	for _, d := range p.Namespaces {
		s.Total++
		if d.Enabled {
			s.Enabled++
		} else {
			s.Disabled++
		}
	}
	if s != p.Summary {
		return contractErr("summary", "does not match the namespaces listed")
	}
	*c = ToolNamespaceCatalog(p)
	return nil
}

// UnmarshalJSON decodes a strict namespace descriptor.
func (d *ToolNamespaceDescriptor) UnmarshalJSON(data []byte) error {
	type plain ToolNamespaceDescriptor
	var p plain
	keys := []string{"namespace", "sources", "toolCount", "enabled"}
	if err := decodeStrict(data, &p, keys, keys...); err != nil {
		return err
	}
	if p.ToolCount < 1 || len(p.Sources) < 1 || len(p.Sources) > 64 {
		return contractErr("", "a namespace needs at least one tool and 1 to 64 sources")
	}
	*d = ToolNamespaceDescriptor(p)
	return nil
}

// UnmarshalJSON decodes a strict summary.
func (s *ToolNamespaceSummary) UnmarshalJSON(data []byte) error {
	type plain ToolNamespaceSummary
	var p plain
	keys := []string{"total", "enabled", "disabled"}
	if err := decodeStrict(data, &p, keys, keys...); err != nil {
		return err
	}
	*s = ToolNamespaceSummary(p)
	return nil
}

// CheckAuditEventDecodes reports whether ev survives a JSON round trip through
// AuditEvent (json.Marshal, then the strict UnmarshalJSON), as a store that must always
// read its trail back requires, at a fraction of the cost of one: the encoding of the
// struct itself cannot fail the strict decoding (its keys are fixed, unique and allowed,
// the required ones are never omitted, and nothing it emits is null), so only the
// version and the nested contract values with decoders of their own (the three
// addresses, the resource, the requested authority) are decoded again. Metadata is
// decoded as plain JSON, which any encodable value survives. The error is the one the
// round trip would give (which of them fails first may differ).
func CheckAuditEventDecodes(ev *AuditEvent) error {
	if ev.Version != "1" {
		return contractErr("version", "must be \"1\"")
	}
	for _, f := range []struct {
		key string
		a   Address
	}{{"actor", ev.Actor}, {"authority", ev.Authority}, {"owner", ev.Owner}} {
		if _, ok := decodableAddresses.Load(f.a); ok {
			continue
		}
		if err := roundTrip(f.a, new(Address)); err != nil {
			return contractErr(f.key, "%v", err)
		}
		if decodableCount.Add(1) <= maxDecodableAddresses {
			decodableAddresses.Store(f.a, struct{}{})
		}
	}
	// A resource that passes Validate decodes (its strings are valid UTF-8, so the
	// encoding is lossless, and the decoder checks them with the same rules or looser
	// ones: FuzzValidResourceRoundTrips); only one that does not is round-tripped, for
	// the decoder's own error.
	if ev.Resource != nil && ev.Resource.Validate() != nil {
		if err := roundTrip(ev.Resource, new(ResourceRef)); err != nil {
			return contractErr("resource", "%v", err)
		}
	}
	if ev.RequestedAuthority != nil {
		if err := roundTrip(ev.RequestedAuthority, new(CapabilityRequest)); err != nil {
			return contractErr("requestedAuthority", "%v", err)
		}
	}
	return nil
}

// decodableAddresses are addresses that survived a round trip (an event's three rarely
// change), at most maxDecodableAddresses of them.
var (
	decodableAddresses sync.Map // Address → struct{}
	decodableCount     atomic.Int64
)

const maxDecodableAddresses = 4096

func roundTrip(v any, into any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
