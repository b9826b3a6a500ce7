package host

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// Principals is the principal cache of a surface that serves many principals from one
// process (`mcp --listen`, and later `serve`): it turns a principal — a token's context
// and grant files — into a prepared, opened host and its session, once per principal
// (concurrent first uses wait for the one build), and keeps them until they are retired.
// Every principal's host uses the same state database handle, opened when the first
// principal is opened and closed by Close: the principals' stores differ in nothing but
// the handle, and one handle means one connection pool, one audit spool and one
// migration check for the whole process.
//
// T is what the surface builds for each principal over its host and session (the MCP
// server of `mcp --listen`); Attach builds it. Principals never authorizes, filters or
// audits: each principal's kernel does, under that principal's context.
type Principals[T any] struct {
	cfg PrincipalsConfig[T]

	storeMu sync.Mutex
	store   store.State
	live    int  // principals opened over store and not closed yet
	closed  bool // Close was called: the store closes with the last principal

	mu       sync.Mutex
	cache    map[string]*Principal[T] // by PrincipalKey
	building map[string]chan struct{} // keys whose host is being opened
}

// PrincipalsConfig configures Principals.
type PrincipalsConfig[T any] struct {
	// Base is the surface's resolved settings: root, state, ceiling, namespaces, --now.
	// With Tokens set, each token's context and grant files replace Base's (As, Owner,
	// Authority, World, Purpose, Grants); without, every principal is Base's context (the
	// ephemeral token bound to the CLI's context).
	Base Settings
	// Tokens is the tokens file ("" : the principals take Base's context; StoreTokens:
	// the tokens of the state database).
	Tokens string
	// State, when set, is the state database handle every principal uses, opened (and
	// closed) by the caller instead of by the first principal (--tokens store: reads the
	// tokens through it before any principal is open).
	State store.State
	Clock func() time.Time
	// Needs are the needs of every principal's host.
	Needs Needs
	// Attach builds the surface's part of a new principal (its host and session are
	// open); an error closes the principal and is Get's error.
	Attach func(ctx context.Context, p *Principal[T]) (T, error)
}

// Principal is one principal's opened host and session, and the surface's part.
type Principal[T any] struct {
	// ID is the token's id and Key its PrincipalKey; Role the token's role.
	ID, Key, Role string
	Host          *Host
	Session       *Session
	Surface       T

	ps   *Principals[T]
	once sync.Once
}

// Close releases the principal's host (its planes, gateway connections and grant
// cache writes). The shared state database stays open while another principal uses it
// or until Principals.Close; the last principal closed after that closes it. Closing
// again does nothing.
func (p *Principal[T]) Close() error {
	var err error
	p.once.Do(func() {
		err = p.Host.Close()
		if serr := p.ps.release(); err == nil {
			err = serr
		}
	})
	return err
}

// release forgets one principal of the shared store, closing it when it was the last
// and Close was called.
func (ps *Principals[T]) release() error {
	ps.storeMu.Lock()
	defer ps.storeMu.Unlock()
	ps.live--
	if ps.live == 0 && ps.closed && ps.store != nil {
		err := ps.closeStore()
		ps.store = nil
		return err
	}
	return nil
}

// NewPrincipals returns an empty principal cache.
func NewPrincipals[T any](cfg PrincipalsConfig[T]) *Principals[T] {
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	return &Principals[T]{cfg: cfg, cache: map[string]*Principal[T]{}, building: map[string]chan struct{}{}}
}

// PrincipalKey identifies what a principal is built from: a changed context or grant list
// (or a re-created token under the same id) is a new principal. It is computed at every
// request, so it is built by hand, not by encoding/json (about 9 µs of a 180 µs
// authorize): every field is written with its length first, so that two different
// entries never have the same key, whatever bytes their fields hold.
func PrincipalKey(e *tokens.Entry) string {
	n := len(e.ID) + len(e.SHA256) + len(e.Context.World) + len(e.Context.Purpose) + len(e.Role) + 64
	for _, g := range e.Grants {
		n += len(g) + 4
	}
	b := make([]byte, 0, n)
	b = appendKeyField(b, e.ID)
	b = appendKeyField(b, e.SHA256)
	b = appendKeyAddress(b, &e.Context.Actor)
	b = appendKeyAddress(b, e.Context.Owner)
	b = appendKeyAddress(b, e.Context.Authority)
	b = appendKeyField(b, e.Context.World)
	b = appendKeyField(b, e.Context.Purpose)
	b = strconv.AppendInt(b, int64(len(e.Grants)), 10)
	b = append(b, '#')
	for _, g := range e.Grants {
		b = appendKeyField(b, g)
	}
	b = appendKeyField(b, e.Role)
	return string(b)
}

// appendKeyField appends s as "len:s" (PrincipalKey).
func appendKeyField(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// appendKeyAddress appends a as "-" when nil, else "+" and its kind and id (PrincipalKey).
func appendKeyAddress(b []byte, a *kernel.Address) []byte {
	if a == nil {
		return append(b, '-')
	}
	b = append(b, '+')
	b = appendKeyField(b, string(a.Kind))
	return appendKeyField(b, a.ID)
}

// Get returns the principal of token entry e, opening it on first use. Opening runs
// outside the cache's lock (one build per key at a time), so a slow host (a gateway
// connection) delays only its own token's first use; the host outlives the request that
// opened it, so it is opened without ctx's cancellation (ctx ending only stops a wait for
// another caller's build).
func (ps *Principals[T]) Get(ctx context.Context, e *tokens.Entry) (*Principal[T], error) {
	key := PrincipalKey(e)
	for {
		ps.mu.Lock()
		if p := ps.cache[key]; p != nil {
			ps.mu.Unlock()
			return p, nil
		}
		if ch, ok := ps.building[key]; ok {
			ps.mu.Unlock()
			select {
			case <-ch:
				continue // built, or failed: look again
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		ps.building[key] = ch
		ps.mu.Unlock()
		p, err := ps.open(context.WithoutCancel(ctx), key, e)
		ps.mu.Lock()
		delete(ps.building, key)
		if err == nil {
			ps.cache[key] = p
		}
		ps.mu.Unlock()
		close(ch)
		return p, err
	}
}

// settings are the host settings of entry e: Base's, with the token's context and grant
// files when the principals come from a tokens file.
func (ps *Principals[T]) settings(e *tokens.Entry) *Settings {
	st := ps.cfg.Base
	st.Namespaces = slices.Clone(st.Namespaces)
	st.Grants = slices.Clone(st.Grants)
	if ps.cfg.Tokens != "" {
		st.As, st.Owner, st.Authority = e.Context.Actor.String(), "", ""
		if e.Context.Owner != nil {
			st.Owner = e.Context.Owner.String()
		}
		if e.Context.Authority != nil {
			st.Authority = e.Context.Authority.String()
		}
		st.World, st.Purpose = e.Context.World, e.Context.Purpose
		st.Grants = slices.Clone(e.Grants)
		st.Tokens = ps.cfg.Tokens
		st.Trace, st.CallID = "", ""
	}
	return &st
}

// open prepares, opens and attaches the principal of e. Every input is checked (Prepare)
// before the shared state database is opened, the first time.
func (ps *Principals[T]) open(ctx context.Context, key string, e *tokens.Entry) (*Principal[T], error) {
	prep, err := Prepare(ps.settings(e), ps.cfg.Clock, ps.cfg.Needs)
	if err != nil {
		return nil, err
	}
	st, err := ps.acquire(ctx, prep.Settings)
	if err != nil {
		_ = prep.Close()
		return nil, err
	}
	p := &Principal[T]{ID: e.ID, Key: key, Role: e.Role, ps: ps}
	fail := func(err error) (*Principal[T], error) {
		_ = prep.Close()
		_ = ps.release()
		return nil, err
	}
	if p.Host, err = prep.open(ctx, st); err != nil {
		return fail(err)
	}
	if p.Session, err = p.Host.NewSession(ps.cfg.Clock); err != nil {
		return fail(err)
	}
	if ps.cfg.Attach != nil {
		if p.Surface, err = ps.cfg.Attach(ctx, p); err != nil {
			return fail(err)
		}
	}
	return p, nil
}

// acquire returns the one state database handle for one more principal, opening it on
// first use (with its audit spool when the principals' needs ask for one). A failed open
// is retried by the next principal.
func (ps *Principals[T]) acquire(ctx context.Context, s *Settings) (store.State, error) {
	ps.storeMu.Lock()
	defer ps.storeMu.Unlock()
	if ps.closed {
		return nil, &Error{Kind: KindInternal, Message: "the principal cache is closed"}
	}
	if ps.store != nil {
		ps.live++
		return ps.store, nil
	}
	if ps.cfg.State != nil {
		ps.store, ps.live = ps.cfg.State, 1
		return ps.store, nil
	}
	st, err := OpenState(ctx, s, ps.cfg.Needs.Workload)
	if err != nil {
		return nil, err
	}
	ps.store, ps.live = st, 1
	return st, nil
}

// Retain keeps the cached principals whose key keep reports and removes the others from
// the cache, returning them: the caller retires them (closes their sessions, then the
// principal) once their in-flight work ended.
func (ps *Principals[T]) Retain(keep func(key string) bool) []*Principal[T] {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var gone []*Principal[T]
	for k, p := range ps.cache {
		if !keep(k) {
			gone = append(gone, p)
			delete(ps.cache, k)
		}
	}
	return gone
}

// All returns the cached principals, in no particular order.
func (ps *Principals[T]) All() []*Principal[T] {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	out := make([]*Principal[T], 0, len(ps.cache))
	for _, p := range ps.cache {
		out = append(out, p)
	}
	return out
}

// Close removes every principal from the cache and calls close on each (which must end
// with Principal.Close); the shared state database is closed once every principal —
// those retired before (Retain) too — is closed. A Get after Close fails.
func (ps *Principals[T]) Close(close func(*Principal[T])) error {
	ps.storeMu.Lock()
	ps.closed = true
	ps.storeMu.Unlock()
	for _, p := range ps.Retain(func(string) bool { return false }) {
		close(p)
	}
	ps.storeMu.Lock()
	defer ps.storeMu.Unlock()
	if ps.live == 0 && ps.store != nil {
		err := ps.closeStore()
		ps.store = nil
		return err
	}
	return nil
}

// closeStore closes the shared handle unless the caller gave it (PrincipalsConfig.State).
func (ps *Principals[T]) closeStore() error {
	if ps.cfg.State != nil {
		return nil
	}
	return ps.store.Close()
}

// Store returns the shared state database handle (nil before the first principal opened
// it, and after it was closed).
func (ps *Principals[T]) Store() store.State {
	ps.storeMu.Lock()
	defer ps.storeMu.Unlock()
	return ps.store
}
