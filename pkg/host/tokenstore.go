package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// StoreTokens is the value of --tokens (SHAREDOS_TOKENS, the config key tokens) that
// keeps the tokens in the PostgreSQL state database instead of a file: `serve` and
// `mcp --listen` replicas over one database then share them, and `sharedos tokens
// create|revoke --tokens store:` through any machine takes effect on all — on each
// replica's next request once its view of the revision includes the change (its
// listener's notification, else its poll: within a second), at once for a request that
// names the change's revision.
//
// A SQLite state database refuses it (one machine's file: the tokens file is the way
// there). The tokens file stays the default.
const StoreTokens = "store:"

// storeTokensName names the store's tokens in messages ("--tokens store:" reads better
// than the bare value, which ends in a colon of its own).
const storeTokensName = "--tokens store:"

// IsStoreTokens reports whether a --tokens value names the store's tokens.
func IsStoreTokens(v string) bool { return v == StoreTokens }

// storeTokensNeedsPostgres is the refusal of --tokens store: over a SQLite state file.
func storeTokensNeedsPostgres(state string) error {
	return &Error{Kind: KindUsage, Message: fmt.Sprintf("--tokens store: needs a PostgreSQL state database, and --state is the file %s", state),
		Hint: "pass --state postgres://… (tokens in the store are shared by replicas), or --tokens FILE on one machine"}
}

// TokenStore is the tokens of --tokens store:, read from the state database and kept
// until the process's view of the revision passes the revision they were read at (a
// token created, changed or revoked anywhere). It has the tokens file watcher's method
// Current, fail-closed as the watcher is: a read that fails is an error until one
// succeeds, never the previous tokens.
type TokenStore struct {
	st    *pgstore.Store
	owned bool

	mu     sync.Mutex
	file   *tokens.File
	rev    int64
	loaded bool
}

// OpenTokenStore opens the store's tokens over the PostgreSQL state database of s (its
// own handle, which Close closes).
func OpenTokenStore(ctx context.Context, s *Settings) (*TokenStore, error) {
	if !IsPostgresState(s.State) {
		return nil, storeTokensNeedsPostgres(s.State)
	}
	st, err := OpenState(ctx, s, WorkloadServer)
	if err != nil {
		return nil, err
	}
	return &TokenStore{st: st.(*pgstore.Store), owned: true}, nil
}

// State is the state database the tokens are read from.
func (ts *TokenStore) State() store.State { return ts.st }

// Close closes the state database handle.
func (ts *TokenStore) Close() error {
	if ts.owned {
		return ts.st.Close()
	}
	return nil
}

// Path names the tokens' source in messages.
func (ts *TokenStore) Path() string { return StoreTokens }

// Current returns the tokens: the ones read last while the process's view of the
// revision has not passed them, else read again.
func (ts *TokenStore) Current() (*tokens.File, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.loaded && ts.st.Revision() <= ts.rev {
		return ts.file, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts.loaded = false
	list, rev, err := ts.st.Tokens(ctx)
	if err != nil {
		return nil, fmt.Errorf("the tokens in the state database cannot be read: %w", err)
	}
	f := &tokens.File{Path: StoreTokens, Entries: make([]tokens.Entry, 0, len(list))}
	for i, t := range list {
		e, err := tokenEntry(t)
		if err != nil {
			return nil, fmt.Errorf("%s token %q: %w", storeTokensName, t.ID, err)
		}
		e.Line = i + 1
		f.Entries = append(f.Entries, e)
	}
	ts.file, ts.rev, ts.loaded = f, rev, true
	return f, nil
}

// tokenEntry is a stored token as a tokens file's entry, checked as the file's are.
func tokenEntry(t pgstore.Token) (tokens.Entry, error) {
	e := tokens.Entry{ID: t.ID, SHA256: t.SHA256, Grants: t.Grants, Role: t.Role,
		Context: tokens.Context{World: t.World, Purpose: t.Purpose}}
	if !tokens.ValidID(t.ID) {
		return e, errors.New("invalid id")
	}
	var err error
	if e.Context.Actor, err = kernel.ParseAddress(t.Actor); err != nil {
		return e, fmt.Errorf("actor: %w", err)
	}
	for _, a := range []struct {
		v   string
		dst **kernel.Address
	}{{t.Owner, &e.Context.Owner}, {t.Authority, &e.Context.Authority}} {
		if a.v == "" {
			continue
		}
		addr, err := kernel.ParseAddress(a.v)
		if err != nil {
			return e, err
		}
		*a.dst = &addr
	}
	for _, g := range t.Grants {
		if !filepath.IsAbs(g) {
			return e, fmt.Errorf("grant file %s is not an absolute path", g)
		}
	}
	if t.ExpiresMs != 0 {
		e.ExpiresAt = time.UnixMilli(t.ExpiresMs).UTC()
	}
	if e.Role == "" {
		e.Role = tokens.RoleAgent
	}
	return e, nil
}

// openTokenAdmin opens the PostgreSQL state database of state for one edit of its tokens.
func openTokenAdmin(ctx context.Context, state string) (*pgstore.Store, error) {
	if !IsPostgresState(state) {
		return nil, storeTokensNeedsPostgres(state)
	}
	st, err := pgstore.Open(ctx, state, pgstore.Options{})
	if err != nil {
		return nil, &Error{Kind: KindState, Message: err.Error(), Hint: postgresStateHint, Err: err}
	}
	return st, nil
}

// CreateStoreToken adds entry e (its grant files absolute) to the tokens of the state
// database state. An id or a token already there is a KindUsage error.
func CreateStoreToken(ctx context.Context, state string, e tokens.NewEntry, now time.Time) error {
	st, err := openTokenAdmin(ctx, state)
	if err != nil {
		return err
	}
	defer st.Close()
	t := pgstore.Token{ID: e.ID, SHA256: e.SHA256, Actor: e.Context.Actor.String(), World: e.Context.World, Purpose: e.Context.Purpose,
		Grants: e.Grants, Role: e.Role, CreatedMs: now.UnixMilli()}
	if e.Context.Owner != nil {
		t.Owner = e.Context.Owner.String()
	}
	if e.Context.Authority != nil {
		t.Authority = e.Context.Authority.String()
	}
	if !e.ExpiresAt.IsZero() {
		t.ExpiresMs = e.ExpiresAt.UnixMilli()
	}
	if _, err := tokenEntry(t); err != nil {
		return &Error{Kind: KindUsage, Message: fmt.Sprintf("token %q: %v", e.ID, err), Hint: "see 'sharedos tokens create --help'"}
	}
	if err := st.CreateToken(ctx, t); err != nil {
		if errors.Is(err, store.ErrDuplicate) {
			return &Error{Kind: KindUsage, Message: fmt.Sprintf("%s token %q: duplicate token id", storeTokensName, e.ID),
				Hint: "choose another --id, or 'sharedos tokens revoke " + e.ID + " --tokens store:' first", Err: err}
		}
		return &Error{Kind: KindState, Message: err.Error(), Hint: postgresStateHint, Err: err}
	}
	return nil
}

// RevokeStoreToken removes the token id from the tokens of the state database state; an
// unknown id is a KindUsage error.
func RevokeStoreToken(ctx context.Context, state, id string) error {
	st, err := openTokenAdmin(ctx, state)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.RevokeToken(ctx, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return &Error{Kind: KindUsage, Message: fmt.Sprintf("%s token %q: no such token", storeTokensName, id),
				Hint: "'sharedos tokens list --tokens store:' shows the ids", Err: err}
		}
		return &Error{Kind: KindState, Message: err.Error(), Hint: postgresStateHint, Err: err}
	}
	return nil
}

// ListStoreTokens returns the tokens of the state database state.
func ListStoreTokens(ctx context.Context, state string) (*tokens.File, error) {
	st, err := openTokenAdmin(ctx, state)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	ts := &TokenStore{st: st}
	f, err := ts.Current()
	if err != nil {
		return nil, &Error{Kind: KindState, Message: err.Error(), Hint: postgresStateHint, Err: err}
	}
	return f, nil
}
