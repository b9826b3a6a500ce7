package kernel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf16"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// ListToolNamespaces is the namespace catalogue of the turn's context: every tool
// namespace of the resolved (unfiltered) registry with its sources, its tool count —
// every registered tool, whatever the grants — and whether the context enables it. An
// enabled namespace without tools does not appear.
func (t *Turn) ListToolNamespaces(ctx context.Context) (ToolNamespaceCatalog, error) {
	reg, err := t.registry(ctx)
	if err != nil {
		return ToolNamespaceCatalog{}, err
	}
	cat := buildNamespaceCatalog(reg, t.actx.EnabledToolNamespaces)
	ev := t.k.event(t.actx, EventNamespaceCatalogListed, OutcomeSucceeded)
	ev.Metadata = map[string]any{"totalNamespaces": cat.Summary.Total, "enabledNamespaces": cat.Summary.Enabled}
	t.auditAfter(ctx, ev, false)
	return cat, nil
}

func buildNamespaceCatalog(reg *registry, enabled []string) ToolNamespaceCatalog {
	summary := reg.namespaceSummary()
	cat := ToolNamespaceCatalog{Namespaces: make([]ToolNamespaceDescriptor, 0, len(summary))}
	for _, d := range summary {
		d.Enabled = slices.Contains(enabled, d.Namespace)
		d.Sources = slices.Clone(d.Sources)
		cat.Namespaces = append(cat.Namespaces, d)
		cat.Summary.Total++
		if d.Enabled {
			cat.Summary.Enabled++
		} else {
			cat.Summary.Disabled++
		}
	}
	return cat
}

// namespaceSummary is the registry's namespaces (sorted), each with its sources (sorted)
// and tool count, Enabled unset: computed once per registry (a static registry lives as
// long as its registrations), not per catalogue.
func (r *registry) namespaceSummary() []ToolNamespaceDescriptor {
	r.nsOnce.Do(func() {
		type acc struct {
			sources map[string]bool
			count   int
		}
		byNS := map[string]*acc{}
		for _, n := range r.names {
			d := &r.byName[n].handler.Definition
			a := byNS[d.Namespace]
			if a == nil {
				a = &acc{sources: map[string]bool{}}
				byNS[d.Namespace] = a
			}
			a.sources[d.Source] = true
			a.count++
		}
		names := make([]string, 0, len(byNS))
		for n := range byNS {
			names = append(names, n)
		}
		jscompat.SortLocale(names)
		out := make([]ToolNamespaceDescriptor, 0, len(names))
		for _, n := range names {
			a := byNS[n]
			srcs := make([]string, 0, len(a.sources))
			for s := range a.sources {
				srcs = append(srcs, s)
			}
			jscompat.SortLocale(srcs)
			out = append(out, ToolNamespaceDescriptor{Namespace: n, Sources: srcs, ToolCount: a.count})
		}
		r.namespaces = out
	})
	return r.namespaces
}

// UpdateToolNamespaces validates update, drops from its enable list the namespaces the
// host forbids (Config.ForbiddenNamespaces: an update may narrow, never widen), applies it
// through the settings store (atomically against fresh state) and returns the catalogue
// recomputed for the selection that took effect, with that selection (sorted). A
// malformed update fails with an error matching ErrInvalidUpdate and nothing is stored;
// no settings store fails with ErrMissingRegistration. The turn's own context keeps the
// selection it began with: begin a new turn to act under the new one.
func (t *Turn) UpdateToolNamespaces(ctx context.Context, update ToolNamespaceUpdate) (ToolNamespaceCatalog, []string, error) {
	k := t.k
	u := ToolNamespaceUpdate{Enable: slices.Clone(update.Enable), Disable: slices.Clone(update.Disable)}
	if err := u.Validate(); err != nil {
		return ToolNamespaceCatalog{}, nil, err
	}
	if k.cfg.Settings == nil {
		return ToolNamespaceCatalog{}, nil, fmt.Errorf("tool namespace settings: %w", ErrMissingRegistration)
	}
	forbidden := func(n string) bool { return slices.Contains(k.cfg.ForbiddenNamespaces, n) }
	u.Enable = slices.DeleteFunc(u.Enable, forbidden)
	// effective is what a stored selection means for this host (valid, forbidden ones
	// dropped, sorted), and updated the event that records it.
	effective := func(sel []string) ([]string, error) {
		sel, err := ValidateEnabledToolNamespaces(sel)
		if err != nil {
			return nil, fmt.Errorf("tool namespace settings returned an invalid selection: %w", err)
		}
		sel = slices.DeleteFunc(sel, forbidden)
		jscompat.SortLocale(sel)
		return sel, nil
	}
	updated := func(sel []string) AuditEvent {
		next := cloneContext(t.actx)
		next.EnabledToolNamespaces = sel
		ev := k.event(next, EventNamespaceSelectionUpdated, OutcomeSucceeded)
		ev.Metadata = map[string]any{"enabledNamespaces": sel}
		return t.withMeta(ev)
	}
	var sel []string
	var err error
	audited := false
	switch as, ok := k.cfg.Settings.(AuditedSettingsStore); {
	case len(u.Enable) == 0 && len(u.Disable) == 0:
		// Only forbidden namespaces were asked for: nothing changes.
		sel = slices.Clone(t.actx.EnabledToolNamespaces)
	case ok && k.cfg.Audit != nil:
		// the selection and its record in one transaction
		sel, err = as.ApplyUpdateAudited(ctx, t.actx, u, func(raw []string) AuditEvent {
			eff, verr := effective(slices.Clone(raw))
			if verr != nil {
				eff = raw
			}
			return updated(eff)
		})
		audited = err == nil
	default:
		sel, err = k.cfg.Settings.ApplyUpdate(ctx, t.actx, u)
	}
	if err != nil {
		ev := k.event(t.actx, EventNamespaceSelectionUpdated, OutcomeFailed)
		t.auditAfter(ctx, ev, true)
		return ToolNamespaceCatalog{}, nil, fmt.Errorf("apply tool namespace update: %w", err)
	}
	if sel, err = effective(sel); err != nil {
		return ToolNamespaceCatalog{}, nil, err
	}
	if !audited {
		if err := t.audit(ctx, updated(sel)); err != nil {
			// the change took effect without its record: say so, never a quiet success
			return ToolNamespaceCatalog{}, sel, fmt.Errorf("tool namespace selection changed but its audit record could not be written: %w", err)
		}
	}
	reg, err := t.registry(ctx)
	if err != nil {
		return ToolNamespaceCatalog{}, sel, err
	}
	return buildNamespaceCatalog(reg, sel), sel, nil
}

// Escalation tool constants (spec 10 §6.2).
const (
	EscalationToolName       = "sharedos.escalate"
	EscalationToolNamespace  = "sharedos"
	EscalationResource       = "sharedos"
	EscalationAction         = "request"
	EscalationReasonMaxLen   = 512
	escalationDefaultMessage = "the turn asked for a human decision without saying what needs deciding"
)

// EscalationResourcePath is the resource path escalation grants name.
func EscalationResourcePath() []string { return []string{"escalation"} }

// EscalationTool is the sharedos.escalate handler a host registers. It is catalogued and
// never executed: a driver that sees it offered ends the turn escalated instead of
// calling it, so the handler, if it is reached anyway, always fails escalation_not_terminated.
func EscalationTool() ToolHandler {
	return ToolHandler{
		Definition: ToolDefinition{
			Name: EscalationToolName,
			Description: "End this turn by asking a human to decide. Give the reason: what needs deciding and why. " +
				"Nothing is granted while the ask is pending. Returns {escalated, reason, note}: the turn is over; " +
				"the operator's answer (approved or denied, with their note) comes as a line of text with your first tool call after they decide.",
			Namespace: EscalationToolNamespace, Source: "sharedos", ReadWrite: ClassRead,
			InputSchema: map[string]any{"type": "object", "additionalProperties": false, "required": []any{"reason"},
				"properties": map[string]any{"reason": map[string]any{"type": "string", "minLength": 1, "maxLength": EscalationReasonMaxLen,
					"description": "What needs deciding and why, in one or two sentences for a person, e.g. " +
						"\"I need to write drafts/plan.md to save the plan; files.create was refused (no grant)\"."}}},
			RequiredCapability: CapabilityRequirement{Resource: ResourceRef{Namespace: EscalationResource, Path: EscalationResourcePath()}, Action: EscalationAction},
			Annotations:        &ToolAnnotations{ReadOnly: BoolPtr(true)},
		},
		Invoke: func(_ context.Context, actx AccessContext, call ParsedToolCall) (ToolResult, error) {
			return FailedResult(call.ToolCall, actx.Now, CodeEscalationNotTerminated,
				"sharedos.escalate ends the turn; the driver must not execute it"), nil
		},
	}
}

// EscalationOffered reports whether a catalogue offers sharedos.escalate.
func EscalationOffered(tools []ToolDefinition) bool {
	for i := range tools {
		if tools[i].Name == EscalationToolName {
			return true
		}
	}
	return false
}

// EscalationReason reads the reason of an escalate call: trimmed and cut to 512 UTF-16
// units without splitting a surrogate pair; unreadable or empty gives a standard text.
func EscalationReason(args json.RawMessage) string {
	var v struct {
		Reason any `json:"reason"`
	}
	if json.Unmarshal(args, &v) != nil {
		return escalationDefaultMessage
	}
	s, ok := v.Reason.(string)
	if !ok {
		return escalationDefaultMessage
	}
	s = jscompat.JSTrim(s)
	if s == "" {
		return escalationDefaultMessage
	}
	u := utf16.Encode([]rune(s))
	if len(u) > EscalationReasonMaxLen {
		cut := EscalationReasonMaxLen
		if utf16.IsSurrogate(rune(u[cut-1])) && u[cut-1] < 0xdc00 {
			cut--
		}
		s = string(utf16.Decode(u[:cut]))
	}
	return s
}

// RecordEscalation records that the turn of actx ended asking a human: one
// escalation.requested audit event. Nothing is granted; the host resolves it by issuing a
// grant a later turn loads. The reviewer is the context's owner.
//
// Recording is the escalate tool's effect (a driver never executes the tool), so it is
// authorized first like any effect: one consuming decision on the tool's requirement,
// audited, which spends a use of a bounded escalation grant. When that decision refuses
// (the grant is exhausted, say), nothing is recorded and the error matches
// ErrEscalationRefused and carries the code (EscalationRefusedError).
func (t *Turn) RecordEscalation(ctx context.Context, reason string, requested *CapabilityRequest) (Escalation, error) {
	k, actx := t.k, t.actx
	st := t.state(ctx, true)
	req := CapabilityRequirement{Resource: ResourceRef{Namespace: EscalationResource, Path: EscalationResourcePath()}, Action: EscalationAction}
	var eval Evaluation
	evaluateInto(&eval, st.auth, &t.actx, t.instant, t.instant, st.wall, req, false)
	d, _, _, err := t.settleConsuming(ctx, st.auth, ToolCall{Tool: EscalationToolName}, &eval, false)
	if err != nil {
		return Escalation{}, fmt.Errorf("record escalation: %w", err)
	}
	if !d.Allowed {
		return Escalation{}, &EscalationRefusedError{Code: d.ReasonCode}
	}
	esc := Escalation{Reason: reason, Reviewer: actx.Owner, RequestedAt: actx.Now, Status: "pending", RequestedAuthority: requested}
	ev := k.event(actx, EventEscalationRequested, OutcomeEscalated)
	ev.Reason = CodeEscalationRequested
	ev.RequestedAuthority = requested
	ev.Metadata = map[string]any{"detail": reason, "reviewer": actx.Owner, "reviewerAssumed": true, "resolution": "pending"}
	if err := t.audit(ctx, ev); err != nil {
		return Escalation{}, fmt.Errorf("record escalation: %w", err)
	}
	return esc, nil
}

// ErrEscalationRefused is matched by the error of a RecordEscalation its authorization
// refused.
var ErrEscalationRefused = errors.New("the escalation was refused")

// EscalationRefusedError says why RecordEscalation recorded nothing.
type EscalationRefusedError struct{ Code ReasonCode }

func (e *EscalationRefusedError) Error() string {
	return "the escalation was refused: " + string(e.Code)
}

// Is makes errors.Is(err, ErrEscalationRefused) true.
func (e *EscalationRefusedError) Is(target error) bool { return target == ErrEscalationRefused }
