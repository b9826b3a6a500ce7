package host

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestOpenStateWorkloads: the workload picks how the store writes its write-ahead
// records — committed one by one, appended to the shared spool (a command), or through a
// spool of the process (a server) — and every record reads back the same.
func TestOpenStateWorkloads(t *testing.T) {
	t.Parallel()
	owner, _ := kernel.ParseAddress("human:alice")
	for _, tc := range []struct {
		w                Workload
		spoolDir, shared bool
	}{
		{WorkloadEach, false, false},
		{WorkloadCommand, true, true},
		{WorkloadServer, true, false},
	} {
		path := filepath.Join(t.TempDir(), "state.db")
		st, err := OpenState(context.Background(), &Settings{State: path}, tc.w)
		if err != nil {
			t.Fatal(err)
		}
		wa, ok := st.(kernel.WriteAheadAuditSink)
		if !ok {
			t.Fatalf("workload %d: the store has no write-ahead sink", tc.w)
		}
		ev := kernel.AuditEvent{Version: "1", ID: "e1", Type: kernel.EventToolCatalogListed, Outcome: kernel.OutcomeSucceeded,
			At: "2026-08-03T09:00:00.000Z", TraceID: "t", NamespaceID: "w", Actor: owner, Authority: owner, Owner: owner, Purpose: "p"}
		if err := wa.AppendWriteAhead(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		_, dirErr := os.Stat(sqlitestore.SpoolDir(path))
		_, sharedErr := os.Stat(sqlitestore.SharedSpoolPath(path))
		if (dirErr == nil) != tc.spoolDir || (sharedErr == nil) != tc.shared {
			t.Errorf("workload %d: spool dir %v (want %v), shared spool %v (want %v)", tc.w, dirErr == nil, tc.spoolDir, sharedErr == nil, tc.shared)
		}
		evs, err := st.ListAudit(context.Background(), store.AuditFilter{})
		if err != nil || len(evs) != 1 || evs[0].ID != "e1" {
			t.Errorf("workload %d: read back %v %+v", tc.w, err, evs)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenStateErrors: invalid default namespaces are the configuration's error; a state
// database that cannot be opened is a state error naming it, with the state hint.
func TestOpenStateErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := OpenState(context.Background(), &Settings{State: filepath.Join(dir, "a.db"), DefaultNamespaces: []string{"files", "files"}}, WorkloadEach)
	var he *Error
	if !errors.As(err, &he) || he.Kind != KindConfig || he.Hint != "defaultNamespaces must list namespace identifiers" {
		t.Fatalf("invalid default namespaces: %#v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.db")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused open created the database: %v", err)
	}
	notDB := filepath.Join(dir, "not.db")
	if err := os.WriteFile(notDB, []byte("not a database, not at all, no"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = OpenState(context.Background(), &Settings{State: notDB}, WorkloadCommand)
	prefix := "open state database " + notDB + ": "
	if !errors.As(err, &he) || he.Kind != KindState || !errors.Is(err, store.ErrUnavailable) || he.Hint != StateHint(notDB) ||
		len(he.Message) < len(prefix) || he.Message[:len(prefix)] != prefix {
		t.Fatalf("not a database: %#v", err)
	}
	if b, _ := os.ReadFile(notDB); string(b) != "not a database, not at all, no" {
		t.Fatalf("the refused file was modified: %q", b)
	}
}

// TestCheckTrustBoundary: a surface that reaches the planes needs an existing root, and
// the state database (and the store's own files) outside it.
func TestCheckTrustBoundary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root, cache := filepath.Join(dir, "root"), filepath.Join(dir, "cache")
	for _, d := range []string{root, cache} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := CheckTrustBoundary(&Settings{Root: root, State: filepath.Join(dir, "state.db")}); err != nil {
		t.Fatalf("state outside the root: %v", err)
	}
	for name, s := range map[string]*Settings{
		"state inside":  {Root: root, State: filepath.Join(root, "state.db")},
		"missing root":  {Root: filepath.Join(dir, "nope"), State: filepath.Join(dir, "state.db")},
		"root in cache": {Root: cache, State: filepath.Join(dir, "state.db")},
	} {
		var he *Error
		if err := CheckTrustBoundary(s); !errors.As(err, &he) || he.Kind != KindUsage {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
	// without the planes, a root that does not exist yet is fine, a state inside it not
	if err := CheckStateBoundary(&Settings{Root: filepath.Join(dir, "nope"), State: filepath.Join(dir, "state.db")}); err != nil {
		t.Fatalf("state boundary, missing root: %v", err)
	}
	if err := CheckStateBoundary(&Settings{Root: filepath.Join(dir, "nope"), State: filepath.Join(dir, "nope", "s.db")}); err == nil {
		t.Fatal("state boundary: a state database under a root that does not exist yet was accepted")
	}
}
