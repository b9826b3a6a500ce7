package host

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// trail is the whole audit trail of the session's store, oldest first.
func trail(t *testing.T, s *Session) []kernel.AuditEvent {
	t.Helper()
	evs, err := s.h.Store.ListAudit(context.Background(), store.AuditFilter{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// eventTypes are the types of evs, in order.
func eventTypes(evs []kernel.AuditEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = string(ev.Type) + "/" + string(ev.Outcome)
	}
	return out
}

// TestSessionServiceChecks: the checks of one request's service (HTTP /v1's authorize,
// explain and reach): Authorize decides and audits without spending; ExplainAuthorize and
// Reach write nothing.
func TestSessionServiceChecks(t *testing.T) {
	t.Parallel()
	sess, _ := openSession(t, time.Now, "2026-08-03T09:00:00Z")
	ctx := context.Background()
	read := kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"notes", "a.md"}}, Action: "read"}
	write := kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"notes", "a.md"}}, Action: "write"}
	for _, tc := range []struct {
		name    string
		req     kernel.CapabilityRequirement
		allowed bool
		grant   string
	}{
		{"covered", read, true, "g-read"},
		{"not covered", write, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := sess.Service(map[string]any{"surface": "http"}, "", "http")
			before := len(trail(t, sess))
			ex, err := svc.ExplainAuthorize(ctx, tc.req)
			if err != nil || ex.Allowed != tc.allowed {
				t.Fatalf("ExplainAuthorize = allowed %v, %v; want %v", ex.Allowed, err, tc.allowed)
			}
			if tc.allowed && (ex.MatchedGrant == nil || ex.MatchedGrant.ID != tc.grant) {
				t.Errorf("ExplainAuthorize matched %+v, want %s", ex.MatchedGrant, tc.grant)
			}
			if !tc.allowed && (ex.Refusal == nil || len(ex.Fixes) == 0) {
				t.Errorf("ExplainAuthorize of a refusal: refusal %+v, fixes %+v; want both", ex.Refusal, ex.Fixes)
			}
			if n := len(trail(t, sess)); n != before {
				t.Errorf("ExplainAuthorize wrote %d audit events, want none", n-before)
			}
			d, err := svc.Authorize(ctx, tc.req, "op-"+tc.name)
			if err != nil || d.Allowed != tc.allowed {
				t.Fatalf("Authorize = %+v, %v; want allowed %v", d, err, tc.allowed)
			}
			evs := trail(t, sess)[before:]
			var decided bool
			for _, ev := range evs {
				if ev.Type == kernel.EventAuthorizationChecked && ev.OperationID == "op-"+tc.name {
					decided = true
					if want := map[bool]kernel.AuditOutcome{true: kernel.OutcomeAllowed, false: kernel.OutcomeDenied}[tc.allowed]; ev.Outcome != want {
						t.Errorf("the decision's record is %s, want %s", ev.Outcome, want)
					}
					if ev.Metadata["surface"] != "http" {
						t.Errorf("the decision's record lacks the request's metadata: %v", ev.Metadata)
					}
				}
			}
			if !decided {
				t.Errorf("Authorize recorded no decision of op-%s: %v", tc.name, eventTypes(evs))
			}
		})
	}
	svc := sess.Service(nil, "", "http")
	before := len(trail(t, sess))
	r, err := svc.Reach(ctx)
	if err != nil || len(r.Reach) == 0 {
		t.Fatalf("Reach = %+v, %v; want the grants' reach", r, err)
	}
	var files bool
	for _, e := range r.Reach {
		files = files || e.Namespace == "files"
	}
	if !files {
		t.Errorf("Reach %+v does not name files", r.Reach)
	}
	for _, ev := range trail(t, sess)[before:] {
		// the session's first turn resolves its authority once; Reach decides nothing
		if ev.Type != kernel.EventAuthorityResolved {
			t.Errorf("Reach wrote %s, want no record but the session's authority.resolved", ev.Type)
		}
	}
	actx, err := sess.AccessContext(ctx)
	if err != nil || actx.Actor.String() != "agent:helper" || actx.Now != "2026-08-03T09:00:00.000Z" || !slices.Equal(actx.EnabledToolNamespaces, []string{"files"}) {
		t.Errorf("AccessContext = %+v, %v", actx, err)
	}
}

// TestSessionServiceNamespacesOf: an operator's namespace routes read and patch the
// stored selection of another (world, owner), never the context's; a malformed patch is
// an invalid request and stores nothing.
func TestSessionServiceNamespacesOf(t *testing.T) {
	t.Parallel()
	sess, _ := openSession(t, time.Now, "2026-08-03T09:00:00Z")
	ctx := context.Background()
	bob := kernel.Address{Kind: kernel.KindHuman, ID: "bob"}
	svc := sess.Service(nil, "", "http")
	ns, err := svc.NamespacesOf(ctx, "other", bob)
	if err != nil || ns.SelectionSource != "default" || ns.World != "other" || ns.Owner != bob || !slices.Equal(ns.EffectiveSelection, []string{"files"}) {
		t.Fatalf("NamespacesOf before any patch = %+v, %v", ns, err)
	}
	for _, tc := range []struct {
		name    string
		patch   kernel.ToolNamespaceUpdate
		want    []string
		wantErr string
	}{
		{"enable", kernel.ToolNamespaceUpdate{Enable: []string{"repo"}}, []string{"files", "repo"}, ""},
		{"in both lists", kernel.ToolNamespaceUpdate{Enable: []string{"files"}, Disable: []string{"files"}}, nil, api.CodeInvalidRequest},
		{"empty", kernel.ToolNamespaceUpdate{}, nil, api.CodeInvalidRequest},
		{"disable", kernel.ToolNamespaceUpdate{Disable: []string{"files"}}, []string{"repo"}, ""},
	} {
		before, _, err := sess.h.Store.Selection(ctx, "other", bob)
		if err != nil {
			t.Fatal(err)
		}
		up, err := sess.Service(nil, "", "http").UpdateNamespacesOf(ctx, "other", bob, tc.patch)
		if tc.wantErr != "" {
			var ae *api.Error
			if !errors.As(err, &ae) || ae.Code != tc.wantErr {
				t.Fatalf("%s: UpdateNamespacesOf = %+v, %v; want an *api.Error %s", tc.name, up, err, tc.wantErr)
			}
			if after, _, _ := sess.h.Store.Selection(ctx, "other", bob); !slices.Equal(after, before) {
				t.Fatalf("%s: the refused patch changed the stored selection from %v to %v", tc.name, before, after)
			}
			continue
		}
		if err != nil || !slices.Equal(up.EffectiveSelection, tc.want) || up.SelectionSource != "stored" {
			t.Fatalf("%s: UpdateNamespacesOf = %+v, %v; want %v stored", tc.name, up, err, tc.want)
		}
		got, err := sess.Service(nil, "", "http").NamespacesOf(ctx, "other", bob)
		if err != nil || !slices.Equal(got.EffectiveSelection, tc.want) || got.SelectionSource != "stored" {
			t.Fatalf("%s: NamespacesOf after the patch = %+v, %v", tc.name, got, err)
		}
	}
	// the context's own (world, owner) kept its default selection
	own, err := sess.Service(nil, "", "http").Namespaces(ctx)
	if err != nil || own.SelectionSource != "default" || !slices.Equal(own.EffectiveSelection, []string{"files"}) {
		t.Errorf("the context's Namespaces after patching another pair = %+v, %v", own, err)
	}
}

// TestSessionServiceRefuseInEnvelope: an envelope's refusal is a denied result with gate
// envelope, recorded by the kernel (tool.invoked, source envelope, the metadata given),
// and no grant is consulted or spent.
func TestSessionServiceRefuseInEnvelope(t *testing.T) {
	t.Parallel()
	sess, _ := openSession(t, time.Now, "2026-08-03T09:00:00Z")
	ctx := context.Background()
	before := len(trail(t, sess))
	svc := sess.Service(map[string]any{"surface": "mcp"}, "", "mcp")
	res, err := svc.RefuseInEnvelope(ctx, api.EnvelopeRefusal{Call: api.InvokeRequest{ID: "call-9", Tool: "files.read",
		Arguments: json.RawMessage(`{"path":["a.md"]}`)}, Code: "escalation_pending", Message: "wait", Metadata: map[string]any{"escalation": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != kernel.StatusDenied || res.Gate != kernel.GateEnvelope || res.Error == nil || res.Error.Code != "escalation_pending" {
		t.Fatalf("RefuseInEnvelope = %+v, want denied at the envelope", res)
	}
	evs := trail(t, sess)[before:]
	var invoked []kernel.AuditEvent
	for _, ev := range evs {
		switch ev.Type {
		case kernel.EventToolInvoked:
			invoked = append(invoked, ev)
		case kernel.EventAuthorizationChecked:
			t.Errorf("the envelope's refusal consulted a grant: %+v", ev)
		}
	}
	if len(invoked) != 1 || invoked[0].OperationID != "call-9" || invoked[0].Source != "envelope" || invoked[0].Outcome != kernel.OutcomeDenied ||
		!reflect.DeepEqual(invoked[0].Metadata["escalation"], 3.0) && !reflect.DeepEqual(invoked[0].Metadata["escalation"], 3) {
		t.Fatalf("the refusal's records: %+v", invoked)
	}
}

// TestBeginTurnAt: a driver's turn takes the (world, owner)'s stored selection, sorted,
// whatever the context it was given says, and writes nothing.
func TestBeginTurnAt(t *testing.T) {
	t.Parallel()
	sess, _ := openSession(t, time.Now, "2026-08-03T09:00:00Z")
	ctx := context.Background()
	h := sess.h
	if _, err := sess.Service(nil, "", "test").UpdateNamespaces(ctx, kernel.ToolNamespaceUpdate{Enable: []string{"sharedos"}}); err != nil {
		t.Fatal(err)
	}
	before := len(trail(t, sess))
	actx := h.Prepared.Context
	actx.EnabledToolNamespaces = []string{"repo"}
	turn, err := h.BeginTurnAt(ctx, actx, map[string]any{"surface": "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := turn.Context().EnabledToolNamespaces; !slices.Equal(got, []string{"files", "sharedos"}) {
		t.Errorf("the turn's selection = %v, want the stored one, sorted", got)
	}
	if n := len(trail(t, sess)); n != before {
		t.Errorf("BeginTurnAt wrote %d audit events", n-before)
	}
}
