package cmd

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

func newAuditCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit trail of the state database",
		Args:  noArgs,
	}
	c.AddCommand(newAuditListCmd(f))
	return c
}

// AuditListOptions are the options of `audit list`.
type AuditListOptions struct {
	f         *Factory
	Types     []string
	Outcomes  []string
	Tool      string
	Since     string
	Limit     int
	Operation string
}

func newAuditListCmd(f *Factory) *cobra.Command {
	opts := &AuditListOptions{f: f}
	c := &cobra.Command{
		Use:   "list",
		Short: "List audit events, newest first",
		Long: `List audit events, newest first. In table output a refusal shows the gate it came from
(registration, request, grant, ceiling, infrastructure). --trace limits the list to one run.`,
		Example: `  sharedos audit list --type tool.invoked --outcome denied --limit 5
  sharedos audit list --since 1h --tool files.read -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runAuditList(c.Context(), opts) },
	}
	c.Flags().StringSliceVar(&opts.Types, "type", nil, "event types (comma-separated), e.g. tool.invoked")
	c.Flags().StringSliceVar(&opts.Outcomes, "outcome", nil, "outcomes (comma-separated): allowed, denied, succeeded, failed, escalated")
	c.Flags().StringVar(&opts.Tool, "tool", "", "tool name")
	c.Flags().StringVar(&opts.Since, "since", "", "only events at or after this RFC 3339 instant, or this long ago (e.g. 1h)")
	c.Flags().IntVar(&opts.Limit, "limit", 100, "at most this many events (0: all)")
	c.Flags().StringVar(&opts.Operation, "operation", "", "only the events of this call id")
	return c
}

func runAuditList(ctx context.Context, opts *AuditListOptions) error {
	f := opts.f
	p, err := f.Printer()
	if err != nil {
		return err
	}
	s, err := f.Settings()
	if err != nil {
		return err
	}
	filter := sqlitestore.AuditFilter{Types: opts.Types, Outcomes: opts.Outcomes, Tool: opts.Tool,
		OperationID: opts.Operation, TraceID: s.Trace, World: s.World, Limit: opts.Limit}
	if opts.Limit < 0 {
		return usageError("pass --limit 0 (all) or a positive number", "invalid --limit %d", opts.Limit)
	}
	if opts.Since != "" {
		if ms, err := kernel.ParseTimestamp(opts.Since); err == nil {
			filter.SinceMillis = ms
		} else if d, err := time.ParseDuration(opts.Since); err == nil && d >= 0 {
			filter.SinceMillis = f.Clock().Add(-d).UnixMilli()
		} else {
			return usageError("pass an RFC 3339 instant (2026-08-03T09:00:00Z) or a duration (90m, 24h)", "invalid --since %q", opts.Since)
		}
	}
	store, err := f.Store(ctx)
	if err != nil {
		return err
	}
	events, err := store.ListAudit(ctx, filter)
	if err != nil {
		return stateError(err, stateHint(s.State))
	}
	if events == nil {
		events = []kernel.AuditEvent{}
	}
	if p.format != FormatTable {
		return p.data(events)
	}
	st := p.st()
	t := p.table("AT", "TYPE", "OUTCOME", "TOOL", "REASON", "GATE", "CALL")
	for _, ev := range events {
		oc := cell{text: string(ev.Outcome)}
		switch ev.Outcome {
		case kernel.OutcomeDenied, kernel.OutcomeFailed:
			oc.style = &st.bad
		case kernel.OutcomeEscalated:
			oc.style = &st.warn
		}
		reason := string(ev.Reason)
		if ev.Cause != "" && string(ev.Cause) != reason {
			reason += " (" + string(ev.Cause) + ")"
		}
		t.rowCells(cell{text: ev.At}, cell{text: string(ev.Type)}, oc, cell{text: dash(ev.Tool)},
			cell{text: dash(reason)}, cell{text: dash(string(kernel.ClassifyRefusal(ev)))}, cell{text: dash(shortID(ev.OperationID))})
	}
	return t.render()
}

func shortID(id string) string {
	if i := strings.IndexByte(id, '-'); i == 8 {
		return id[:8]
	}
	return id
}
