package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestMain runs a child role (see child_test.go) when the test binary is re-executed by a
// multi-process test, and the tests otherwise.
func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(runChild(role))
	}
	os.Exit(m.Run())
}

// openTest opens a fresh store in a temporary directory.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "state", "state.db"), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenConfiguresConnection(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "state.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o700 {
		t.Errorf("parent directory mode = %o, want 700", got)
	}
	if fi, err = os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("database mode = %o, want 600", got)
	}
	// Every pooled connection must carry the DSN settings, so check on a few at once.
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		conn, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var mode string
		var busy, sync int
		if err := conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || busy != 10000 || sync != 1 {
			t.Errorf("conn %d: journal_mode=%s busy_timeout=%d synchronous=%d, want wal 10000 1", i, mode, busy, sync)
		}
	}
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(migrations) {
		t.Errorf("user_version = %d (%v), want %d", v, err, len(migrations))
	}
}

func TestOpenImmediateTransactions(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := context.Background()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// A second store on the same file must not be able to take the write lock while the
	// first transaction (immediate, so holding it from BEGIN) is open.
	other, err := Open(ctx, s.Path(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	other.db.SetMaxOpenConns(1) // so that the connection below is the one TryConsume uses
	if _, err := other.db.Exec("PRAGMA busy_timeout = 0"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.TryConsume(ctx, uk("w", "g"), 1); err == nil {
		t.Fatal("TryConsume succeeded while another connection held an immediate transaction")
	}
}

func TestOpenReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.TryConsume(ctx, uk("w", "g"), 5); !ok || err != nil {
		t.Fatalf("TryConsume = %v, %v", ok, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if n, err := s.GetUsage(ctx, uk("w", "g")); n != 1 || err != nil {
		t.Fatalf("GetUsage after reopen = %d, %v; want 1", n, err)
	}
}

func TestOpenRefusesNonDatabases(t *testing.T) {
	t.Parallel()
	header := func(mutate func(b []byte)) []byte {
		b := make([]byte, 4096)
		copy(b, "SQLite format 3\x00")
		b[16], b[17] = 0x10, 0x00 // page size 4096
		b[18], b[19] = 1, 1
		b[21], b[22], b[23] = 64, 32, 32
		mutate(b)
		return b
	}
	tests := []struct {
		name    string
		content []byte
	}{
		{"garbage", bytes.Repeat([]byte("not a database, just garbage bytes\n"), 200)},
		{"short", []byte("SQLite format 3")},
		{"bad page size", header(func(b []byte) { b[16], b[17] = 0x03, 0x00 })},
		{"bad format version", header(func(b []byte) { b[18] = 9 })},
		{"bad payload fractions", header(func(b []byte) { b[21] = 0 })},
		{"random header tail", append([]byte("SQLite format 3\x00"), bytes.Repeat([]byte{0xff}, 2000)...)},
		{"valid header, corrupt schema page", header(func(b []byte) {
			for i := 100; i < len(b); i++ {
				b[i] = byte(i*7 + 3)
			}
		})},
		{"valid header, truncated", header(func(b []byte) {})[:100]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := filepath.Join(dir, "state.db")
			if err := os.WriteFile(path, tt.content, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(context.Background(), path, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded on a file that is not a database")
			}
			t.Log(err)
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not wrap ErrUnavailable or name the file", err)
			}
			got, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(got, tt.content) {
				t.Errorf("the file was modified (%v)", rerr)
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("Open left files beside the database: %v", entries)
			}
		})
	}
}

func TestOpenRefusesDirectory(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state.db")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded on a directory")
	}
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not wrap ErrUnavailable or name the file", err)
	}
}

func TestOpenRefusesParentThatIsAFile(t *testing.T) {
	t.Parallel()
	parent := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(parent, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), filepath.Join(parent, "state.db"), Options{})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open = %v, want ErrUnavailable", err)
	}
}

func TestOpenRefusesForeignOrNewerSchema(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		ours  bool // start from a sharedos database (else from a plain SQLite one)
		setup []string
		want  string
	}{
		{"newer schema", true, []string{"PRAGMA user_version = 99"}, "newer"},
		{"foreign application id", true, []string{"PRAGMA application_id = 42"}, "not a sharedos"},
		{"foreign database", false, []string{"CREATE TABLE other (x)"}, "not a sharedos"},
		{"foreign versioned database", false, []string{"CREATE TABLE other (x)", "PRAGMA user_version = 1"}, "not a sharedos"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "state.db")
			if tt.ours {
				s, err := Open(ctx, path, Options{})
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range tt.setup {
				if _, err := db.Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			db.Close()
			s, err := Open(ctx, path, Options{})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open = %v, want ErrUnavailable mentioning %q", err, tt.want)
			}
		})
	}
}

func TestOpenRejectsInvalidDefaults(t *testing.T) {
	t.Parallel()
	for _, defaults := range [][]string{{"files", "files"}, {""}} {
		_, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), Options{DefaultNamespaces: defaults})
		if err == nil || errors.Is(err, ErrUnavailable) {
			t.Errorf("Open with defaults %q = %v, want a configuration error", defaults, err)
		}
	}
}

func TestDSNEscapesPath(t *testing.T) {
	t.Parallel()
	got := dsn("/tmp/a?b#c%d/state.db", dsnParams)
	if !strings.HasPrefix(got, "file:/tmp/a%3fb%23c%25d/state.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)") {
		t.Errorf("dsn = %q", got)
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "odd ?#% name", "state.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ok, err := s.TryConsume(ctx, uk("w", "g"), 1); !ok || err != nil {
		t.Fatalf("TryConsume = %v, %v", ok, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database not at the given path: %v", err)
	}
}

func TestClosedStoreFails(t *testing.T) {
	t.Parallel()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUsage(context.Background(), uk("w", "g")); err == nil {
		t.Error("GetUsage succeeded after Close")
	}
}

// TestAuditIndexes: the trail keeps the indexes its readers need (time, operation, trace,
// the unique id) and none of the four that cost every write more than they saved.
func TestAuditIndexes(t *testing.T) {
	s := openTest(t, Options{})
	rows, err := s.db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_events' AND name NOT LIKE 'sqlite_autoindex_%' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	want := []string{"audit_events_at", "audit_events_operation", "audit_events_trace"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("audit_events indexes %v, want %v", got, want)
	}
	var unique int
	if err := s.db.QueryRow(`SELECT count(*) FROM pragma_index_list('audit_events') WHERE "unique" = 1`).Scan(&unique); err != nil || unique != 1 {
		t.Fatalf("the id is not unique-indexed: %d %v", unique, err)
	}
}
