package kernel_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// sameAsMarshal fails unless MarshalAuditEvent returns json.Marshal's bytes, or fails
// when it fails.
func sameAsMarshal(t *testing.T, ev *kernel.AuditEvent) {
	t.Helper()
	want, wantErr := json.Marshal(ev)
	got, err := kernel.MarshalAuditEvent(ev)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%+v: error %v, json.Marshal's %v", ev, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, want) {
		t.Fatalf("%+v:\n got %s\nwant %s", ev, got, want)
	}
	// AppendAuditEvent appends the same bytes after what the buffer holds, and leaves it
	// as it was when it fails
	got, err = kernel.AppendAuditEvent(append(make([]byte, 0, 4096), "prefix"...), ev)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("%+v: AppendAuditEvent error %v, json.Marshal's %v", ev, err, wantErr)
	}
	if err == nil && string(got) != "prefix"+string(want) || err != nil && string(got) != "prefix" {
		t.Fatalf("%+v: AppendAuditEvent\n got %s\nwant prefix%s", ev, got, want)
	}
}

func TestMarshalAuditEvent(t *testing.T) {
	yes, no := true, false
	for _, ev := range auditEventVariants() {
		sameAsMarshal(t, &ev)
		full := ev
		full.RecordedAt, full.Action, full.GrantID, full.AuthorityHash = "2026-08-03T09:00:00.001Z", "read", "g<1>", "sha256:x"
		full.OperationID, full.Tool, full.Reason, full.Source, full.Cause = "op&1", "files.read", "no_matching_grant", "kernel", "not_registered"
		full.FailClosed, full.Consumed, full.EndedBy = true, &yes, "runtime"
		sameAsMarshal(t, &full)
		full.Consumed, full.FailClosed = &no, false
		full.Metadata = map[string]any{"s": "x\u2028y", "n": 3, "i64": int64(-4), "f": 1.5e300, "b": false, "nil": nil,
			"strs": []string{"a", "<b>"}, "nilStrs": []string(nil), "list": []any{1, "two", nil, map[string]any{"z": 1, "a": []any{}}},
			"nilMap": map[string]any(nil), "raw": json.RawMessage(`{"k": 1}`), "u": uint8(7), "\xff": "bad key"}
		sameAsMarshal(t, &full)
		full.Metadata = map[string]any{"bad": json.RawMessage(`{`)}
		sameAsMarshal(t, &full)
		full.Metadata = map[string]any{"ch": make(chan int)}
		sameAsMarshal(t, &full)
	}
}

func FuzzMarshalAuditEvent(f *testing.F) {
	f.Add("files", "a.md", "agent", "helper", "op-1", "k", "v", int64(1), true)
	f.Add("fi\"les", "a\x00\n<&>", "robot", " x ", "\xff\xfe", "\u2028", "\ufffd", int64(-1), false)
	f.Fuzz(func(t *testing.T, ns, seg, kind, id, op, mk, mv string, n int64, b bool) {
		ev := kernel.AuditEvent{Version: "1", ID: id, Type: kernel.AuditEventType(op), Outcome: kernel.OutcomeAllowed,
			At: seg, TraceID: mv, NamespaceID: ns, Actor: kernel.Address{Kind: kernel.AddressKind(kind), ID: id},
			Authority: kernel.Address{Kind: kernel.KindHuman, ID: mk}, Owner: kernel.Address{Kind: kernel.KindAgent, ID: seg},
			Purpose: mv, Resource: &kernel.ResourceRef{Namespace: ns, Path: []string{seg, mk}}, OperationID: op, Tool: mk,
			Consumed: &b, Metadata: map[string]any{mk: mv, "n": n, "b": b, "l": []any{mv, n, []string{seg}}}}
		if kernel.AddressKind(kind) == kernel.KindGroup {
			ev.Resource.Owner = &kernel.Address{Kind: kernel.KindService, ID: op}
		}
		sameAsMarshal(t, &ev)
	})
}

// BenchmarkMarshalAuditEvent: a read call's authorization.checked record, as the MCP
// server writes it.
func BenchmarkMarshalAuditEvent(b *testing.B) {
	consumed := false
	ev := kernel.AuditEvent{Version: "1", ID: "01a23173c7771a3b183a879e407890d3", Type: kernel.EventAuthorizationChecked,
		Outcome: kernel.OutcomeAllowed, At: "2026-12-01T11:53:21.015Z", RecordedAt: "2026-12-01T11:53:21.015Z",
		TraceID: "d765f664-d11a-4cec-b86c-d813eec71b72", NamespaceID: "default", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "bench"},
		Authority: alice, Owner: alice, Purpose: "cli", Resource: &kernel.ResourceRef{Namespace: "files", Path: []string{"notes", "a.md"}, Owner: &alice},
		Action: "read", GrantID: "g-read", AuthorityHash: "18152ea5477b31276e019951485461c6102800174ea8aa8612b313ccf6a7f164",
		OperationID: "73d9f33a-5379-49db-bd2a-4333623a6c7d", Tool: "files.read", Consumed: &consumed,
		Metadata: map[string]any{"client": map[string]any{"name": "bench", "version": "1"}, "grantsResolved": 1,
			"rejectedGrants": []any{}, "session": "812e2a07-c68f-4f3b-8847-4ad073872b9b", "surface": "mcp"}}
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			if _, err := json.Marshal(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("MarshalAuditEvent", func(b *testing.B) {
		for b.Loop() {
			if _, err := kernel.MarshalAuditEvent(&ev); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestMarshalAuditEventOmitsSeq: an event read by a cursor carries its store's sequence
// number (Seq), which is no part of the recorded event: encoding it for a store, by the
// drops it.
func TestMarshalAuditEventOmitsSeq(t *testing.T) {
	for _, ev := range auditEventVariants()[:1] {
		want, err := kernel.MarshalAuditEvent(&ev)
		if err != nil {
			t.Fatal(err)
		}
		ev.Seq = 42
		got, err := kernel.MarshalAuditEvent(&ev)
		if err != nil || !bytes.Equal(got, want) || bytes.Contains(got, []byte(`"seq"`)) {
			t.Errorf("MarshalAuditEvent of an event with Seq 42 = %s, %v; want %s", got, err, want)
		}
		if ev.Seq != 42 {
			t.Errorf("MarshalAuditEvent changed the event's Seq to %d", ev.Seq)
		}
	}
}
