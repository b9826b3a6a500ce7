package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestChainBoundIsExact: a delegation chain of exactly DefaultMaxDelegationChainLength
// grants (leaf included) is accepted; one more is refused chain_too_long.
func TestChainBoundIsExact(t *testing.T) {
	t.Parallel()
	for _, n := range []int{kernel.DefaultMaxDelegationChainLength, kernel.DefaultMaxDelegationChainLength + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			store := resolverMap{}
			var leaf kernel.CapabilityGrant
			for i := range n {
				g := grant(fmt.Sprintf("g%d", i), []string{"read"}, kernel.ScopeDescendants)
				g.Constraints.DelegationDepth = i64(int64(n - 1 - i))
				if i < n-1 {
					g.Subject = alice // each ancestor is held by the next grant's issuer
				}
				if i > 0 {
					g.ParentGrantID = fmt.Sprintf("g%d", i-1)
				}
				gg := g
				store[g.ID] = &gg
				leaf = g
			}
			z := kernel.Authorizer{Resolver: store}
			auth := kernel.NewAuthority([]kernel.CapabilityGrant{leaf}, testContext(), 0)
			d, diag := z.Authorize(context.Background(), auth, testContext(), req("read", "x"), kernel.AuthorizeOptions{})
			if n == kernel.DefaultMaxDelegationChainLength {
				if !d.Allowed {
					t.Fatalf("a chain of %d grants is refused: %s %v %+v", n, d.ReasonCode, d.Metadata, diag)
				}
				return
			}
			link, _ := d.Metadata["delegation"].(map[string]any)
			if d.Allowed || d.ReasonCode != kernel.ReasonDelegationChainInvalid || link["code"] != kernel.LinkChainTooLong {
				t.Fatalf("a chain of %d grants: %s %v, want delegation_chain_invalid chain_too_long", n, d.ReasonCode, d.Metadata)
			}
		})
	}
}

// TestActionsCompareAsWholeStrings holds both matchers to whole-string actions: a granted
// "snapshot" does not cover "snapshot:create", "read" does not cover "readme", and
// "snapshot:*" is an ordinary action, not a glob. Only a granted "*" covers everything,
// and a requested "*" is covered only by a granted "*".
func TestActionsCompareAsWholeStrings(t *testing.T) {
	t.Parallel()
	cases := []struct {
		granted, requested string
		want               bool
	}{
		{"snapshot", "snapshot:create", false},
		{"snapshot:create", "snapshot", false},
		{"read", "readme", false},
		{"readme", "read", false},
		{"snapshot:*", "snapshot:create", false},
		{"snapshot:*", "snapshot:*", true},
		{"read", "read", true},
		{"*", "snapshot:create", true},
		{"read", "*", false},
		{"*", "*", true},
		{"Read", "read", false},
	}
	for _, c := range cases {
		for _, scope := range []kernel.Scope{kernel.ScopeExact, kernel.ScopeDescendants} {
			capa := kernel.Capability{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"docs"}}, Actions: []string{c.granted}, Scope: scope}
			r := req(c.requested, "docs")
			if got := kernel.CapabilityCovers(&capa, &r, alice); got != c.want {
				t.Errorf("covers: granted %q, requested %q (%s): %v, want %v", c.granted, c.requested, scope, got, c.want)
			}
			if got := kernel.CapabilityIntersects(&capa, &r, alice); got != c.want {
				t.Errorf("intersects: granted %q, requested %q (%s): %v, want %v", c.granted, c.requested, scope, got, c.want)
			}
		}
		// and through the kernel (the index must not hide a matcher bug, nor invent a match)
		k := newKernel(t, []kernel.CapabilityGrant{grant("g", []string{c.granted}, kernel.ScopeDescendants, "docs")}, nil, echoTool("t.x", c.requested))
		res := k.InvokeTool(context.Background(), testContext(), call("t.x", `{"path":["docs","a"]}`))
		if got := res.Status == kernel.StatusSucceeded; got != c.want {
			t.Errorf("kernel: granted %q, requested %q: %s %+v, want allowed=%v", c.granted, c.requested, res.Status, res.Error, c.want)
		}
	}
}

// TestListingNeverSpendsAUse: a maxUses:1 grant survives any number of listings and
// discoveries, and is spent by exactly one call.
func TestListingNeverSpendsAUse(t *testing.T) {
	t.Parallel()
	g := grant("g", []string{"read"}, kernel.ScopeDescendants, "docs")
	g.Constraints.MaxUses = i64(1)
	k := newKernel(t, []kernel.CapabilityGrant{g}, nil, echoTool("t.read", "read"))
	for range 5 {
		tools, err := k.ListTools(context.Background(), testContext())
		if err != nil || len(tools) != 1 {
			t.Fatalf("listing: %v %v", tools, err)
		}
	}
	turn := mustTurn(t, k, testContext())
	_ = turn.ExplainCall(context.Background(), call("t.read", `{"path":["docs","a"]}`))
	if _, err := turn.AllTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["docs","a"]}`)); res.Status != kernel.StatusSucceeded {
		t.Fatalf("first call after listings: %+v", res.Error)
	}
	if res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["docs","a"]}`)); res.Status == kernel.StatusSucceeded {
		t.Fatal("a second call spent a use that does not exist")
	}
}

// TestNamespaceGateAppliesAtListing: a granted tool whose namespace is off is not listed.
func TestNamespaceGateAppliesAtListing(t *testing.T) {
	t.Parallel()
	k := newKernel(t, []kernel.CapabilityGrant{grant("g", []string{"*"}, kernel.ScopeDescendants)}, nil, echoTool("t.read", "read"))
	actx := testContext()
	actx.EnabledToolNamespaces = []string{"other"}
	tools, err := k.ListTools(context.Background(), actx)
	if err != nil || len(tools) != 0 {
		t.Fatalf("listed %v (%v) with its namespace off", tools, err)
	}
	actx.EnabledToolNamespaces = []string{"files"}
	if tools, _ := k.ListTools(context.Background(), actx); len(tools) != 1 {
		t.Fatalf("listed %v with its namespace on", tools)
	}
}

// TestWrongCallIDIsInvalidResult: a result naming another call (or tool) is refused
// invalid_tool_result, never passed on.
func TestWrongCallIDIsInvalidResult(t *testing.T) {
	t.Parallel()
	for _, bad := range []func(*kernel.ToolResult){
		func(r *kernel.ToolResult) { r.CallID = "another-call" },
		func(r *kernel.ToolResult) { r.Tool = "t.other" },
	} {
		h := echoTool("t.read", "read")
		inner := h.Invoke
		h.Invoke = func(ctx context.Context, actx kernel.AccessContext, c kernel.ParsedToolCall) (kernel.ToolResult, error) {
			r, err := inner(ctx, actx, c)
			bad(&r)
			return r, err
		}
		k := newKernel(t, []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants)}, nil, h)
		res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["docs"]}`))
		if res.Status != kernel.StatusFailed || res.Error.Code != kernel.CodeInvalidToolResult || res.CallID != "call-1" {
			t.Fatalf("result %+v %+v, want failed invalid_tool_result for call-1", res, res.Error)
		}
	}
}

// TestRequirementComesFromTheArguments: the call is decided on the resource its
// arguments name, not on the tool's declared bound (its ceiling, files:/docs here). A
// grant on exactly the derived resource allows that resource and nothing else, although
// it does not cover the ceiling; a grant on exactly the ceiling allows the ceiling and
// none of the resources under it; a grant on a sibling of the derived resource allows
// the sibling and not it. A kernel that authorized the ceiling instead (or first, taking
// its allow for the call's) fails the second table; one that looked for the ceiling's
// grants fails the first. A denial names the derived resource as the missing authority.
func TestRequirementComesFromTheArguments(t *testing.T) {
	t.Parallel()
	tool := echoTool("t.read", "read")
	tool.Definition.RequiredCapability = req("read", "docs")
	for _, tc := range []struct {
		name  string
		grant kernel.CapabilityGrant
		want  map[string]kernel.ToolStatus
	}{
		{"exact on the derived resource", grant("g", []string{"read"}, kernel.ScopeExact, "docs", "a"), map[string]kernel.ToolStatus{
			`["docs","a"]`: kernel.StatusSucceeded, `["docs","b"]`: kernel.StatusDenied, `["docs"]`: kernel.StatusDenied,
			`["docs","a","x"]`: kernel.StatusDenied}},
		{"exact on the ceiling", grant("g", []string{"read"}, kernel.ScopeExact, "docs"), map[string]kernel.ToolStatus{
			`["docs"]`: kernel.StatusSucceeded, `["docs","a"]`: kernel.StatusDenied, `["docs","a","x"]`: kernel.StatusDenied}},
		{"descendants of a sibling", grant("g", []string{"read"}, kernel.ScopeDescendants, "docs", "b"), map[string]kernel.ToolStatus{
			`["docs","b","x"]`: kernel.StatusSucceeded, `["docs","b"]`: kernel.StatusSucceeded, `["docs","a"]`: kernel.StatusDenied,
			`["docs"]`: kernel.StatusDenied}},
	} {
		k := newKernel(t, []kernel.CapabilityGrant{tc.grant}, nil, tool)
		for path, want := range tc.want {
			res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":`+path+`}`))
			if res.Status != want {
				t.Errorf("%s: path %s: %s, want %s", tc.name, path, res.Status, want)
				continue
			}
			if want != kernel.StatusDenied {
				continue
			}
			if res.Error.Code != kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant) {
				t.Errorf("%s: path %s: %s, want no_matching_grant", tc.name, path, res.Error.Code)
			}
			// the missing authority is the derived resource, not the ceiling
			b, err := json.Marshal(res.Error)
			if err != nil {
				t.Fatal(err)
			}
			var e struct {
				Details struct {
					RequiredAuthority struct {
						Capabilities []kernel.Capability `json:"capabilities"`
					} `json:"requiredAuthority"`
				} `json:"details"`
			}
			if err := json.Unmarshal(b, &e); err != nil {
				t.Fatal(err)
			}
			var wantPath []string
			if err := json.Unmarshal([]byte(path), &wantPath); err != nil {
				t.Fatal(err)
			}
			if caps := e.Details.RequiredAuthority.Capabilities; len(caps) != 1 || !slices.Equal(caps[0].Resource.Path, wantPath) ||
				caps[0].Scope != kernel.ScopeExact || !slices.Equal(caps[0].Actions, []string{"read"}) {
				t.Errorf("%s: path %s: the missing authority is %s, want read on exactly %s", tc.name, path, b, path)
			}
		}
	}
}

// TestCapabilitiesNeverCombine: the path of one capability and the action of another —
// in one grant or across grants — never add up to an allow (spec 20 §3.7).
func TestCapabilitiesNeverCombine(t *testing.T) {
	t.Parallel()
	pathOnly := grant("path", []string{"write"}, kernel.ScopeDescendants, "docs")
	actionOnly := grant("action", []string{"read"}, kernel.ScopeDescendants, "src")
	both := grant("both", []string{"write"}, kernel.ScopeDescendants, "docs")
	both.Capabilities = append(both.Capabilities, actionOnly.Capabilities[0])
	for name, grants := range map[string][]kernel.CapabilityGrant{
		"across grants": {pathOnly, actionOnly},
		"in one grant":  {both},
	} {
		k := newKernel(t, grants, nil, echoTool("t.read", "read"))
		res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["docs","a"]}`))
		if res.Status != kernel.StatusDenied || res.Error.Code != kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant) {
			b, _ := json.Marshal(res)
			t.Errorf("%s: %s, want no_matching_grant", name, b)
		}
	}
}

// TestScopeAtTheMatcher tests the path rules on the matchers directly (the grant index
// offers an exact grant only for its own path, so it would hide a matcher that let an
// exact capability cover its subtree).
func TestScopeAtTheMatcher(t *testing.T) {
	t.Parallel()
	cases := []struct {
		scope             kernel.Scope
		granted, asked    []string
		covers, intersect bool
	}{
		{kernel.ScopeExact, []string{"docs"}, []string{"docs"}, true, true},
		{kernel.ScopeExact, []string{"docs"}, []string{"docs", "a"}, false, false},
		{kernel.ScopeExact, []string{"docs", "a"}, []string{"docs"}, false, true},
		{kernel.ScopeExact, []string{"docs"}, []string{"docsx"}, false, false},
		{kernel.ScopeDescendants, []string{"docs"}, []string{"docs", "a"}, true, true},
		{kernel.ScopeDescendants, []string{"docs", "a"}, []string{"docs"}, false, true},
		{kernel.ScopeDescendants, []string{"docs"}, []string{"docs-secret"}, false, false},
		{kernel.ScopeDescendants, []string{}, []string{"x", "y"}, true, true},
	}
	for _, c := range cases {
		capa := kernel.Capability{Resource: kernel.ResourceRef{Namespace: "files", Path: c.granted}, Actions: []string{"read"}, Scope: c.scope}
		r := req("read", c.asked...)
		if got := kernel.CapabilityCovers(&capa, &r, alice); got != c.covers {
			t.Errorf("covers %s %v ⊇ %v: %v, want %v", c.scope, c.granted, c.asked, got, c.covers)
		}
		if got := kernel.CapabilityIntersects(&capa, &r, alice); got != c.intersect {
			t.Errorf("intersects %s %v ∩ bound %v: %v, want %v", c.scope, c.granted, c.asked, got, c.intersect)
		}
	}
}

// countingSnapshots is a SnapshotGrantSource whose snapshot the test can change.
type countingSnapshots struct {
	snap  kernel.GrantSnapshot
	loads int
}

func (c *countingSnapshots) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return c.snap.Grants, nil
}

func (c *countingSnapshots) LoadGrantSnapshot(context.Context, kernel.AccessContext) (kernel.GrantSnapshot, error) {
	c.loads++
	return c.snap, nil // an immutable snapshot, shared as grant files share theirs
}

// TestAuthorityReusedPerSnapshot: turns over an unchanged snapshot share one validated
// authority; a new hash, a source whose ids disagree with its hash, and another scope
// each build (and validate) a new one; an invalid snapshot is never cached.
func TestAuthorityReusedPerSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g1 := grant("g1", []string{"read"}, kernel.ScopeDescendants)
	g2 := grant("g2", []string{"read"}, kernel.ScopeDescendants)
	src := &countingSnapshots{snap: kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{g1}, Hash: "h1"}}
	k := kernel.New(kernel.Config{Grants: src})
	authOf := func(actx kernel.AccessContext) *kernel.Authority { return mustTurn(t, k, actx).Authority(ctx) }
	a1 := authOf(testContext())
	if a2 := authOf(testContext()); a2 != a1 {
		t.Fatal("an unchanged snapshot was validated and indexed again")
	}
	if a1.Hash() != "h1" {
		t.Fatalf("hash %q, want the snapshot's", a1.Hash())
	}
	src.snap = kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{g2}, Hash: "h1"} // a lying source
	if a := authOf(testContext()); a == a1 || a.Grant("g2") == nil {
		t.Fatal("a snapshot with other grants under the same hash reused the old authority")
	}
	src.snap = kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{g1, g2}, Hash: "h2"}
	a3 := authOf(testContext())
	if a3 == a1 || a3.GrantCount() != 2 {
		t.Fatal("a new snapshot reused the old authority")
	}
	other := testContext()
	other.Actor = carol
	if a := authOf(other); a == a3 || a.Unavailable() != kernel.AuthorityGrantScopeMismatch {
		t.Fatalf("another scope: %q (shared=%v)", a.Unavailable(), a == a3)
	}
	bad := g1
	bad.IssuedAt = "not a time"
	src.snap = kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{bad}, Hash: "h3"}
	for range 2 {
		if a := authOf(testContext()); a.Unavailable() != kernel.AuthorityInvalidGrantMaterial {
			t.Fatalf("an invalid snapshot: %q", a.Unavailable())
		}
	}
}

// sliceSnapshots is a SnapshotGrantSource of a type that is not comparable.
type sliceSnapshots []kernel.CapabilityGrant

func (s sliceSnapshots) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return s, nil
}

func (s sliceSnapshots) LoadGrantSnapshot(context.Context, kernel.AccessContext) (kernel.GrantSnapshot, error) {
	return kernel.GrantSnapshot{Grants: s, Hash: "h"}, nil
}

// TestPreparedAuthority: an authority prepared before the kernel exists is the one the
// kernel's first turn uses when the kernel adopts it — and only a kernel over the same
// source value and grant limit adopts it; what cannot be prepared (no snapshot source,
// an invalid snapshot) is left to the turn, which fails on its own. AdoptAuthorityLater
// waits for the preparation only when a turn first needs its authority.
func TestPreparedAuthority(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g1 := grant("g1", []string{"read"}, kernel.ScopeDescendants)
	src := &countingSnapshots{snap: kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{g1}, Hash: "h1"}}
	pa := kernel.PrepareAuthority(ctx, src, testContext(), 0)
	if pa == nil || pa.Authority().Unavailable() != "" || pa.Authority().Hash() != "h1" {
		t.Fatalf("prepared authority %+v", pa)
	}
	k := kernel.New(kernel.Config{Grants: src})
	if !k.AdoptAuthority(pa) {
		t.Fatal("a kernel over the same source refused the prepared authority")
	}
	loads := src.loads
	if a := mustTurn(t, k, testContext()).Authority(ctx); a != pa.Authority() {
		t.Fatal("the turn validated and indexed the grants again")
	}
	if src.loads != loads+1 {
		t.Fatalf("the turn loaded its snapshot %d times, want once", src.loads-loads)
	}
	// the turn still checks the snapshot it loads: other grants under the same hash are
	// validated afresh
	src.snap = kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{grant("g2", []string{"read"}, kernel.ScopeDescendants)}, Hash: "h1"}
	if a := mustTurn(t, kernel.New(kernel.Config{Grants: src}), testContext()).Authority(ctx); a == pa.Authority() || a.Grant("g2") == nil {
		t.Fatal("a changed snapshot used the prepared authority")
	}
	src.snap = kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{g1}, Hash: "h1"}

	other := &countingSnapshots{snap: src.snap}
	if kernel.New(kernel.Config{Grants: other}).AdoptAuthority(pa) {
		t.Fatal("a kernel over another source adopted the prepared authority")
	}
	if kernel.New(kernel.Config{Grants: src, MaxGrants: 5}).AdoptAuthority(pa) {
		t.Fatal("a kernel with another grant limit adopted the prepared authority")
	}
	unc := sliceSnapshots{g1}
	if pu := kernel.PrepareAuthority(ctx, unc, testContext(), 0); pu == nil || kernel.New(kernel.Config{Grants: unc}).AdoptAuthority(pu) {
		t.Fatal("a source of a type that is not comparable cannot be known to be the same")
	}
	bad := g1
	bad.IssuedAt = "not a time"
	if p := kernel.PrepareAuthority(ctx, &countingSnapshots{snap: kernel.GrantSnapshot{Grants: []kernel.CapabilityGrant{bad}, Hash: "h3"}}, testContext(), 0); p != nil {
		t.Fatal("an invalid snapshot was prepared")
	}
	if p := kernel.PrepareAuthority(ctx, &grantStore{grants: []kernel.CapabilityGrant{g1}}, testContext(), 0); p != nil {
		t.Fatal("a source without snapshots was prepared")
	}
	if k.AdoptAuthority(nil) {
		t.Fatal("nil adopted")
	}

	calls := 0
	k = kernel.New(kernel.Config{Grants: src})
	k.AdoptAuthorityLater(func() *kernel.PreparedAuthority { calls++; return pa })
	turn := mustTurn(t, k, testContext())
	if calls != 0 {
		t.Fatal("the preparation was waited for before a turn needed its authority")
	}
	if a := turn.Authority(ctx); a != pa.Authority() || calls != 1 {
		t.Fatalf("later adoption: shared=%v, %d calls", a == pa.Authority(), calls)
	}
	if a := mustTurn(t, k, testContext()).Authority(ctx); a != pa.Authority() || calls != 1 {
		t.Fatalf("second turn: shared=%v, %d calls", a == pa.Authority(), calls)
	}
}

// TestDuplicateKeysRefused: a contract document naming a key twice is refused, at the
// top level and nested, in every strict decoder (encoding/json would keep the last).
func TestDuplicateKeysRefused(t *testing.T) {
	t.Parallel()
	if _, err := kernel.ParseToolNamespaceUpdate([]byte(`{"enable":["a"],"enable":["b"]}`)); err == nil {
		t.Error("namespace patch with enable twice accepted")
	}
	if _, err := kernel.StrictFields([]byte(`{"path":["a"],"path":["b"]}`), "path"); err == nil {
		t.Error("tool arguments with path twice accepted")
	}
	var c kernel.ToolCall
	if err := json.Unmarshal([]byte(`{"id":"a","tool":"t.x","tool":"t.y","arguments":{},"traceId":"t","requestedAt":"2026-01-01T00:00:00Z"}`), &c); err == nil {
		t.Error("tool call with tool twice accepted")
	}
	g := `{"id":"g","namespaceId":"w","subject":{"kind":"agent","agentId":"a"},"issuer":{"kind":"human","userId":"h"},` +
		`"capabilities":[{"resource":{"namespace":"files","namespace":"repo","path":[]},"actions":["read"],"scope":"exact"}],` +
		`"constraints":{},"issuedAt":"2026-01-01T00:00:00Z"}`
	var gr kernel.CapabilityGrant
	if err := json.Unmarshal([]byte(g), &gr); err == nil {
		t.Error("grant with a nested duplicate key accepted")
	}
	ok := strings.Replace(g, `"namespace":"files",`, ``, 1)
	if err := json.Unmarshal([]byte(ok), &gr); err != nil {
		t.Errorf("the same grant without the duplicate: %v", err)
	}
}

// FuzzDuplicateKeys: the duplicate-key scan never panics, and accepts every document
// encoding/json writes from a decoded value (which cannot repeat a key).
func FuzzDuplicateKeys(f *testing.F) {
	f.Add(`{"a":1,"b":{"c":[{"d":2},{"d":3}]}}`)
	f.Add(`{"a":1,"a":2}`)
	f.Add(`[{"x":{"y":1,"y":2}}]`)
	f.Fuzz(func(t *testing.T, doc string) {
		_, _ = kernel.StrictFields([]byte(doc), "a", "b", "x")
		var v any
		if json.Unmarshal([]byte(doc), &v) != nil {
			return
		}
		clean, err := json.Marshal(v)
		if err != nil {
			return
		}
		if m, ok := v.(map[string]any); ok {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			if _, err := kernel.StrictFields(clean, keys...); err != nil {
				t.Fatalf("a document without duplicates refused: %s: %v", clean, err)
			}
		}
	})
}

// TestHostileNamesNeverAuditedVerbatim: a tool name that cannot be a tool name (an
// escape sequence, a line break) is refused like any unknown name (tool_unavailable,
// not_registered: spec 20 §5) and recorded quoted; a call id with control characters is
// recorded quoted too. No audit event holds the raw bytes.
func TestHostileNamesNeverAuditedVerbatim(t *testing.T) {
	t.Parallel()
	audit := &memAudit{}
	k := newKernel(t, nil, audit, echoTool("t.read", "read"))
	for _, c := range []kernel.ToolCall{
		{ID: "c1", Tool: "\x1b[2J\x1b[HAPPROVED", Arguments: json.RawMessage(`{}`), TraceID: "trace-1", RequestedAt: admitted},
		{ID: "c2", Tool: "files.read\nforged\trow", Arguments: json.RawMessage(`{}`), TraceID: "trace-1", RequestedAt: admitted},
		{ID: "c3\x1b[31m", Tool: "t.read", Arguments: json.RawMessage(`{"path":["docs"]}`), TraceID: "trace-1", RequestedAt: admitted},
	} {
		res := k.InvokeTool(context.Background(), testContext(), c)
		if res.Status != kernel.StatusDenied {
			t.Fatalf("%q: %s", c.Tool, res.Status)
		}
	}
	for _, ev := range audit.events {
		for _, f := range []string{ev.Tool, ev.OperationID, fmt.Sprint(ev.Metadata["toolName"])} {
			if strings.ContainsAny(f, "\x1b\n\t") {
				t.Errorf("raw control characters in %s event: %q", ev.Type, f)
			}
		}
		if ev.Type == kernel.EventToolInvoked && ev.Tool == "" {
			if q, _ := ev.Metadata["toolName"].(string); !strings.HasPrefix(q, `"`) {
				t.Errorf("hostile name not recorded quoted: %v", ev.Metadata)
			}
		}
	}
	res := k.InvokeTool(context.Background(), testContext(), call("files.raed", `{}`))
	if res.Error.Code != kernel.CodeToolUnavailable || res.Cause != kernel.CauseNotRegistered {
		t.Fatalf("a well-formed unknown name: %s %s, want tool_unavailable not_registered", res.Error.Code, res.Cause)
	}
}

// TestPinnedInstantOnlyRemovesAuthority: with a wall clock, a turn pinned in the past
// cannot revive an expired or revoked grant, nor one pinned in the future use a grant
// not yet issued — for listing and calling. Explain still evaluates the pinned instant.
// Every event records the wall clock's instant beside the pinned one.
func TestPinnedInstantOnlyRemovesAuthority(t *testing.T) {
	t.Parallel()
	wall := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	expired := grant("expired", []string{"read"}, kernel.ScopeDescendants, "docs")
	expired.Constraints.ExpiresAt = "2026-09-01T00:00:00Z"
	revoked := grant("revoked", []string{"read"}, kernel.ScopeDescendants, "src")
	revoked.RevokedAt = "2026-09-01T00:00:00Z"
	future := grant("future", []string{"read"}, kernel.ScopeDescendants, "later")
	future.IssuedAt = "2027-01-01T00:00:00Z"
	audit := &memAudit{}
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{expired, revoked, future}},
		Usage: newMemUsage(), Audit: audit, Clock: func() time.Time { return wall }})
	if err := k.RegisterTool(echoTool("t.read", "read")); err != nil {
		t.Fatal(err)
	}
	past := testContext() // 2026-08-03: both old grants active then
	for _, path := range []string{`["docs","a"]`, `["src","a"]`} {
		c := call("t.read", `{"path":`+path+`}`)
		turn := mustTurn(t, k, past)
		if ex := turn.ExplainCall(context.Background(), c); !ex.Allowed {
			t.Fatalf("explain at the pinned instant: %+v", ex.Findings)
		}
		if res := turn.InvokeTool(context.Background(), c); res.Status == kernel.StatusSucceeded {
			t.Errorf("a past pinned instant revived %s", path)
		}
	}
	if tools, _ := k.ListTools(context.Background(), past); len(tools) != 0 {
		t.Errorf("a past pinned instant lists %v", tools)
	}
	ahead := testContext()
	ahead.Now = "2027-02-01T00:00:00.000Z"
	if res := k.InvokeTool(context.Background(), ahead, call("t.read", `{"path":["later","a"]}`)); res.Status == kernel.StatusSucceeded {
		t.Error("a future pinned instant used a grant the wall clock has not issued yet")
	}
	for _, ev := range audit.events {
		if ev.RecordedAt != "2026-12-01T12:00:00.000Z" {
			t.Fatalf("%s event recordedAt %q", ev.Type, ev.RecordedAt)
		}
	}
}

// TestForbiddenNamespaces: the namespace ceiling is the kernel's. A forbidden namespace
// in a context's selection (stored before the ceiling, or passed for one run) is off
// for the turn; an update cannot enable it; asking only for it changes nothing.
func TestForbiddenNamespaces(t *testing.T) {
	t.Parallel()
	settings := &memSettings{selection: []string{"files"}}
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{grant("g", []string{"*"}, kernel.ScopeDescendants)}},
		Settings: settings, ForbiddenNamespaces: []string{"files"}})
	if err := k.RegisterTool(echoTool("t.read", "read")); err != nil {
		t.Fatal(err)
	}
	actx := testContext() // enables files
	turn := mustTurn(t, k, actx)
	if got := turn.Context().EnabledToolNamespaces; len(got) != 0 {
		t.Fatalf("forbidden namespace enabled for the turn: %v", got)
	}
	if tools, _ := turn.ListTools(context.Background()); len(tools) != 0 {
		t.Fatalf("listed %v", tools)
	}
	if res := turn.InvokeTool(context.Background(), call("t.read", `{"path":["a"]}`)); res.Cause != kernel.CauseNamespaceDisabled {
		t.Fatalf("call: %s %s", res.Status, res.Cause)
	}
	_, sel, err := turn.UpdateToolNamespaces(context.Background(), kernel.ToolNamespaceUpdate{Enable: []string{"files", "other"}})
	if err != nil || slices.Contains(sel, "files") || !slices.Contains(sel, "other") {
		t.Fatalf("update: %v %v", sel, err)
	}
	if _, sel, err := turn.UpdateToolNamespaces(context.Background(), kernel.ToolNamespaceUpdate{Enable: []string{"files"}}); err != nil || slices.Contains(sel, "files") {
		t.Fatalf("enabling only the forbidden namespace: %v %v", sel, err)
	}
}

// auditedMemSettings is memSettings storing a selection and appending its event
// together, as the state database does (kernel.AuditedSettingsStore).
type auditedMemSettings struct {
	memSettings
	audit *memAudit
}

func (s *auditedMemSettings) ApplyUpdateAudited(ctx context.Context, actx kernel.AccessContext, u kernel.ToolNamespaceUpdate, event func([]string) kernel.AuditEvent) ([]string, error) {
	sel, err := s.ApplyUpdate(ctx, actx, u)
	if err != nil {
		return nil, err
	}
	return sel, s.audit.Append(ctx, event(sel))
}

// TestForbiddenNamespaceIsNeverStored: what a host forbids is dropped from an update
// before it reaches the settings store, not only from the answer and the turn: enabled
// while forbidden, a namespace stays off once the ban is lifted (the next turn's
// selection is the stored one), through the plain and the audited store alike; asking
// only for a forbidden namespace stores nothing. Enabling it after the lift does store it.
func TestForbiddenNamespaceIsNeverStored(t *testing.T) {
	t.Parallel()
	grants := &grantStore{grants: []kernel.CapabilityGrant{grant("g", []string{"*"}, kernel.ScopeDescendants)}}
	for _, tc := range []struct {
		name     string
		settings func(*memAudit) (kernel.ToolNamespaceSettingsStore, *memSettings)
	}{
		{"plain store", func(*memAudit) (kernel.ToolNamespaceSettingsStore, *memSettings) {
			s := &memSettings{selection: []string{}}
			return s, s
		}},
		{"audited store", func(a *memAudit) (kernel.ToolNamespaceSettingsStore, *memSettings) {
			s := &auditedMemSettings{memSettings: memSettings{selection: []string{}}, audit: a}
			return s, &s.memSettings
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { forbiddenNeverStored(t, grants, tc.settings) })
	}
}

// forbiddenNeverStored is TestForbiddenNamespaceIsNeverStored on one settings store
// (stored is the selection it keeps).
func forbiddenNeverStored(t *testing.T, grants *grantStore, newSettings func(*memAudit) (kernel.ToolNamespaceSettingsStore, *memSettings)) {
	audit := &memAudit{}
	settings, stored := newSettings(audit)
	kernelWith := func(forbidden []string) *kernel.Kernel {
		k := kernel.New(kernel.Config{Grants: grants, Settings: settings, Audit: audit, ForbiddenNamespaces: forbidden})
		if err := k.RegisterTool(echoTool("t.read", "read")); err != nil {
			t.Fatal(err)
		}
		return k
	}
	// the host's context: the stored selection
	turnOn := func(k *kernel.Kernel) *kernel.Turn {
		actx := testContext()
		actx.EnabledToolNamespaces = stored.current()
		return mustTurn(t, k, actx)
	}
	banned := kernelWith([]string{"files"})
	if _, _, err := turnOn(banned).UpdateToolNamespaces(context.Background(), kernel.ToolNamespaceUpdate{Enable: []string{"files", "other"}}); err != nil {
		t.Fatalf("%v", err)
	}
	if got := stored.current(); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("stored selection %q after enabling files while it was forbidden, want [other]", got)
	}
	if _, _, err := turnOn(banned).UpdateToolNamespaces(context.Background(), kernel.ToolNamespaceUpdate{Enable: []string{"files"}}); err != nil {
		t.Fatalf("%v", err)
	}
	if got := stored.current(); !slices.Equal(got, []string{"other"}) {
		t.Fatalf("stored selection %q after asking only for the forbidden namespace, want [other]", got)
	}
	for _, ev := range audit.events {
		if sel, _ := ev.Metadata["enabledNamespaces"].([]string); slices.Contains(sel, "files") {
			t.Fatalf("%s records files enabled: %v", ev.Type, ev.Metadata)
		}
	}

	// The ban is lifted: files is still off, at listing and at the call.
	lifted := kernelWith(nil)
	turn := turnOn(lifted)
	if tools, err := turn.ListTools(context.Background()); err != nil || len(tools) != 0 {
		t.Fatalf("after the ban was lifted, listed %v (%v)", tools, err)
	}
	if res := turn.InvokeTool(context.Background(), call("t.read", `{"path":["a"]}`)); res.Cause != kernel.CauseNamespaceDisabled {
		t.Fatalf("after the ban was lifted, a files call: %s %s, want namespace_disabled", res.Status, res.Cause)
	}
	// Enabling it now is stored.
	if _, sel, err := turnOn(lifted).UpdateToolNamespaces(context.Background(), kernel.ToolNamespaceUpdate{Enable: []string{"files"}}); err != nil ||
		!slices.Equal(sel, []string{"files", "other"}) || !slices.Equal(stored.current(), []string{"files", "other"}) {
		t.Fatalf("enabling files once allowed: answer %q stored %q (%v)", sel, stored.current(), err)
	}
	if res := turnOn(lifted).InvokeTool(context.Background(), call("t.read", `{"path":["a"]}`)); res.Status != kernel.StatusSucceeded {
		t.Fatalf("a files call once enabled: %s %s", res.Status, res.Cause)
	}
}

// TestUsageKeyedByGrantIdentity: two subjects' grants that share an id in one world have
// their own maxUses; the kernel names the grant by world, issuer, subject and id.
func TestUsageKeyedByGrantIdentity(t *testing.T) {
	t.Parallel()
	forBob := grant("g", []string{"read"}, kernel.ScopeDescendants)
	forBob.Constraints.MaxUses = i64(1)
	forCarol := forBob
	forCarol.Subject = carol
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{forBob, forCarol}}, Usage: newMemUsage()})
	if err := k.RegisterTool(echoTool("t.read", "read")); err != nil {
		t.Fatal(err)
	}
	asCarol := testContext()
	asCarol.Actor = carol
	if res := k.InvokeTool(context.Background(), asCarol, call("t.read", `{"path":["a"]}`)); res.Status != kernel.StatusSucceeded {
		t.Fatalf("carol's use: %+v", res.Error)
	}
	if res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["a"]}`)); res.Status != kernel.StatusSucceeded {
		t.Fatalf("bob's grant was spent by carol's call: %s %s", res.Status, res.Cause)
	}
	if res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["a"]}`)); res.Status == kernel.StatusSucceeded {
		t.Fatal("bob's maxUses:1 grant used twice")
	}
}

// TestEffectWithoutAuditIsMarked: when the tool ran but its tool.invoked record could
// not be written, the result says so (AuditUnavailableKey) and OnAuditError is told; the
// effect is not hidden behind a plain success.
func TestEffectWithoutAuditIsMarked(t *testing.T) {
	t.Parallel()
	var told error
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants)}},
		Audit: &failingAudit{failType: kernel.EventToolInvoked}, OnAuditError: func(err error) { told = err }})
	if err := k.RegisterTool(echoTool("t.read", "read")); err != nil {
		t.Fatal(err)
	}
	res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["a"]}`))
	if res.Status != kernel.StatusSucceeded {
		t.Fatalf("status %s", res.Status)
	}
	if _, ok := res.Metadata[kernel.AuditUnavailableKey]; !ok || told == nil {
		t.Fatalf("an effect without its audit record is not marked: %v (told %v)", res.Metadata, told)
	}
}

// TestRefusalWithoutAuditIsNotAnEffect: a refused call whose tool.invoked record could
// not be written took no effect, so its result is not marked (a host would report an
// effect that never happened); OnAuditError is still told.
func TestRefusalWithoutAuditIsNotAnEffect(t *testing.T) {
	t.Parallel()
	var told error
	k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants)}},
		Audit: &failingAudit{failType: kernel.EventToolInvoked}, OnAuditError: func(err error) { told = err }})
	if err := k.RegisterTool(echoTool("t.write", "write")); err != nil {
		t.Fatal(err)
	}
	res := k.InvokeTool(context.Background(), testContext(), call("t.write", `{"path":["a"]}`))
	if res.Status != kernel.StatusDenied {
		t.Fatalf("status %s, want denied (no grant for write)", res.Status)
	}
	if _, ok := res.Metadata[kernel.AuditUnavailableKey]; ok || told == nil {
		t.Fatalf("a refusal is marked as an effect without its record: %v (told %v)", res.Metadata, told)
	}
}

// TestNamespaceChangeWithoutAuditFails: with a settings store that cannot write the
// selection and its record in one transaction, a change whose record fails is reported
// as an error (the CLI exits non-zero), never a quiet success.
func TestNamespaceChangeWithoutAuditFails(t *testing.T) {
	t.Parallel()
	k := kernel.New(kernel.Config{Grants: &grantStore{}, Settings: &memSettings{selection: []string{}},
		Audit: &failingAudit{failType: kernel.EventNamespaceSelectionUpdated}})
	if err := k.RegisterTool(echoTool("t.read", "read")); err != nil {
		t.Fatal(err)
	}
	_, sel, err := mustTurn(t, k, testContext()).UpdateToolNamespaces(context.Background(), kernel.ToolNamespaceUpdate{Enable: []string{"files"}})
	if err == nil || !slices.Contains(sel, "files") {
		t.Fatalf("selection %v, error %v: want the effect reported with an error", sel, err)
	}
}

// reservingUsage is a ReservingUsageStore double that records the order of operations.
type reservingUsage struct {
	*memUsage
	log      []string
	failWith error
}

type reservedUse struct {
	u   *reservingUsage
	key kernel.UsageKey
	max int64
}

func (r *reservingUsage) ReserveUse(_ context.Context, key kernel.UsageKey, max int64) (kernel.UsageReservation, bool, error) {
	r.log = append(r.log, "reserve")
	return &reservedUse{r, key, max}, true, nil
}

func (u *reservedUse) Commit(ctx context.Context, ev *kernel.AuditEvent) error {
	if u.u.failWith != nil {
		u.u.log = append(u.u.log, "commit failed")
		return u.u.failWith
	}
	u.u.log = append(u.u.log, "commit "+string(ev.Type))
	_, err := u.u.TryConsume(ctx, u.key, u.max)
	return err
}

func (u *reservedUse) Release() error { u.u.log = append(u.u.log, "release"); return nil }

// TestReserveAuditCommitThenRun: a consuming decision reserves the use, commits it
// together with its authorization.checked record, and only then runs the tool (ADR
// 0029); when the commit fails nothing runs and the call fails audit_unavailable.
func TestReserveAuditCommitThenRun(t *testing.T) {
	t.Parallel()
	g := grant("g", []string{"read"}, kernel.ScopeDescendants)
	g.Constraints.MaxUses = i64(3)
	for _, fail := range []bool{false, true} {
		usage := &reservingUsage{memUsage: newMemUsage()}
		if fail {
			usage.failWith = errors.New("disk full")
		}
		tool := echoTool("t.read", "read")
		inner := tool.Invoke
		tool.Invoke = func(ctx context.Context, actx kernel.AccessContext, c kernel.ParsedToolCall) (kernel.ToolResult, error) {
			usage.log = append(usage.log, "run")
			return inner(ctx, actx, c)
		}
		k := kernel.New(kernel.Config{Grants: &grantStore{grants: []kernel.CapabilityGrant{g}}, Usage: usage, Audit: &memAudit{}})
		if err := k.RegisterTool(tool); err != nil {
			t.Fatal(err)
		}
		res := k.InvokeTool(context.Background(), testContext(), call("t.read", `{"path":["a"]}`))
		want := []string{"reserve", "commit authorization.checked", "run"}
		if fail {
			want = []string{"reserve", "commit failed"}
			if res.Status != kernel.StatusFailed || res.Error.Code != kernel.CodeAuditUnavailable {
				t.Fatalf("failed commit: %s %+v", res.Status, res.Error)
			}
		}
		if !slices.Equal(usage.log, want) {
			t.Fatalf("order %v, want %v", usage.log, want)
		}
	}
}

// TestContractRefusesInvalidUTF8: invalid UTF-8 is refused in every string of a grant and
// a context built in Go (the canonical hash writes bytes as they are, so no encoder may
// have to repair them), and CanonicalJSON fails on what is not one JSON value.
func TestContractRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	bad := "x\xffy"
	for name, mod := range map[string]func(*kernel.CapabilityGrant){
		"id":        func(g *kernel.CapabilityGrant) { g.ID = bad },
		"world":     func(g *kernel.CapabilityGrant) { g.NamespaceID = bad },
		"subject":   func(g *kernel.CapabilityGrant) { g.Subject.ID = bad },
		"issuer":    func(g *kernel.CapabilityGrant) { g.Issuer.ID = bad },
		"action":    func(g *kernel.CapabilityGrant) { g.Capabilities[0].Actions = []string{bad} },
		"namespace": func(g *kernel.CapabilityGrant) { g.Capabilities[0].Resource.Namespace = bad },
		"segment":   func(g *kernel.CapabilityGrant) { g.Capabilities[0].Resource.Path = []string{bad} },
		"purpose":   func(g *kernel.CapabilityGrant) { g.Constraints.Purposes = []string{bad} },
		"parent":    func(g *kernel.CapabilityGrant) { g.ParentGrantID = bad },
	} {
		g := grant("g", []string{"read"}, kernel.ScopeDescendants, "docs")
		mod(&g)
		if err := g.Validate(); err == nil {
			t.Errorf("%s: invalid UTF-8 accepted", name)
		}
	}
	actx := testContext()
	actx.Purpose = bad
	if err := actx.Validate(); err == nil {
		t.Error("context purpose: invalid UTF-8 accepted")
	}
	for _, doc := range []string{``, `{`, `{"a":1} {"b":2}`, `nope`} {
		if out, err := kernel.CanonicalJSON([]byte(doc)); err == nil {
			t.Errorf("CanonicalJSON(%q) = %q, want an error", doc, out)
		}
	}
}

// TestScanAgreesWithTrie: the first path lookups of an authority scan its grants, later
// ones use the path trie; both give the same decisions and diagnostics (the same
// candidates) for calls and for discovery, over exact and descendants capabilities on
// overlapping paths, several actions and the wildcard.
func TestScanAgreesWithTrie(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	segs := []string{"a", "b", "c"}
	rnd := uint32(7)
	next := func(n int) int { rnd = rnd*1103515245 + 12345; return int(rnd>>16) % n }
	path := func() []string {
		p := []string{}
		for range next(4) {
			p = append(p, segs[next(len(segs))])
		}
		return p
	}
	actions := [][]string{{"read"}, {"list"}, {"read", "list"}, {"*"}}
	var grants []kernel.CapabilityGrant
	for i := range 300 {
		scope := kernel.ScopeDescendants
		if next(2) == 0 {
			scope = kernel.ScopeExact
		}
		g := grant(fmt.Sprintf("g%03d", i), actions[next(len(actions))], scope, path()...)
		if next(3) == 0 { // a second capability, in another namespace or not
			ns := []string{"files", "repo"}[next(2)]
			g.Capabilities = append(g.Capabilities, kernel.Capability{Resource: kernel.ResourceRef{Namespace: ns, Path: path()},
				Actions: actions[next(len(actions))], Scope: kernel.ScopeExact})
		}
		if next(4) == 0 {
			g.Constraints.Purposes = []string{"other"} // ineligible: reported among the rejections
		}
		grants = append(grants, g)
	}
	actx := testContext()
	warm := kernel.NewAuthority(grants, actx, 0)
	if warm.Unavailable() != "" {
		t.Fatal(warm.Unavailable())
	}
	z := &kernel.Authorizer{}
	for _, act := range []string{"read", "list", "*", "stat"} { // past the scans: the trie from now on
		for range 5 {
			z.Authorize(ctx, warm, actx, req(act, "a"), kernel.AuthorizeOptions{})
			z.CanDiscover(ctx, warm, actx, req(act, "a"), "")
		}
	}
	for range 300 {
		r := req([]string{"read", "list", "*", "stat"}[next(4)], path()...)
		fresh := kernel.NewAuthority(grants, actx, 0) // its first lookup: a scan
		d1, g1 := z.Authorize(ctx, fresh, actx, r, kernel.AuthorizeOptions{})
		d2, g2 := z.Authorize(ctx, warm, actx, r, kernel.AuthorizeOptions{})
		if !reflect.DeepEqual(d1, d2) || !reflect.DeepEqual(g1, g2) {
			t.Fatalf("call %+v: scan %+v %+v, trie %+v %+v", r, d1, g1, d2, g2)
		}
		fresh = kernel.NewAuthority(grants, actx, 0)
		d1, g1 = z.CanDiscover(ctx, fresh, actx, r, "")
		d2, g2 = z.CanDiscover(ctx, warm, actx, r, "")
		if !reflect.DeepEqual(d1, d2) || !reflect.DeepEqual(g1, g2) {
			t.Fatalf("discovery %+v: scan %+v %+v, trie %+v %+v", r, d1, g1, d2, g2)
		}
	}
}
