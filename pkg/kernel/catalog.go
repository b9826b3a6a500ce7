package kernel

// This file holds the filtered catalogue (ListTools).

import (
	"context"
	"fmt"
	"slices"
)

// ListTools is the filtered catalogue of one operation in a turn of its own (see
// Turn.ListTools).
func (k *Kernel) ListTools(ctx context.Context, actx AccessContext) ([]ToolDefinition, error) {
	t, err := k.BeginTurn(actx)
	if err != nil {
		return nil, err
	}
	return t.ListTools(ctx)
}

// ListTools is the filtered catalogue: every registered tool whose namespace is enabled
// and whose declared bound some grant can discover, sorted by name. An authority outage
// yields an empty catalogue (fail-closed), not an error; an unresolvable registry yields
// an error matching ErrToolCatalogUnavailable; the tools of a namespace whose provider
// confined its failure to it (ProviderUnavailableError) are absent, and the listing's
// audit record names the namespace with its cause (unavailableNamespaces); a listing whose audit record cannot be
// written fails.
func (t *Turn) ListTools(ctx context.Context) ([]ToolDefinition, error) {
	k := t.k
	st := t.state(ctx, true)
	if st.auditErr != nil {
		return nil, fmt.Errorf("write audit: %w", st.auditErr)
	}
	if st.auth.unavailable != "" {
		ev := k.event(t.actx, EventToolCatalogListed, OutcomeDenied)
		ev.Reason = ErrorCodeOf(ReasonAuthorityUnavailable)
		ev.Metadata = map[string]any{"enabledNamespaces": t.actx.EnabledToolNamespaces, "withheldCount": 0}
		t.auditAfter(ctx, ev, false)
		return []ToolDefinition{}, nil
	}
	if st.regErr != nil {
		if k.cfg.Audit != nil {
			ev := k.event(t.actx, EventToolCatalogListed, OutcomeFailed)
			ev.Reason = CodeToolCatalogUnavailable
			ev.AuthorityHash = st.auth.Hash()
			ev.Metadata = map[string]any{"enabledNamespaces": t.actx.EnabledToolNamespaces, "catalogError": catalogCause(st.regErr)}
			t.auditAfter(ctx, ev, false)
		}
		return nil, st.regErr
	}
	out := make([]ToolDefinition, 0, len(st.reg.names))
	withheld, outage := 0, false
	var ev Evaluation
	for _, n := range st.reg.names {
		def := &st.reg.byName[n].handler.Definition
		if !slices.Contains(t.actx.EnabledToolNamespaces, def.Namespace) {
			continue
		}
		d := t.discover(ctx, st.auth, def, &ev, st.wall)
		if !d.Allowed {
			withheld++
			if IsInfrastructureDenial(d.ReasonCode) {
				outage = true
			}
			continue
		}
		out = append(out, *def)
	}
	if k.cfg.Audit != nil {
		ev := k.event(t.actx, EventToolCatalogListed, OutcomeSucceeded)
		ev.AuthorityHash = st.auth.Hash()
		ev.FailClosed = outage
		ev.Metadata = map[string]any{"catalogHash": st.reg.hash, "enabledNamespaces": t.actx.EnabledToolNamespaces,
			"withheldCount": withheld}
		if len(st.reg.unavailable) > 0 {
			ev.Metadata["unavailableNamespaces"] = unavailableMetadata(st.reg.unavailable)
		}
		if err := t.auditWriteAhead(ctx, ev); err != nil {
			return nil, fmt.Errorf("write audit: %w", err)
		}
	}
	return out, nil
}

// discover is the catalogue check of one tool at the turn's instant (and wall, when set);
// ev is scratch space reused across the tools of one listing.
func (t *Turn) discover(ctx context.Context, auth *Authority, def *ToolDefinition, ev *Evaluation, wall int64) AuthorizationDecision {
	evaluateInto(ev, auth, &t.actx, t.instant, t.instant, wall, def.RequiredCapability, true)
	d, _ := t.k.authz.Settle(ctx, auth, t.actx, ev, false)
	return d
}

// unavailableMetadata is the audit record's unavailableNamespaces: each unavailable
// namespace with its provider's failure, cause included.
func unavailableMetadata(us []UnavailableNamespace) map[string]any {
	m := make(map[string]any, len(us))
	for i := range us {
		m[us[i].Namespace] = us[i].AuditCause()
	}
	return m
}
