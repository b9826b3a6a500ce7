package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sharedos/sharedos/pkg/gateway"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
	"github.com/sharedos/sharedos/pkg/store/storetest"
)

// open opens the store kept in dir with enable applied (nil: as it comes).
func open(enable func(t storetest.T, st *sqlitestore.Store)) func(t storetest.T, dir string) store.State {
	return func(t storetest.T, dir string) store.State {
		t.Helper()
		st, err := sqlitestore.Open(context.Background(), filepath.Join(dir, "state.db"), sqlitestore.Options{DefaultNamespaces: []string{"files", "repo"}})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		if enable != nil {
			enable(t, st)
		}
		return st
	}
}

// TestConformance: the store passes storetest as a host opens it for a CLI command
// (write-ahead records committed one by one), with the shared spool of CLI commands, and
// with the spool of a long-lived MCP server. A spooled write-ahead record's id is checked
// when it is copied in (see spool.go), hence DeferredDuplicates.
func TestConformance(t *testing.T) {
	t.Run("Plain", func(t *testing.T) {
		storetest.Run(t, storetest.Config{Open: open(nil)})
	})
	t.Run("SharedSpool", func(t *testing.T) {
		storetest.Run(t, storetest.Config{DeferredDuplicates: true,
			Open: open(func(_ storetest.T, st *sqlitestore.Store) { st.EnableSharedSpool() })})
	})
	t.Run("Spool", func(t *testing.T) {
		storetest.Run(t, storetest.Config{DeferredDuplicates: true, Open: open(func(t storetest.T, st *sqlitestore.Store) {
			if err := st.EnableSpool(); err != nil {
				t.Fatalf("EnableSpool: %v", err)
			}
		})})
	})
}

// A store.State is what the gateway caches its catalogues in (host hands it over).
var _ gateway.CatalogCache = store.State(nil)
