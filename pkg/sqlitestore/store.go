// Package sqlitestore is the embedded SQLite default for the kernel's stateful ports: the
// per-(world, owner) tool namespace settings, the maxUses counters, the append-only audit
// trail, the recorded escalations and the snapshot index of the files plane.
//
// Store implements store.State (pkg/store) and passes its conformance suite,
// pkg/store/storetest.
//
// One database file may be shared by many processes at once (WAL mode, a busy timeout,
// immediate write transactions and migrations guarded by the write lock). The store keeps
// no authority of its own: it must never decide an authorization, never widen a namespace
// selection beyond what an update asks, never rewrite or delete an
// audit event, and never modify a file that is not its own database.
package sqlitestore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"

	"modernc.org/sqlite" // registers the "sqlite" database/sql driver
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrUnavailable is store.ErrUnavailable, wrapped by every error of Open: the state
// database could not be created, read or migrated (it is not a SQLite database, it is
// corrupt, it is a directory, it belongs to another program, or its schema is newer than
// this build).
var ErrUnavailable = store.ErrUnavailable

// ErrDuplicate is store.ErrDuplicate, wrapped when a record that must be unique already
// exists: a snapshot with the same (world, owner, root, path, id), or an audit event id
// already recorded with other content.
var ErrDuplicate = store.ErrDuplicate

// Compile-time checks that Store implements the ports it is the default for.
var (
	_ kernel.ToolNamespaceSettingsStore = (*Store)(nil)
	_ kernel.UsageStore                 = (*Store)(nil)
	_ kernel.AuditSink                  = (*Store)(nil)
	_ kernel.SnapshotIndex              = (*Store)(nil)
	_ store.State                       = (*Store)(nil)
)

// Options configures a Store.
type Options struct {
	// DefaultNamespaces is the selection a (world, owner) has before anything is stored.
	DefaultNamespaces []string
	// AuditSpool says how the write-ahead audit records are written: SpoolNone commits
	// each, SpoolPrivate is EnableSpool (a long-lived process answering many calls),
	// SpoolShared is EnableSharedSpool (a short-lived process). Durable writes are the
	// same whatever it says.
	AuditSpool Spool
}

// Spool is how a Store writes its write-ahead audit records (Options.AuditSpool).
type Spool int

// Spools.
const (
	// SpoolNone commits each write-ahead record as it is written.
	SpoolNone Spool = iota
	// SpoolPrivate writes them through a spool file of this process (EnableSpool).
	SpoolPrivate
	// SpoolShared appends them to the database's shared spool (EnableSharedSpool).
	SpoolShared
)

// Store is an open state database. It is safe for concurrent use by many goroutines, and
// its file is safe to share with other processes.
//
// # Durability
//
// Which record gets which guarantee is pkg/store's contract (the table in its package
// doc); this is how the store keeps it. Every write is one SQLite transaction in WAL
// mode: atomic, visible to every reader in every process as soon as it commits, and it
// survives the crash of any process. What differs is when a commit is forced to stable
// storage (fsync), which is what a power failure or an operating-system crash could
// otherwise take back:
//
//   - Durable writes commit with synchronous=FULL: the write-ahead log is fsynced before
//     the commit returns. Besides the table's durable records, AppendBatch is durable
//     (an event the caller did not classify is treated as the record of an effect).
//   - Write-ahead records (AppendWriteAhead, AppendWriteAheadBatch) and cache entries
//     (StoreDigest, PutGatewayCatalog) commit with synchronous=NORMAL (or, spooled, are
//     not committed at once: see EnableSpool): no fsync, so a
//     read-only command forces nothing to the disk. Such a write becomes durable with the
//     next durable commit of any process (its fsync covers every earlier frame of the
//     log) or the next checkpoint; only a power failure before either can lose it.
//
// SQLite still checkpoints the log (copying it into the database file, with an fsync)
// when it reaches 1,000 pages and when the last connection to the file closes.
type Store struct {
	db       *sql.DB // synchronous=NORMAL: reads and write-ahead records
	path     string
	defaults []string

	durableOnce sync.Once
	durableDB   *sql.DB // synchronous=FULL: every write that must be durable; opened on first use
	durableErr  error

	stmtMu sync.Mutex
	stmts  map[string]*sql.Stmt // statements of the hot paths, prepared on db once each

	sel selCache         // the namespace selections read (see selCache)
	now func() time.Time // the clock of the selection cache (tests move it)

	spoolMu sync.Mutex
	sp      *spool       // the audit spool (EnableSpool), nil when records are committed one by one
	shared  *sharedSpool // the shared spool (EnableSharedSpool)
}

// applicationID marks a database file as a sharedos state database ("shOS").
const applicationID = 0x73684f53

// dsnParams are the connection parameters, applied by modernc.org/sqlite to every new
// connection. busy_timeout comes first so that later statements wait for a lock instead of
// failing (the driver runs it before the other _pragma values whatever their order; see
// migrateRetrying for the one case SQLite will not wait), and _txlock makes every BEGIN an
// immediate one, so a transaction that writes holds the write lock from its start.
// temp_store(MEMORY) keeps SQLite's temporary files in memory — above all the statement
// journal of a multi-row INSERT inside a transaction (the audit spool's ingest), which
// otherwise spills past 64 KiB to a temporary file, one write(2) per page (~10 % of
// serve's CPU per request). They are scratch space, rolled back or discarded within the
// statement or transaction: nothing durable is kept there, so durability is unchanged.
const dsnParams = "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=temp_store(MEMORY)&_txlock=immediate"

// durableParams are dsnParams for the durable connections (see Store): every commit
// fsyncs the write-ahead log before it returns.
const durableParams = "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=temp_store(MEMORY)&_txlock=immediate"

// Open opens (creating it and its parent directory, mode 0700, when missing) the state
// database at path and brings its schema up to date. Every failure wraps ErrUnavailable
// and names the file, except an invalid Options value. A file that is not a SQLite
// database is refused without being modified.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	warmSkip.Store(true) // a warm-up that has not started would only compete with this open
	defaults, err := kernel.ValidateEnabledToolNamespaces(opts.DefaultNamespaces)
	if err != nil {
		return nil, fmt.Errorf("open state database: default namespaces: %w", err)
	}
	jscompat.SortLocale(defaults)

	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, unavailable(path, err)
	}
	if err := prepareFile(abs); err != nil {
		return nil, unavailable(abs, err)
	}
	db, err := sql.Open("sqlite", dsn(abs, dsnParams))
	if err != nil {
		return nil, unavailable(abs, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(4)
	if err := migrateRetrying(ctx, db); err != nil {
		db.Close()
		return nil, unavailable(abs, err)
	}
	st := &Store{db: db, path: abs, defaults: defaults, now: time.Now}
	switch opts.AuditSpool {
	case SpoolPrivate:
		if err := st.EnableSpool(); err != nil {
			_ = st.Close()
			return nil, unavailable(abs, err)
		}
	case SpoolShared:
		st.EnableSharedSpool()
	}
	return st, nil
}

// Path returns the absolute path of the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database. Calls after Close fail.
func (s *Store) Close() error {
	var errs []error
	errs = append(errs, s.closeSpool(), s.closeShared())
	// A closed store answers nothing, not even from its cache.
	s.sel.forget()
	s.durableOnce.Do(func() { s.durableErr = errors.New("the store is closed") }) // no durable pool after Close
	if s.durableDB != nil {
		errs = append(errs, s.durableDB.Close())
	}
	s.stmtMu.Lock()
	for _, st := range s.stmts {
		errs = append(errs, st.Close())
	}
	s.stmts = nil
	s.stmtMu.Unlock()
	errs = append(errs, s.db.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close state database %s: %w", s.path, err)
	}
	return nil
}

// durable returns the pool of durable connections (see Store), opening it on first use.
func (s *Store) durable() (*sql.DB, error) {
	s.durableOnce.Do(func() {
		db, err := sql.Open("sqlite", dsn(s.path, durableParams))
		if err != nil {
			s.durableErr = fmt.Errorf("state database %s: %w", s.path, err)
			return
		}
		db.SetMaxOpenConns(8)
		db.SetMaxIdleConns(4)
		s.durableDB = db
	})
	return s.durableDB, s.durableErr
}

// beginDurable begins an immediate transaction on a durable connection.
func (s *Store) beginDurable(ctx context.Context) (*sql.Tx, error) {
	db, err := s.durable()
	if err != nil {
		return nil, err
	}
	// A durable write records an effect: the write-ahead records spooled before it (its
	// decision, say) come first in the trail.
	if err := s.ingestOwn(ctx); err != nil {
		return nil, err
	}
	if err := s.flushOwnShared(ctx); err != nil {
		return nil, err
	}
	return db.BeginTx(ctx, nil) // immediate (see dsnParams)
}

// prepared returns query prepared on db (the write-ahead pool; database/sql prepares it
// again on each connection that runs it), preparing it on first use: the statements of
// the hot paths (one per operation of a long-lived session) are parsed once, not per
// call. A failed prepare is retried by the next call. Only for statements that return no
// rows: with the selection read prepared this way, a session's calls slowed down steadily
// (0.45 ms to 2.6 ms per call over a few thousand calls; measured, cause not pinned down —
// a query statement left unreset keeping a read snapshot open would do it), so queries
// are not.
func (s *Store) prepared(ctx context.Context, query string) (*sql.Stmt, error) {
	s.stmtMu.Lock()
	defer s.stmtMu.Unlock()
	if st := s.stmts[query]; st != nil {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if s.stmts == nil {
		s.stmts = map[string]*sql.Stmt{}
	}
	s.stmts[query] = st
	return st, nil
}

// lightInsert is the audit insert prepared on the write-ahead pool.
func (s *Store) lightInsert(ctx context.Context) (*sql.Stmt, error) {
	return s.prepared(ctx, insertAuditSQL)
}

func unavailable(path string, err error) error {
	return fmt.Errorf("open state database %s: %w: %w", path, ErrUnavailable, err)
}

// dsn builds the driver's URI for an absolute path; the characters a SQLite URI treats
// specially in a path are escaped.
func dsn(abs, params string) string {
	p := filepath.ToSlash(abs)
	if runtime.GOOS == "windows" && !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	p = strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
	return "file:" + p + params
}

// prepareFile creates the parent directory and an empty database file (mode 0600, so the
// WAL files SQLite creates beside it get the same mode) when they are missing, and refuses
// anything that is not a regular file starting with a valid SQLite header. It never writes
// to an existing file.
func prepareFile(abs string) error {
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return fmt.Errorf("create directory: %w", err)
	}
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f.Close()
	}
	if !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	f, err = os.Open(abs)
	if err != nil {
		return err
	}
	defer f.Close()
	var hdr [100]byte
	n, err := io.ReadFull(f, hdr[:])
	if n == 0 && (err == io.EOF || err == nil) {
		return nil // an empty file is an empty database
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		return err
	}
	if n < len(hdr) || !validHeader(hdr) {
		return errors.New("file is not a SQLite database")
	}
	return nil
}

// validHeader mirrors the checks SQLite makes on a database header before using it
// (https://www.sqlite.org/fileformat.html#the_database_header).
func validHeader(h [100]byte) bool {
	if !bytes.Equal(h[:16], []byte("SQLite format 3\x00")) {
		return false
	}
	ps := int(h[16])<<8 | int(h[17])
	if ps == 1 {
		ps = 65536
	}
	if ps < 512 || ps&(ps-1) != 0 {
		return false
	}
	if h[18] < 1 || h[18] > 2 || h[19] < 1 || h[19] > 2 {
		return false
	}
	return h[21] == 64 && h[22] == 32 && h[23] == 32
}

// migrations are the schema versions: migrations[i] brings user_version i to i+1.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE namespace_settings (
	world      TEXT NOT NULL,
	owner      TEXT NOT NULL,
	selection  TEXT NOT NULL,
	PRIMARY KEY (world, owner)
) WITHOUT ROWID;

CREATE TABLE grant_usage (
	world    TEXT NOT NULL,
	grant_id TEXT NOT NULL,
	uses     INTEGER NOT NULL CHECK (uses >= 0),
	PRIMARY KEY (world, grant_id)
) WITHOUT ROWID;

CREATE TABLE audit_events (
	seq          INTEGER PRIMARY KEY,
	id           TEXT NOT NULL UNIQUE,
	type         TEXT NOT NULL,
	outcome      TEXT NOT NULL,
	at           TEXT NOT NULL,
	at_ms        INTEGER,
	tool         TEXT NOT NULL,
	operation_id TEXT NOT NULL,
	trace_id     TEXT NOT NULL,
	world        TEXT NOT NULL,
	event        TEXT NOT NULL
);
CREATE INDEX audit_events_type ON audit_events (type);
CREATE INDEX audit_events_outcome ON audit_events (outcome);
CREATE INDEX audit_events_at ON audit_events (at_ms);
CREATE INDEX audit_events_tool ON audit_events (tool);
CREATE INDEX audit_events_operation ON audit_events (operation_id);
CREATE INDEX audit_events_trace ON audit_events (trace_id);
CREATE INDEX audit_events_world ON audit_events (world);
CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit events are append-only'); END;

CREATE TABLE escalations (
	seq        INTEGER PRIMARY KEY,
	world      TEXT NOT NULL,
	owner      TEXT NOT NULL,
	trace_id   TEXT NOT NULL,
	call_id    TEXT NOT NULL,
	escalation TEXT NOT NULL
);
CREATE INDEX escalations_world_owner ON escalations (world, owner);

CREATE TABLE snapshots (
	seq        INTEGER PRIMARY KEY,
	root       TEXT NOT NULL,
	path       TEXT NOT NULL,
	id         TEXT NOT NULL,
	kind       TEXT NOT NULL,
	label      TEXT,
	created_ms INTEGER NOT NULL,
	entries    TEXT NOT NULL,
	UNIQUE (root, path, id)
);
CREATE INDEX snapshots_list ON snapshots (root, path, created_ms DESC, seq DESC);
`,
	// 2: snapshots belong to the world and owner that took them. Snapshots recorded
	// before (world and owner unknown) keep world = owner = '' and so belong to no
	// context: they can no longer be listed or restored, never by the wrong owner.
	`
CREATE TABLE snapshots_v2 (
	seq        INTEGER PRIMARY KEY,
	world      TEXT NOT NULL,
	owner      TEXT NOT NULL,
	root       TEXT NOT NULL,
	path       TEXT NOT NULL,
	id         TEXT NOT NULL,
	kind       TEXT NOT NULL,
	label      TEXT,
	created_ms INTEGER NOT NULL,
	entries    TEXT NOT NULL,
	UNIQUE (world, owner, root, path, id)
);
INSERT INTO snapshots_v2 (seq, world, owner, root, path, id, kind, label, created_ms, entries)
	SELECT seq, '', '', root, path, id, kind, label, created_ms, entries FROM snapshots;
DROP TABLE snapshots;
ALTER TABLE snapshots_v2 RENAME TO snapshots;
CREATE INDEX snapshots_list ON snapshots (world, owner, root, path, created_ms DESC, seq DESC);
`,
	// 3: escalation resolutions (at most one per escalation, never updated or deleted).
	`
CREATE TABLE escalation_resolutions (
	escalation  INTEGER PRIMARY KEY REFERENCES escalations (seq),
	status      TEXT NOT NULL CHECK (status IN ('approved', 'denied')),
	resolved_by TEXT NOT NULL,
	resolved_at TEXT NOT NULL,
	note        TEXT NOT NULL
);
CREATE TRIGGER escalation_resolutions_no_update BEFORE UPDATE ON escalation_resolutions
BEGIN SELECT RAISE(ABORT, 'escalation resolutions are append-only'); END;
CREATE TRIGGER escalation_resolutions_no_delete BEFORE DELETE ON escalation_resolutions
BEGIN SELECT RAISE(ABORT, 'escalation resolutions are append-only'); END;
`,
	// 4: use counters belong to a grant's identity (world, issuer, subject, id), not to
	// (world, id): another subject's grant with the same id no longer spends this one's
	// uses. Counts recorded before were shared by every grant of that (world, id); they
	// are kept, frozen, and still count against each such grant (a use spent is never
	// given back), so the upgrade frees no use.
	`
ALTER TABLE grant_usage RENAME TO grant_usage_legacy;
CREATE TABLE grant_usage (
	world    TEXT NOT NULL,
	issuer   TEXT NOT NULL,
	subject  TEXT NOT NULL,
	grant_id TEXT NOT NULL,
	uses     INTEGER NOT NULL CHECK (uses >= 0),
	PRIMARY KEY (world, issuer, subject, grant_id)
) WITHOUT ROWID;
`,
	// The content digests of large files (kernel.FileDigestCache): one entry per file
	// (device, inode), replaced when the file is hashed again. A cache only: losing an
	// entry costs a re-hash, and the files plane decides when an entry can be trusted.
	`
CREATE TABLE file_digests (
	dev         INTEGER NOT NULL,
	ino         INTEGER NOT NULL,
	size        INTEGER NOT NULL,
	mtime_ns    INTEGER NOT NULL,
	ctime_ns    INTEGER NOT NULL,
	digest      BLOB NOT NULL CHECK (length(digest) = 32),
	recorded_ns INTEGER NOT NULL,
	PRIMARY KEY (dev, ino)
) WITHOUT ROWID;
`,
	// gateway: the upstream tool lists of configured MCP servers (spec 60 §3), keyed by
	// the server's config digest and the owner; a cache, never authority.
	`
CREATE TABLE gateway_catalogs (
	key       TEXT PRIMARY KEY,
	stored_ms INTEGER NOT NULL,
	tools     TEXT NOT NULL
) WITHOUT ROWID;
`,
	// Every call writes its audit records, and each index of audit_events costs the
	// pages it touches in every commit. The four on columns with a handful of values
	// (type, outcome, world) or that are filtered only together with others (tool) cost
	// more per write than they save per read: a filtered listing walks seq from the
	// newest and stops at its limit. The time, operation and trace indexes stay.
	`
DROP INDEX IF EXISTS audit_events_type;
DROP INDEX IF EXISTS audit_events_outcome;
DROP INDEX IF EXISTS audit_events_tool;
DROP INDEX IF EXISTS audit_events_world;
`,
	// mailbox: messages between principals (spec 80 §4), one row each, pending until
	// answered or failed; (world, id) is the message's identity.
	`
CREATE TABLE messages (
	seq         INTEGER PRIMARY KEY AUTOINCREMENT,
	world       TEXT NOT NULL,
	id          TEXT NOT NULL,
	sender      TEXT NOT NULL,
	receiver    TEXT NOT NULL,
	envelope    TEXT NOT NULL,
	accepted_at TEXT NOT NULL,
	status      TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'answered', 'failed')),
	reply       TEXT,
	failed_code TEXT,
	resolved_at TEXT,
	UNIQUE (world, id)
);
CREATE INDEX messages_receiver ON messages (world, receiver, status);
CREATE INDEX messages_sender ON messages (world, sender, status);
`,
	// idempotency: the responses of requests sent with an Idempotency-Key (serve's
	// POST /v1/tools/invoke), by (scope, key); status 0 while the first request runs.
	`
CREATE TABLE idempotency (
	scope       TEXT NOT NULL,
	key         TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	claimed_ms  INTEGER NOT NULL,
	status      INTEGER NOT NULL,
	body        BLOB,
	PRIMARY KEY (scope, key)
) WITHOUT ROWID;
CREATE INDEX idempotency_claimed ON idempotency (claimed_ms);
`,
	// the lease and fencing token of an idempotency claim (store.LeasedIdempotency): the
	// claim's epoch, its last renewal (NULL: claimed_ms) and whether it spent a use
	`
ALTER TABLE idempotency ADD COLUMN epoch INTEGER NOT NULL DEFAULT 1;
ALTER TABLE idempotency ADD COLUMN held_ms INTEGER;
ALTER TABLE idempotency ADD COLUMN spent INTEGER NOT NULL DEFAULT 0;
`,
}

// busyWait bounds how long Open retries a first connection refused with SQLITE_BUSY; it
// matches the busy timeout.
const busyWait = 10 * time.Second

// migrateRetrying runs migrate, retrying while it fails with SQLITE_BUSY. SQLite does not
// call the busy handler for one case that concerns us: the first connections to a fresh
// file all run journal_mode(WAL), which reads page 1 and then upgrades to a write lock to
// mark the file as WAL, and a read-to-write upgrade fails at once when another connection
// holds a lock (waiting could deadlock). Once the file is in WAL mode, journal_mode(WAL)
// only reads, so this only happens while the file is being created.
func migrateRetrying(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(busyWait)
	pause := 2 * time.Millisecond
	for {
		err := migrate(ctx, db)
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(pause + rand.N(pause))
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// isBusy reports whether err is SQLite's SQLITE_BUSY (any extended code).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// migrate brings the schema to the latest version. The fast path only reads user_version;
// otherwise the version is read again under the write lock (BEGIN IMMEDIATE), so when many
// processes open a fresh file at once exactly one of them creates the schema.
func migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	latest := len(migrations)
	v, err := userVersion(ctx, conn)
	if err != nil {
		return err
	}
	if v == latest {
		return checkAppID(ctx, conn)
	}
	if v > latest {
		return fmt.Errorf("schema version %d is newer than this build supports (%d)", v, latest)
	}
	tx, err := conn.BeginTx(ctx, nil) // immediate: takes the write lock
	if err != nil {
		return fmt.Errorf("begin migration: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	switch {
	case v == latest:
		return checkAppID(ctx, tx)
	case v > latest:
		return fmt.Errorf("schema version %d is newer than this build supports (%d)", v, latest)
	case v == 0:
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		if n > 0 {
			return errors.New("not a sharedos state database (it has tables but no schema version)")
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
			return fmt.Errorf("set application id: %w", err)
		}
	default:
		if err := checkAppID(ctx, tx); err != nil {
			return err
		}
	}
	for i := v; i < latest; i++ {
		if _, err := tx.ExecContext(ctx, migrations[i]); err != nil {
			return fmt.Errorf("migrate schema to version %d: %w", i+1, err)
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", latest)); err != nil {
		return fmt.Errorf("set schema version: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit migration: %w", err)
	}
	return nil
}

func userVersion(ctx context.Context, conn *sql.Conn) (int, error) {
	var v int
	if err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func checkAppID(ctx context.Context, q queryRower) error {
	var id int64
	if err := q.QueryRowContext(ctx, "PRAGMA application_id").Scan(&id); err != nil {
		return fmt.Errorf("read application id: %w", err)
	}
	if id != applicationID {
		return fmt.Errorf("not a sharedos state database (application id %#x)", id)
	}
	return nil
}
