package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

var adminRequests = []struct{ method, path, body string }{
	{"GET", "/v1/admin/escalations", ""},
	{"GET", "/v1/admin/escalations/1", ""},
	{"POST", "/v1/admin/escalations/1/resolve", `{"status":"approved"}`},
	{"GET", "/v1/admin/audit", ""},
	{"GET", "/v1/admin/audit/export", ""},
	{"GET", "/v1/admin/audit/calls", ""},
	{"GET", "/v1/admin/namespaces?world=default&owner=human:bob", ""},
	{"PUT", "/v1/admin/namespaces?world=default&owner=human:bob", `{"disable":["files"]}`},
}

// TestAdminForbiddenToAgents: every operator route is 403 for an agent token, and the
// refused patch stored nothing.
func TestAdminForbiddenToAgents(t *testing.T) {
	f := newFixture(t)
	f.recordEscalation(t)
	for _, rq := range adminRequests {
		r := f.do(rq.method, rq.path, "alice", rq.body)
		if r.status != 403 || r.errCode(t) != "permission_denied" {
			t.Errorf("%s %s as an agent: %d %s", rq.method, rq.path, r.status, r.body)
		}
	}
	r := f.do("GET", "/v1/admin/namespaces?world=default&owner=human:bob", "op", "")
	if !strings.Contains(string(r.body), `"effectiveSelection":["files","sharedos"]`) {
		t.Fatalf("bob's selection after the refused patch: %s", r.body)
	}
	r = f.do("GET", "/v1/admin/escalations/1", "op", "")
	if !strings.Contains(string(r.body), `"status":"pending"`) {
		t.Fatalf("the escalation after the refused resolve: %s", r.body)
	}
}

// recordEscalation records one pending escalation of (default, human:alice).
func (f *fixture) recordEscalation(t testing.TB) {
	t.Helper()
	st, err := sqlitestore.Open(context.Background(), f.state, sqlitestore.Options{})
	must(t, err)
	defer st.Close()
	owner, _ := kernel.ParseAddress("human:alice")
	must(t, st.RecordEscalation(context.Background(), store.EscalationRecord{World: "default", Owner: owner, TraceID: "trace-e", CallID: "call-e",
		Escalation: kernel.Escalation{Reason: "needs delete", Reviewer: owner, RequestedAt: "2026-01-01T00:00:00Z", Status: store.EscalationPending}}))
}

func TestAdminEscalations(t *testing.T) {
	f := newFixture(t)
	f.recordEscalation(t)
	r := f.do("GET", "/v1/admin/escalations?status=pending", "op", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"callId":"call-e"`) {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/v1/admin/escalations?status=maybe", "op", ""); r.status != 400 {
		t.Fatalf("bad status: %d", r.status)
	}
	if r := f.do("GET", "/v1/admin/escalations/99", "op", ""); r.status != 404 || r.errCode(t) != "not_found" {
		t.Fatalf("unknown id: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/v1/admin/escalations/1/resolve", "op", `{"status":"maybe"}`); r.status != 400 {
		t.Fatalf("bad decision: %d %s", r.status, r.body)
	}
	r = f.do("POST", "/v1/admin/escalations/1/resolve", "op", `{"status":"approved","note":"ok"}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"status":"approved"`) || !strings.Contains(string(r.body), `"note":"ok"`) {
		t.Fatalf("resolve: %d %s", r.status, r.body)
	}
	if r := f.do("POST", "/v1/admin/escalations/1/resolve", "op", `{"status":"denied"}`); r.status != 400 {
		t.Fatalf("resolving again otherwise: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/v1/admin/escalations/1", "op", ""); !strings.Contains(string(r.body), `"resolvedBy":{"kind":"human","userId":"alice"}`) {
		t.Fatalf("show: %s", r.body)
	}
}

func TestAdminAudit(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"a1", "a2", "a3"} {
		f.do("POST", "/v1/tools/invoke", "alice", call(id, "files.read", `{"path":["notes","todo.md"]}`))
	}
	r := f.do("GET", "/v1/admin/audit?type=tool.invoked&limit=2", "op", "")
	var evs []kernel.AuditEvent
	must(t, json.Unmarshal(r.body, &evs))
	if r.status != 200 || len(evs) != 2 || evs[0].OperationID != "a3" {
		t.Fatalf("query: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/v1/admin/audit?since=yesterday", "op", ""); r.status != 400 {
		t.Fatalf("bad since: %d", r.status)
	}
	// the export streams JSON lines, oldest first, and resumes from a cursor
	req := "/v1/admin/audit/export?type=tool.invoked"
	r = f.doRaw("GET", req, "op")
	lines := strings.Split(strings.TrimSpace(string(r.body)), "\n")
	if r.status != 200 || r.header.Get("Content-Type") != "application/x-ndjson" || len(lines) != 3 {
		t.Fatalf("export: %d %q %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var first, last kernel.AuditEvent
	must(t, json.Unmarshal([]byte(lines[0]), &first))
	must(t, json.Unmarshal([]byte(lines[2]), &last))
	if first.OperationID != "a1" || last.OperationID != "a3" {
		t.Fatalf("export order: %s", r.body)
	}
	r = f.do("GET", "/v1/admin/audit/calls?limit=1", "op", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"operationId":"a3"`) || !strings.Contains(string(r.body), `"checks":[`) {
		t.Fatalf("calls: %d %s", r.status, r.body)
	}
}

func TestAdminNamespaces(t *testing.T) {
	f := newFixture(t)
	if r := f.do("GET", "/v1/admin/namespaces", "op", ""); r.status != 400 {
		t.Fatalf("no pair: %d", r.status)
	}
	r := f.do("PUT", "/v1/admin/namespaces?world=default&owner=human:bob", "op", `{"disable":["files"]}`)
	if r.status != 200 || !strings.Contains(string(r.body), `"effectiveSelection":["sharedos"]`) || !strings.Contains(string(r.body), `"owner":{"kind":"human","userId":"bob"}`) {
		t.Fatalf("PUT bob's: %d %s", r.status, r.body)
	}
	// alice's own selection is untouched
	if r := f.do("GET", "/v1/tools/namespaces", "alice", ""); !strings.Contains(string(r.body), `"effectiveSelection":["files","sharedos"]`) {
		t.Fatalf("alice's after bob's patch: %s", r.body)
	}
	r = f.do("GET", "/v1/admin/namespaces?world=default&owner=human:bob", "op", "")
	if !strings.Contains(string(r.body), `"selectionSource":"stored"`) {
		t.Fatalf("GET bob's: %s", r.body)
	}
}

// TestAdminAuditExportPages: with pages of 2 events, the export of 7 calls (more than
// three pages) streams every call once, oldest first; with limit=3 it stops at the
// third.
func TestAdminAuditExportPages(t *testing.T) {
	f := newFixtureWith(t, func(c *httpapi.Config) { c.AuditPage = 2 })
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("p%d", i)
		f.do("POST", "/v1/tools/invoke", "alice", call(id, "files.read", `{"path":["notes","todo.md"]}`))
		want = append(want, id)
	}
	for _, c := range []struct {
		query string
		want  []string
	}{{"type=tool.invoked", want}, {"type=tool.invoked&limit=3", want[:3]}} {
		r := f.doRaw("GET", "/v1/admin/audit/export?"+c.query, "op")
		if r.status != 200 {
			t.Fatalf("export %s: %d %s", c.query, r.status, r.body)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(string(r.body)), "\n") {
			var ev kernel.AuditEvent
			must(t, json.Unmarshal([]byte(line), &ev))
			got = append(got, ev.OperationID)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("export %s = %v, want %v (oldest first, each once)", c.query, got, c.want)
		}
	}
}
