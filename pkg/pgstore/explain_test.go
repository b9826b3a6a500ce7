package pgstore

import (
	"context"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// (TestMain, through pgtest.Main, is conformance_test.go's: one per test binary.)

// TestAuditListUsesAnIndex: at 100,000 events, the queries of `audit list --limit 20`
// (by instant, and in recording order, with and without a filter) walk an index and stop
// at the limit: the plan has an index scan and no Sort over the table.
func TestAuditListUsesAnIndex(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	st, err := Open(ctx, dsn, Options{Migrate: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer st.Close()
	if _, err := st.pool.Exec(ctx, `INSERT INTO audit_events
		(id, type, outcome, at, at_ms, tool, operation_id, trace_id, world, owner, actor, event)
		SELECT 'e' || i, CASE WHEN i % 3 = 0 THEN 'tool.invoked' ELSE 'authorization.checked' END,
			CASE WHEN i % 7 = 0 THEN 'denied' ELSE 'allowed' END, '', 1700000000000 + (i * 7919) % 100000 * 1000,
			'files.read', 'c' || i, 't' || (i / 3), 'w' || (i % 4), 'human:u' || (i % 10), 'agent:a' || (i % 5), '{}'
		FROM generate_series(1, 100000) AS i`); err != nil {
		t.Fatalf("fill the trail: %v", err)
	}
	if _, err := st.pool.Exec(ctx, "ANALYZE audit_events"); err != nil {
		t.Fatalf("analyze: %v", err)
	}
	for name, f := range map[string]store.AuditFilter{
		"by instant":                {ByInstant: true, Limit: 20},
		"by instant, one type":      {ByInstant: true, Limit: 20, Types: []string{"tool.invoked"}},
		"by instant, one owner":     {ByInstant: true, Limit: 20, Owner: mustAddress(t, "human:u3")},
		"newest first":              {Limit: 20},
		"oldest first":              {Limit: 20, Oldest: true},
		"newest first, one outcome": {Limit: 20, Outcomes: []string{"denied"}},
	} {
		q, args := auditQuery(f)
		rows, err := st.pool.Query(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			t.Fatalf("%s: EXPLAIN: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatalf("%s: EXPLAIN: %v", name, err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		text := strings.Join(plan, "\n")
		if !strings.Contains(text, "Index Scan") || strings.Contains(text, "Sort") {
			t.Errorf("%s: the plan of %s is not an index walk stopped by the limit:\n%s", name, q, text)
		}
	}
}

func mustAddress(t *testing.T, s string) kernel.Address {
	t.Helper()
	a, err := kernel.ParseAddress(s)
	if err != nil {
		t.Fatalf("ParseAddress(%s): %v", s, err)
	}
	return a
}
