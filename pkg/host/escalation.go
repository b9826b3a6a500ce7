package host

import (
	"context"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// Escalations is the host's escalation service: the one place that records an escalation
// (the kernel's escalation.requested event and the store's record), finds one, lists them
// and records a reviewer's decision (the kernel's escalation.resolved event and the
// store's resolution, in one transaction). Every surface — the CLI, the MCP server, the
// scenario runner, and later HTTP — goes through it; none records, finds or resolves an
// escalation on its own. One function per step:
//
//   - EscalateIfOffered: the "an offered sharedos.escalate is recorded, not run" branch;
//   - Escalate: kernel record + store record;
//   - Get: one escalation by its number (no listing);
//   - Pending: the escalation of one call, found by its call id (the MCP latch);
//   - List: the escalations a filter selects;
//   - Resolve: the reviewer's decision, checked, then kernel event + store resolution.
//
// A decision grants nothing: authority still comes only from grant files.
type Escalations struct{ st store.Escalations }

// NewEscalations returns the escalation service over a store's escalations.
func NewEscalations(st store.Escalations) *Escalations { return &Escalations{st: st} }

// Escalations returns the escalation service over the host's state database.
func (h *Host) Escalations() *Escalations { return NewEscalations(h.Store) }

// CatalogueError is EscalateIfOffered's error when the turn's catalogue could not be
// listed, so it is unknown whether sharedos.escalate is offered: nothing was recorded and
// the call must not run.
type CatalogueError struct{ Err error }

func (e *CatalogueError) Error() string { return "the tool catalogue is unavailable: " + e.Err.Error() }

// Unwrap returns the kernel's error.
func (e *CatalogueError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, kernel.ErrCatalogueUnavailable) true.
func (e *CatalogueError) Is(target error) bool { return target == kernel.ErrCatalogueUnavailable }

// EscalateIfOffered is the one branch "the call is sharedos.escalate and the turn's
// catalogue offers it ⇒ record the escalation, do not run the tool" (the driver of a turn
// ends the turn; the tool itself only fails escalation_not_terminated). It returns
// escalated=false, and does nothing, when the call is another tool or sharedos.escalate
// is not offered (the caller then invokes the call as any other, and the kernel refuses
// it). escalated=true means the branch was taken: err is then nil (recorded: esc), a
// *kernel.EscalationRefusedError (its own authorization refused it; nothing recorded) or
// an outage (Escalate's). A catalogue that cannot be listed is a *CatalogueError.
func (e *Escalations) EscalateIfOffered(ctx context.Context, t *kernel.Turn, call kernel.ToolCall) (esc kernel.Escalation, escalated bool, err error) {
	if call.Tool != kernel.EscalationToolName {
		return kernel.Escalation{}, false, nil
	}
	tools, err := t.ListTools(ctx)
	if err != nil {
		return kernel.Escalation{}, true, &CatalogueError{Err: err}
	}
	if !kernel.EscalationOffered(tools) {
		return kernel.Escalation{}, false, nil
	}
	esc, err = e.Escalate(ctx, t, call)
	return esc, true, err
}

// Escalate records the escalation asked by call in turn t: the kernel's
// escalation.requested event (after the escalation's own consuming decision: a refusal is
// a *kernel.EscalationRefusedError and records nothing), then the store's record of the
// turn's (world, owner, trace) and the call's id. Nothing is granted.
func (e *Escalations) Escalate(ctx context.Context, t *kernel.Turn, call kernel.ToolCall) (kernel.Escalation, error) {
	esc, err := t.RecordEscalation(ctx, kernel.EscalationReason(call.Arguments), nil)
	if err != nil {
		return kernel.Escalation{}, err
	}
	actx := t.Context()
	rec := store.EscalationRecord{World: actx.World, Owner: actx.Owner, TraceID: actx.TraceID, CallID: call.ID, Escalation: esc}
	if err := e.st.RecordEscalation(ctx, rec); err != nil {
		return kernel.Escalation{}, err
	}
	return esc, nil
}

// Get returns escalation id with its resolution, read by its key (no listing). An
// unknown id wraps store.ErrNotFound.
func (e *Escalations) Get(ctx context.Context, id int64) (store.EscalationRecord, error) {
	return e.st.GetEscalation(ctx, id)
}

// List returns the escalations f selects, the most recently recorded first.
func (e *Escalations) List(ctx context.Context, f store.EscalationFilter) ([]store.EscalationRecord, error) {
	return e.st.ListEscalations(ctx, f)
}

// ByCall returns the escalation that call callID recorded in (world, owner), selected by
// the store's query (store.EscalationFilter.CallID); ok=false when there is none.
func (e *Escalations) ByCall(ctx context.Context, world string, owner kernel.Address, callID string) (rec store.EscalationRecord, ok bool, err error) {
	recs, err := e.st.ListEscalations(ctx, store.EscalationFilter{World: world, Owner: owner, CallID: callID, Limit: 1})
	if err != nil || len(recs) == 0 {
		return store.EscalationRecord{}, false, err
	}
	return recs[0], true, nil
}

// NotReviewerError is Resolve's refusal of a decision taken in another (world, owner)
// than the escalation's: its reviewer is the owner it was asked of, in its world.
// Nothing was written.
type NotReviewerError struct {
	Record store.EscalationRecord
	World  string
	Owner  kernel.Address
}

func (e *NotReviewerError) Error() string {
	return fmt.Sprintf("escalation %d was asked of %s in world %s, not of %s in world %s",
		e.Record.ID, e.Record.Owner, e.Record.World, e.Owner, e.World)
}

// Resolution is a reviewer's decision for Resolve.
type Resolution struct {
	// ID is the escalation's number (Get's id).
	ID int64
	// Decision is store.EscalationApproved or store.EscalationDenied.
	Decision string
	// Note is the reviewer's note ("" when none).
	Note string
	// Source is the surface the decision came through (the audit event's source).
	Source string
}

// Resolve records the reviewer's decision r on an escalation, in turn t: the reviewer is
// the turn's owner, at the turn's instant. The escalation is read by its id first, and
// nothing is written when it is unknown (store.ErrNotFound), asked of another (world,
// owner) (*NotReviewerError) or already resolved (store.ErrAlreadyResolved, with the
// record as it is: a resolution is never changed, and the same decision again changes
// nothing either). Otherwise the kernel writes its escalation.resolved event through the
// store's ResolveEscalation, which stores the resolution with it in one transaction (both
// or neither; another process resolving it in between is ErrAlreadyResolved too). It
// returns the resolved record.
func (e *Escalations) Resolve(ctx context.Context, t *kernel.Turn, r Resolution) (store.EscalationRecord, error) {
	if r.Decision != store.EscalationApproved && r.Decision != store.EscalationDenied {
		return store.EscalationRecord{}, fmt.Errorf("resolve escalation %d: %w %q", r.ID, kernel.ErrInvalidDecision, r.Decision)
	}
	rec, err := e.st.GetEscalation(ctx, r.ID)
	if err != nil {
		return store.EscalationRecord{}, err
	}
	actx := t.Context()
	if rec.World != actx.World || rec.Owner != actx.Owner {
		return rec, &NotReviewerError{Record: rec, World: actx.World, Owner: actx.Owner}
	}
	if rec.Resolution != nil {
		return rec, fmt.Errorf("escalation %d was %w (%s by %s at %s)", r.ID, store.ErrAlreadyResolved,
			rec.Resolution.Status, rec.Resolution.ResolvedBy, rec.Resolution.ResolvedAt)
	}
	res := store.EscalationResolution{Status: r.Decision, ResolvedBy: actx.Owner, ResolvedAt: actx.Now, Note: r.Note}
	var done store.EscalationRecord
	_, err = t.RecordEscalationResolution(ctx, kernel.EscalationDecision{Escalation: r.ID, CallID: rec.CallID,
		RequestTraceID: rec.TraceID, Decision: r.Decision, Note: r.Note, Source: r.Source},
		func(ctx context.Context, ev kernel.AuditEvent) error {
			var err error
			done, err = e.st.ResolveEscalation(ctx, r.ID, res, ev)
			return err
		})
	if err != nil {
		if errors.Is(err, store.ErrAlreadyResolved) {
			return done, err // resolved by another process since the read: the record as it is
		}
		return store.EscalationRecord{}, err
	}
	return done, nil
}
