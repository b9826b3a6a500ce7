package cmd

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// EventEscalationResolved is the audit type of `escalations resolve`: the kernel's
// escalation.resolved event, written by the kernel (kernel.Turn.RecordEscalationResolution,
// through host.Escalations.Resolve) in the same transaction as the resolution.
const EventEscalationResolved = string(kernel.EventEscalationResolved)

// escalationStatuses is the closed vocabulary of --status.
var escalationStatuses = []string{store.EscalationPending, store.EscalationApproved, store.EscalationDenied}

func newEscalationsCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "escalations",
		Short: "List and resolve the escalations agents recorded (asks for a human decision)",
		Example: `  sharedos escalations list --status pending
  sharedos escalations resolve 3 --deny --note "not before the release"`,
		Args: noArgs,
	}
	c.AddCommand(newEscalationsListCmd(f), newEscalationsResolveCmd(f))
	return c
}

// EscalationsListOptions are the options of `escalations list`.
type EscalationsListOptions struct {
	f      *Factory
	Limit  int
	Status string
	All    bool
}

func newEscalationsListCmd(f *Factory) *cobra.Command {
	opts := &EscalationsListOptions{f: f}
	c := &cobra.Command{
		Use:   "list",
		Short: "List recorded escalations, newest first",
		Long: `List recorded escalations, newest first: those of the context's (world, owner) — the
grant files' context, --world and --owner — or, with --all, of every world and owner.
The ID column is what 'sharedos escalations resolve' takes.`,
		Example: `  sharedos escalations list
  sharedos escalations list --status pending -o json
  sharedos escalations list --all --limit 10`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runEscalationsList(c.Context(), opts) },
	}
	c.Flags().IntVar(&opts.Limit, "limit", 0, "at most this many (0: all)")
	c.Flags().StringVar(&opts.Status, "status", "", "only escalations of this status: "+strings.Join(escalationStatuses, ", "))
	c.Flags().BoolVar(&opts.All, "all", false, "escalations of every world and owner, not only the context's")
	_ = c.RegisterFlagCompletionFunc("status", completeList(escalationStatuses))
	return c
}

// escalationRow is one escalation with where it was recorded and its resolution.
type escalationRow struct {
	ID int64 `json:"id"`
	kernel.Escalation
	World      string                      `json:"world"`
	Owner      kernel.Address              `json:"owner"`
	TraceID    string                      `json:"traceId"`
	CallID     string                      `json:"callId"`
	Resolution *store.EscalationResolution `json:"resolution,omitempty"`
}

func toRow(r store.EscalationRecord) escalationRow {
	return escalationRow{ID: r.ID, Escalation: r.Escalation, World: r.World, Owner: r.Owner, TraceID: r.TraceID,
		CallID: r.CallID, Resolution: r.Resolution}
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
	if opts.Status != "" {
		if err := checkVocabulary("status", []string{opts.Status}, escalationStatuses); err != nil {
			return err
		}
	}
	filter := store.EscalationFilter{Status: opts.Status, Limit: opts.Limit}
	if !opts.All {
		prep, err := f.prepared(host.Needs{})
		if err != nil {
			return err
		}
		filter.World, filter.Owner = prep.Context.World, prep.Context.Owner
	}
	db, err := f.Store(ctx)
	if err != nil {
		return err
	}
	recs, err := host.NewEscalations(db).List(ctx, filter)
	if err != nil {
		return stateError(err, stateHint(db.Path()))
	}
	rows := make([]escalationRow, len(recs))
	for i, r := range recs {
		rows[i] = toRow(r)
	}
	if p.format != FormatTable {
		return p.data(rows)
	}
	if len(rows) == 0 {
		if opts.All {
			return p.empty("no escalations recorded")
		}
		return p.empty("no escalations for owner " + filter.Owner.String() + " in world " + filter.World + " (--all lists every owner's)")
	}
	st := p.st()
	t := p.table("ID", "REQUESTED", "STATUS", "REVIEWER", "WORLD", "REASON").flexible(5)
	for _, r := range rows {
		status := cell{text: r.Status, style: &st.warn}
		switch r.Status {
		case store.EscalationApproved:
			status.style = &st.ok
		case store.EscalationDenied:
			status.style = &st.bad
		}
		t.rowCells(cell{text: strconv.FormatInt(r.ID, 10)}, cell{text: r.RequestedAt}, status,
			cell{text: r.Reviewer.String()}, cell{text: r.World}, cell{text: r.Reason})
	}
	return t.render()
}

// EscalationsResolveOptions are the options of `escalations resolve`.
type EscalationsResolveOptions struct {
	f       *Factory
	ID      string
	Approve bool
	Deny    bool
	Note    string
}

func newEscalationsResolveCmd(f *Factory) *cobra.Command {
	opts := &EscalationsResolveOptions{f: f}
	c := &cobra.Command{
		Use:   "resolve ID --approve|--deny [--note TEXT]",
		Short: "Record the reviewer's decision on an escalation (grants nothing)",
		Long: `Record the decision on an escalation: --approve or --deny, with an optional --note. The
decision is made by the escalation's reviewer, the owner it was asked of, so the context's
(world, owner) must be the escalation's. It is recorded once (a resolution is never
changed; resolving again with the same decision changes nothing) and audited
(escalation.resolved). Resolving grants nothing: to let the agent make the call, add the
grant that 'sharedos explain … --print-grant' prints to its grant file.`,
		Example: `  sharedos escalations resolve 3 --approve --note "go ahead, grant added"
  sharedos escalations resolve 4 --deny --note "not before the release" -o json`,
		Args: exactArgs(1, "one escalation ID (the ID column of 'sharedos escalations list')"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			return runEscalationsResolve(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.Approve, "approve", false, "approve the escalation")
	c.Flags().BoolVar(&opts.Deny, "deny", false, "deny the escalation")
	c.Flags().StringVar(&opts.Note, "note", "", "a note for the record (e.g. why)")
	c.MarkFlagsMutuallyExclusive("approve", "deny")
	c.MarkFlagsOneRequired("approve", "deny")
	return c
}

func runEscalationsResolve(ctx context.Context, opts *EscalationsResolveOptions) error {
	f := opts.f
	p, err := f.Printer()
	if err != nil {
		return err
	}
	id, err := strconv.ParseInt(opts.ID, 10, 64)
	if err != nil || id < 1 {
		return usageError("pass the ID column of 'sharedos escalations list'", "invalid escalation ID %q: want a positive number", opts.ID)
	}
	status := store.EscalationApproved
	if opts.Deny {
		status = store.EscalationDenied
	}
	// The reviewer's turn: the context's (world, owner) decides, at its instant. The
	// escalation service checks, and the kernel records the decision (escalation.resolved)
	// with the store's resolution, in one transaction.
	h, err := f.Host(ctx, host.Needs{})
	if err != nil {
		return err
	}
	done, err := h.Escalations().Resolve(ctx, h.Turn, host.Resolution{ID: id, Decision: status, Note: opts.Note, Source: "cli"})
	var notReviewer *host.NotReviewerError
	switch {
	case err == nil:
		return printResolution(p, toRow(done))
	case errors.Is(err, store.ErrNotFound):
		return usageError("'sharedos escalations list --all' lists every escalation with its ID", "no escalation %d is recorded", id)
	case errors.As(err, &notReviewer):
		rec := notReviewer.Record
		return usageError("pass --owner "+rec.Owner.String()+" --world "+rec.World+" (or the grant file of that context)", "%v", err)
	case errors.Is(err, store.ErrAlreadyResolved) && done.Resolution != nil && done.Resolution.Status == status:
		warn(f.IOStreams, "escalation %d was already %s by %s at %s; nothing changed", id, status, done.Resolution.ResolvedBy, done.Resolution.ResolvedAt)
		return printResolution(p, toRow(done))
	case errors.Is(err, store.ErrAlreadyResolved) && done.Resolution != nil:
		return usageError("a resolution is never changed; record a new decision in the grant file instead",
			"escalation %d was already %s by %s at %s", id, done.Resolution.Status, done.Resolution.ResolvedBy, done.Resolution.ResolvedAt)
	}
	return stateError(err, stateHint(h.Settings.State))
}

func printResolution(p *printer, r escalationRow) error {
	if p.format != FormatTable {
		return p.data(r)
	}
	st := p.st()
	style := &st.ok
	if r.Status == store.EscalationDenied {
		style = &st.bad
	}
	p.line("%s escalation %d: %s", p.styled(cell{text: r.Status, style: style}), r.ID, r.Reason)
	p.line("resolved by %s at %s", r.Resolution.ResolvedBy, r.Resolution.ResolvedAt)
	if r.Resolution.Note != "" {
		p.line("note: %s", r.Resolution.Note)
	}
	p.line("hint: nothing was granted; to allow the call, add the grant 'sharedos explain TOOL … --print-grant' prints to the grant file")
	return nil
}
