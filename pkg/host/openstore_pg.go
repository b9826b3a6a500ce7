package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// The PostgreSQL store: Settings.State a postgres:// (or postgresql://) DSN instead of a
// file. It is opened here, where the host opens a store; its local files (the grant
// cache, the snapshot blobs) live in Settings.LocalDir(), which a surface sets apart from
// the DSN (Settings.StateDir). It has no files of its own beside a database (no spool,
// no selection stamp) for the trust boundary to guard.

// IsPostgresState reports whether state (Settings.State) names a PostgreSQL database.
func IsPostgresState(state string) bool { return pgstore.IsDSN(state) }

// postgresStateHint is the hint of a PostgreSQL store that cannot be opened.
const postgresStateHint = "check that the PostgreSQL server is reachable and its schema is this build's (sharedos store migrate --state …)"

// openPostgresState opens the PostgreSQL store of s. It does not migrate: a schema behind
// this build's (or newer) is refused (sharedos store migrate). A store that could not be
// opened is an *Error of KindState; an invalid defaultNamespaces one of KindConfig.
//
// A long-lived server (WorkloadServer: serve, mcp --listen, mcp) opens a schema behind
// this build's all the same: its /readyz names the pending migrations (503) until
// `sharedos store migrate` applies them, and it is ready then without a restart — a new
// build rolled out before the migration waits for it instead of crash-looping.
func openPostgresState(ctx context.Context, s *Settings, w Workload) (store.State, error) {
	st, err := pgstore.Open(ctx, s.State, pgstore.Options{DefaultNamespaces: s.DefaultNamespaces, AllowPending: w == WorkloadServer})
	if err != nil {
		if !errors.Is(err, store.ErrUnavailable) {
			return nil, &Error{Kind: KindConfig, Hint: "defaultNamespaces must list namespace identifiers", Message: err.Error(), Err: err}
		}
		return nil, &Error{Kind: KindState, Message: err.Error(), Hint: postgresStateHint, Err: err}
	}
	return st, nil
}

// MigrateResult says what MigrateState did.
type MigrateResult struct {
	// State names the store (a DSN without its password).
	State string `json:"state"`
	// From and To are the schema versions before and after.
	From int64 `json:"from"`
	To   int64 `json:"to"`
	// Applied are the migrations applied, in order (none when the schema was up to date).
	Applied []string `json:"applied"`
}

// MigrateState brings the schema of the PostgreSQL store state names up to this build's
// (each pending migration once, whatever other processes migrate at the same time). A
// state that is not a PostgreSQL DSN is a KindUsage error: the SQLite store migrates
// itself when it is opened. A store that cannot be reached or migrated, or whose schema
// is newer than this build's, is a KindState error and is left as it was.
func MigrateState(ctx context.Context, state string) (MigrateResult, error) {
	if !IsPostgresState(state) {
		return MigrateResult{}, &Error{Kind: KindUsage, Message: fmt.Sprintf("store migrate: %s is not a PostgreSQL database", state),
			Hint: "pass --state postgres://…; the SQLite state database migrates itself when a command opens it"}
	}
	res, err := pgstore.Migrate(ctx, state)
	out := MigrateResult{State: pgstore.Redact(state), From: res.From, To: res.To, Applied: res.Applied}
	if out.Applied == nil {
		out.Applied = []string{}
	}
	if err != nil {
		hint := postgresStateHint
		if errors.Is(err, pgstore.ErrSchemaNewer) {
			hint = "the database was migrated by a newer sharedos: run that version (or newer)"
		}
		return out, &Error{Kind: KindState, Message: err.Error(), Hint: hint, Err: err}
	}
	return out, nil
}
