package pgstore_test

import (
	"context"
	"testing"

	"github.com/sharedos/sharedos/pkg/pgstore"
)

// TestWriteAheadTransactionsCommitAsynchronously: a write-ahead transaction (begun with
// its SET LOCAL in the same message as its BEGIN) runs with synchronous_commit off, a
// durable one with the server's default (on).
func TestWriteAheadTransactionsCommitAsynchronously(t *testing.T) {
	st, _ := openFresh(t)
	for _, c := range []struct {
		writeAhead bool
		want       string
	}{{true, "off"}, {false, "on"}} {
		got, err := pgstore.SynchronousCommitIn(context.Background(), st, c.writeAhead)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("writeAhead %v: synchronous_commit %q, want %q", c.writeAhead, got, c.want)
		}
	}
}
