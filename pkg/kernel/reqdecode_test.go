package kernel

import (
	"encoding/json"
	"reflect"
	"testing"
)

// requirementSeeds are requirement documents, in and out of the fast path's form.
var requirementSeeds = []string{
	`{"resource":{"namespace":"files","path":["notes","todo.md"]},"action":"read"}`,
	` {"action" : "read" , "resource" : { "path" : [ ] , "namespace" : "files" } } ` + "\n",
	`{"resource":{"namespace":"  files ","path":["a"]},"action":"  read  "}`,
	`{"resource":{"namespace":"files","path":["a"]},"action":""}`,
	`{"resource":{"namespace":"","path":["a"]},"action":"read"}`,
	`{"resource":{"namespace":"files","path":[".."]},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a",""]},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a"]},"action":"read","action":"write"}`,
	`{"resource":{"namespace":"files","namespace":"repo","path":["a"]},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a"],"owner":{"kind":"human","id":"alice"}},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a"]},"action":"read","extra":1}`,
	`{"resource":{"namespace":"files"},"action":"read"}`,
	`{"resource":{"path":["a"]},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a"]}}`,
	`{"action":"read"}`,
	`{"resource":{"namespace":"files","path":"a"},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a\u0041"]},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a"]},"action":"re\"ad"}`,
	`{"resource":{"namespace":"files","path":["a"]},"action":"read"} x`,
	`{"resource":{"namespace":"files","path":["a"]},"action":"read"`,
	`{"resource":{"namespace":"files","path":["a",]},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a"]},,"action":"read"}`,
	`{"resource":null,"action":"read"}`,
	`{"resource":{"namespace":"files","path":["a"]},"action":null}`,
	`{"resource":{"namespace":"files","path":["a"]},"action":"` + string(make([]byte, 0)) + `xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}`,
	`{}`, `[]`, `null`, ``, `{"resource":{},"action":"read"}`,
}

// checkRequirementFast: whatever the fast path accepts, the general way accepts with the
// same value.
func checkRequirementFast(t *testing.T, doc []byte) {
	fast, ok := decodeRequirementFast(doc)
	if !ok {
		return
	}
	var slow CapabilityRequirement
	if err := CheckDuplicateKeys(doc); err != nil {
		t.Fatalf("%q: the fast path accepted a document with a duplicate key: %v", doc, err)
	}
	if err := json.Unmarshal(doc, &slow); err != nil {
		t.Fatalf("%q: the fast path accepted %+v, the general way refuses it: %v", doc, fast, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: the fast path read %#v, the general way %#v", doc, fast, slow)
	}
}

// TestDecodeRequirementFastAgreesWithUnmarshal: the fast path accepts the common form
// (so the hot route takes it) and agrees with the general way on every seed;
// DecodeRequirement refuses what the general way refuses.
func TestDecodeRequirementFastAgreesWithUnmarshal(t *testing.T) {
	for _, s := range requirementSeeds {
		checkRequirementFast(t, []byte(s))
		_, derr := DecodeRequirement([]byte(s))
		var r CapabilityRequirement
		uerr := CheckDuplicateKeys([]byte(s))
		if uerr == nil {
			uerr = json.Unmarshal([]byte(s), &r)
		}
		if (derr == nil) != (uerr == nil) {
			t.Errorf("%q: DecodeRequirement error %v, the general way's %v", s, derr, uerr)
		}
	}
	for _, s := range requirementSeeds[:3] {
		if _, ok := decodeRequirementFast([]byte(s)); !ok {
			t.Errorf("%q: the common form is not read by the fast path", s)
		}
	}
}

// FuzzDecodeRequirementFast: the fast path never accepts what the general way refuses or
// reads differently.
func FuzzDecodeRequirementFast(f *testing.F) {
	for _, s := range requirementSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { checkRequirementFast(t, doc) })
}
