package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// auditTypes and auditOutcomes are the closed vocabularies of --type and --outcome.
var (
	auditTypes = []string{string(kernel.EventAuthorityResolved), string(kernel.EventAuthorizationChecked),
		string(kernel.EventToolInvoked), string(kernel.EventToolCatalogListed), string(kernel.EventEscalationRequested),
		string(kernel.EventNamespaceCatalogListed), string(kernel.EventNamespaceSelectionUpdated),
		string(kernel.EventResourceInvoked), string(kernel.EventTurnEnded), string(kernel.EventEscalationAutoDecided),
		string(kernel.EventMessageSent), EventEscalationResolved}
	auditOutcomes = []string{string(kernel.OutcomeAllowed), string(kernel.OutcomeDenied), string(kernel.OutcomeSucceeded),
		string(kernel.OutcomeFailed), string(kernel.OutcomeEscalated), string(kernel.OutcomeInterrupted)}
)

func newAuditCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "audit",
		Short: "Read the audit trail of the state database",
		Example: `  sharedos audit list --calls --outcome denied --limit 5
  sharedos audit list --operation 3f2a9c1e -o json`,
		Args: noArgs,
	}
	c.AddCommand(newAuditListCmd(f, nil), newAuditExportCmd(f, nil))
	return c
}

// AuditListOptions are the options of `audit list`.
type AuditListOptions struct {
	IO       *IOStreams
	Printer  func() (*printer, error)
	Service  func() (api.Service, error)
	Settings func() (*Settings, error)
	Clock    func() time.Time

	Types     []string
	Outcomes  []string
	Tool      string
	Since     string
	Limit     int
	Operation string
	Actor     string
	Calls     bool

	// SinceMillis and ActorAddr are Since and Actor as RunE checked them.
	SinceMillis int64
	ActorAddr   kernel.Address
}

// newAuditListCmd builds `audit list`; runF, when set, replaces the run.
func newAuditListCmd(f *Factory, runF func(*AuditListOptions) error) *cobra.Command {
	opts := &AuditListOptions{IO: f.IOStreams, Printer: f.Printer, Settings: f.Settings, Clock: f.Clock,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
	c := &cobra.Command{
		Use:   "list",
		Short: "List audit events, newest first",
		Long: `List audit events, newest first by the instant they record (the turn's instant, which
--now pins; events of one instant in the order they were recorded); --since filters on
the same instant. In table output a refusal shows the gate it came from (registration,
request, grant, ceiling, infrastructure).

Filters combine (all must hold): --type and --outcome take values of a closed list (a
typo is a usage error naming the valid ones); --operation takes a call id or a prefix of
one, such as the 8 characters the table shows (ambiguous prefixes are refused, listing
the matches); --owner, --actor, --world and --trace select by context. --calls keeps
only the tool invocations (tool.invoked), hiding the listing and explain records.`,
		Example: `  sharedos audit list --calls --outcome denied --limit 5
  sharedos audit list --since 1h --tool files.read -o json
  sharedos audit list --operation 3f2a9c1e
  sharedos audit list --owner human:alice --actor agent:helper --calls`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runAuditList(c.Context(), opts)
		},
	}
	c.Flags().StringSliceVar(&opts.Types, "type", nil, "event types (comma-separated): "+strings.Join(auditTypes, ", "))
	c.Flags().StringSliceVar(&opts.Outcomes, "outcome", nil, "outcomes (comma-separated): "+strings.Join(auditOutcomes, ", "))
	c.Flags().StringVar(&opts.Tool, "tool", "", "tool name")
	c.Flags().StringVar(&opts.Since, "since", "", "only events at or after this RFC 3339 instant, or this long ago (e.g. 1h)")
	c.Flags().IntVar(&opts.Limit, "limit", 100, "at most this many events (0: all)")
	c.Flags().StringVar(&opts.Operation, "operation", "", "only the events of this call id (or unique prefix of one)")
	c.Flags().StringVar(&opts.Actor, "actor", "", "only the events of this actor, kind:id (--owner filters by owner)")
	c.Flags().BoolVar(&opts.Calls, "calls", false, "only tool invocations (type tool.invoked)")
	_ = c.RegisterFlagCompletionFunc("type", completeCommaList(func() []string { return auditTypes }))
	_ = c.RegisterFlagCompletionFunc("outcome", completeCommaList(func() []string { return auditOutcomes }))
	_ = c.RegisterFlagCompletionFunc("tool", f.completeToolFlag)
	return c
}

// checkVocabulary refuses a value outside a closed list, naming the valid ones (with a
// "did you mean" when one is close).
func checkVocabulary(flag string, vals, valid []string) error {
	for _, v := range vals {
		if slices.Contains(valid, v) {
			continue
		}
		msg := fmt.Sprintf("invalid value %q for --%s", v, flag)
		if s := closest(v, valid); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		}
		return usageError("valid values: "+strings.Join(valid, ", "), "%s", msg)
	}
	return nil
}

// validate checks the flags of `audit list` before anything is opened.
func (opts *AuditListOptions) validate() error {
	if err := checkVocabulary("type", opts.Types, auditTypes); err != nil {
		return err
	}
	if err := checkVocabulary("outcome", opts.Outcomes, auditOutcomes); err != nil {
		return err
	}
	if opts.Calls {
		if len(opts.Types) > 0 {
			return usageError("--calls is --type tool.invoked; pass one of them", "--calls cannot be combined with --type")
		}
		opts.Types = []string{string(kernel.EventToolInvoked)}
	}
	if opts.Limit < 0 {
		return usageError("pass --limit 0 (all) or a positive number", "invalid --limit %d", opts.Limit)
	}
	var err error
	if opts.Actor != "" {
		if opts.ActorAddr, err = parseAddressFlag("actor", opts.Actor); err != nil {
			return err
		}
	}
	if opts.SinceMillis, err = parseSince(opts.Since, opts.Clock); err != nil {
		return err
	}
	return nil
}

// parseSince is --since as a Unix millisecond: an RFC 3339 instant, or a duration ago
// (0 when since is empty).
func parseSince(since string, clock func() time.Time) (int64, error) {
	if since == "" {
		return 0, nil
	}
	if ms, err := kernel.ParseTimestamp(since); err == nil {
		return ms, nil
	}
	if d, err := time.ParseDuration(since); err == nil && d >= 0 {
		return clock().Add(-d).UnixMilli(), nil
	}
	return 0, usageError("pass an RFC 3339 instant (2026-08-03T09:00:00Z) or a duration (90m, 24h)", "invalid --since %q", since)
}

func runAuditList(ctx context.Context, opts *AuditListOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	s, err := opts.Settings()
	if err != nil {
		return err
	}
	var owner kernel.Address
	if s.Owner != "" {
		if owner, err = parseAddressFlag("owner", s.Owner); err != nil {
			return err
		}
	}
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	// --world and --trace filter by what they name (not by the context they would resolve
	// to); the order, --since and the limit all use the events' instant.
	events, err := svc.QueryAudit(ctx, api.AuditQuery{Types: opts.Types, Outcomes: opts.Outcomes, Tool: opts.Tool,
		Operation: opts.Operation, TraceID: s.Trace, World: s.World, Owner: owner, Actor: opts.ActorAddr,
		SinceMillis: opts.SinceMillis, Limit: opts.Limit})
	if err != nil {
		return serviceError(err)
	}
	if p.format != FormatTable {
		return p.data(events)
	}
	if len(events) == 0 {
		return p.empty("no audit events match")
	}
	targets, err := callTargets(ctx, svc, events)
	if err != nil {
		return serviceError(err)
	}
	st := p.st()
	t := p.table("AT", "TYPE", "OUTCOME", "ACTOR", "TOOL", "ACTION", "RESOURCE", "REASON", "GATE", "CALL").flexible(6)
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
		action, resource := eventTarget(ev)
		if tg, ok := targets[ev.OperationID]; ok && action == "" && resource == "" {
			action, resource = tg[0], tg[1]
		}
		t.rowCells(cell{text: ev.At}, cell{text: string(ev.Type)}, oc, cell{text: dash(addrText(ev.Actor))},
			cell{text: dash(ev.Tool)}, cell{text: dash(action)}, cell{text: dash(resource)},
			cell{text: dash(reason)}, cell{text: dash(string(kernel.ClassifyRefusal(ev)))}, cell{text: dash(shortID(ev.OperationID))})
	}
	return t.render()
}

func addrText(a kernel.Address) string {
	if a.IsZero() {
		return ""
	}
	return a.String()
}

// callTargets finds, for each tool.invoked event without a resource, the action and
// resource of its call: the kernel records them on the call's authorization.checked
// event (one indexed lookup per call shown).
func callTargets(ctx context.Context, svc api.Service, events []kernel.AuditEvent) (map[string][2]string, error) {
	out := map[string][2]string{}
	for _, ev := range events {
		if ev.Type != kernel.EventToolInvoked || ev.OperationID == "" || ev.Resource != nil {
			continue
		}
		if _, done := out[ev.OperationID]; done {
			continue
		}
		checks, err := svc.QueryAudit(ctx, api.AuditQuery{Operation: ev.OperationID, TraceID: ev.TraceID,
			Types: []string{string(kernel.EventAuthorizationChecked)}, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(checks) == 1 {
			a, r := eventTarget(checks[0])
			out[ev.OperationID] = [2]string{a, r}
		}
	}
	return out, nil
}

// eventTarget is the action and resource an event is about: its own, else those of the
// authority the call requested (a refused call records what it asked for).
func eventTarget(ev kernel.AuditEvent) (action, resource string) {
	action, resource = ev.Action, resourceText(ev.Resource)
	if ra := ev.RequestedAuthority; ra != nil && len(ra.Capabilities) > 0 {
		c := ra.Capabilities[0]
		if action == "" {
			action = strings.Join(c.Actions, ",")
		}
		if resource == "" {
			resource = resourceText(&c.Resource)
		}
	}
	return action, resource
}

// resourceText is namespace:seg/seg of a resource (the root of a namespace is namespace:).
func resourceText(r *kernel.ResourceRef) string {
	if r == nil {
		return ""
	}
	return r.Namespace + ":" + kernel.JoinPath(r.Path)
}

func shortID(id string) string {
	if i := strings.IndexByte(id, '-'); i == 8 {
		return id[:8]
	}
	return id
}
