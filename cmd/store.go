package cmd

import (
	"context"
	"strings"
	"time"

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
		Example: `  sharedos store migrate --state postgres://sharedos@db.internal:5432/sharedos
  sharedos store prune --retention 90d`,
	}
	c.AddCommand(newStoreMigrateCmd(f, nil), newStorePruneCmd(f, nil))
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

// StorePruneOptions are the options of `store prune`.
type StorePruneOptions struct {
	IO       *IOStreams
	Printer  func() (*printer, error)
	Settings func() (*Settings, error)
	Clock    func() time.Time
	// Retention is --retention ("": the config file's audit.retention).
	Retention string
	// Prune deletes the events of the store of s recorded before before.
	Prune func(ctx context.Context, s *host.Settings, before time.Time) (int64, error)
}

// newStorePruneCmd builds `store prune`; runF, when set, replaces the run.
func newStorePruneCmd(f *Factory, runF func(*StorePruneOptions) error) *cobra.Command {
	opts := &StorePruneOptions{IO: f.IOStreams, Printer: f.Printer, Settings: f.Settings, Clock: f.Clock, Prune: host.PruneAudit}
	c := &cobra.Command{
		Use:   "prune",
		Short: "Delete audit events older than the audit retention",
		Long: `Delete the audit events whose instant is older than the retention (--retention, else the
config file's audit.retention: a number of days such as 90d, or a duration such as 720h),
in batches. The events of an escalation still pending are kept whatever their age (those
of its world and trace, of its call when it names one), and so is an event whose instant
does not parse. Nothing else of the trail is ever deleted or changed.

Retention runs only when this command runs (schedule it: cron, a systemd timer, a
Kubernetes CronJob); serve never deletes on its own. It works on both stores: a
PostgreSQL database (one run for all replicas) and a SQLite file.`,
		Example: `  sharedos store prune --retention 90d
  sharedos store prune --state postgres://sharedos@db.internal/sharedos   # audit.retention from the config file`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Retention != "" {
				if _, err := parseRetention(opts.Retention); err != nil {
					return usageError("pass --retention as a number of days such as 90d, or a duration such as 720h", "invalid --retention: %v", err)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return runStorePrune(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.Retention, "retention", "", "keep this long: days (90d) or a duration (720h); default: the config file's audit.retention")
	return c
}

func runStorePrune(ctx context.Context, opts *StorePruneOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	s, err := opts.Settings()
	if err != nil {
		return err
	}
	keep := s.AuditRetention
	if opts.Retention != "" {
		keep, _ = parseRetention(opts.Retention)
	}
	if keep == 0 {
		return usageError("pass --retention 90d, or set audit.retention in the config file", "no audit retention is set")
	}
	before := opts.Clock().Add(-keep).UTC()
	n, err := opts.Prune(ctx, &s.Settings, before)
	if err != nil {
		return hostError(err)
	}
	if p.format != FormatTable {
		return p.data(map[string]any{"deleted": n, "before": before.Format(time.RFC3339)})
	}
	p.line("deleted %d audit events older than %s (events of pending escalations kept)", n, before.Format(time.RFC3339))
	return nil
}
