package cmd

import (
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// EventEscalationResolved is the audit type of `escalations resolve`: the kernel's
// escalation.resolved event, written by the kernel (kernel.Turn.RecordEscalationResolution,
// through host.Escalations.Resolve) in the same transaction as the resolution.
const EventEscalationResolved = string(kernel.EventEscalationResolved)

// escalationStatuses is the closed vocabulary of --status.
var escalationStatuses = []string{api.EscalationPending, api.EscalationApproved, api.EscalationDenied}

func newEscalationsCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "escalations",
		Short: "List and resolve the escalations agents recorded (asks for a human decision)",
		Example: `  sharedos escalations list --status pending
  sharedos escalations resolve 3 --deny --note "not before the release"`,
		Args: noArgs,
	}
	c.AddCommand(newEscalationsListCmd(f, nil), newEscalationsResolveCmd(f, nil))
	return c
}

// EscalationsListOptions are the options of `escalations list`.
type EscalationsListOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)

	Limit  int
	Status string
	All    bool
}

// newEscalationsListCmd builds `escalations list`; runF, when set, replaces the run.
func newEscalationsListCmd(f *Factory, runF func(*EscalationsListOptions) error) *cobra.Command {
	opts := &EscalationsListOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
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
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.Limit < 0 {
				return usageError("pass --limit 0 (all) or a positive number", "invalid --limit %d", opts.Limit)
			}
			if opts.Status != "" {
				if err := checkVocabulary("status", []string{opts.Status}, escalationStatuses); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return runEscalationsList(c.Context(), opts)
		},
	}
	c.Flags().IntVar(&opts.Limit, "limit", 0, "at most this many (0: all)")
	c.Flags().StringVar(&opts.Status, "status", "", "only escalations of this status: "+strings.Join(escalationStatuses, ", "))
	c.Flags().BoolVar(&opts.All, "all", false, "escalations of every world and owner, not only the context's")
	_ = c.RegisterFlagCompletionFunc("status", completeList(escalationStatuses))
	return c
}

func runEscalationsList(ctx context.Context, opts *EscalationsListOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	recs, err := svc.ListEscalations(ctx, api.EscalationQuery{All: opts.All, Status: opts.Status, Limit: opts.Limit})
	if err != nil {
		return serviceError(err)
	}
	if recs == nil {
		recs = []api.EscalationRecord{}
	}
	if p.format != FormatTable {
		return p.data(recs)
	}
	if len(recs) == 0 {
		if opts.All {
			return p.empty("no escalations recorded")
		}
		reg, err := svc.Registry(ctx)
		if err != nil {
			return serviceError(err)
		}
		return p.empty("no escalations for owner " + reg.Context.Owner.String() + " in world " + reg.Context.World + " (--all lists every owner's)")
	}
	st := p.st()
	t := p.table("ID", "REQUESTED", "STATUS", "REVIEWER", "WORLD", "REASON").flexible(5)
	for _, r := range recs {
		status := cell{text: r.Status, style: &st.warn}
		switch r.Status {
		case api.EscalationApproved:
			status.style = &st.ok
		case api.EscalationDenied:
			status.style = &st.bad
		}
		t.rowCells(cell{text: strconv.FormatInt(r.ID, 10)}, cell{text: r.RequestedAt}, status,
			cell{text: r.Reviewer.String()}, cell{text: r.World}, cell{text: r.Reason})
	}
	return t.render()
}

// EscalationsResolveOptions are the options of `escalations resolve`.
type EscalationsResolveOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)

	Approve bool
	Deny    bool
	Note    string
	// Request is the escalation's ID and the decision, as RunE checked them.
	Request api.ResolveRequest
}

// newEscalationsResolveCmd builds `escalations resolve`; runF, when set, replaces the
// run.
func newEscalationsResolveCmd(f *Factory, runF func(*EscalationsResolveOptions) error) *cobra.Command {
	opts := &EscalationsResolveOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
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
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id < 1 {
				return usageError("pass the ID column of 'sharedos escalations list'", "invalid escalation ID %q: want a positive number", args[0])
			}
			opts.Request = api.ResolveRequest{ID: id, Status: api.EscalationApproved, Note: opts.Note}
			if opts.Deny {
				opts.Request.Status = api.EscalationDenied
			}
			if runF != nil {
				return runF(opts)
			}
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

// runEscalationsResolve records the decision through the service: the reviewer's turn
// (the context's (world, owner), at its instant) is checked, and the kernel records the
// decision (escalation.resolved) with the store's resolution, in one transaction.
func runEscalationsResolve(ctx context.Context, opts *EscalationsResolveOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	done, err := svc.ResolveEscalation(ctx, opts.Request)
	if err != nil {
		return serviceError(err)
	}
	if done.Unchanged {
		res := done.Record.Resolution
		warn(opts.IO, "escalation %d was already %s by %s at %s; nothing changed", done.Record.ID, res.Status, res.ResolvedBy, res.ResolvedAt)
	}
	return printResolution(p, done.Record)
}

func printResolution(p *printer, r api.EscalationRecord) error {
	if p.format != FormatTable {
		return p.data(r)
	}
	st := p.st()
	style := &st.ok
	if r.Status == api.EscalationDenied {
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
