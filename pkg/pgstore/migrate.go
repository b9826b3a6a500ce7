package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"

	"github.com/sharedos/sharedos/pkg/store"
)

// VersionTable is the table of the schema's migration history (goose's version table).
const VersionTable = "sharedos_schema_version"

// SchemaVersion is the schema version this build writes: the version of its last
// migration.
var SchemaVersion = func() int64 {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(fmt.Sprintf("pgstore: the embedded migrations: %v", err))
	}
	var last int64
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			panic(fmt.Sprintf("pgstore: migration %s: %v", e.Name(), err))
		}
		last = max(last, v)
	}
	return last
}()

// MigrateResult says what Migrate did.
type MigrateResult struct {
	// From and To are the schema versions before and after (equal when nothing was to
	// do).
	From, To int64
	// Applied are the migrations applied, in order (their file names).
	Applied []string
}

// Migrate brings the schema of the database dsn names up to this build's: every pending
// migration, in order, each in a transaction, while holding a PostgreSQL advisory lock so
// that processes migrating at once apply each migration once. A schema newer than this
// build's is refused and left alone. Errors wrap store.ErrUnavailable and name the
// database (without a password).
func Migrate(ctx context.Context, dsn string) (MigrateResult, error) {
	name := Redact(dsn)
	pool, err := newPool(ctx, dsn)
	if err != nil {
		return MigrateResult{}, unavailable(name, err)
	}
	defer pool.Close()
	res, err := migrate(ctx, pool)
	if err != nil {
		return res, unavailable(name, err)
	}
	return res, nil
}

// provider is goose's migration provider of the embedded files on pool.
func provider(pool *pgxpool.Pool) (*goose.Provider, error) {
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	st, err := database.NewStore(database.DialectPostgres, VersionTable)
	if err != nil {
		return nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	opts := []goose.ProviderOption{goose.WithStore(st), goose.WithSessionLocker(locker), goose.WithDisableGlobalRegistry(true)}
	return goose.NewProvider("", stdlib.OpenDBFromPool(pool), files, opts...)
}

func migrate(ctx context.Context, pool *pgxpool.Pool) (MigrateResult, error) {
	from, err := schemaVersion(ctx, pool)
	if err != nil {
		return MigrateResult{}, err
	}
	res := MigrateResult{From: from, To: from}
	if from > SchemaVersion {
		return res, newerError(from)
	}
	if from == SchemaVersion {
		return res, nil
	}
	p, err := provider(pool)
	if err != nil {
		return res, fmt.Errorf("migrations: %w", err)
	}
	defer p.Close()
	results, err := p.Up(ctx)
	for _, r := range results {
		if r.Error == nil && r.Source != nil {
			res.Applied = append(res.Applied, r.Source.Path)
		}
	}
	if err != nil {
		return res, fmt.Errorf("migrate the schema from version %d: %w", from, err)
	}
	if res.To, err = schemaVersion(ctx, pool); err != nil {
		return res, err
	}
	return res, nil
}

// schemaVersion reads the schema version of the database (0 for a database without the
// version table: nothing was migrated).
//
// One statement in one round trip (the simple protocol: nothing prepared for a statement
// a command runs once); a missing version table is its error 42P01 (undefined table).
func schemaVersion(ctx context.Context, q querier) (int64, error) {
	var v *int64
	err := q.QueryRow(ctx, "SELECT max(version_id) FROM "+VersionTable+" WHERE is_applied", pgx.QueryExecModeSimpleProtocol).Scan(&v)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return 0, nil
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}

// checkSchema refuses a schema that is not this build's.
func checkSchema(ctx context.Context, q querier) error {
	v, err := schemaVersion(ctx, q)
	if err != nil {
		return err
	}
	switch {
	case v > SchemaVersion:
		return newerError(v)
	case v < SchemaVersion:
		return pendingError(v)
	}
	return nil
}

// pendingMigrations are the file names of the embedded migrations after version v, in
// order.
func pendingMigrations(v int64) []string {
	entries, _ := fs.ReadDir(migrationFiles, "migrations") // read at init (SchemaVersion)
	var out []string
	for _, e := range entries {
		if n, err := goose.NumericComponent(e.Name()); err == nil && n > v {
			out = append(out, e.Name())
		}
	}
	return out
}

// ErrSchemaNewer is wrapped when the database's schema is newer than this build's.
var ErrSchemaNewer = errors.New("schema is newer than this build")

func newerError(v int64) error {
	return fmt.Errorf("its %w (version %d, this build knows up to %d): upgrade sharedos", ErrSchemaNewer, v, SchemaVersion)
}

// pendingError is the error of a schema at version v, behind this build's: it wraps
// store.ErrMigrationPending and names the pending migrations, in one line.
func pendingError(v int64) error {
	return fmt.Errorf("%w: %s (schema version %d, this build needs %d): run `sharedos store migrate --state …`",
		store.ErrMigrationPending, strings.Join(pendingMigrations(v), ", "), v, SchemaVersion)
}
