package kernel_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

func TestPathSegments(t *testing.T) {
	cases := []struct {
		seg string
		ok  bool
	}{
		{"a", true}, {"...", true}, {".git", true}, {"a..b", true}, {"two words", true}, {"résumé", true},
		{"\u0085nel", true}, // C1 controls are not rejected
		{strings.Repeat("a", 256), true},
		{strings.Repeat("😀", 128), true}, // 256 UTF-16 units
		{strings.Repeat("😀", 129), false},
		{strings.Repeat("a", 257), false},
		{"", false}, {".", false}, {"..", false}, {"a/b", false}, {`a\b`, false},
		{" a", false}, {"a ", false}, {"\u00a0a", false}, {"a\ufeff", false}, {"a\u3000", false},
		{"a\x00b", false}, {"a\nb", false}, {"a\tb", false}, {"a\x7fb", false}, {"\x1b[0m", false},
	}
	for _, c := range cases {
		err := kernel.ValidatePathSegment(c.seg)
		if (err == nil) != c.ok {
			t.Errorf("segment %q: err %v, want ok=%v", c.seg, err, c.ok)
		}
	}
	if kernel.ValidatePath(make([]string, 65)) == nil {
		t.Error("65 segments must be refused")
	}
}

func FuzzPathSegment(f *testing.F) {
	for _, s := range []string{"a", "..", ".", " a", "a/b", "\x00", "😀", strings.Repeat("x", 256), ".git", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seg string) {
		err := kernel.ValidatePathSegment(seg)
		if err != nil {
			return
		}
		// An accepted segment can never be a separator, a traversal marker, padded or
		// carry a C0 control, and always round-trips through JSON unchanged.
		if seg == "." || seg == ".." || strings.ContainsAny(seg, `/\`) || jscompat.JSTrim(seg) != seg {
			t.Fatalf("accepted %q", seg)
		}
		for _, r := range seg {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("accepted control in %q", seg)
			}
		}
		if n := jscompat.UTF16Len(seg); n < 1 || n > 256 {
			t.Fatalf("accepted length %d", n)
		}
		if utf8.ValidString(seg) {
			b, _ := json.Marshal([]string{seg})
			var back []string
			if json.Unmarshal(b, &back) != nil || back[0] != seg {
				t.Fatalf("segment %q does not round-trip", seg)
			}
		}
	})
}

const seedGrant = `{"id":"g","namespaceId":"w","subject":{"kind":"agent","agentId":"bob"},"issuer":{"kind":"human","userId":"alice"},
"capabilities":[{"resource":{"namespace":"files","path":["a"],"owner":{"kind":"human","userId":"alice"}},"actions":["read","*"],"scope":"descendants"}],
"constraints":{"purposes":["p"],"notBefore":"2026-01-01T00:00:00Z","expiresAt":"2027-01-01T00:00:00+02:00","maxUses":3,"delegationDepth":1},
"issuedAt":"2026-01-01T00:00:00.000Z","revokedAt":"2028-01-01T00:00:00Z","parentGrantId":"p0","metadata":{"x":[1,2]}}`

// FuzzGrantJSON: the strict decoder never panics, never returns a partial grant beside an
// error, and whatever it accepts validates and authorizes without error-induced allows.
func FuzzGrantJSON(f *testing.F) {
	f.Add([]byte(seedGrant))
	f.Add([]byte(`{"id":" g ","namespaceId":"w","subject":{"kind":"agent","agentId":"b"},"issuer":{"kind":"human","userId":"a"},"capabilities":[{"resource":{"namespace":"files","path":[]},"actions":["x"],"scope":"exact"}],"constraints":{},"issuedAt":"2026-01-01T00:00:00Z"}`))
	f.Add([]byte(`{"id":"g","ID":"h"}`))
	f.Add([]byte(`{"constraints":{"maxUses":1.5}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var g kernel.CapabilityGrant
		err := json.Unmarshal(data, &g)
		if err != nil {
			if g.ID != "" || g.Capabilities != nil {
				t.Fatalf("partial grant beside an error: %+v", g)
			}
			return
		}
		if verr := g.Validate(); verr != nil {
			t.Fatalf("decoded grant fails Validate: %v", verr)
		}
		b, merr := json.Marshal(g)
		if merr != nil {
			t.Fatalf("decoded grant does not encode: %v", merr)
		}
		var back kernel.CapabilityGrant
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		// A decision against a context the grant was not issued for is never an allow.
		actx := testContext()
		actx.World = g.NamespaceID + "-other"
		auth := kernel.NewAuthority([]kernel.CapabilityGrant{g}, actx, 0)
		var z kernel.Authorizer
		d, _ := z.Authorize(context.Background(), auth, actx, req("read", "a"), kernel.AuthorizeOptions{})
		if d.Allowed {
			t.Fatalf("allowed against an unavailable authority: %+v", d)
		}
	})
}

func FuzzAccessContextJSON(f *testing.F) {
	b, _ := json.Marshal(testContext())
	f.Add(b)
	f.Add([]byte(`{"namespaceId":"w","grants":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c kernel.AccessContext
		if err := json.Unmarshal(data, &c); err != nil {
			if c.World != "" || c.Now != "" {
				t.Fatalf("partial context beside an error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("decoded context fails Validate: %v", err)
		}
	})
}

func FuzzNamespaceUpdate(f *testing.F) {
	for _, s := range []string{`{"enable":["a"]}`, `{"enable":["a"],"disable":["a"]}`, `{}`, `{"disable":["x","y"]}`, `{"enable":["a"],"x":1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		u, err := kernel.ParseToolNamespaceUpdate(data)
		if err != nil {
			if u.Enable != nil || u.Disable != nil {
				t.Fatal("partial update beside an error")
			}
			return
		}
		if len(u.Enable)+len(u.Disable) == 0 {
			t.Fatal("accepted an empty update")
		}
		out, err := kernel.ApplyToolNamespaceUpdate(nil, u)
		if err != nil {
			t.Fatalf("valid update failed to apply: %v", err)
		}
		for _, d := range u.Disable {
			for _, o := range out {
				if o == d {
					t.Fatalf("disabled %q still enabled", d)
				}
			}
		}
	})
}

func FuzzAddress(f *testing.F) {
	for _, s := range []string{"human:alice", "agent: bob ", "group:c", "service:s", "robot:x", `{"kind":"human","userId":"u"}`, ":", "human:"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := kernel.ParseAddress(s)
		if err != nil {
			if !a.IsZero() {
				t.Fatal("partial address beside an error")
			}
			return
		}
		if err := a.Validate(); err != nil {
			t.Fatalf("parsed address %+v fails Validate: %v", a, err)
		}
		b, _ := json.Marshal(a)
		var back kernel.Address
		if json.Unmarshal(b, &back) != nil || back != a {
			t.Fatalf("address %+v does not round-trip", a)
		}
	})
}

func TestParseTimestamp(t *testing.T) {
	cases := []struct {
		s    string
		ms   int64
		fail bool
	}{
		{s: "1970-01-01T00:00:00Z", ms: 0},
		{s: "1970-01-01T00:00:00.5Z", ms: 500},
		{s: "1970-01-01T00:00:00.123456Z", ms: 123},
		{s: "1970-01-01T01:00:00+01:00", ms: 0},
		{s: "1969-12-31T23:00:00-01:00", ms: 0},
		{s: "2024-02-29T00:00:00Z", ms: 1709164800000},
		{s: "2023-02-29T00:00:00Z", fail: true},
		{s: "2026-13-01T00:00:00Z", fail: true},
		{s: "2026-01-01T24:00:00Z", fail: true},
		{s: "2026-01-01T00:00Z", fail: true},
		{s: "2026-01-01T00:00:00", fail: true},
		{s: "2026-01-01 00:00:00Z", fail: true},
		{s: "2026-01-01T00:00:00.Z", fail: true},
		{s: "2026-01-01T00:00:00+0100", fail: true},
		{s: "2026-01-01t00:00:00z", fail: true},
	}
	for _, c := range cases {
		ms, err := kernel.ParseTimestamp(c.s)
		if (err != nil) != c.fail || (!c.fail && ms != c.ms) {
			t.Errorf("%s: %d %v", c.s, ms, err)
		}
	}
}

func FuzzParseTimestamp(f *testing.F) {
	f.Add("2026-08-03T09:00:00.000Z")
	f.Add("2026-08-03T09:00:00+05:30")
	f.Fuzz(func(t *testing.T, s string) {
		ms, err := kernel.ParseTimestamp(s)
		if err != nil {
			return
		}
		// whatever is accepted is a real instant that Go's RFC 3339 parser agrees on
		tm, terr := time.Parse(time.RFC3339Nano, s)
		if terr != nil || tm.UnixMilli() != ms {
			t.Fatalf("%q: ours %d, time.Parse %v %v", s, ms, tm.UnixMilli(), terr)
		}
	})
}

// TestCanonicalGrant holds the direct canonical encoder to the generic one.
func TestCanonicalGrant(t *testing.T) {
	var g kernel.CapabilityGrant
	if err := json.Unmarshal([]byte(seedGrant), &g); err != nil {
		t.Fatal(err)
	}
	grants := []kernel.CapabilityGrant{g, grant("plain", []string{"read"}, kernel.ScopeExact)}
	for _, kind := range []kernel.AddressKind{kernel.KindAgent, kernel.KindGroup, kernel.KindService, kernel.KindHuman} {
		x := grant("k-"+string(kind), []string{"a\"b", "<&>"}, kernel.ScopeDescendants, "é", "\u2028")
		x.Subject = kernel.Address{Kind: kind, ID: "id\\1"}
		grants = append(grants, x)
	}
	for _, g := range grants {
		checkCanonicalGrant(t, &g)
	}
}

func checkCanonicalGrant(t *testing.T, g *kernel.CapabilityGrant) {
	t.Helper()
	raw, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	want, err := kernel.CanonicalJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := kernel.CanonicalGrant(g); string(got) != string(want) {
		t.Errorf("grant %q:\n got %s\nwant %s", g.ID, got, want)
	}
}

// FuzzCanonicalGrant holds the direct canonical encoder to the generic one for every
// grant the contract accepts (invalid UTF-8 anywhere is refused by the contract, so the
// two never have to agree on how to repair it).
func FuzzCanonicalGrant(f *testing.F) {
	f.Add(seedGrant)
	f.Add(`{"id":"g\u2028","namespaceId":"w","subject":{"kind":"agent","agentId":"a\"b"},"issuer":{"kind":"human","userId":"\\u"},"capabilities":[{"resource":{"namespace":"files","path":["é","\u00ff"]},"actions":["read","<&>"],"scope":"exact"}],"constraints":{"maxUses":3},"issuedAt":"2026-01-01T00:00:00Z","metadata":{"b":[1,2.5,"x"],"a":{"z":null}}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		var g kernel.CapabilityGrant
		if json.Unmarshal([]byte(doc), &g) != nil {
			return
		}
		if err := g.Validate(); err != nil {
			t.Fatalf("decoded grant fails Validate: %v", err)
		}
		checkCanonicalGrant(t, &g)
	})
}

func TestStrictNumbers(t *testing.T) {
	for _, c := range []struct {
		constraints string
		ok          bool
	}{
		{`{"maxUses":3}`, true}, {`{"maxUses":3.0}`, true}, {`{"maxUses":"3"}`, false}, {`{"maxUses":3.5}`, false},
		{`{"maxUses":0}`, false}, {`{"delegationDepth":"2"}`, false}, {`{"delegationDepth":0}`, true},
		{`{"maxUses":null}`, false}, {`{"maxUses":true}`, false}, {`{"notBefore":"2026-01-02T00:00:00Z","expiresAt":"2026-01-01T00:00:00Z"}`, false},
	} {
		var k kernel.CapabilityConstraints
		err := json.Unmarshal([]byte(c.constraints), &k)
		if (err == nil) != c.ok {
			t.Errorf("%s: err %v, want ok=%v", c.constraints, err, c.ok)
		}
	}
}

// TestAuthorityHash pins the hash to its definition: hex(SHA-256(canonical JSON of the
// sorted canonical JSON of each grant)), independent of grant order.
func TestAuthorityHash(t *testing.T) {
	g1 := grant("b", []string{"read"}, kernel.ScopeExact, "x\"y")
	g2 := grant("a", []string{"list"}, kernel.ScopeDescendants)
	actx := testContext()
	h1 := kernel.NewAuthority([]kernel.CapabilityGrant{g1, g2}, actx, 0).Hash()
	h2 := kernel.NewAuthority([]kernel.CapabilityGrant{g2, g1}, actx, 0).Hash()
	parts := []string{string(kernel.CanonicalGrant(&g1)), string(kernel.CanonicalGrant(&g2))}
	sort.Strings(parts)
	arr, _ := json.Marshal(parts)
	canonical, err := kernel.CanonicalJSON(arr)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canonical)
	if want := hex.EncodeToString(sum[:]); h1 != want || h2 != want {
		t.Fatalf("hash %s / %s, want %s", h1, h2, want)
	}
}
