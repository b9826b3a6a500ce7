package kernel

// This file holds the turn: the validated context, its authority (and the
// authority.resolved record) and registry, resolved once per turn.

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
)

// Turn is one turn of one context: it holds the validated context (its enabled tool
// namespaces already narrowed by Config.ForbiddenNamespaces) and what is resolved once
// per turn — the authority (grants loaded once, an outage held for the whole turn) and
// the unfiltered tool registry (providers called once). Every operation of the turn is
// decided against them at the context's instant. A Turn is safe for concurrent use.
//
// The turn's authority.resolved audit event is written once, by the first audited
// operation (ListTools, InvokeTool, the namespace and escalation operations); the dry
// runs (ExplainCall, AllTools) write nothing.
type Turn struct {
	k       *Kernel
	actx    AccessContext
	instant int64 // actx.Now, parsed once
	meta    map[string]any
	once    bool   // TurnOptions.AuthorityResolvedOnce
	session string // TurnOptions.SessionKey

	authOnce sync.Once
	auth     *Authority

	auditOnce sync.Once
	audited   *Authority // auth, or an unavailable one when its audit record failed
	auditErr  error      // why the turn's authority.resolved record could not be written

	regOnce sync.Once
	reg     *registry
	regErr  error
}

// TurnOptions tune a turn.
type TurnOptions struct {
	// AuditMetadata is merged into the metadata of every audit event the turn writes
	// (a surface's name, its session id, the client: "surface", "session", "client").
	// Keys the kernel sets itself win. The map is not copied; do not change it after.
	AuditMetadata map[string]any
	// AuthorityResolvedOnce is for a long-lived session that begins a turn per operation
	// (an MCP session): the turn writes its authority.resolved record only when this
	// kernel has not yet written one for the same authority (its snapshot hash and grant
	// count), the same context identity (actor, authority, owner, world, purpose, trace)
	// and the same AuditMetadata. Every later record of the session names that
	// authorityHash, which the session's first authority.resolved record describes; a
	// changed grant set is a new hash and is recorded again. An unavailable authority is
	// recorded by every turn, and a record that could not be written is tried again by
	// the next turn.
	AuthorityResolvedOnce bool
	// SessionKey, with AuthorityResolvedOnce, names a long-lived session whose every
	// operation carries metadata and a trace of its own (serve's /v1: one request id and
	// trace per HTTP request, under one token's context). Its turns then record
	// authority.resolved once per (session key, context identity without the trace,
	// authority): the memo is keyed by the session key instead of the trace and
	// AuditMetadata, so a per-request id does not make every request record the
	// authority again (spec 50 §1, "a session is not a turn"). The record written carries
	// the metadata and trace of the operation that wrote it; every decision record still
	// carries its own and names the authorityHash that record describes. A changed grant
	// set is a new hash and is recorded again.
	SessionKey string
}

// BeginTurn starts a turn for actx. It fails (matching ErrInvalidContext) when actx does
// not match the contract.
func (k *Kernel) BeginTurn(actx AccessContext) (*Turn, error) {
	return k.BeginTurnWith(actx, TurnOptions{})
}

// BeginTurnWith is BeginTurn with options.
func (k *Kernel) BeginTurnWith(actx AccessContext, opts TurnOptions) (*Turn, error) {
	actx = cloneContext(actx)
	if err := actx.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidContext, err)
	}
	if len(k.cfg.ForbiddenNamespaces) > 0 {
		actx.EnabledToolNamespaces = slices.DeleteFunc(actx.EnabledToolNamespaces, func(n string) bool {
			return slices.Contains(k.cfg.ForbiddenNamespaces, n)
		})
	}
	instant, _ := ParseTimestamp(actx.Now) // Validate parsed it already
	return &Turn{k: k, actx: actx, instant: instant, meta: opts.AuditMetadata, once: opts.AuthorityResolvedOnce, session: opts.SessionKey}, nil
}

// Context returns a copy of the turn's context.
func (t *Turn) Context() AccessContext { return cloneContext(t.actx) }

// Options returns the options the turn was begun with, so a driver can begin another
// turn of the same kernel under another context with them (a reply's turn under the
// request's purpose and trace). Its AuditMetadata is the turn's map itself (not a copy):
// do not change it.
func (t *Turn) Options() TurnOptions {
	return TurnOptions{AuditMetadata: t.meta, AuthorityResolvedOnce: t.once, SessionKey: t.session}
}

// Authority returns the turn's authority, loading it on first use. It writes no audit
// record (see Turn).
func (t *Turn) Authority(ctx context.Context) *Authority {
	t.authOnce.Do(func() { t.auth = t.k.resolveAuthority(ctx, t.actx) })
	return t.auth
}

// auditedAuthority is Authority after the turn's authority.resolved event was written;
// when it cannot be, the turn's audited operations run under no authority.
func (t *Turn) auditedAuthority(ctx context.Context) *Authority {
	auth := t.Authority(ctx)
	t.auditOnce.Do(func() {
		t.audited = auth
		k := t.k
		if k.cfg.Audit == nil {
			return
		}
		memo := ""
		if t.once && auth.unavailable == "" {
			memo = t.authorityMemoKey(auth)
			if k.authorityRecorded(memo) {
				return
			}
		}
		ev := k.event(t.actx, EventAuthorityResolved, OutcomeSucceeded)
		if auth.unavailable != "" {
			ev.Outcome = OutcomeFailed
			ev.Reason = ErrorCodeOf(ReasonAuthorityUnavailable)
			ev.FailClosed = true
			ev.Metadata = map[string]any{"authority": auth.unavailable}
		} else {
			// O(1) in the grants: the set is named by its hash, not listed.
			ev.AuthorityHash = auth.Hash()
			ev.Metadata = map[string]any{"grantCount": len(auth.grants)}
		}
		ev.Metadata["hostCeiling"] = map[bool]string{true: "installed", false: "absent"}[k.cfg.Ceiling != nil]
		if err := t.auditWriteAhead(ctx, ev); err != nil {
			t.audited = UnavailableAuthority(string(CodeAuditUnavailable))
			t.auditErr = err
			return
		}
		if memo != "" {
			k.markAuthorityRecorded(memo)
		}
	})
	return t.audited
}

// maxAuthorityMemo bounds the authority.resolved memo (see TurnOptions.AuthorityResolvedOnce);
// when full it is emptied, which only means records written again.
const maxAuthorityMemo = 1024

// authorityMemoKey identifies what a turn's authority.resolved record says but its
// instant and id.
func (t *Turn) authorityMemoKey(auth *Authority) string {
	a := &t.actx
	// A session's turns share the authority and the metadata map (TurnOptions: not to
	// be changed after): the key of the last turn is reused when nothing it names changed.
	// With a session key, neither the metadata nor the trace is part of the key.
	var metaPtr uintptr
	meta, trace := t.meta, a.TraceID
	if t.session != "" {
		meta, trace = nil, ""
	}
	if meta != nil {
		metaPtr = reflect.ValueOf(meta).Pointer()
	}
	last := t.k.lastMemo.Load()
	if last != nil && last.auth == auth && last.metaPtr == metaPtr && last.session == t.session && last.actor == a.Actor &&
		last.authority == a.Authority && last.owner == a.Owner && last.world == a.World && last.purpose == a.Purpose && last.trace == trace {
		return last.key
	}
	key := t.buildMemoKey(auth, meta, trace)
	if key != "" {
		t.k.lastMemo.Store(&memoKey{auth: auth, meta: meta, metaPtr: metaPtr, session: t.session, actor: a.Actor, authority: a.Authority,
			owner: a.Owner, world: a.World, purpose: a.Purpose, trace: trace, key: key})
	}
	return key
}

// memoKey is the last authority.resolved memo key built, with what it was built from. It
// holds the authority and the metadata map themselves, so that neither address can be
// reused by another value while it is compared by address.
type memoKey struct {
	auth                    *Authority
	meta                    map[string]any
	metaPtr                 uintptr
	actor, authority, owner Address
	world, purpose, trace   string
	session                 string
	key                     string
}

// buildMemoKey is the memo key of auth under the turn's context identity with trace,
// and meta (or, for a session key, the key instead of both: trace and meta are then "" and nil).
func (t *Turn) buildMemoKey(auth *Authority, meta map[string]any, trace string) string {
	a := &t.actx
	b := make([]byte, 0, 256)
	b = append(b, auth.Hash()...)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(len(auth.grants)), 10)
	for _, v := range []string{a.Actor.String(), a.Authority.String(), a.Owner.String(), a.World, a.Purpose, trace, t.session} {
		b = append(b, ' ')
		b = strconv.AppendQuote(b, v)
	}
	b = append(b, ' ')
	// sorted keys: a stable identity (json.Marshal's bytes)
	b, ok := appendJSONValue(b, meta, 0)
	if !ok {
		return "" // unencodable metadata: record every turn
	}
	return string(b)
}

func (k *Kernel) authorityRecorded(key string) bool {
	if key == "" {
		return false
	}
	k.memoMu.Lock()
	defer k.memoMu.Unlock()
	_, ok := k.recorded[key]
	return ok
}

func (k *Kernel) markAuthorityRecorded(key string) {
	k.memoMu.Lock()
	defer k.memoMu.Unlock()
	if k.recorded == nil || len(k.recorded) >= maxAuthorityMemo {
		k.recorded = make(map[string]struct{})
	}
	k.recorded[key] = struct{}{}
}

func (t *Turn) registry(ctx context.Context) (*registry, error) {
	t.regOnce.Do(func() { t.reg, t.regErr = t.k.resolveRegistry(ctx, t.actx) })
	return t.reg, t.regErr
}

// state resolves what a plan is evaluated against; audited selects an effectful
// operation: the turn's authority.resolved event is written first, and the time rules
// are held to the wall clock too (see Config.Clock).
func (t *Turn) state(ctx context.Context, audited bool) *turnState {
	st := &turnState{actx: t.actx, instant: t.instant}
	if audited {
		st.wall = t.k.wallNow()
		st.auth = t.auditedAuthority(ctx)
		st.auditErr = t.auditErr
	} else {
		st.auth = t.Authority(ctx)
	}
	if st.auth.unavailable == "" {
		st.reg, st.regErr = t.registry(ctx)
	}
	return st
}

// wallNow is the wall clock's instant in Unix milliseconds, or 0 without a clock.
func (k *Kernel) wallNow() int64 {
	if k.cfg.Clock == nil {
		return 0
	}
	return k.cfg.Clock().UnixMilli()
}
