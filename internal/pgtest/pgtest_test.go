package pgtest_test

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestDatabasesAreSeparate: each DSN is a database of its own on a server that answers;
// what one test writes the other does not see.
func TestDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	a, b := pgtest.DSN(t), pgtest.DSN(t)
	if a == b {
		t.Fatalf("two calls gave the same DSN %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatalf("connect %s: %v", a, err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_here (x int)"); err != nil {
		t.Fatalf("create table: %v", err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatalf("connect %s: %v", b, err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_here'").Scan(&n); err != nil {
		t.Fatalf("query: %v", err)
	}
	if n != 0 {
		t.Errorf("a table created in one test's database is in the other's")
	}
}
