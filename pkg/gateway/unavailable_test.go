package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/gateway"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

// A server that does not answer within connectTimeout is confined to its namespace: its
// provider fails with a kernel.ProviderUnavailableError naming the namespace (and the
// cause), the healthy server beside it lists its tools, and the next listing of the
// process does not reach the slow server again before connectTimeout has passed once
// more. The slow server is an HTTP upstream in this process that never answers and
// counts the requests it receives (the count is asserted, never a duration); the clock
// is the test's.
func TestSlowServerConfinedAndNotRetried(t *testing.T) {
	var reqs atomic.Int64
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		reqs.Add(1)
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // runs first: no handler is left waiting
	slow := fmt.Sprintf("  - id: slow\n    url: %s\n    connectTimeout: 300ms\n", srv.URL)
	e := newEnv(t, slow+fakeServer(t, "github", "normal", githubTools))
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	g := gateway.New(e.cfg, gateway.Options{Clock: clock})
	t.Cleanup(func() { _ = g.Close() })
	ps := g.Providers()
	if ps[0].ID() != "slow" || ps[1].ID() != "github" {
		t.Fatalf("providers %s, %s", ps[0].ID(), ps[1].ID())
	}
	actx := kernel.AccessContext{Owner: kernel.Address{Kind: kernel.KindHuman, ID: "alice"}, Now: "2026-01-01T00:00:00Z"}
	list := func() *kernel.ProviderUnavailableError {
		t.Helper()
		_, err := ps[0].ListTools(context.Background(), actx)
		var pu *kernel.ProviderUnavailableError
		if !errors.As(err, &pu) || len(pu.Namespaces) != 1 || pu.Namespaces[0] != "slow" || pu.Cause == nil {
			t.Fatalf("slow ListTools = %v, want a ProviderUnavailableError for namespace slow", err)
		}
		return pu
	}
	first := list()
	hs, err := ps[1].ListTools(context.Background(), actx)
	if err != nil || len(hs) != 3 {
		t.Fatalf("github ListTools = %d tools, %v", len(hs), err)
	}
	n := reqs.Load()
	if n == 0 {
		t.Fatal("the slow server was never reached")
	}
	// the next listing, before connectTimeout has passed again: not reached, same cause
	pu := list()
	if reqs.Load() != n || !strings.Contains(pu.Error(), first.Error()) || !strings.Contains(pu.Error(), "not tried again") {
		t.Errorf("second listing: %d requests (want %d), %v", reqs.Load(), n, pu)
	}
	// once connectTimeout has passed, the next listing tries again
	mu.Lock()
	now = now.Add(300 * time.Millisecond)
	mu.Unlock()
	list()
	if reqs.Load() == n {
		t.Errorf("after connectTimeout: still %d requests, want the server reached again", n)
	}
}

// Through the host: a listing returns the healthy server's tools (and the planes') while
// the hanging one is unavailable; a call of its tools fails tool_catalog_unavailable
// naming it, a call of the healthy server's runs, and the listing's audit record has the
// cause.
func TestSlowServerListingServesTheOthers(t *testing.T) {
	e := newEnv(t, fakeServer(t, "slow", "hang", "    connectTimeout: 300ms\n")+fakeServer(t, "github", "normal", githubTools))
	h := e.open(host.Needs{})
	actx := h.Turn.Context()
	actx.EnabledToolNamespaces = append(actx.EnabledToolNamespaces, "slow")
	turn, err := h.Kernel.BeginTurn(actx)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := turn.ListTools(context.Background())
	if err != nil {
		t.Fatalf("ListTools = %v", err)
	}
	names := map[string]bool{}
	for _, d := range defs {
		names[d.Name] = true
	}
	if !names["github.search_code"] || !names["files.read"] {
		t.Errorf("listing = %v, want the healthy server's tools and the planes'", names)
	}
	call := kernel.ToolCall{ID: "c-slow", Tool: "slow.anything", Arguments: []byte(`{}`), TraceID: actx.TraceID, RequestedAt: actx.Now}
	r := turn.InvokeTool(context.Background(), call)
	if code(r) != "failed tool_catalog_unavailable" || !strings.Contains(r.Error.Message, `provider "slow"`) {
		t.Errorf("slow.anything = %s %+v", code(r), r.Error)
	}
	call = kernel.ToolCall{ID: "c-gh", Tool: "github.search_code", Arguments: []byte(`{"query":"x"}`), TraceID: actx.TraceID, RequestedAt: actx.Now}
	if r := turn.InvokeTool(context.Background(), call); r.Status != kernel.StatusSucceeded {
		t.Errorf("github.search_code = %s %+v", code(r), r.Error)
	}
	evs, err := h.Store.ListAudit(context.Background(), sqlitestore.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, ev := range evs {
		if un, ok := ev.Metadata["unavailableNamespaces"].(map[string]any); ok && ev.Type == kernel.EventToolCatalogListed {
			c, _ := un["slow"].(string)
			listed = strings.Contains(c, "no answer within 300ms")
		}
	}
	if !listed {
		t.Error("no tool.catalog.listed record names namespace slow with its cause")
	}
}
