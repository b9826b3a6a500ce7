package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

// invoked counts the tool.invoked events of call id.
func (f *fixture) invoked(t testing.TB, id string) int {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(t, err)
	defer st.Close()
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{OperationID: id, Types: []string{"tool.invoked"}})
	must(t, err)
	return len(evs)
}

// usesLeft reports how many of the drafts grant's two uses are left: it creates files
// under fresh keys until one is refused.
func (f *fixture) usesLeft(t testing.TB) int {
	t.Helper()
	for n := 0; n < 3; n++ {
		name := "probe" + string(rune('a'+n))
		r := f.do("POST", "/v1/tools/invoke", "alice", call(name, "files.create", `{"path":["drafts","`+name+`.md"],"content":"p"}`),
			"Idempotency-Key", "probe-"+name)
		if m := r.json(t); m["status"] != "succeeded" {
			return n
		}
	}
	t.Fatalf("the drafts grant allowed more than its two uses")
	return 0
}

func TestIdempotentReplay(t *testing.T) {
	f := newFixture(t)
	body := call("call-k", "files.create", `{"path":["drafts","k.md"],"content":"once"}`)
	first := f.do("POST", "/v1/tools/invoke", "alice", body, "Idempotency-Key", "key-1")
	if m := first.json(t); first.status != 200 || m["status"] != "succeeded" || first.header.Get("Idempotency-Replayed") != "" {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	// a retry may send a new requestedAt: still the same request
	retry := strings.Replace(body, "2026-01-01T00:00:00Z", "2026-01-01T00:00:05Z", 1)
	for i := 0; i < 3; i++ {
		r := f.do("POST", "/v1/tools/invoke", "alice", retry, "Idempotency-Key", "key-1")
		if r.status != 200 || string(r.body) != string(first.body) || r.header.Get("Idempotency-Replayed") != "true" {
			t.Fatalf("replay #%d: %d %s (want the first body %s)", i, r.status, r.body, first.body)
		}
	}
	// another request under the key: 409, and nothing runs
	other := call("call-k", "files.create", `{"path":["drafts","other.md"],"content":"x"}`)
	if r := f.do("POST", "/v1/tools/invoke", "alice", other, "Idempotency-Key", "key-1"); r.status != 409 || r.errCode(t) != "replay_conflict" {
		t.Fatalf("different request, same key: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/v1/tools/invoke", "alice", body, "Idempotency-Key", "bad key"); r.status != 400 || r.errCode(t) != "invalid_request" {
		t.Fatalf("invalid key: %d %s", r.status, r.body)
	}
	if n := f.invoked(t, "call-k"); n != 1 {
		t.Fatalf("call-k ran %d times, want once", n)
	}
	if n := f.usesLeft(t); n != 1 {
		t.Fatalf("uses left after one keyed call and its replays: %d, want 1", n)
	}
	// a request that failed as a request keeps nothing: the key is free
	if r := f.do("POST", "/v1/tools/invoke", "alice", `{"tool":1}`, "Idempotency-Key", "key-2"); r.status != 400 {
		t.Fatalf("invalid body: %d", r.status)
	}
}

func TestIdempotentConcurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 requests")
	}
	f := newFixture(t)
	body := call("call-c", "files.create", `{"path":["drafts","c.md"],"content":"once"}`)
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 64, MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	const n = 1000
	bodies := make([]string, n)
	statuses := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("POST", f.url+"/v1/tools/invoke", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+f.tok["alice"])
			req.Header.Set("Idempotency-Key", "key-c")
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			bodies[i], statuses[i] = string(b), resp.StatusCode
		}()
	}
	wg.Wait()
	for i := range n {
		if statuses[i] != 200 || bodies[i] != bodies[0] {
			t.Fatalf("request %d: %d %s; request 0: %d %s", i, statuses[i], bodies[i], statuses[0], bodies[0])
		}
	}
	var m map[string]any
	must(t, json.Unmarshal([]byte(bodies[0]), &m))
	if m["status"] != "succeeded" {
		t.Fatalf("the call: %s", bodies[0])
	}
	if got := f.invoked(t, "call-c"); got != 1 {
		t.Fatalf("call-c ran %d times, want once", got)
	}
	if left := f.usesLeft(t); left != 1 {
		t.Fatalf("uses left: %d, want 1 (one spent by the 1,000 requests)", left)
	}
}

// TestIdempotentPending: a key claimed by another process (another handle on the state
// database) is 409 replay_pending while it runs, and its response is replayed once it
// completed there.
func TestIdempotentPending(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config) { c.ReplayWait = -1 })
	f.do("GET", "/v1/tools", "alice", "") // open the principal
	raw := call("call-p", "files.create", `{"path":["drafts","p.md"],"content":"x"}`)
	var c kernel.ToolCall
	must(t, json.Unmarshal([]byte(raw), &c))
	owner, _ := kernel.ParseAddress("human:alice")
	actor, _ := kernel.ParseAddress("agent:alice-bot")
	k := store.IdempotencyKey{Scope: httpapi.ContextScope(kernel.AccessContext{World: "default", Actor: actor, Owner: owner, Authority: owner, Purpose: "test"}), Key: "key-p"}
	fp := httpapi.Fingerprint(c, c.TraceID)
	other, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(t, err)
	defer other.Close()
	state, _, err := other.BeginIdempotent(context.Background(), k, fp, time.Now(), time.Hour)
	if err != nil || state != store.IdempotencyClaimed {
		t.Fatalf("claim from the other handle: %v %v", state, err)
	}
	if r := f.do("POST", "/v1/tools/invoke", "alice", raw, "Idempotency-Key", "key-p"); r.status != 409 || r.errCode(t) != "replay_pending" {
		t.Fatalf("while the other process runs it: %d %s", r.status, r.body)
	}
	if n := f.invoked(t, "call-p"); n != 0 {
		t.Fatalf("a pending key ran the call here")
	}
	stored := `{"callId":"call-p","tool":"files.create","status":"succeeded","output":{},"completedAt":"2026-01-01T00:00:00Z"}` + "\n"
	must(t, other.CompleteIdempotent(context.Background(), k, fp, 200, []byte(stored)))
	if r := f.do("POST", "/v1/tools/invoke", "alice", raw, "Idempotency-Key", "key-p"); r.status != 200 || string(r.body) != stored {
		t.Fatalf("after the other process completed: %d %s", r.status, r.body)
	}
}
