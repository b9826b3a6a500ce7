package host

import (
	"context"
	"errors"

	"github.com/sharedos/sharedos/pkg/sqlitestore"
	"github.com/sharedos/sharedos/pkg/store"
)

// This file is the one place the host opens a store and names a store's own package:
// the rest of the host sees store.State. A second store (another backend behind
// Settings.State) is added here: OpenState picks it, warmState warms it, stateFiles
// names the files of it that the trust boundary guards.

// Workload says how the process that opens a store uses it, so that each store writes
// its write-ahead records the way that suits it (SQLite: committed one by one, through a
// private spool, or appended to the database's shared spool). Durable writes are the same
// whatever it says.
type Workload int

// Workloads.
const (
	// WorkloadEach: every record is committed as it is written (the scenario runner,
	// a library user).
	WorkloadEach Workload = iota
	// WorkloadCommand: a short-lived process (a CLI command): a command that changes
	// nothing writes nothing to the database and the store syncs nothing when it exits
	// (SQLite: the shared spool).
	WorkloadCommand
	// WorkloadServer: a long-lived surface answering many calls (mcp, mcp --listen):
	// write-ahead records are written in batches (SQLite: a spool of the process) instead
	// of one commit per call; readers of the trail see them all the same.
	WorkloadServer
)

// OpenState opens the store of s (s.State, with s.DefaultNamespaces) for workload w. It
// does not check the trust boundary (CheckStateBoundary does). A store that could not be
// opened is an *Error of KindState; an invalid defaultNamespaces one of KindConfig.
func OpenState(ctx context.Context, s *Settings, w Workload) (store.State, error) {
	if IsPostgresState(s.State) {
		return openPostgresState(ctx, s, w)
	}
	spool := sqlitestore.SpoolNone
	switch w {
	case WorkloadCommand:
		spool = sqlitestore.SpoolShared
	case WorkloadServer:
		spool = sqlitestore.SpoolPrivate
	}
	st, err := sqlitestore.Open(ctx, s.State, sqlitestore.Options{DefaultNamespaces: s.DefaultNamespaces, AuditSpool: spool})
	if err != nil {
		if !errors.Is(err, store.ErrUnavailable) {
			return nil, &Error{Kind: KindConfig, Hint: "defaultNamespaces must list namespace identifiers", Message: err.Error(), Err: err}
		}
		return nil, stateError(err, s.State)
	}
	return st, nil
}

// warmState starts the store's warm-up (SQLite: the library initialised in memory on
// another goroutine), as soon as the host knows it will open s's store.
func warmState(s *Settings) {
	if !IsPostgresState(s.State) {
		sqlitestore.WarmUp()
	}
}

// boundaryItem is a path the trust boundary keeps out of the root; with dir, the root
// must not lie inside it either.
type boundaryItem struct {
	what, path string
	dir        bool
}

// stateFiles are the files of s's store besides the database that the trust boundary
// keeps out of the root: SQLite's spool and selection stamp — an agent that could write there
// could forge the audit records of an MCP server (the spool) or hide a namespace change
// from its next call (the stamp). A PostgreSQL store has no local file.
func stateFiles(s *Settings) []boundaryItem {
	if IsPostgresState(s.State) {
		return nil // a database on a server: no local file of it for an agent to reach
	}
	return []boundaryItem{{"audit spool", sqlitestore.SpoolDir(s.State), true},
		{"namespace selection stamp", sqlitestore.SelectionStampPath(s.State), false}}
}
