package httpapi

import (
	"encoding/json"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// marshalled is what writeJSON writes for v.
func marshalled(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b) + "\n"
}

// TestAppendDecisionAgreesWithMarshal: the hand-written body of a decision is
// encoding/json's, byte for byte, and every decision it does not encode is left to it.
func TestAppendDecisionAgreesWithMarshal(t *testing.T) {
	alice := kernel.Address{Kind: "human", ID: "alice"}
	req := &kernel.CapabilityRequest{ID: "r", Requester: alice, Owner: alice}
	for _, d := range []kernel.AuthorizationDecision{
		{Allowed: true, ReasonCode: kernel.ReasonAllowed, MatchedGrantID: "g-notes"},
		{Allowed: true, ReasonCode: kernel.ReasonAllowed},
		{ReasonCode: kernel.ReasonNoMatchingGrant},
		{ReasonCode: kernel.ReasonNoMatchingGrant, MatchedGrantID: "g"},
		{Allowed: true, ReasonCode: kernel.ReasonAllowed, MatchedGrantID: "g<&>"},
		{Allowed: true, ReasonCode: kernel.ReasonAllowed, MatchedGrantID: "g\"\\\x01é\u2028"},
		{Allowed: true, ReasonCode: "a&b"},
		{ReasonCode: kernel.ReasonNoMatchingGrant, RequiredAuthority: req},
		{ReasonCode: kernel.ReasonAuthorityUnavailable, Metadata: map[string]any{"authority": map[string]any{"code": "audit_unavailable"}}},
		{Allowed: true, ReasonCode: kernel.ReasonAllowed, Metadata: map[string]any{}},
	} {
		want := marshalled(t, d)
		got, ok := appendDecision(nil, &d)
		if ok && string(got) != want {
			t.Errorf("appendDecision(%+v) = %s, want %s", d, got, want)
		}
		if simple := d.RequiredAuthority == nil && len(d.Metadata) == 0 && plainJSON(d.MatchedGrantID) && plainJSON(string(d.ReasonCode)); ok != simple {
			t.Errorf("appendDecision(%+v) encoded %v, want %v", d, ok, simple)
		}
	}
}

// FuzzAppendDecision: whatever the strings, a decision appendDecision encodes is
// encoding/json's bytes.
func FuzzAppendDecision(f *testing.F) {
	f.Add(true, "allowed", "g-notes")
	f.Add(false, "no_matching_grant", "")
	f.Fuzz(func(t *testing.T, allowed bool, code, grant string) {
		d := kernel.AuthorizationDecision{Allowed: allowed, ReasonCode: kernel.ReasonCode(code), MatchedGrantID: grant}
		if got, ok := appendDecision(nil, &d); ok && string(got) != marshalled(t, d) {
			t.Errorf("appendDecision(%+v) = %s, want %s", d, got, marshalled(t, d))
		}
	})
}
