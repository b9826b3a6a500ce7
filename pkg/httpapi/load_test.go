package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestLoopbackLoad: 64 concurrent clients × 1,000 calls of files.read on a grant with
// maxUses 10000 over loopback: exactly 10,000 are allowed, every other is denied
// (grant_exhausted, or tool_unavailable once the spent grant no longer makes the tool
// discoverable), and
// every call's tool.invoked record is in the trail (64,000, 10,000 of them succeeded).
// Bounded in count (64,000 requests) and in time (the test's deadline).
func TestLoopbackLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("64,000 requests")
	}
	const clients, calls, maxUses = 64, 1000, 10000
	f := newFixtureWith(t, func(c *httpapi.Config) { c.Logger = slog.New(slog.DiscardHandler) })
	// alice's grants become the one bounded grant
	must(t, os.WriteFile(filepath.Join(f.dir, "etc", "grants", "alice.yaml"), []byte(loadGrants), 0o600))
	must(t, os.MkdirAll(filepath.Join(f.root, "load"), 0o755))
	must(t, os.WriteFile(filepath.Join(f.root, "load", "x.md"), []byte("x"), 0o644))
	hc := &http.Client{Transport: &http.Transport{MaxConnsPerHost: clients, MaxIdleConnsPerHost: clients}}
	defer hc.CloseIdleConnections()
	var allowed, denied, other atomic.Int64
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				body := call(fmt.Sprintf("load-%d-%d", c, i), "files.read", `{"path":["load","x.md"]}`)
				req, _ := http.NewRequest("POST", f.url+"/v1/tools/invoke", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+f.tok["alice"])
				resp, err := hc.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case resp.StatusCode != 200:
					other.Add(1)
				case strings.Contains(string(b), `"status":"succeeded"`):
					allowed.Add(1)
				case strings.Contains(string(b), `"status":"denied"`):
					// grant_exhausted, or once exhausted the tool is no longer discoverable
					denied.Add(1)
				default:
					other.Add(1)
					t.Errorf("unexpected result: %s", b)
				}
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != maxUses || denied.Load() != clients*calls-maxUses || other.Load() != 0 {
		t.Fatalf("allowed %d, denied %d, other %d; want %d, %d, 0", allowed.Load(), denied.Load(), other.Load(), maxUses, clients*calls-maxUses)
	}
	st, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(t, err)
	defer st.Close()
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{Types: []string{"tool.invoked"}, Tool: "files.read"})
	must(t, err)
	ok := 0
	for _, ev := range evs {
		if ev.Outcome == "succeeded" {
			ok++
		}
	}
	if len(evs) != clients*calls || ok != maxUses {
		t.Fatalf("tool.invoked records: %d (%d succeeded); want %d (%d)", len(evs), ok, clients*calls, maxUses)
	}
}

const loadGrants = `version: 1
grants:
  - id: g-load
    subject: agent:alice-bot
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [load]}
        actions: [read]
        scope: descendants
    constraints: {maxUses: 10000}
`
