package cmd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
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
	c.AddCommand(newAuditListCmd(f), newAuditExportCmd(f))
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
	Actor     string
	Calls     bool
}

func newAuditListCmd(f *Factory) *cobra.Command {
	opts := &AuditListOptions{f: f}
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
		RunE: func(c *cobra.Command, _ []string) error { return runAuditList(c.Context(), opts) },
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
	var owner, actor kernel.Address
	if s.Owner != "" {
		if owner, err = parseAddressFlag("owner", s.Owner); err != nil {
			return err
		}
	}
	if opts.Actor != "" {
		if actor, err = parseAddressFlag("actor", opts.Actor); err != nil {
			return err
		}
	}
	// Every event is fetched in recording order and ordered here by its instant, so that
	// the order and --since use the same one; the limit applies last.
	filter := sqlitestore.AuditFilter{Types: opts.Types, Outcomes: opts.Outcomes, Tool: opts.Tool,
		TraceID: s.Trace, World: s.World, Oldest: true}
	if opts.Since != "" {
		if ms, err := kernel.ParseTimestamp(opts.Since); err == nil {
			filter.SinceMillis = ms
		} else if d, err := time.ParseDuration(opts.Since); err == nil && d >= 0 {
			filter.SinceMillis = f.Clock().Add(-d).UnixMilli()
		} else {
			return usageError("pass an RFC 3339 instant (2026-08-03T09:00:00Z) or a duration (90m, 24h)", "invalid --since %q", opts.Since)
		}
	}
	// Without a filter that only this command applies (an operation prefix, an owner or
	// an actor), the store orders by instant and stops at the limit: the command then
	// reads what it prints, not the whole trail.
	pushed := opts.Operation == "" && owner.IsZero() && actor.IsZero() && opts.Limit > 0
	if pushed {
		filter.ByInstant, filter.Limit = true, opts.Limit
	}
	store, err := f.Store(ctx)
	if err != nil {
		return err
	}
	events, err := store.ListAudit(ctx, filter)
	if err != nil {
		return stateError(err, stateHint(s.State))
	}
	if opts.Operation != "" {
		id, err := resolveOperation(events, opts.Operation)
		if err != nil {
			return err
		}
		events = slices.DeleteFunc(events, func(ev kernel.AuditEvent) bool { return ev.OperationID != id })
	}
	events = slices.DeleteFunc(events, func(ev kernel.AuditEvent) bool {
		return !owner.IsZero() && ev.Owner != owner || !actor.IsZero() && ev.Actor != actor
	})
	if !pushed {
		slices.Reverse(events) // newest recorded first, then by instant (stable)
		slices.SortStableFunc(events, func(a, b kernel.AuditEvent) int { return cmp.Compare(eventMillis(b), eventMillis(a)) })
	}
	if opts.Limit > 0 && len(events) > opts.Limit {
		events = events[:opts.Limit]
	}
	if events == nil {
		events = []kernel.AuditEvent{}
	}
	if p.format != FormatTable {
		return p.data(events)
	}
	if len(events) == 0 {
		return p.empty("no audit events match")
	}
	targets, err := callTargets(ctx, store, events)
	if err != nil {
		return stateError(err, stateHint(s.State))
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

// resolveOperation finds the one call id that is id or starts with it, among events.
func resolveOperation(events []kernel.AuditEvent, id string) (string, error) {
	var matches []string
	for _, ev := range events {
		if ev.OperationID == id {
			return id, nil
		}
		if strings.HasPrefix(ev.OperationID, id) && !slices.Contains(matches, ev.OperationID) {
			matches = append(matches, ev.OperationID)
		}
	}
	if len(matches) > 1 {
		slices.Sort(matches)
		return "", usageError("pass more characters of the call id", "--operation %q is ambiguous: it starts %s",
			id, strings.Join(matches, ", "))
	}
	if len(matches) == 1 {
		return matches[0], nil
	}
	return id, nil
}

func eventMillis(ev kernel.AuditEvent) int64 {
	ms, _ := kernel.ParseTimestamp(ev.At)
	return ms
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
func callTargets(ctx context.Context, store *sqlitestore.Store, events []kernel.AuditEvent) (map[string][2]string, error) {
	out := map[string][2]string{}
	for _, ev := range events {
		if ev.Type != kernel.EventToolInvoked || ev.OperationID == "" || ev.Resource != nil {
			continue
		}
		if _, done := out[ev.OperationID]; done {
			continue
		}
		checks, err := store.ListAudit(ctx, sqlitestore.AuditFilter{OperationID: ev.OperationID, TraceID: ev.TraceID,
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
