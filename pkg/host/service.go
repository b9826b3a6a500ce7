package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// Backend is what a Service is built over. Each part is reached on the first operation
// that needs it, so an operation opens only what it needs: Registry and Definition use
// the prepared host alone (nothing opened: arguments are checked before the state
// database is touched), the audit queries the store alone (no grant file is read), and
// the rest the opened host. Every part is called at most as often as operations ask for
// it; a surface passes functions that build once (the CLI's factory does).
type Backend struct {
	// Prepare returns the prepared host: every input checked, the tool table built.
	Prepare func() (*Prepared, error)
	// Open returns the opened host: the state database open, the turn begun.
	Open func(ctx context.Context) (*Host, error)
	// State returns the store of the audit and escalation operations; nil: the opened
	// host's.
	State func(ctx context.Context) (ServiceState, error)
	// StatePath names the state database in the hint of a state failure.
	StatePath string
	// Surface is the audit source of the events the service writes itself (an
	// escalation's resolution); "" is "cli".
	Surface string
}

// ServiceState is what a Service reads and writes of the store without the kernel: the
// audit trail's query and the escalations.
type ServiceState interface {
	store.Audit
	store.Escalations
}

// Service is the embedded backend of api.Service: every operation runs in the host's one
// turn, through the kernel (which authorizes, filters and audits), and a store failure is
// an *api.Error with api.CodeStateUnavailable. Errors of Backend's Prepare and Open are
// returned as they are (a *Error, or whatever the surface's own functions return).
type Service struct {
	b Backend
	h *Host // the opened host, once an operation opened it

	// t and callID are the turn and call id of a service over one turn a driver began
	// (TurnService); nil and "": the host's own turn and the run's call id.
	t      *kernel.Turn
	callID string
}

var _ api.Service = (*Service)(nil)

// NewService returns the embedded backend over b.
func NewService(b Backend) *Service { return &Service{b: b} }

// Service returns the embedded backend over an opened host (its store serves the audit
// and escalation operations).
func (h *Host) Service() *Service {
	return &Service{b: Backend{Prepare: func() (*Prepared, error) { return h.Prepared, nil },
		Open: func(context.Context) (*Host, error) { return h, nil }, StatePath: h.Settings.State}, h: h}
}

// TurnService returns the embedded backend of turn t, which the driver of h began itself
// (a scenario step's turn, with its own context and instant): every operation runs in t,
// under t's context, and a call gets the id callID; the audit and escalation operations
// use h's store. The host's own turn (h.Turn) is not used.
func (h *Host) TurnService(t *kernel.Turn, callID string) *Service {
	svc := h.Service()
	svc.t, svc.callID = t, callID
	return svc
}

// turn is the turn of the service's operations: its own (TurnService), else the host's.
func (s *Service) turn(h *Host) *kernel.Turn {
	if s.t != nil {
		return s.t
	}
	return h.Turn
}

// context is the access context of the service's operations: its turn's (TurnService),
// else the host's prepared context (the host's turn's, with the selection it opened with).
func (s *Service) context(h *Host) kernel.AccessContext {
	if s.t != nil {
		return s.t.Context()
	}
	return h.Prepared.Context
}

func (s *Service) open(ctx context.Context) (*Host, error) {
	if s.h != nil {
		return s.h, nil
	}
	h, err := s.b.Open(ctx)
	if err != nil {
		return nil, err
	}
	s.h = h
	return h, nil
}

func (s *Service) state(ctx context.Context) (ServiceState, error) {
	if s.b.State != nil {
		return s.b.State(ctx)
	}
	h, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	return h.Store, nil
}

// stateErr is a store failure.
func (s *Service) stateErr(err error) error {
	return &api.Error{Code: api.CodeStateUnavailable, Message: err.Error(), Hint: StateHint(s.b.StatePath), Err: err}
}

// kernelErr is a failure of a kernel listing: the catalogue could not be resolved, the
// context is invalid, or the audit record could not be written (the state).
func (s *Service) kernelErr(err error) error {
	switch {
	case errors.Is(err, kernel.ErrToolCatalogUnavailable):
		hint := "a tool provider failed or two tools share a name; no partial catalogue is served"
		var ce *kernel.CatalogError
		if errors.As(err, &ce) && ce.Cause != nil {
			// the operator at the terminal sees the cause (the audit trail has it too)
			hint = ce.Cause.Error() + "; no partial catalogue is served"
		}
		return &api.Error{Code: api.CodeToolCatalogUnavailable, Message: err.Error(), Hint: hint, Err: err}
	case errors.Is(err, kernel.ErrInvalidContext):
		return &api.Error{Code: api.CodeInvalidRequest, Message: err.Error(),
			Hint: "check --as, --owner, --authority, --world and --purpose", Err: err}
	}
	return s.stateErr(err)
}

// Registry returns the prepared host's tools and the namespaces its MCP servers serve
// the context's owner; nothing is opened.
func (s *Service) Registry(context.Context) (api.Registry, error) {
	p, err := s.b.Prepare()
	if err != nil {
		return api.Registry{}, err
	}
	actx := p.Context
	if s.t != nil {
		actx = s.t.Context()
	}
	return api.Registry{Tools: p.Definitions(), ProvidedNamespaces: p.GatewayNamespaces(), Context: actx}, nil
}

// Definition returns a registered tool's definition, or one an MCP server's list read
// so far has; with list, a name in the namespace of an MCP server that serves the
// context's owner opens the host and reads that server's list.
func (s *Service) Definition(ctx context.Context, name string, list bool) (*kernel.ToolDefinition, error) {
	p, err := s.b.Prepare()
	if err != nil {
		return nil, err
	}
	if d := p.Definition(name); d != nil {
		return d, nil
	}
	if s.h != nil {
		if d := s.h.Definition(name); d != nil {
			return d, nil
		}
	}
	if !list || !p.MayProvide(name) {
		return nil, nil
	}
	h, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	return h.Gateway().Lookup(ctx, s.context(h).Owner, name), nil
}

// ListTools returns the turn's usable catalogue (kernel.Turn.ListTools).
func (s *Service) ListTools(ctx context.Context) (api.ToolList, error) {
	h, err := s.open(ctx)
	if err != nil {
		return api.ToolList{}, err
	}
	defs, err := s.turn(h).ListTools(ctx)
	if err != nil {
		return api.ToolList{}, s.kernelErr(err)
	}
	return api.ToolList{Tools: defs, Context: s.context(h), SelectionSource: h.SelectionSource}, nil
}

// ListAllTools returns every registered tool with its gate (kernel.Turn.AllTools).
func (s *Service) ListAllTools(ctx context.Context) ([]api.ToolStatus, error) {
	h, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	gs, err := s.turn(h).AllTools(ctx)
	if err != nil {
		return nil, s.kernelErr(err)
	}
	out := make([]api.ToolStatus, len(gs))
	for i, g := range gs {
		d := g.Definition
		out[i] = api.ToolStatus{Tool: d.Name, Namespace: d.Namespace, Source: d.Source, ReadWrite: string(d.ReadWrite),
			Usable: g.Usable, Gate: g.Gate, Cause: g.Cause, Definition: d}
	}
	return out, nil
}

// call is req as the turn's call: the run's call id (TurnService: its own), the turn's
// trace and instant, unless req names its own id and trace (a remote caller's).
func (s *Service) call(h *Host, req api.InvokeRequest) kernel.ToolCall {
	actx := s.context(h)
	id := h.CallID
	if s.t != nil {
		id = s.callID
	}
	c := kernel.ToolCall{ID: id, Tool: req.Tool, Arguments: req.Arguments, TraceID: actx.TraceID, RequestedAt: actx.Now}
	if req.ID != "" {
		c.ID = req.ID
	}
	if req.TraceID != "" {
		c.TraceID = req.TraceID
	}
	return c
}

// Invoke calls the tool once in the turn (kernel.Turn.InvokeTool).
func (s *Service) Invoke(ctx context.Context, req api.InvokeRequest) (api.InvokeResult, error) {
	h, err := s.open(ctx)
	if err != nil {
		return api.InvokeResult{}, err
	}
	res := s.turn(h).InvokeTool(ctx, s.call(h, req))
	return api.InvokeResult{Result: res, Definition: h.Definition(req.Tool)}, nil
}

// Explain is the turn's dry run of the call (kernel.Turn.ExplainCall) with its
// candidates and fixes (Explain).
func (s *Service) Explain(ctx context.Context, req api.InvokeRequest) (api.Explanation, error) {
	h, err := s.open(ctx)
	if err != nil {
		return api.Explanation{}, err
	}
	t := s.turn(h)
	return Explain(ctx, t, t.ExplainCall(ctx, s.call(h, req))), nil
}

// Namespaces returns the turn's namespace catalogue (kernel.Turn.ListToolNamespaces).
func (s *Service) Namespaces(ctx context.Context) (api.Namespaces, error) {
	h, err := s.open(ctx)
	if err != nil {
		return api.Namespaces{}, err
	}
	cat, err := s.turn(h).ListToolNamespaces(ctx)
	if err != nil {
		return api.Namespaces{}, s.kernelErr(err)
	}
	actx := s.context(h)
	return api.Namespaces{Namespaces: cat.Namespaces, Summary: cat.Summary, EffectiveSelection: actx.EnabledToolNamespaces,
		World: actx.World, Owner: actx.Owner, SelectionSource: h.SelectionSource}, nil
}

// UpdateNamespaces applies the patch (kernel.Turn.UpdateToolNamespaces).
func (s *Service) UpdateNamespaces(ctx context.Context, u kernel.ToolNamespaceUpdate) (api.NamespacesUpdated, error) {
	h, err := s.open(ctx)
	if err != nil {
		return api.NamespacesUpdated{}, err
	}
	cat, sel, err := s.turn(h).UpdateToolNamespaces(ctx, u)
	if err != nil {
		if errors.Is(err, kernel.ErrInvalidUpdate) {
			return api.NamespacesUpdated{}, &api.Error{Code: api.CodeInvalidRequest, Message: "invalid namespace patch: " + err.Error(), Err: err}
		}
		return api.NamespacesUpdated{}, s.kernelErr(err)
	}
	actx := s.context(h)
	return api.NamespacesUpdated{Namespaces: api.Namespaces{Namespaces: cat.Namespaces, Summary: cat.Summary,
		EffectiveSelection: sel, World: actx.World, Owner: actx.Owner, SelectionSource: "stored"},
		RunSelectionKept: h.SelectionSource == "flag"}, nil
}

// Escalate records the escalation of the call in the turn (kernel.Turn.RecordEscalation)
// and in the store; with req.IfOffered, only when the turn's catalogue offers
// sharedos.escalate (Escalations.EscalateIfOffered, the one "offered ⇒ record, do not
// run" branch), else the result is NotOffered and nothing is recorded.
func (s *Service) Escalate(ctx context.Context, req api.EscalateRequest) (api.EscalateResult, error) {
	h, err := s.open(ctx)
	if err != nil {
		return api.EscalateResult{}, err
	}
	actx := s.context(h)
	call := s.call(h, api.InvokeRequest{Tool: kernel.EscalationToolName, Arguments: req.Call.Arguments, ID: req.Call.ID, TraceID: req.Call.TraceID})
	var esc kernel.Escalation
	if req.IfOffered {
		var escalated bool
		if esc, escalated, err = h.Escalations().EscalateIfOffered(ctx, s.turn(h), call); !escalated {
			return api.EscalateResult{NotOffered: true}, nil
		}
	} else {
		esc, err = h.Escalations().Escalate(ctx, s.turn(h), call)
	}
	var refused *kernel.EscalationRefusedError
	var catalogue *CatalogueError
	switch {
	case errors.As(err, &catalogue):
		return api.EscalateResult{}, s.kernelErr(catalogue.Err)
	case errors.As(err, &refused):
		// the escalation's own authorization refused it: its grant's uses are spent
		res := kernel.DeniedResult(call, actx.Now, kernel.ErrorCodeOf(refused.Code), "the escalation was refused: "+string(refused.Code))
		res.Gate = kernel.GateOf(refused.Code)
		return api.EscalateResult{Denied: &res}, nil
	case err != nil:
		return api.EscalateResult{}, s.stateErr(err)
	}
	return api.EscalateResult{Escalation: &esc}, nil
}

// ListEscalations lists the store's escalations: the context's (world, owner), or all.
func (s *Service) ListEscalations(ctx context.Context, q api.EscalationQuery) ([]api.EscalationRecord, error) {
	f := store.EscalationFilter{Status: q.Status, Limit: q.Limit, CallID: q.CallID}
	switch {
	case q.All:
	case s.t != nil:
		actx := s.t.Context()
		f.World, f.Owner = actx.World, actx.Owner
	default:
		p, err := s.b.Prepare()
		if err != nil {
			return nil, err
		}
		f.World, f.Owner = p.Context.World, p.Context.Owner
	}
	st, err := s.state(ctx)
	if err != nil {
		return nil, err
	}
	recs, err := st.ListEscalations(ctx, f)
	if err != nil {
		return nil, s.stateErr(err)
	}
	if recs == nil {
		recs = []api.EscalationRecord{}
	}
	return recs, nil
}

// ResolveEscalation records the context's owner's decision on escalation req.ID, which
// must have been asked of that owner in the context's world, with its audit event in the
// same transaction. Resolving again with the same decision changes nothing (Unchanged);
// with another, or an unknown id, is an *api.Error (CodeInvalidRequest, CodeNotFound).
func (s *Service) ResolveEscalation(ctx context.Context, req api.ResolveRequest) (api.Resolved, error) {
	if req.Status != api.EscalationApproved && req.Status != api.EscalationDenied {
		return api.Resolved{}, &api.Error{Code: api.CodeInvalidRequest, Message: fmt.Sprintf("invalid decision %q: want approved or denied", req.Status)}
	}
	h, err := s.open(ctx)
	if err != nil {
		return api.Resolved{}, err
	}
	source := s.b.Surface
	if source == "" {
		source = "cli"
	}
	// the host's escalation service: the kernel's escalation.resolved event and the
	// store's resolution, in one transaction
	rec, err := h.Escalations().Resolve(ctx, s.turn(h), Resolution{ID: req.ID, Decision: req.Status, Note: req.Note, Source: source})
	var notReviewer *NotReviewerError
	switch {
	case err == nil:
		return api.Resolved{Record: rec}, nil
	case errors.Is(err, store.ErrNotFound):
		return api.Resolved{}, &api.Error{Code: api.CodeNotFound, Message: fmt.Sprintf("no escalation %d is recorded", req.ID), Err: err,
			Hint: "'sharedos escalations list --all' lists every escalation with its ID"}
	case errors.As(err, &notReviewer):
		return api.Resolved{}, &api.Error{Code: api.CodeInvalidRequest, Message: err.Error(), Err: err,
			Hint: "pass --owner " + rec.Owner.String() + " --world " + rec.World + " (or the grant file of that context)"}
	case errors.Is(err, store.ErrAlreadyResolved) && rec.Resolution != nil && rec.Resolution.Status == req.Status:
		return api.Resolved{Record: rec, Unchanged: true}, nil
	case errors.Is(err, store.ErrAlreadyResolved) && rec.Resolution != nil:
		return api.Resolved{}, &api.Error{Code: api.CodeInvalidRequest, Err: err,
			Message: fmt.Sprintf("escalation %d was already %s by %s at %s", req.ID, rec.Resolution.Status, rec.Resolution.ResolvedBy, rec.Resolution.ResolvedAt),
			Hint:    "a resolution is never changed; record a new decision in the grant file instead"}
	}
	return api.Resolved{}, s.stateErr(err)
}

// auditFilter is q's filter without its operation, owner, actor, limit and order.
func auditFilter(q api.AuditQuery) store.AuditFilter {
	return store.AuditFilter{Types: q.Types, Outcomes: q.Outcomes, Tool: q.Tool, TraceID: q.TraceID, World: q.World,
		SinceMillis: q.SinceMillis}
}

// operationID resolves q.Operation among the events f selects: an exact call id, else
// the one call id it is a prefix of; no match leaves it as it is (nothing matches it).
func operationID(ctx context.Context, st ServiceState, f store.AuditFilter, op string) (string, error) {
	exact := f
	exact.OperationID, exact.Limit = op, 1
	if evs, err := st.ListAudit(ctx, exact); err != nil || len(evs) > 0 {
		return op, err
	}
	f.Oldest = true
	evs, err := st.ListAudit(ctx, f)
	if err != nil {
		return "", err
	}
	var matches []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.OperationID, op) && !slices.Contains(matches, ev.OperationID) {
			matches = append(matches, ev.OperationID)
		}
	}
	switch len(matches) {
	case 0:
		return op, nil
	case 1:
		return matches[0], nil
	}
	slices.Sort(matches)
	return "", &api.Error{Code: api.CodeInvalidRequest, Hint: "pass more characters of the call id",
		Message: fmt.Sprintf("--operation %q is ambiguous: it starts %s", op, strings.Join(matches, ", "))}
}

// query resolves q's operation and returns its whole filter (without limit and order).
func (s *Service) query(ctx context.Context, q api.AuditQuery) (ServiceState, store.AuditFilter, error) {
	st, err := s.state(ctx)
	if err != nil {
		return nil, store.AuditFilter{}, err
	}
	f := auditFilter(q)
	if q.Operation != "" {
		id, err := operationID(ctx, st, f, q.Operation)
		var ae *api.Error
		if errors.As(err, &ae) {
			return nil, f, err
		}
		if err != nil {
			return nil, f, s.stateErr(err)
		}
		f.OperationID = id
	}
	f.Owner, f.Actor = q.Owner, q.Actor
	return st, f, nil
}

// QueryAudit returns the events q selects, filtered and ordered by the store's query;
// with q.AfterSeq, those recorded after it, oldest first, each with its Seq.
func (s *Service) QueryAudit(ctx context.Context, q api.AuditQuery) ([]kernel.AuditEvent, error) {
	st, f, err := s.query(ctx, q)
	if err != nil {
		return nil, err
	}
	f.Limit = q.Limit
	switch {
	case q.AfterSeq != nil:
		f.Oldest, f.AfterSeq, f.WithSeq = true, *q.AfterSeq, true
	case q.Oldest:
		f.Oldest = true
	default:
		f.ByInstant = true
	}
	evs, err := st.ListAudit(ctx, f)
	if err != nil {
		return nil, s.stateErr(err)
	}
	if evs == nil {
		evs = []kernel.AuditEvent{}
	}
	return evs, nil
}

// EachAudit calls fn with each event q selects, oldest first, at most q.Limit (0: all),
// reading the store a page of page events at a time (store.EachAudit; page ≤ 0: the
// store's default), so that an export of any size holds one page in memory. It stops at
// fn's first error and returns it as it is; a store failure is an *api.Error.
func (s *Service) EachAudit(ctx context.Context, q api.AuditQuery, page int, fn func(kernel.AuditEvent) error) error {
	st, f, err := s.query(ctx, q)
	if err != nil {
		return err
	}
	f.Limit = q.Limit
	var fnErr error
	err = store.EachAudit(ctx, st, f, page, func(ev kernel.AuditEvent) error {
		fnErr = fn(ev)
		return fnErr
	})
	switch {
	case fnErr != nil:
		return fnErr
	case err != nil:
		return s.stateErr(err)
	}
	return nil
}

// ExportAudit returns the recorded calls q selects with their authorization records:
// the newest q.Limit calls (0: all), oldest first. With a limit it reads the newest
// calls only (a query of q.Limit rows, a larger one only when some selected events name
// no tool); without one it reads the trail by pages (EachAudit).
func (s *Service) ExportAudit(ctx context.Context, q api.AuditQuery) ([]api.AuditCall, error) {
	q.Types = []string{string(kernel.EventToolInvoked)}
	st, f, err := s.query(ctx, q)
	if err != nil {
		return nil, err
	}
	var calls []kernel.AuditEvent
	hasTool := func(ev kernel.AuditEvent) bool { return ev.Tool != "" }
	if q.Limit > 0 {
		// newest first, by pages that grow until q.Limit calls name a tool or the
		// trail is read
		for n := q.Limit; ; n *= 4 {
			f.Limit = n
			evs, err := st.ListAudit(ctx, f)
			if err != nil {
				return nil, s.stateErr(err)
			}
			calls = calls[:0]
			for _, ev := range evs {
				if hasTool(ev) && len(calls) < q.Limit {
					calls = append(calls, ev)
				}
			}
			if len(calls) == q.Limit || len(evs) < n {
				break
			}
		}
		slices.Reverse(calls)
	} else if err := store.EachAudit(ctx, st, f, 0, func(ev kernel.AuditEvent) error {
		if hasTool(ev) {
			calls = append(calls, ev)
		}
		return nil
	}); err != nil {
		return nil, s.stateErr(err)
	}
	out := make([]api.AuditCall, len(calls))
	for i, ev := range calls {
		checks, err := st.ListAudit(ctx, store.AuditFilter{OperationID: ev.OperationID, TraceID: ev.TraceID,
			Types: []string{string(kernel.EventAuthorizationChecked)}, Oldest: true})
		if err != nil {
			return nil, s.stateErr(err)
		}
		out[i] = api.AuditCall{Call: ev, Checks: checks}
	}
	return out, nil
}

// BeginTurnAt begins a turn of h's kernel for actx — a driver's own context and instant
// (a scenario step's) — under the namespace selection stored now for its (world, owner)
// (actx.EnabledToolNamespaces is replaced), with meta on every audit event of the turn.
// It writes nothing: the turn's operations go through TurnService. A store failure is
// returned as the store's error.
func (h *Host) BeginTurnAt(ctx context.Context, actx kernel.AccessContext, meta map[string]any) (*kernel.Turn, error) {
	sel, _, err := h.Store.Selection(ctx, actx.World, actx.Owner)
	if err != nil {
		return nil, err
	}
	jscompat.SortLocale(sel)
	actx.EnabledToolNamespaces = sel
	return h.Kernel.BeginTurnWith(actx, kernel.TurnOptions{AuditMetadata: meta})
}
