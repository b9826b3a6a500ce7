package host

import (
	"context"
	"errors"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Service returns the embedded backend of one request to the session (HTTP /v1): its
// operations run in one turn begun when the first of them needs it — the grant files
// and namespace selection current then, the instant read then — under trace (the
// session's own trace when ""), with meta on every audit event of the turn. A call
// without an id of its own gets a fresh one. The audit and escalation operations use the
// session's store; an escalation resolved through it is recorded with source surface.
func (s *Session) Service(meta map[string]any, trace, surface string) *Service {
	return s.RequestService(meta, trace, surface, "")
}

// RequestService is Service for a surface whose every request carries metadata and a
// trace of its own under one long-lived session (serve's /v1: a request id and a trace
// per HTTP request): with sessionKey set (the session's name, e.g. its surface and
// token), the requests' turns record authority.resolved once per session, context and
// authority — again when the authority changes (a grant file edited) — not once per
// request (kernel.TurnOptions.SessionKey); every other record carries the request's own
// metadata and trace. With sessionKey "" it is Service.
func (s *Session) RequestService(meta map[string]any, trace, surface, sessionKey string) *Service {
	h := s.h
	return &Service{b: Backend{
		Prepare: func() (*Prepared, error) { return h.Prepared, nil },
		Open: func(ctx context.Context) (*Host, error) {
			t, k, source, err := s.begin(ctx, meta, trace, sessionKey)
			if err != nil {
				return nil, err
			}
			p := *h.Prepared // the request's view: its context and call id; nothing is closed through it
			p.Context = t.Context()
			p.CallID = NewUUID()
			return &Host{Prepared: &p, Kernel: k, Turn: t, Store: h.Store, SelectionSource: source}, nil
		},
		State:     func(context.Context) (ServiceState, error) { return h.Store, nil },
		StatePath: h.Settings.State,
		Surface:   surface,
	}}
}

var _ api.Checks = (*Service)(nil)

// Authorize is the turn's dry-run authorization of req (kernel.Turn.Authorize): nothing
// is spent, the decision is audited.
func (s *Service) Authorize(ctx context.Context, req kernel.CapabilityRequirement, operationID string) (kernel.AuthorizationDecision, error) {
	h, err := s.open(ctx)
	if err != nil {
		return kernel.AuthorizationDecision{}, err
	}
	return h.Turn.Authorize(ctx, req, operationID), nil
}

// Reach is where the turn's grants reach (kernel.Turn.Reach).
func (s *Service) Reach(ctx context.Context) (kernel.ReachResult, error) {
	h, err := s.open(ctx)
	if err != nil {
		return kernel.ReachResult{}, err
	}
	return h.Turn.Reach(ctx), nil
}

// ExplainAuthorize is the explanation of the dry-run authorization of req
// (kernel.Turn.ExplainRequirement) with its candidates and fixes (Explain): what
// `sharedos explain -o json` prints for a call with that requirement. Nothing is spent
// or audited.
func (s *Service) ExplainAuthorize(ctx context.Context, req kernel.CapabilityRequirement) (api.Explanation, error) {
	h, err := s.open(ctx)
	if err != nil {
		return api.Explanation{}, err
	}
	return Explain(ctx, h.Turn, h.Turn.ExplainRequirement(ctx, req)), nil
}

var _ api.Admin = (*Service)(nil)

// of begins a turn of the host's kernel for (world, owner) instead of the context's:
// the context's actor, authority and purpose, the pair's stored (or default) selection.
func (s *Service) of(ctx context.Context, world string, owner kernel.Address) (*kernel.Turn, string, error) {
	h, err := s.open(ctx)
	if err != nil {
		return nil, "", err
	}
	actx := h.Turn.Context()
	actx.World, actx.Owner = world, owner
	sel, stored, err := h.Store.Selection(ctx, world, owner)
	if err != nil {
		return nil, "", s.stateErr(err)
	}
	actx.EnabledToolNamespaces = sel
	t, err := h.Kernel.BeginTurnWith(actx, kernel.TurnOptions{AuthorityResolvedOnce: true})
	if err != nil {
		return nil, "", &api.Error{Code: api.CodeInvalidRequest, Message: err.Error(), Err: err}
	}
	return t, map[bool]string{true: "stored", false: "default"}[stored], nil
}

// NamespacesOf returns the namespace catalogue of (world, owner).
func (s *Service) NamespacesOf(ctx context.Context, world string, owner kernel.Address) (api.Namespaces, error) {
	t, source, err := s.of(ctx, world, owner)
	if err != nil {
		return api.Namespaces{}, err
	}
	cat, err := t.ListToolNamespaces(ctx)
	if err != nil {
		return api.Namespaces{}, s.kernelErr(err)
	}
	return api.Namespaces{Namespaces: cat.Namespaces, Summary: cat.Summary, EffectiveSelection: t.Context().EnabledToolNamespaces,
		World: world, Owner: owner, SelectionSource: source}, nil
}

// UpdateNamespacesOf applies the patch to (world, owner)'s stored selection.
func (s *Service) UpdateNamespacesOf(ctx context.Context, world string, owner kernel.Address, u kernel.ToolNamespaceUpdate) (api.NamespacesUpdated, error) {
	t, _, err := s.of(ctx, world, owner)
	if err != nil {
		return api.NamespacesUpdated{}, err
	}
	cat, sel, err := t.UpdateToolNamespaces(ctx, u)
	if err != nil {
		if errors.Is(err, kernel.ErrInvalidUpdate) {
			return api.NamespacesUpdated{}, &api.Error{Code: api.CodeInvalidRequest, Message: "invalid namespace patch: " + err.Error(), Err: err}
		}
		return api.NamespacesUpdated{}, s.kernelErr(err)
	}
	return api.NamespacesUpdated{Namespaces: api.Namespaces{Namespaces: cat.Namespaces, Summary: cat.Summary,
		EffectiveSelection: sel, World: world, Owner: owner, SelectionSource: "stored"}}, nil
}

// AccessContext is the session's access context now: its instant and namespace
// selection read now. It writes nothing.
func (s *Session) AccessContext(ctx context.Context) (kernel.AccessContext, error) {
	actx, _, err := s.context(ctx)
	return actx, err
}

var _ api.Envelope = (*Service)(nil)

// RefuseInEnvelope refuses the call in the turn before any gate runs
// (kernel.Turn.RefuseInEnvelope): the kernel records it; nothing runs or is spent.
func (s *Service) RefuseInEnvelope(ctx context.Context, req api.EnvelopeRefusal) (kernel.ToolResult, error) {
	h, err := s.open(ctx)
	if err != nil {
		return kernel.ToolResult{}, err
	}
	return s.turn(h).RefuseInEnvelope(ctx, s.call(h, req.Call), req.Code, req.Message, req.Metadata), nil
}
