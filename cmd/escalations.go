package cmd

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

func newEscalationsCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "escalations",
		Short: "List the escalations agents recorded (asks for a human decision)",
		Args:  noArgs,
	}
	c.AddCommand(newEscalationsListCmd(f))
	return c
}

// EscalationsListOptions are the options of `escalations list`.
type EscalationsListOptions struct {
	f     *Factory
	Limit int
}

func newEscalationsListCmd(f *Factory) *cobra.Command {
	opts := &EscalationsListOptions{f: f}
	c := &cobra.Command{
		Use:   "list",
		Short: "List recorded escalations, newest first",
		Long: `List recorded escalations, newest first. With --world or --owner, only those of that
world or owner.`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runEscalationsList(c.Context(), opts) },
	}
	c.Flags().IntVar(&opts.Limit, "limit", 0, "at most this many (0: all)")
	return c
}

// escalationRow is one escalation with where it was recorded.
type escalationRow struct {
	kernel.Escalation
	World   string `json:"world"`
	TraceID string `json:"traceId"`
	CallID  string `json:"callId"`
}

func runEscalationsList(ctx context.Context, opts *EscalationsListOptions) error {
	f := opts.f
	p, err := f.Printer()
	if err != nil {
		return err
	}
	if opts.Limit < 0 {
		return usageError("pass --limit 0 (all) or a positive number", "invalid --limit %d", opts.Limit)
	}
	s, err := f.Settings()
	if err != nil {
		return err
	}
	filter := sqlitestore.EscalationFilter{World: s.World, Limit: opts.Limit}
	if s.Owner != "" {
		if filter.Owner, err = parseAddressFlag("owner", s.Owner); err != nil {
			return err
		}
	}
	store, err := f.Store(ctx)
	if err != nil {
		return err
	}
	recs, err := store.ListEscalations(ctx, filter)
	if err != nil {
		return stateError(err, stateHint(s.State))
	}
	rows := make([]escalationRow, len(recs))
	for i, r := range recs {
		rows[i] = escalationRow{Escalation: r.Escalation, World: r.World, TraceID: r.TraceID, CallID: r.CallID}
	}
	if p.format != FormatTable {
		return p.data(rows)
	}
	t := p.table("REQUESTED", "STATUS", "REVIEWER", "WORLD", "REASON")
	for _, r := range rows {
		t.row(r.RequestedAt, r.Status, r.Reviewer.String(), r.World, summary(r.Reason, 80))
	}
	return t.render()
}

// EventEscalationResolved is the audit type of `escalations resolve` (the CLI's own
// event: the kernel has no resolve operation).
const EventEscalationResolved = "escalation.resolved"
