package pgstore

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestAuditListStopsAtItsLimit: a trail of 100,000 events recorded under schema version
// 2 is migrated (00004 indexes an existing table with its rows), then every filter of
// `audit list --limit 20` — one type, two types, one outcome, a tool, an owner, an actor,
// since, a type and since — whose value is rare (5 matches, spread over the trail) reads
// (or 1 in 200, for two types) at most a few dozen rows: each scan of the plan, run (EXPLAIN ANALYZE), returns and
// removes by filter at most 60 rows in all, where a walk of the whole trail reads
// 100,000. Counted rows, not time.
func TestAuditListStopsAtItsLimit(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	pool, err := newPool(ctx, dsn)
	if err != nil {
		t.Fatalf("pool: %v", err)
	}
	defer pool.Close()
	p, err := provider(pool)
	if err != nil {
		t.Fatalf("provider: %v", err)
	}
	if _, err := p.UpTo(ctx, 2); err != nil {
		t.Fatalf("migrate to version 2: %v", err)
	}
	p.Close()
	// every 20,000th event is the rare one of each column
	if _, err := pool.Exec(ctx, `INSERT INTO audit_events
		(id, type, outcome, at, at_ms, tool, operation_id, trace_id, world, owner, actor, event)
		SELECT 'e' || i,
			CASE WHEN i % 20000 = 7 THEN 'escalation.requested' WHEN i % 20000 = 8 THEN 'turn.ended'
				WHEN i % 200 = 1 THEN 'resource.invoked' WHEN i % 200 = 2 THEN 'message.sent' WHEN i % 3 = 0 THEN 'tool.invoked' ELSE 'authorization.checked' END,
			CASE WHEN i % 20000 = 9 THEN 'error' WHEN i % 7 = 0 THEN 'denied' ELSE 'allowed' END,
			'', 1700000000000 + i * 1000,
			CASE WHEN i % 20000 = 10 THEN 'rare.tool' ELSE 'files.read' END,
			'c' || i, 't' || (i / 3), 'w' || (i % 4),
			CASE WHEN i % 20000 = 11 THEN 'human:rare' ELSE 'human:u' || (i % 10) END,
			CASE WHEN i % 20000 = 12 THEN 'agent:rare' ELSE 'agent:a' || (i % 5) END, '{}'
		FROM generate_series(1, 100000) AS i`); err != nil {
		t.Fatalf("fill the trail: %v", err)
	}
	st, err := Open(ctx, dsn, Options{Migrate: true})
	if err != nil {
		t.Fatalf("Open (migrate the filled trail): %v", err)
	}
	defer st.Close()
	var n int64
	if err := st.pool.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n); err != nil || n != 100000 {
		t.Fatalf("after the migration: %d events, %v; want 100000", n, err)
	}
	if _, err := st.pool.Exec(ctx, "ANALYZE audit_events"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	late := int64(1700000000000 + 99990*1000)
	for _, c := range []struct {
		name string
		f    store.AuditFilter
		want int
	}{
		{"no filter", store.AuditFilter{}, 20},
		{"one type", store.AuditFilter{Types: []string{"escalation.requested"}}, 5},
		{"two types", store.AuditFilter{Types: []string{"escalation.requested", "turn.ended"}}, 10},
		{"two types of 1 event in 200", store.AuditFilter{Types: []string{"resource.invoked", "message.sent"}}, 20},
		{"types, outcomes", store.AuditFilter{Types: []string{"escalation.requested", "turn.ended"}, Outcomes: []string{"error", "denied"}}, 1},
		{"one outcome", store.AuditFilter{Outcomes: []string{"error"}}, 5},
		{"a tool", store.AuditFilter{Tool: "rare.tool"}, 5},
		{"an owner", store.AuditFilter{Owner: mustAddress(t, "human:rare")}, 5},
		{"an actor", store.AuditFilter{Actor: mustAddress(t, "agent:rare")}, 5},
		{"since", store.AuditFilter{SinceMillis: late}, 11},
		{"a type, since", store.AuditFilter{Types: []string{"tool.invoked"}, SinceMillis: late}, 4},
		{"a common owner", store.AuditFilter{Owner: mustAddress(t, "human:u3")}, 20},
	} {
		name, f := c.name, c.f
		f.ByInstant, f.Limit = true, 20
		q, args := auditQuery(f)
		var plan []map[string]any
		var text []byte
		if err := st.pool.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q, args...).Scan(&text); err != nil {
			t.Fatalf("%s: EXPLAIN: %v", name, err)
		}
		if err := json.Unmarshal(text, &plan); err != nil || len(plan) != 1 {
			t.Fatalf("%s: the plan %s: %v", name, text, err)
		}
		if read := rowsRead(plan[0]["Plan"].(map[string]any)); read > 60 {
			t.Errorf("%s: the scans of %s read %d rows for a limit of 20; plan:\n%s", name, q, read, text)
		}
		rows, err := st.pool.Query(ctx, q, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got := 0
		for rows.Next() {
			got++
		}
		rows.Close()
		if got != c.want {
			t.Errorf("%s: %d events, want %d", name, got, c.want)
		}
	}
}

// rowsRead sums, over the scans of a plan node and its children, the rows they returned
// and the rows they removed by filter.
func rowsRead(node map[string]any) int {
	n := 0
	if _, scan := node["Relation Name"]; scan {
		for _, k := range []string{"Actual Rows", "Rows Removed by Filter"} {
			if v, ok := node[k].(float64); ok {
				n += int(v)
			}
		}
	}
	if kids, ok := node["Plans"].([]any); ok {
		for _, k := range kids {
			n += rowsRead(k.(map[string]any))
		}
	}
	return n
}
