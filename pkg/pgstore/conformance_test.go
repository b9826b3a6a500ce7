package pgstore_test

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
	"github.com/sharedos/sharedos/pkg/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openFresh opens a store on a fresh, migrated database for t.
func openFresh(t testing.TB) (*pgstore.Store, string) {
	t.Helper()
	dsn := pgtest.DSN(t)
	st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{DefaultNamespaces: []string{"files", "repo"}, Migrate: true})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dsn
}

// TestConformance: the store passes storetest unchanged. The suite's directory names a
// database: the first Open of a directory creates (and migrates) one, a second Open of
// it opens the same database, as a restarted process does.
func TestConformance(t *testing.T) {
	c := pgtest.Start(t)
	var mu sync.Mutex
	dbs := map[string]string{} // directory → DSN
	storetest.Run(t, storetest.Config{Open: func(t storetest.T, dir string) store.State {
		t.Helper()
		mu.Lock()
		dsn, ok := dbs[dir]
		if !ok {
			var drop func() error
			var err error
			dsn, drop, err = c.CreateDatabase(context.Background())
			if err != nil {
				mu.Unlock()
				t.Fatalf("create database: %v", err)
			}
			dbs[dir] = dsn
			t.Cleanup(func() {
				if err := drop(); err != nil {
					t.Errorf("%v", err)
				}
			})
		}
		mu.Unlock()
		st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{DefaultNamespaces: []string{"files", "repo"}, Migrate: true})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		return st
	}})
}
