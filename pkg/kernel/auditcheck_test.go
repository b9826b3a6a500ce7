package kernel_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// auditEventVariants is every combination of valid and invalid values of the parts of an
// audit event that the strict decoding can refuse.
func auditEventVariants() []kernel.AuditEvent {
	versions := []string{"1", "2", ""}
	addrs := []kernel.Address{alice, {Kind: "robot", ID: "x"}, {Kind: kernel.AddressKind("human"), ID: " padded "},
		{Kind: kernel.AddressKind("human"), ID: ""}, {}}
	resources := []*kernel.ResourceRef{nil, {Namespace: "files", Path: []string{"a", "b"}},
		{Namespace: "files", Path: []string{".."}}, {Namespace: "", Path: []string{}}, {Namespace: "files", Path: nil}}
	requests := []*kernel.CapabilityRequest{nil,
		{ID: "r1", NamespaceID: "world-a", Requester: bob, Owner: alice, Purpose: "p", RequestedAt: "2026-08-03T09:00:00.000Z",
			Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{}}, Actions: []string{"read"}, Scope: kernel.ScopeExact}}},
		{ID: "r2", NamespaceID: "world-a", Requester: bob, Owner: alice, Purpose: "p", RequestedAt: "2026-08-03T09:00:00.000Z"},
		{ID: "r3", NamespaceID: "world-a", Requester: kernel.Address{Kind: "robot", ID: "x"}, Owner: alice, Purpose: "p", RequestedAt: "2026-08-03T09:00:00.000Z",
			Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{}}, Actions: []string{"read"}, Scope: kernel.ScopeExact}}},
	}
	metas := []map[string]any{nil, {}, {"a\xff": 1, "a\xfe": 2}, {"nested": map[string]any{"x": []any{1, "two", nil}}},
		{"raw": json.RawMessage(`{"k":1,"k":2}`)}}
	var out []kernel.AuditEvent
	for _, v := range versions {
		for i, a := range addrs {
			for _, r := range resources {
				for _, q := range requests {
					for _, m := range metas {
						ev := kernel.AuditEvent{Version: v, ID: "e", Type: kernel.EventToolInvoked, Outcome: kernel.OutcomeDenied,
							At: "2026-08-03T09:00:00.000Z", TraceID: "t", NamespaceID: "world-a", Actor: bob, Authority: alice,
							Owner: alice, Purpose: "p", Resource: r, RequestedAuthority: q, Metadata: m}
						switch i % 3 {
						case 0:
							ev.Actor = a
						case 1:
							ev.Authority = a
						default:
							ev.Owner = a
						}
						out = append(out, ev)
					}
				}
			}
		}
	}
	return out
}

// TestCheckAuditEventDecodes: the cheap check accepts exactly the events that survive a
// full JSON round trip through AuditEvent.
func TestCheckAuditEventDecodes(t *testing.T) {
	accepted, refused := 0, 0
	for i, ev := range auditEventVariants() {
		var roundTrip error
		if text, err := json.Marshal(ev); err != nil {
			roundTrip = err
		} else {
			var back kernel.AuditEvent
			roundTrip = json.Unmarshal(text, &back)
		}
		check := kernel.CheckAuditEventDecodes(&ev)
		if (check == nil) != (roundTrip == nil) {
			t.Errorf("variant %d %s: check = %v, round trip = %v", i, fmt.Sprintf("%+v", ev), check, roundTrip)
		}
		if check == nil {
			accepted++
		} else {
			refused++
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("the variants are not discriminating: %d accepted, %d refused", accepted, refused)
	}
}

// FuzzValidResourceRoundTrips: a resource that passes Validate survives the JSON round
// trip CheckAuditEventDecodes skips for it, and CheckAuditEventDecodes agrees with the
// round trip on every resource.
func FuzzValidResourceRoundTrips(f *testing.F) {
	for _, s := range [][5]string{
		{"files", "a", "b", "", ""},
		{"files", "notes", "a b.md", "human", "alice"},
		{"repo", "é", "日本", "agent", "x"},
		{" files", "a", "b", "", ""},
		{"files", " a", "b\u00a0", "", ""},
		{"files", "a\x00", "b", "", ""},
		{"files", "\xff", "b", "", ""},
		{"files", "..", "b", "", ""},
		{"files", "a", "b", "robot", "x"},
		{"files", "a", "b", "human", " padded"},
		{"files", "\u2028", "\ufeffx", "service", "s\u2029"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4])
	}
	f.Fuzz(func(t *testing.T, ns, seg1, seg2, kind, id string) {
		r := kernel.ResourceRef{Namespace: ns, Path: []string{seg1, seg2}}
		if kind != "" {
			r.Owner = &kernel.Address{Kind: kernel.AddressKind(kind), ID: id}
		}
		var roundTrip error
		if text, err := json.Marshal(r); err != nil {
			roundTrip = err
		} else {
			roundTrip = json.Unmarshal(text, new(kernel.ResourceRef))
		}
		if r.Validate() == nil && roundTrip != nil {
			t.Fatalf("%+v passes Validate but does not round-trip: %v", r, roundTrip)
		}
		ev := kernel.AuditEvent{Version: "1", ID: "e", Type: kernel.EventToolInvoked, Outcome: kernel.OutcomeDenied,
			At: "2026-08-03T09:00:00.000Z", TraceID: "t", NamespaceID: "world-a", Actor: bob, Authority: alice,
			Owner: alice, Purpose: "p", Resource: &r}
		if check := kernel.CheckAuditEventDecodes(&ev); (check == nil) != (roundTrip == nil) {
			t.Fatalf("%+v: check = %v, round trip = %v", r, check, roundTrip)
		}
	})
}
