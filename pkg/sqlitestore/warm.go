package sqlitestore

import (
	"database/sql"
	"sync"
	"sync/atomic"
)

// WarmUp opens and uses a private in-memory database, once per process and on another
// goroutine, so that Open finds the SQLite library initialised and its code in memory
// (the state database's open then takes about half as long). It touches no file. A
// warm-up that has not started when Open begins is skipped: it would only compete with
// the real open. A host calls it as early as it knows it will open a Store.
func WarmUp() {
	warmOnce.Do(func() {
		go func() {
			if !warmSkip.Load() {
				_ = warmUp()
			}
		}()
	})
}

// warmUp is the warm-up: a database in memory only, created, written, read and closed.
func warmUp() error {
	db, err := sql.Open("sqlite", "file:sharedos-warm?mode=memory")
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = db.Exec("CREATE TABLE w(a INTEGER PRIMARY KEY, b TEXT NOT NULL); INSERT INTO w(b) VALUES ('x'); SELECT a, b FROM w WHERE a = 1")
	return err
}

var (
	warmOnce sync.Once
	warmSkip atomic.Bool
)
