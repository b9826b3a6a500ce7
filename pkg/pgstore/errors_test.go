package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/store"
)

// TestErrorClasses: which errors mean the server is unreachable (store.ErrUnavailable)
// and which transactions may be retried (only those the server rolled back).
func TestErrorClasses(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		err                    error
		unreachable, retryable bool
	}{
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, true, false},
		{"connection failure", &pgconn.PgError{Code: "08006"}, true, false},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true, false},
		{"a lost stream", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true, false},
		{"a refused connection", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true, false},
		{"serialization failure", &pgconn.PgError{Code: "40001"}, false, true},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, false, true},
		{"unique violation", &pgconn.PgError{Code: "23505"}, false, false},
		{"the caller cancelled", fmt.Errorf("timeout: %w", context.Canceled), false, false},
		{"nil", nil, false, false},
	} {
		if got := isUnreachable(tc.err); got != tc.unreachable {
			t.Errorf("%s: isUnreachable = %v, want %v", tc.name, got, tc.unreachable)
		}
		if got := retryable(tc.err); got != tc.retryable {
			t.Errorf("%s: retryable = %v, want %v", tc.name, got, tc.retryable)
		}
	}
}

// TestCancelledIsNotUnavailable: a query its caller cancels while the server runs it
// fails with context.Canceled and not store.ErrUnavailable (pgx reports it as a network
// timeout): the caller gave up, the server is there.
func TestCancelledIsNotUnavailable(t *testing.T) {
	dsn := pgtest.DSN(t)
	st, err := Open(context.Background(), dsn, Options{Migrate: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer st.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := st.pool.Exec(ctx, "SELECT pg_sleep(60)")
		done <- fail("sleep", err)
	}()
	for { // until the server runs the query
		var n int
		if err := st.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'active' AND query LIKE 'SELECT pg_sleep%'`).Scan(&n); err != nil {
			t.Fatalf("pg_stat_activity: %v", err)
		}
		if n == 1 {
			break
		}
	}
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Errorf("a cancelled query = %v; want context.Canceled and not store.ErrUnavailable", err)
	}
}
