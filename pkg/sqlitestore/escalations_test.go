package sqlitestore

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func escalation(world string, owner kernel.Address, call string) EscalationRecord {
	return EscalationRecord{
		World: world, Owner: owner, TraceID: "trace-" + call, CallID: call,
		Escalation: kernel.Escalation{Reason: "need write to " + call, Reviewer: owner,
			RequestedAt: "2026-01-01T00:00:00Z", Status: "pending"},
	}
}

func TestEscalations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	full := escalation("w1", alice, "c1")
	full.Escalation.RequestedAuthority = &kernel.CapabilityRequest{
		ID: "r1", NamespaceID: "w1", Requester: helper, Owner: alice, Purpose: "triage", RequestedAt: "2026-01-01T00:00:00Z",
		Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a"}, Owner: &alice},
			Actions: []string{"write"}, Scope: kernel.ScopeExact}},
	}
	recs := []EscalationRecord{full, escalation("w1", bob, "c2"), escalation("w2", alice, "c3"), escalation("w1", alice, "c4")}
	for _, r := range recs {
		if err := s.RecordEscalation(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		f    EscalationFilter
		want []string
	}{
		{"all, newest first", EscalationFilter{}, []string{"c4", "c3", "c2", "c1"}},
		{"world", EscalationFilter{World: "w1"}, []string{"c4", "c2", "c1"}},
		{"owner", EscalationFilter{Owner: alice}, []string{"c4", "c3", "c1"}},
		{"world and owner", EscalationFilter{World: "w1", Owner: alice}, []string{"c4", "c1"}},
		{"limit", EscalationFilter{World: "w1", Limit: 2}, []string{"c4", "c2"}},
		{"none", EscalationFilter{World: "w3"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.ListEscalations(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range got {
				ids = append(ids, r.CallID)
			}
			if !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ListEscalations = %v, want %v", ids, tt.want)
			}
		})
	}
	got, err := s.ListEscalations(ctx, EscalationFilter{World: "w1", Owner: alice})
	want := full
	want.ID = 1 // the first recorded
	if err != nil || len(got) != 2 || !reflect.DeepEqual(got[1], want) {
		t.Errorf("round trip: got %+v, %v; want %+v", got, err, want)
	}
}

// TestResolveEscalation: a resolution is recorded once with its audit event, shown by
// ListEscalations (status filter included), and never changed.
func TestResolveEscalation(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := context.Background()
	for _, c := range []string{"c1", "c2"} {
		if err := s.RecordEscalation(ctx, escalation("w1", alice, c)); err != nil {
			t.Fatal(err)
		}
	}
	ev := kernel.AuditEvent{Version: "1", ID: "ev-resolve-1", Type: "escalation.resolved", Outcome: kernel.OutcomeSucceeded,
		At: "2026-01-02T00:00:00.000Z", TraceID: "t", NamespaceID: "w1", Actor: alice, Authority: alice, Owner: alice, Purpose: "cli"}
	res := EscalationResolution{Status: EscalationDenied, ResolvedBy: alice, ResolvedAt: "2026-01-02T00:00:00.000Z", Note: "no"}
	rec, err := s.ResolveEscalation(ctx, 1, res, ev)
	if err != nil || rec.CallID != "c1" || rec.Escalation.Status != EscalationDenied || rec.Resolution.Note != "no" {
		t.Fatalf("resolve: %+v, %v", rec, err)
	}
	if _, err := s.ResolveEscalation(ctx, 1, EscalationResolution{Status: EscalationApproved, ResolvedBy: alice}, ev); !errors.Is(err, ErrAlreadyResolved) {
		t.Fatalf("second resolve: %v", err)
	}
	ev.ID = "ev-resolve-9"
	if _, err := s.ResolveEscalation(ctx, 9, res, ev); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	for status, want := range map[string][]string{EscalationPending: {"c2"}, EscalationDenied: {"c1"}, EscalationApproved: nil} {
		got, err := s.ListEscalations(ctx, EscalationFilter{Status: status})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range got {
			ids = append(ids, r.CallID)
		}
		if !reflect.DeepEqual(ids, want) {
			t.Errorf("status %s: %v, want %v", status, ids, want)
		}
	}
	evs, err := s.ListAudit(ctx, AuditFilter{Types: []string{"escalation.resolved"}})
	if err != nil || len(evs) != 1 || evs[0].ID != "ev-resolve-1" {
		t.Fatalf("audit: %+v, %v", evs, err)
	}
}

func TestRecordEscalationRejectsBadRecords(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := context.Background()
	noWorld := escalation("", alice, "c")
	noOwner := escalation("w", kernel.Address{}, "c")
	noOwner.Escalation.Reviewer = alice
	noReviewer := escalation("w", alice, "c")
	noReviewer.Escalation.Reviewer = kernel.Address{}
	for i, r := range []EscalationRecord{noWorld, noOwner, noReviewer} {
		if err := s.RecordEscalation(ctx, r); err == nil {
			t.Errorf("record %d was accepted", i)
		}
	}
	if got, err := s.ListEscalations(ctx, EscalationFilter{}); err != nil || len(got) != 0 {
		t.Errorf("ListEscalations = %v, %v; want none", got, err)
	}
}
