package kernel

import (
	"encoding/json"
	"slices"
	"strconv"
)

// MarshalAuditEvent returns exactly the bytes json.Marshal(ev) returns (the same error
// when it fails), in a fraction of the time: the audit trail stores every event of every
// call in this encoding, and the reflection encoder, which also re-compacts the output of
// every nested MarshalJSON, was a tenth of an MCP call. Strings that need escaping
// (anything but printable ASCII without ", \, <, > or &), metadata values other than
// strings, booleans, integers, nil, string slices and nested maps and slices of those, and
// the requested authority are encoded by json.Marshal itself; FuzzMarshalAuditEvent
// compares the two byte for byte.
//
// Seq is not encoded: it is the store's number of a recorded event, no part of it.
func MarshalAuditEvent(ev *AuditEvent) ([]byte, error) {
	return AppendAuditEvent(make([]byte, 0, 1024), ev)
}

// AppendAuditEvent appends MarshalAuditEvent's bytes of ev to b (a store encoding into a
// buffer it reuses); on error b is returned as it was.
func AppendAuditEvent(b []byte, ev *AuditEvent) ([]byte, error) {
	out, ok := appendAuditEvent(b, ev)
	if ok {
		return out, nil
	}
	if ev.Seq != 0 {
		c := *ev
		c.Seq = 0
		ev = &c
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return b, err
	}
	return append(b, raw...), nil
}

// appendAuditEvent appends ev's encoding; false when it cannot be encoded here (an
// address of no known kind, a value json.Marshal would refuse): the caller then uses
// json.Marshal for its bytes or error.
func appendAuditEvent(b []byte, ev *AuditEvent) ([]byte, bool) {
	ok := true
	str := func(key, v string) {
		b = append(b, key...)
		b = appendJSONString(b, v)
	}
	opt := func(key, v string) {
		if v != "" {
			str(key, v)
		}
	}
	addr := func(key string, a Address) {
		idKey := a.Kind.idKey()
		if idKey == "" {
			ok = false
			return
		}
		b = append(b, key...)
		b = append(b, `{"kind":"`...)
		b = append(b, a.Kind...)
		b = append(b, `","`...)
		b = append(b, idKey...)
		b = append(b, `":`...)
		b = appendJSONString(b, a.ID)
		b = append(b, '}')
	}
	str(`{"version":`, ev.Version)
	str(`,"id":`, ev.ID)
	str(`,"type":`, string(ev.Type))
	str(`,"outcome":`, string(ev.Outcome))
	str(`,"at":`, ev.At)
	opt(`,"recordedAt":`, ev.RecordedAt)
	str(`,"traceId":`, ev.TraceID)
	str(`,"namespaceId":`, ev.NamespaceID)
	addr(`,"actor":`, ev.Actor)
	addr(`,"authority":`, ev.Authority)
	addr(`,"owner":`, ev.Owner)
	str(`,"purpose":`, ev.Purpose)
	if r := ev.Resource; r != nil {
		str(`,"resource":{"namespace":`, r.Namespace)
		b = append(b, `,"path":[`...)
		for i, seg := range r.Path {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, seg)
		}
		b = append(b, ']')
		if r.Owner != nil {
			addr(`,"owner":`, *r.Owner)
		}
		b = append(b, '}')
	}
	opt(`,"action":`, ev.Action)
	opt(`,"grantId":`, ev.GrantID)
	opt(`,"authorityHash":`, ev.AuthorityHash)
	opt(`,"operationId":`, ev.OperationID)
	opt(`,"tool":`, ev.Tool)
	opt(`,"reason":`, string(ev.Reason))
	opt(`,"source":`, ev.Source)
	opt(`,"cause":`, string(ev.Cause))
	if ev.FailClosed {
		b = append(b, `,"failClosed":true`...)
	}
	if ev.Consumed != nil {
		b = append(b, `,"consumed":`...)
		b = strconv.AppendBool(b, *ev.Consumed)
	}
	opt(`,"endedBy":`, ev.EndedBy)
	if ev.RequestedAuthority != nil {
		raw, err := json.Marshal(ev.RequestedAuthority)
		if err != nil {
			return b, false
		}
		b = append(b, `,"requestedAuthority":`...)
		b = append(b, raw...)
	}
	if !ok {
		return b, false
	}
	if len(ev.Metadata) > 0 {
		b = append(b, `,"metadata":`...)
		var metaOK bool
		if b, metaOK = appendJSONValue(b, ev.Metadata, 0); !metaOK {
			return b, false
		}
	}
	return append(b, '}'), true
}

// appendJSONValue appends v as json.Marshal would (false: it would fail).
func appendJSONValue(b []byte, v any, depth int) ([]byte, bool) {
	if depth > 64 {
		return appendMarshaled(b, v)
	}
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return appendJSONString(b, v), true
	case bool:
		return strconv.AppendBool(b, v), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case []string:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		return append(b, ']'), true
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var ok bool
			if b, ok = appendJSONValue(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			var ok bool
			if b, ok = appendJSONValue(b, v[k], depth+1); !ok {
				return b, false
			}
		}
		return append(b, '}'), true
	}
	return appendMarshaled(b, v)
}

func appendMarshaled(b []byte, v any) ([]byte, bool) {
	raw, err := json.Marshal(v)
	if err != nil {
		return b, false
	}
	return append(b, raw...), true
}

// appendJSONString appends s quoted as json.Marshal quotes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(s) // a string always encodes
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
