package kernel

import (
	"encoding/json"
	"reflect"
	"testing"
)

// An EscalationRecord survives a JSON round trip (pkg/client reads the server's list
// this way): the record's own keys are not refused as unknown keys of the Escalation.
func TestEscalationRecordJSONRoundTrip(t *testing.T) {
	owner, err := ParseAddress("human:alice")
	if err != nil {
		t.Fatal(err)
	}
	in := EscalationRecord{ID: 7, Escalation: Escalation{Reason: "may I?", Reviewer: owner, RequestedAt: "2026-08-03T09:00:00.000Z",
		Status: EscalationPending}, World: "default", Owner: owner, TraceID: "t1", CallID: "c1",
		Resolution: &EscalationResolution{Status: EscalationApproved, ResolvedBy: owner, ResolvedAt: "2026-08-03T10:00:00.000Z", Note: "ok"}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var out EscalationRecord
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
	// the Escalation part is still strict
	if err := json.Unmarshal([]byte(`{"id":1,"reason":"r","reviewer":"human:alice","requestedAt":"2026-08-03T09:00:00Z","status":"pending","bogus":1}`), &out); err == nil {
		t.Fatal("an unknown key was accepted")
	}
}
