package cmd

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/host"
)

func newStoreCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "store",
		Short: "Manage the state database (migrate a PostgreSQL store)",
		Long: `The state database keeps the namespace selections, the use counters of bounded grants,
the audit trail, the escalations and the snapshot index. By default it is a SQLite file
(--state FILE), which migrates itself when a command opens it. A PostgreSQL database
(--state postgres://…, or SHAREDOS_STATE) is shared by several hosts; its schema changes
only when an operator runs 'sharedos store migrate', and every other command refuses a
schema that is not this build's.`,
		Example: `  sharedos store migrate --state postgres://sharedos@db.internal:5432/sharedos`,
	}
	c.AddCommand(newStoreMigrateCmd(f, nil))
	return c
}

// StoreMigrateOptions are the options of `store migrate`.
type StoreMigrateOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	// State resolves the store to migrate: --state, else SHAREDOS_STATE, else the config
	// file's state, else the default.
	State func() (string, error)
	// Migrate migrates the store a DSN names.
	Migrate func(ctx context.Context, state string) (host.MigrateResult, error)
}

// newStoreMigrateCmd builds `store migrate`; runF, when set, replaces the run.
func newStoreMigrateCmd(f *Factory, runF func(*StoreMigrateOptions) error) *cobra.Command {
	opts := &StoreMigrateOptions{IO: f.IOStreams, Printer: f.Printer,
		State: func() (string, error) {
			s, err := f.Settings()
			if err != nil {
				return "", err
			}
			return s.State, nil
		},
		Migrate: host.MigrateState}
	return &cobra.Command{
		Use:   "migrate",
		Short: "Bring the schema of a PostgreSQL state database up to this build's",
		Long: `Apply every pending migration of the PostgreSQL store --state names, in order, each once
(replicas or operators migrating at the same time wait for one another). A database whose
schema is newer than this build's is refused and left as it is. A SQLite state database
needs no command: it migrates itself when it is opened.`,
		Example: `  sharedos store migrate --state postgres://sharedos@db.internal:5432/sharedos
  SHAREDOS_STATE=postgres://sharedos@db.internal/sharedos sharedos store migrate -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runStoreMigrate(c.Context(), opts)
		},
	}
}

func runStoreMigrate(ctx context.Context, opts *StoreMigrateOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	state, err := opts.State()
	if err != nil {
		return err
	}
	res, err := opts.Migrate(ctx, state)
	if err != nil {
		return hostError(err)
	}
	if p.format != FormatTable {
		return p.data(res)
	}
	if len(res.Applied) == 0 {
		p.line("%s is at schema version %d: nothing to migrate", res.State, res.To)
		return nil
	}
	p.line("migrated %s from schema version %d to %d (%s)", res.State, res.From, res.To, strings.Join(res.Applied, ", "))
	return nil
}
