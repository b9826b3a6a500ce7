package host_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
	"github.com/sharedos/sharedos/pkg/tokens"
)

func tokenEntry(t *testing.T, id, actor, grants string) *tokens.Entry {
	t.Helper()
	a, err := kernel.ParseAddress(actor)
	must(t, err)
	owner, _ := kernel.ParseAddress("human:alice")
	return &tokens.Entry{ID: id, SHA256: tokens.Hash(id + "-secret"), Context: tokens.Context{Actor: a, Owner: &owner}, Grants: []string{grants}}
}

// TestPrincipalsShareOneStore: every principal of the cache is built once (concurrent
// first uses wait for the one build), runs under its token's context with a host and
// session of its own, and uses the one state database handle, which closes only when
// the cache is closed and its last principal is.
func TestPrincipalsShareOneStore(t *testing.T) {
	dir, root, grants := escFixture(t)
	var attached atomic.Int32
	ps := host.NewPrincipals(host.PrincipalsConfig[string]{
		Base:   host.Settings{Root: root, State: filepath.Join(dir, "state", "state.db"), DefaultNamespaces: []string{"files"}},
		Tokens: filepath.Join(dir, "tokens.yaml"), Needs: host.Needs{Planes: true, Actor: true, Workload: host.WorkloadServer},
		Attach: func(_ context.Context, p *host.Principal[string]) (string, error) {
			attached.Add(1)
			return "surface of " + p.ID, nil
		}})
	helper, other := tokenEntry(t, "helper", "agent:helper", grants), tokenEntry(t, "other", "agent:other", grants)

	var wg sync.WaitGroup
	got := make([]*host.Principal[string], 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := ps.Get(ctx, helper)
			if err != nil {
				t.Error(err)
			}
			got[i] = p
		}()
	}
	wg.Wait()
	for _, p := range got[1:] {
		if p != got[0] {
			t.Fatal("concurrent first uses built more than one principal")
		}
	}
	a := got[0]
	b, err := ps.Get(ctx, other)
	must(t, err)
	if n := attached.Load(); n != 2 {
		t.Fatalf("Attach ran %d times for two principals", n)
	}
	if a.Surface != "surface of helper" || b.Surface != "surface of other" {
		t.Fatalf("surfaces %q, %q", a.Surface, b.Surface)
	}
	if a.Host.Turn.Context().Actor.String() != "agent:helper" || b.Host.Turn.Context().Actor.String() != "agent:other" {
		t.Fatalf("contexts %s, %s", a.Host.Turn.Context().Actor, b.Host.Turn.Context().Actor)
	}
	shared := ps.Store()
	if shared == nil || a.Host.Store != shared || b.Host.Store != shared || a.Host == b.Host || a.Session == b.Session {
		t.Fatal("the principals do not share one store handle, or share a host")
	}

	// a retired principal is closed by its retirer; the store stays open for the other
	gone := ps.Retain(func(key string) bool { return key == host.PrincipalKey(other) })
	if len(gone) != 1 || gone[0] != a || len(ps.All()) != 1 {
		t.Fatalf("Retain returned %d, kept %d", len(gone), len(ps.All()))
	}
	must(t, a.Close())
	if _, _, err := shared.Selection(ctx, "default", b.Host.Turn.Context().Owner); err != nil {
		t.Fatalf("the store closed with a principal still using it: %v", err)
	}
	// Close closes the cached principals and then the store
	closed := 0
	must(t, ps.Close(func(p *host.Principal[string]) { closed++; _ = p.Close() }))
	if closed != 1 || ps.Store() != nil {
		t.Fatalf("Close closed %d principals; store %v", closed, ps.Store())
	}
	if _, err := shared.ListEscalations(ctx, store.EscalationFilter{}); err == nil {
		t.Fatal("the shared store is still open after Close")
	}
	if _, err := ps.Get(ctx, helper); err == nil {
		t.Fatal("Get after Close opened a principal")
	}
}

// TestPrincipalsStoreOutlivesClose: a principal retired before Close and closed after it
// keeps the store open until it is closed.
func TestPrincipalsStoreOutlivesClose(t *testing.T) {
	dir, root, grants := escFixture(t)
	ps := host.NewPrincipals(host.PrincipalsConfig[int]{
		Base:   host.Settings{Root: root, State: filepath.Join(dir, "state.db"), Grants: []string{grants}, DefaultNamespaces: []string{"files"}},
		Needs:  host.Needs{Planes: true, Actor: true},
		Attach: func(context.Context, *host.Principal[int]) (int, error) { return 1, nil }})
	// without a tokens file every principal is the base's context (the grant file's)
	p, err := ps.Get(ctx, &tokens.Entry{ID: "ephemeral", SHA256: tokens.Hash("x")})
	must(t, err)
	if p.Host.Turn.Context().Actor.String() != "agent:helper" {
		t.Fatalf("ephemeral principal acts as %s", p.Host.Turn.Context().Actor)
	}
	st := ps.Store()
	ps.Retain(func(string) bool { return false })
	must(t, ps.Close(func(*host.Principal[int]) { t.Fatal("a retired principal was closed by Close") }))
	if _, _, err := st.Selection(ctx, "default", p.Host.Turn.Context().Owner); err != nil {
		t.Fatalf("the store closed under a live principal: %v", err)
	}
	must(t, p.Close())
	if _, _, err := st.Selection(ctx, "default", p.Host.Turn.Context().Owner); err == nil {
		t.Fatal("the store stayed open after its last principal closed")
	}
}

// TestPrincipalKeyTellsEntriesApart: entries that differ in any field the principal is
// built from have different keys, even where the fields' bytes, run together, are the
// same; equal entries have equal keys.
func TestPrincipalKeyTellsEntriesApart(t *testing.T) {
	alice, _ := kernel.ParseAddress("human:alice")
	bot, _ := kernel.ParseAddress("agent:bot")
	base := func() *tokens.Entry {
		o := alice
		return &tokens.Entry{ID: "t1", SHA256: "ab", Context: tokens.Context{Actor: bot, Owner: &o, World: "w", Purpose: "p"},
			Grants: []string{"/g/a.yaml", "/g/b.yaml"}, Role: tokens.RoleAgent}
	}
	variants := map[string]func(*tokens.Entry){
		"id":               func(e *tokens.Entry) { e.ID = "t2" },
		"id into sha":      func(e *tokens.Entry) { e.ID, e.SHA256 = "t1a", "b" },
		"sha":              func(e *tokens.Entry) { e.SHA256 = "cd" },
		"actor":            func(e *tokens.Entry) { e.Context.Actor = alice },
		"actor kind to id": func(e *tokens.Entry) { e.Context.Actor = kernel.Address{Kind: "agen", ID: "tbot"} },
		"no owner":         func(e *tokens.Entry) { e.Context.Owner = nil },
		"zero owner":       func(e *tokens.Entry) { e.Context.Owner = &kernel.Address{} },
		"authority":        func(e *tokens.Entry) { a := alice; e.Context.Authority = &a },
		"world":            func(e *tokens.Entry) { e.Context.World = "w2" },
		"world to purpose": func(e *tokens.Entry) { e.Context.World, e.Context.Purpose = "wp", "" },
		"purpose":          func(e *tokens.Entry) { e.Context.Purpose = "q" },
		"grants joined":    func(e *tokens.Entry) { e.Grants = []string{"/g/a.yaml/g/b.yaml"} },
		"grants split":     func(e *tokens.Entry) { e.Grants = []string{"/g/a.yaml", "/g/b", ".yaml"} },
		"grants order":     func(e *tokens.Entry) { e.Grants = []string{"/g/b.yaml", "/g/a.yaml"} },
		"no grants":        func(e *tokens.Entry) { e.Grants = nil },
		"role":             func(e *tokens.Entry) { e.Role = tokens.RoleOperator },
	}
	seen := map[string]string{host.PrincipalKey(base()): "base"}
	if a, b := host.PrincipalKey(base()), host.PrincipalKey(base()); a != b {
		t.Fatal("equal entries have different keys")
	}
	for name, change := range variants {
		e := base()
		change(e)
		k := host.PrincipalKey(e)
		if prev, ok := seen[k]; ok {
			t.Errorf("%s and %s have the same key %q", name, prev, k)
		}
		seen[k] = name
	}
}
