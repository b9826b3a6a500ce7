// Package pgstore is the PostgreSQL store of a host: what pkg/sqlitestore keeps in one
// file, kept in one PostgreSQL database that several hosts (replicas of `sharedos serve`,
// command-line runs) share at once. It implements store.State and the kernel's optional
// extensions (kernel.ReservingUsageStore, kernel.AuditedSettingsStore,
// kernel.WriteAheadAuditSink, kernel.WriteAheadBatchAuditSink), store.Idempotency and
// store.Mailbox, and passes pkg/store/storetest unchanged (every area runs).
//
// It is built on github.com/jackc/pgx/v5's pool (pgxpool), without database/sql: only
// the migrations go through database/sql (stdlib.OpenDBFromPool), because goose runs on
// it.
//
// # Exact counters across processes
//
// A use of a bounded grant is spent by one conditional statement (INSERT … ON CONFLICT DO
// UPDATE SET uses = uses + 1 WHERE uses < max RETURNING uses): PostgreSQL locks the row
// and evaluates the condition on its latest committed version, so concurrent spenders in
// any number of processes never spend more than max. ReserveUse runs it in a transaction
// that stays open (holding the row) until Commit appends the decision record in the same
// transaction, or Release rolls it back: a process killed at any point leaves a spent use
// with its record or neither (PostgreSQL rolls back the transaction of a connection that
// is gone).
//
// # Durability
//
// A durable write commits with synchronous_commit on (the server's default: the commit is
// flushed to its write-ahead log before it returns), or — a transaction that appends audit
// events, which holds the audit lock until it ends — commits with synchronous_commit off
// and then waits, outside the lock, for a flush that covers its commit (flush.go); either
// way the method returns once the write is durable. A write-ahead record or a cache
// entry commits with SET LOCAL synchronous_commit = off: committed and visible at once,
// flushed with the server's next WAL flush (at most wal_writer_delay × 3 later, and with
// any durable commit after it). This is the class table of pkg/store, kept by the
// server.
//
// # Failure
//
// Every error of a method is an outage unless pkg/store names it otherwise; one that
// comes from the server being unreachable (a refused or dropped connection, a server
// shutting down) also wraps store.ErrUnavailable, so a caller can tell it apart. A
// transaction is retried (a bounded number of times) only on a serialization failure or
// a deadlock (SQLSTATE 40001, 40P01): the server rolled it back, so it provably did not
// commit. A connection dropped after the COMMIT was sent leaves the outcome unknown: a
// write that appends audit events then looks it up by its records once the server
// answers (ambiguous.go), answers what was recorded, and is run again only when it
// provably did not commit; any other write is never retried (it may have committed).
package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"runtime"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/store"
)

// Compile-time checks of the ports and extensions Store implements.
var (
	_ store.State                       = (*Store)(nil)
	_ kernel.ReservingUsageStore        = (*Store)(nil)
	_ kernel.AuditedSettingsStore       = (*Store)(nil)
	_ kernel.WriteAheadAuditSink        = (*Store)(nil)
	_ kernel.WriteAheadBatchAuditSink   = (*Store)(nil)
	_ kernel.FileDigestCache            = (*Store)(nil)
	_ kernel.ToolNamespaceSettingsStore = (*Store)(nil)
	_ store.AuditCursor                 = (*Store)(nil)
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Options configures a Store.
type Options struct {
	// DefaultNamespaces is the selection a (world, owner) has before anything is stored.
	DefaultNamespaces []string
	// Migrate brings the schema up to date at Open. Without it, Open refuses a database
	// whose schema is behind this build's (run `sharedos store migrate`): on a database
	// several replicas share, the schema changes when an operator says so, not when one
	// command of a newer build happens to run.
	Migrate bool
	// AllowPending opens a database whose schema is behind this build's instead of
	// refusing it (a newer one is still refused): a long-lived server (`serve`) starts,
	// and Ready reports the pending migrations (503 on /readyz, so a load balancer sends
	// it nothing) until `sharedos store migrate` applies them — then it is ready without
	// a restart. A call that needs a table of a pending migration fails meanwhile.
	AllowPending bool
	// RevisionPoll is how often the revision listener reads the revision when no
	// notification came (default DefaultRevisionPoll; see Revision).
	RevisionPoll time.Duration
}

// Store is an open PostgreSQL state database. It is safe for concurrent use, and its
// database is safe to share with other processes.
type Store struct {
	pool     *pgxpool.Pool
	name     string // the DSN without its password, for messages
	defaults []string
	rev      *revisions
	hints    *mailbox.Hub // the mailbox's wake-up hints (MessageHints)
	sel      selCache     // the selections read, validated by the revision
	group    auditGroup   // the write-ahead appends being joined (auditgroup.go)
	flush    flusher      // the waits for durability being joined (flush.go)
	usage    usageReads   // the usage reads being joined (usageread.go)
}

// IsDSN reports whether state names a PostgreSQL database (a postgres:// or
// postgresql:// URL) rather than a file.
func IsDSN(state string) bool {
	return strings.HasPrefix(state, "postgres://") || strings.HasPrefix(state, "postgresql://")
}

// Redact returns dsn without its password (for messages); a DSN that does not parse is
// replaced by a placeholder, as it might hold one.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(a DSN that does not parse)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// Open connects to the database dsn names and checks its schema: a schema newer than
// this build's is refused, and so is one behind it unless opts.Migrate (then it is
// migrated). Every failure wraps store.ErrUnavailable and names the database (without a
// password), except an invalid Options value.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	defaults, err := kernel.ValidateEnabledToolNamespaces(opts.DefaultNamespaces)
	if err != nil {
		return nil, fmt.Errorf("open state database: default namespaces: %w", err)
	}
	jscompat.SortLocale(defaults)
	name := Redact(dsn)
	pool, err := newPool(ctx, dsn)
	if err != nil {
		return nil, unavailable(name, err)
	}
	if opts.Migrate {
		if _, err := migrate(ctx, pool); err != nil {
			pool.Close()
			return nil, unavailable(name, err)
		}
	}
	if err := checkSchema(ctx, pool); err != nil && !(opts.AllowPending && errors.Is(err, store.ErrMigrationPending)) {
		pool.Close()
		return nil, unavailable(name, err)
	}
	return &Store{pool: pool, name: name, defaults: defaults, rev: newRevisions(opts.RevisionPoll), hints: mailbox.NewHub()}, nil
}

// newPool opens a pool on dsn. Without pool_max_conns in the DSN the pool holds up to 4
// connections per CPU (at least 8): a reservation holds its connection until it is
// committed. It opens no connection itself (pool_min_conns aside): the caller's first
// statement (Open's schema check) connects and proves the server answers, so a command
// that reads once pays one connection and no extra round trip.
func newPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("the DSN does not parse: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		cfg.MaxConns = int32(max(8, 4*runtime.NumCPU()))
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

func unavailable(name string, err error) error {
	return fmt.Errorf("open state database %s: %w: %w", name, store.ErrUnavailable, err)
}

// Name returns the DSN the store was opened with, without its password.
func (s *Store) Name() string { return s.name }

// Close closes the pool. Calls after Close fail. It waits for the connections in use (an
// open reservation's among them) to be given back.
func (s *Store) Close() error {
	s.stopListener()
	s.pool.Close()
	return nil
}

// fail wraps err, the error of operation op: with store.ErrUnavailable too when the
// server could not be reached.
func fail(op string, err error) error {
	if isUnreachable(err) {
		return fmt.Errorf("%s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isUnreachable reports whether err says the server could not be reached or the
// connection was lost: a connect error, a network error, an end of stream, or a server
// error of class 08 (connection exception), 57P01–57P03 (shutting down, cannot connect
// now) or 53300 (too many connections).
func isUnreachable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300"
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		pgconn.SafeToRetry(err)
}

// maxRetries bounds the attempts of a transaction that the server rolled back on a
// serialization failure or a deadlock.
const maxRetries = 5

// retryable reports whether err is a serialization failure or a deadlock: the server
// rolled the transaction back, so it did not commit and may be run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01")
}

// inTx runs fn in a transaction and commits it, retrying the whole on a serialization
// failure or a deadlock (at most maxRetries attempts). With writeAhead the commit is not
// waited for on the disk (synchronous_commit off).
func (s *Store) inTx(ctx context.Context, writeAhead bool, fn func(tx pgx.Tx) error) error {
	return s.inTxRetry(ctx, writeAhead, fn, nil)
}

// inTxRetry is inTx, with committed to find out the outcome of an ambiguous commit
// (ambiguous.go) when it is not nil.
func (s *Store) inTxRetry(ctx context.Context, writeAhead bool, fn func(tx pgx.Tx) error, committed func(ctx context.Context, q querier) (bool, error)) error {
	var err error
	for attempt := range maxRetries {
		if attempt > 0 {
			if werr := retryWait(ctx, attempt, err); werr != nil {
				return werr
			}
		}
		err = s.tx1(ctx, writeAhead, fn, committed)
		if !retryable(err) && !errors.Is(err, errNotCommitted) {
			return err
		}
	}
	return err
}

// beginWriteAhead begins a transaction whose commit is not waited for on the disk, in one
// round trip (both statements in one simple-protocol message).
var beginWriteAhead = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL synchronous_commit = off"}

func (s *Store) tx1(ctx context.Context, writeAhead bool, fn func(tx pgx.Tx) error, committed func(ctx context.Context, q querier) (bool, error)) error {
	var opts pgx.TxOptions
	if writeAhead {
		opts = beginWriteAhead
	}
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return err
	}
	pid := tx.Conn().PgConn().PID()
	if err := tx.Commit(ctx); err != nil {
		return s.afterAmbiguousCommit(ctx, pid, err, committed)
	}
	return nil
}

// querier is what a pool, a connection and a transaction have in common.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// txQuerier is what the statements of an open transaction need: a pgx.Tx, or the
// connection of a reservation (usage.go), whose transaction is open on it.
type txQuerier interface {
	querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// retryWait waits before attempt (the attempt-th retry: attempt × 5 ms) of a transaction
// that failed with err; it returns err joined with ctx's error when ctx ends first.
func retryWait(ctx context.Context, attempt int, err error) error {
	t := time.NewTimer(time.Duration(attempt) * 5 * time.Millisecond)
	select {
	case <-ctx.Done():
		t.Stop()
		return errors.Join(err, ctx.Err())
	case <-t.C:
		return nil
	}
}
