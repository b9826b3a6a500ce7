package httpapi_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/httpapi"
)

// TestReadiness: /healthz is up whatever the store; /readyz is 503 while the state
// database is gone and 200 again once it is back (each answer within its 2 s bound).
func TestReadiness(t *testing.T) {
	f := newFixture(t)
	if r := f.do("GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz: %d %s", r.status, r.body)
	}
	dir := filepath.Dir(f.state)
	must(t, os.Rename(dir, dir+".gone"))
	if r := f.do("GET", "/readyz", "", ""); r.status != 503 || r.errCode(t) != "not_ready" {
		t.Fatalf("readyz without the store: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/healthz", "", ""); r.status != 200 {
		t.Fatalf("healthz without the store: %d", r.status)
	}
	must(t, os.Rename(dir+".gone", dir))
	if r := f.do("GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz with the store back: %d %s", r.status, r.body)
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestAccessLogAndMetrics: one JSON line per request with the request id, the token's
// id (never the token), the route's pattern, the status and the decision; the metrics
// count requests by route and decisions by outcome and code, with no id or path label.
func TestAccessLogAndMetrics(t *testing.T) {
	var logs syncBuffer
	f := newFixtureWith(t, func(c *httpapi.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	f.do("POST", "/v1/tools/invoke", "alice", call("call-1", "files.delete", `{"path":["notes","todo.md"]}`), "X-Request-Id", "req-log-1")
	f.do("GET", "/v1/admin/escalations/42", "op", "")
	var line map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, `"req-log-1"`) {
			must(t, json.Unmarshal([]byte(l), &line))
		}
	}
	if line["msg"] != "request" || line["token"] != "alice" || line["route"] != "/v1/tools/invoke" || line["status"] != float64(200) ||
		line["outcome"] != "denied" || line["code"] != "tool_unavailable" || line["latencyMs"] == nil {
		t.Fatalf("access log line: %v\nall: %s", line, logs.String())
	}
	if strings.Contains(logs.String(), f.tok["alice"]) || strings.Contains(logs.String(), f.tok["op"]) {
		t.Fatalf("a token reached the log")
	}
	resp, err := http.Get(f.url + "/metrics")
	must(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := string(b)
	for _, want := range []string{
		`sharedos_http_requests_total{method="POST",route="/v1/tools/invoke",status="200"} 1`,
		`sharedos_http_requests_total{method="GET",route="/v1/admin/escalations/{id}",status="404"} 1`,
		`sharedos_decisions_total{code="tool_unavailable",outcome="denied"} 1`,
		`sharedos_http_request_duration_seconds_bucket{route="/v1/tools/invoke"`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(m, "42") && strings.Contains(m, `escalations/42`) || strings.Contains(m, "call-1") {
		t.Errorf("an id reached a metrics label")
	}
}
