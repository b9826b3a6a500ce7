package sqlitestore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

var helper = kernel.Address{Kind: kernel.KindAgent, ID: "helper"}

// event builds a minimal valid audit event.
func event(id string, typ kernel.AuditEventType, outcome kernel.AuditOutcome, at string) kernel.AuditEvent {
	return kernel.AuditEvent{
		Version: "1", ID: id, Type: typ, Outcome: outcome, At: at, TraceID: "trace-1",
		NamespaceID: "default", Actor: helper, Authority: alice, Owner: alice, Purpose: "cli",
	}
}

// fullEvent sets every optional field of an audit event.
func fullEvent() kernel.AuditEvent {
	maxUses, depth := int64(3), int64(1)
	ev := event("ev-full", kernel.EventAuthorizationChecked, kernel.OutcomeDenied, "2026-03-01T10:00:00.123+02:00")
	ev.Resource = &kernel.ResourceRef{Namespace: "files", Path: []string{"Workspace", "a <b> & c.txt"}, Owner: &bob}
	ev.Action = "read"
	ev.GrantID = "g-1"
	ev.AuthorityHash = "sha256:abc"
	ev.RecordedAt = "2026-03-01T08:00:05.000Z"
	ev.OperationID = "call-1"
	ev.Tool = "files.read"
	ev.Reason = kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant)
	ev.Source = "kernel"
	ev.Cause = "no_matching_grant"
	ev.FailClosed = true
	ev.Consumed = kernel.BoolPtr(false)
	ev.EndedBy = "runtime"
	ev.RequestedAuthority = &kernel.CapabilityRequest{
		ID: "req-1", NamespaceID: "default", Requester: helper, Owner: alice, Purpose: "triage",
		Capabilities: []kernel.Capability{{
			Resource: kernel.ResourceRef{Namespace: "files", Path: []string{}},
			Actions:  []string{"read", "list"}, Scope: kernel.ScopeDescendants,
		}},
		Constraints: &kernel.CapabilityConstraints{Purposes: []string{"triage"}, NotBefore: "2026-01-01T00:00:00Z",
			ExpiresAt: "2027-01-01T00:00:00Z", MaxUses: &maxUses, DelegationDepth: &depth},
		RequestedAt: "2026-03-01T08:00:00Z",
		Metadata:    map[string]any{"why": "ü ✓ \u2028"},
	}
	ev.Metadata = map[string]any{
		"rejectedGrants": []any{map[string]any{"grantId": "g-2", "reason": "expired"}},
		"grantsResolved": 2.0,
		"nested":         map[string]any{"ok": true, "none": nil, "big": 1e21},
	}
	return ev
}

func TestAuditRoundTrip(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := context.Background()
	ev := fullEvent()
	want, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	// Every optional field must actually be set, or this test proves less than it says.
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(want, &fields); err != nil {
		t.Fatal(err)
	}
	// (Seq is the store's number of a recorded event, set by a cursor read only: not a
	// field of the event it records)
	if n := reflect.TypeOf(ev).NumField() - 1; len(fields) != n {
		t.Fatalf("the test event sets %d of %d fields", len(fields), n)
	}
	if err := s.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListAudit(ctx, AuditFilter{})
	if err != nil || len(got) != 1 {
		t.Fatalf("ListAudit = %d events, %v", len(got), err)
	}
	if !reflect.DeepEqual(got[0], ev) {
		t.Errorf("event changed:\n got %+v\nwant %+v", got[0], ev)
	}
	back, err := json.Marshal(got[0])
	if err != nil || !bytes.Equal(back, want) {
		t.Errorf("JSON changed (%v):\n got %s\nwant %s", err, back, want)
	}
}

func TestAuditAppendRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	ev := event("e1", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
	if err := s.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, ev); err != nil {
		t.Errorf("appending the same event again = %v, want a no-op", err)
	}
	other := ev
	other.Outcome = kernel.OutcomeFailed
	if err := s.Append(ctx, other); !errors.Is(err, ErrDuplicate) {
		t.Errorf("appending another event with a recorded id = %v, want ErrDuplicate", err)
	}
	noID := ev
	noID.ID = ""
	if err := s.Append(ctx, noID); err == nil {
		t.Error("an event without an id was accepted")
	}
	unreadable := event("e2", kernel.EventToolInvoked, kernel.OutcomeDenied, "2026-01-01T00:00:00Z")
	unreadable.Resource = &kernel.ResourceRef{Namespace: "files", Path: []string{".."}}
	if err := s.Append(ctx, unreadable); err == nil {
		t.Error("an event that cannot be read back was accepted")
	}
	noOwner := event("e3", kernel.EventToolInvoked, kernel.OutcomeDenied, "2026-01-01T00:00:00Z")
	noOwner.Owner = kernel.Address{}
	if err := s.Append(ctx, noOwner); err == nil {
		t.Error("an event with a zero owner was accepted")
	}
	evs, err := s.ListAudit(ctx, AuditFilter{})
	if err != nil || len(evs) != 1 || !reflect.DeepEqual(evs[0], ev) {
		t.Errorf("ListAudit = %+v, %v; want only the first event", evs, err)
	}
	// The table is append-only even for SQL that bypasses the Store.
	if _, err := s.db.Exec("UPDATE audit_events SET outcome = 'allowed'"); err == nil {
		t.Error("UPDATE of an audit event succeeded")
	}
	if _, err := s.db.Exec("DELETE FROM audit_events"); err == nil {
		t.Error("DELETE of an audit event succeeded")
	}
}

func TestAuditAppendBatchIsAtomic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	at := "2026-01-01T00:00:00Z"
	good := []kernel.AuditEvent{
		event("b1", kernel.EventAuthorityResolved, kernel.OutcomeSucceeded, at),
		event("b2", kernel.EventToolInvoked, kernel.OutcomeSucceeded, at),
	}
	if err := s.AppendBatch(ctx, good); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendBatch(ctx, nil); err != nil {
		t.Errorf("empty batch = %v", err)
	}
	conflicting := event("b1", kernel.EventAuthorityResolved, kernel.OutcomeFailed, at)
	bad := []kernel.AuditEvent{event("b3", kernel.EventTurnEnded, kernel.OutcomeSucceeded, at), conflicting}
	if err := s.AppendBatch(ctx, bad); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("AppendBatch with a conflicting id = %v, want ErrDuplicate", err)
	}
	evs, err := s.ListAudit(ctx, AuditFilter{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	if ids := eventIDs(evs); !reflect.DeepEqual(ids, []string{"b1", "b2"}) {
		t.Errorf("events after a failed batch = %v, want [b1 b2]", ids)
	}
}

func eventIDs(evs []kernel.AuditEvent) []string {
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}

func TestListAuditFilters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	mk := func(id string, typ kernel.AuditEventType, outcome kernel.AuditOutcome, at, tool, op, trace, world string) kernel.AuditEvent {
		ev := event(id, typ, outcome, at)
		ev.Tool, ev.OperationID, ev.TraceID, ev.NamespaceID = tool, op, trace, world
		return ev
	}
	// Recorded in this order; note e4's at is earlier than e3's: order is recording order.
	evs := []kernel.AuditEvent{
		mk("e1", kernel.EventAuthorityResolved, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z", "", "", "t1", "default"),
		mk("e2", kernel.EventAuthorizationChecked, kernel.OutcomeDenied, "2026-01-01T00:00:01Z", "files.read", "c1", "t1", "default"),
		mk("e3", kernel.EventToolInvoked, kernel.OutcomeDenied, "2026-01-01T00:00:02.500Z", "files.read", "c1", "t1", "default"),
		mk("e4", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T02:00:01.500+02:00", "files.list", "c2", "t2", "default"),
		mk("e5", kernel.EventToolInvoked, kernel.OutcomeFailed, "2026-01-02T00:00:00Z", "repo.log", "c3", "t3", "lab"),
	}
	for _, ev := range evs {
		if err := s.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	ms := func(at string) int64 {
		v, err := kernel.ParseTimestamp(at)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		name string
		f    AuditFilter
		want []string
	}{
		{"all, newest first", AuditFilter{}, []string{"e5", "e4", "e3", "e2", "e1"}},
		{"all, oldest first", AuditFilter{Oldest: true}, []string{"e1", "e2", "e3", "e4", "e5"}},
		{"limit newest", AuditFilter{Limit: 2}, []string{"e5", "e4"}},
		{"limit oldest", AuditFilter{Limit: 2, Oldest: true}, []string{"e1", "e2"}},
		{"one type", AuditFilter{Types: []string{"tool.invoked"}}, []string{"e5", "e4", "e3"}},
		{"two types", AuditFilter{Types: []string{"authority.resolved", "authorization.checked"}}, []string{"e2", "e1"}},
		{"unknown type", AuditFilter{Types: []string{"nope"}}, nil},
		{"outcomes", AuditFilter{Outcomes: []string{"denied", "failed"}}, []string{"e5", "e3", "e2"}},
		{"type and outcome", AuditFilter{Types: []string{"tool.invoked"}, Outcomes: []string{"denied"}}, []string{"e3"}},
		{"tool", AuditFilter{Tool: "files.read"}, []string{"e3", "e2"}},
		{"operation", AuditFilter{OperationID: "c1", Oldest: true}, []string{"e2", "e3"}},
		{"trace", AuditFilter{TraceID: "t2"}, []string{"e4"}},
		{"world", AuditFilter{World: "lab"}, []string{"e5"}},
		{"since is inclusive", AuditFilter{SinceMillis: ms("2026-01-01T00:00:01Z")}, []string{"e5", "e4", "e3", "e2"}},
		{"since compares instants, not text", AuditFilter{SinceMillis: ms("2026-01-01T00:00:02Z")}, []string{"e5", "e3"}},
		{"since with milliseconds", AuditFilter{SinceMillis: ms("2026-01-01T00:00:02.501Z")}, []string{"e5"}},
		{"since and limit", AuditFilter{SinceMillis: ms("2026-01-01T00:00:01Z"), Limit: 1, Oldest: true}, []string{"e2"}},
		{"everything at once", AuditFilter{Types: []string{"tool.invoked"}, Outcomes: []string{"denied"}, Tool: "files.read",
			OperationID: "c1", TraceID: "t1", World: "default", SinceMillis: 1, Limit: 5}, []string{"e3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.ListAudit(ctx, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			ids := eventIDs(got)
			if len(ids) == 0 {
				ids = nil
			}
			if !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ListAudit = %v, want %v", ids, tt.want)
			}
		})
	}
}

func TestAuditIndexedColumns(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := context.Background()
	ev := fullEvent()
	if err := s.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	var typ, outcome, at, tool, op, trace, world string
	var atMS int64
	err := s.db.QueryRow(`SELECT type, outcome, at, at_ms, tool, operation_id, trace_id, world
		FROM audit_events WHERE id = ?`, ev.ID).Scan(&typ, &outcome, &at, &atMS, &tool, &op, &trace, &world)
	if err != nil {
		t.Fatal(err)
	}
	wantMS, _ := kernel.ParseTimestamp(ev.At)
	got := fmt.Sprint(typ, outcome, at, atMS, tool, op, trace, world)
	want := fmt.Sprint(string(ev.Type), string(ev.Outcome), ev.At, wantMS, ev.Tool, ev.OperationID, ev.TraceID, ev.NamespaceID)
	if got != want {
		t.Errorf("columns = %s, want %s", got, want)
	}
}

// TestAppendErrorNamesTheDatabase: an audit write that fails (a full disk, a closed or
// read-only database) names the database, so the refusal it causes can be traced to it.
func TestAppendErrorNamesTheDatabase(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err := s.Append(context.Background(), event("ev-closed", kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-08-03T09:00:00Z"))
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("append to a closed store: %v, want an error naming %s", err, path)
	}
}

// TestAuditAfterSeq: LastAuditSeq is 0 on an empty trail and then the newest event's
// sequence number; AfterSeq returns only what was recorded after it, in order.
func TestAuditAfterSeq(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := openTest(t, Options{})
	if seq, err := s.LastAuditSeq(ctx); err != nil || seq != 0 {
		t.Fatalf("empty trail: %d %v", seq, err)
	}
	for _, id := range []string{"a", "b"} {
		if err := s.Append(ctx, event(id, kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00.000Z")); err != nil {
			t.Fatal(err)
		}
	}
	mark, err := s.LastAuditSeq(ctx)
	if err != nil || mark == 0 {
		t.Fatalf("after two: %d %v", mark, err)
	}
	if evs, err := s.ListAudit(ctx, AuditFilter{AfterSeq: mark, Oldest: true}); err != nil || len(evs) != 0 {
		t.Fatalf("nothing after the mark: %v %v", eventIDs(evs), err)
	}
	for _, id := range []string{"c", "d"} {
		if err := s.Append(ctx, event(id, kernel.EventToolInvoked, kernel.OutcomeDenied, "2026-01-01T00:00:00.000Z")); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := s.ListAudit(ctx, AuditFilter{AfterSeq: mark, Oldest: true})
	if err != nil || strings.Join(eventIDs(evs), ",") != "c,d" {
		t.Fatalf("after the mark: %v %v", eventIDs(evs), err)
	}
	if last, _ := s.LastAuditSeq(ctx); last <= mark {
		t.Fatalf("sequence did not advance: %d ≤ %d", last, mark)
	}
}

// TestListAuditByInstant: ordering by instant in the store, with a limit, gives exactly
// the first events of the whole trail ordered by instant (latest first, ties newest
// recorded first), for every limit and with a filter, and reads them through the at
// index (no sort of the whole trail).
func TestListAuditByInstant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	rng := rand.New(rand.NewPCG(7, 11))
	types := []kernel.AuditEventType{kernel.EventToolInvoked, kernel.EventAuthorizationChecked}
	var all []kernel.AuditEvent
	for i := 0; i < 200; i++ {
		// instants out of recording order (pinned clocks), with many ties
		at := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(40)) * time.Second)
		ev := event(fmt.Sprintf("ev-%03d", i), types[rng.IntN(2)], kernel.OutcomeSucceeded, kernel.FormatTimestamp(at.UnixMilli()))
		if err := s.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
		all = append(all, ev)
	}
	ms := func(ev kernel.AuditEvent) int64 { m, _ := kernel.ParseTimestamp(ev.At); return m }
	for _, typ := range []string{"", string(kernel.EventToolInvoked)} {
		var want []kernel.AuditEvent
		for i := len(all) - 1; i >= 0; i-- { // newest recorded first
			if typ == "" || string(all[i].Type) == typ {
				want = append(want, all[i])
			}
		}
		slices.SortStableFunc(want, func(a, b kernel.AuditEvent) int { return cmp.Compare(ms(b), ms(a)) })
		for _, limit := range []int{1, 2, 7, 50, len(want), len(want) + 5} {
			f := AuditFilter{ByInstant: true, Limit: limit, Oldest: true}
			if typ != "" {
				f.Types = []string{typ}
			}
			got, err := s.ListAudit(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			n := min(limit, len(want))
			if len(got) != n {
				t.Fatalf("type %q limit %d: %d events, want %d", typ, limit, len(got), n)
			}
			for i := range got {
				if got[i].ID != want[i].ID {
					t.Fatalf("type %q limit %d: event %d is %s, want %s", typ, limit, i, got[i].ID, want[i].ID)
				}
			}
		}
	}
	rows, err := s.db.QueryContext(ctx, `EXPLAIN QUERY PLAN SELECT seq, event FROM audit_events ORDER BY at_ms DESC, seq DESC LIMIT 5`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if p := strings.Join(plan, "; "); !strings.Contains(p, "audit_events_at") || strings.Contains(p, "TEMP B-TREE") {
		t.Fatalf("the ordered listing does not walk the at index: %s", p)
	}
}
