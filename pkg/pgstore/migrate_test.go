package pgstore_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// tables lists the tables of the database dsn names, sorted.
func tables(t *testing.T, dsn string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename")
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("list tables: %v", err)
	}
	return names
}

// exec runs one statement on dsn's database.
func exec(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestOpenRefusesAnUnmigratedDatabase: without Migrate, Open refuses a database whose
// schema is behind, in one line that says what to run, and creates nothing.
func TestOpenRefusesAnUnmigratedDatabase(t *testing.T) {
	dsn := pgtest.DSN(t)
	_, err := pgstore.Open(context.Background(), dsn, pgstore.Options{})
	if err == nil || !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "sharedos store migrate") || strings.Contains(err.Error(), "\n") {
		t.Errorf("Open of an empty database = %v; want one line wrapping store.ErrUnavailable that says to run sharedos store migrate", err)
	}
	if got := tables(t, dsn); len(got) != 0 {
		t.Errorf("a refused Open created tables %q", got)
	}
}

// TestMigrate: Migrate applies the embedded migrations once (a second run does
// nothing), and replicas migrating one fresh database at once all succeed with each
// migration applied once.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	res, err := pgstore.Migrate(ctx, dsn)
	if err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	files, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	if res.From != 0 || res.To != pgstore.SchemaVersion || len(res.Applied) != len(files) {
		t.Errorf("Migrate of a fresh database = %+v; want from 0 to %d, every migration applied", res, pgstore.SchemaVersion)
	}
	again, err := pgstore.Migrate(ctx, dsn)
	if err != nil || again.From != pgstore.SchemaVersion || again.To != pgstore.SchemaVersion || len(again.Applied) != 0 {
		t.Errorf("Migrate again = %+v, %v; want nothing done", again, err)
	}

	fresh := pgtest.DSN(t)
	var wg sync.WaitGroup
	applied := make(chan int, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := pgstore.Migrate(ctx, fresh)
			if err != nil {
				t.Errorf("concurrent Migrate: %v", err)
			}
			applied <- len(r.Applied)
		}()
	}
	wg.Wait()
	close(applied)
	total := 0
	for n := range applied {
		total += n
	}
	if total != len(files) {
		t.Errorf("4 concurrent Migrate runs applied %d migrations in all, want %d (each once)", total, len(files))
	}
	if st, err := pgstore.Open(ctx, fresh, pgstore.Options{}); err != nil {
		t.Errorf("Open after the concurrent migrations: %v", err)
	} else {
		st.Close()
	}
}

// TestNewerSchemaRefused: a database migrated by a newer build (a version this build
// does not know) is refused by Open and by Migrate, in one line, and left as it is.
func TestNewerSchemaRefused(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	if _, err := pgstore.Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	exec(t, dsn, "INSERT INTO "+pgstore.VersionTable+" (version_id, is_applied) VALUES (999, true)")
	before := tables(t, dsn)
	for name, do := range map[string]func() error{
		"Open": func() error {
			st, err := pgstore.Open(ctx, dsn, pgstore.Options{})
			if err == nil {
				st.Close()
			}
			return err
		},
		"Open with Migrate": func() error {
			st, err := pgstore.Open(ctx, dsn, pgstore.Options{Migrate: true})
			if err == nil {
				st.Close()
			}
			return err
		},
		"Migrate": func() error { _, err := pgstore.Migrate(ctx, dsn); return err },
	} {
		err := do()
		if !errors.Is(err, pgstore.ErrSchemaNewer) || !errors.Is(err, store.ErrUnavailable) || strings.Contains(err.Error(), "\n") ||
			!strings.Contains(err.Error(), "999") {
			t.Errorf("%s of a database of schema 999 = %v; want one line wrapping ErrSchemaNewer and naming the version", name, err)
		}
	}
	if after := tables(t, dsn); strings.Join(after, " ") != strings.Join(before, " ") {
		t.Errorf("the refusals changed the tables: %q, then %q", before, after)
	}
}
