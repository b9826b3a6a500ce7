package host

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// storeTokenIDs are the ids of the store's tokens, in order.
func storeTokenIDs(t *testing.T, dsn string) []string {
	t.Helper()
	f, err := ListStoreTokens(context.Background(), dsn)
	if err != nil {
		t.Fatalf("ListStoreTokens: %v", err)
	}
	ids := []string{}
	for _, e := range f.Entries {
		ids = append(ids, e.ID)
	}
	return ids
}

// TestStoreTokensOverSQLiteRefused: every entry point of --tokens store: refuses a SQLite
// state file with one KindUsage line that names the file, and creates nothing there.
func TestStoreTokensOverSQLiteRefused(t *testing.T) {
	ctx := context.Background()
	state := filepath.Join(t.TempDir(), "state.db")
	want := "--tokens store: needs a PostgreSQL state database, and --state is the file " + state
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"OpenTokenStore", func() error {
			_, err := OpenTokenStore(ctx, &Settings{State: state, StateDir: filepath.Dir(state)})
			return err
		}},
		{"CreateStoreToken", func() error {
			return CreateStoreToken(ctx, state, tokens.NewEntry{ID: "a", SHA256: strings.Repeat("a", 64)}, time.Unix(0, 0))
		}},
		{"RevokeStoreToken", func() error { return RevokeStoreToken(ctx, state, "a") }},
		{"ListStoreTokens", func() error { _, err := ListStoreTokens(ctx, state); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var he *Error
			if !errors.As(err, &he) || he.Kind != KindUsage || he.Error() != want || !strings.Contains(he.Hint, "postgres://") {
				t.Fatalf("%s over a SQLite file = %v; want KindUsage %q", tc.name, err, want)
			}
			if m, _ := filepath.Glob(state + "*"); len(m) != 0 {
				t.Errorf("%s created %v", tc.name, m)
			}
		})
	}
}

// TestStoreTokensLifecycle: tokens created in the store are listed (with their context,
// grants, expiry and role, default agent), read by a TokenStore and seen again after a
// change; a duplicate id, an invalid entry and an unknown id are refused with one line
// each and leave the tokens as they were.
func TestStoreTokensLifecycle(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	if _, err := MigrateState(ctx, dsn); err != nil {
		t.Fatalf("MigrateState: %v", err)
	}
	owner, _ := kernel.ParseAddress("human:ana")
	agent, _ := kernel.ParseAddress("agent:reviewer")
	now := time.UnixMilli(1_700_000_000_000).UTC()
	grant := filepath.Join(t.TempDir(), "g.yaml")
	reviewer := tokens.NewEntry{ID: "reviewer", SHA256: strings.Repeat("b", 64),
		Context: tokens.Context{Actor: agent, Owner: &owner, Authority: &owner, World: "w1", Purpose: "review"},
		Grants:  []string{grant}, ExpiresAt: now.Add(time.Hour)}
	if err := CreateStoreToken(ctx, dsn, reviewer, now); err != nil {
		t.Fatalf("CreateStoreToken: %v", err)
	}
	op := tokens.NewEntry{ID: "op", SHA256: strings.Repeat("c", 64), Role: tokens.RoleOperator,
		Context: tokens.Context{Actor: owner}}
	if err := CreateStoreToken(ctx, dsn, op, now); err != nil {
		t.Fatalf("CreateStoreToken op: %v", err)
	}

	f, err := ListStoreTokens(ctx, dsn)
	if err != nil {
		t.Fatalf("ListStoreTokens: %v", err)
	}
	if f.Path != StoreTokens || len(f.Entries) != 2 {
		t.Fatalf("ListStoreTokens = %+v; want 2 entries from %s", f, StoreTokens)
	}
	byID := map[string]tokens.Entry{}
	for _, e := range f.Entries {
		byID[e.ID] = e
	}
	r := byID["reviewer"]
	if r.Role != tokens.RoleAgent || r.Context.Actor.String() != "agent:reviewer" || r.Context.Owner == nil || r.Context.Owner.String() != "human:ana" ||
		r.Context.Authority == nil || r.Context.World != "w1" || r.Context.Purpose != "review" ||
		len(r.Grants) != 1 || r.Grants[0] != grant || !r.ExpiresAt.Equal(now.Add(time.Hour)) {
		t.Errorf("reviewer = %+v", r)
	}
	if o := byID["op"]; o.Role != tokens.RoleOperator || o.Context.Owner != nil || !o.ExpiresAt.IsZero() {
		t.Errorf("op = %+v", o)
	}

	ts, err := OpenTokenStore(ctx, &Settings{State: dsn, StateDir: t.TempDir()})
	if err != nil {
		t.Fatalf("OpenTokenStore: %v", err)
	}
	defer ts.Close()
	if ts.Path() != StoreTokens || ts.State() == nil {
		t.Errorf("Path = %q, State = %v", ts.Path(), ts.State())
	}
	cur, err := ts.Current()
	if err != nil || len(cur.Entries) != 2 {
		t.Fatalf("Current = %v, %v; want 2 entries", cur, err)
	}
	if again, _ := ts.Current(); again != cur {
		t.Errorf("Current read again with no change in between")
	}

	before := storeTokenIDs(t, dsn)
	for _, tc := range []struct {
		name string
		call func() error
		kind Kind
		msg  string
	}{
		{"duplicate id", func() error { return CreateStoreToken(ctx, dsn, op, now) }, KindUsage, `--tokens store: token "op": duplicate token id`},
		{"relative grant", func() error {
			e := op
			e.ID, e.SHA256, e.Grants = "rel", strings.Repeat("d", 64), []string{"g.yaml"}
			return CreateStoreToken(ctx, dsn, e, now)
		}, KindUsage, `token "rel": grant file g.yaml is not an absolute path`},
		{"invalid id", func() error {
			e := op
			e.ID, e.SHA256 = "no spaces", strings.Repeat("e", 64)
			return CreateStoreToken(ctx, dsn, e, now)
		}, KindUsage, `token "no spaces": invalid id`},
		{"unknown id", func() error { return RevokeStoreToken(ctx, dsn, "ghost") }, KindUsage, `--tokens store: token "ghost": no such token`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var he *Error
			if !errors.As(err, &he) || he.Kind != tc.kind || he.Error() != tc.msg {
				t.Fatalf("= %v; want %q", err, tc.msg)
			}
			if got := storeTokenIDs(t, dsn); strings.Join(got, ",") != strings.Join(before, ",") {
				t.Errorf("tokens after the refusal = %v; want %v", got, before)
			}
		})
	}

	if err := RevokeStoreToken(ctx, dsn, "op"); err != nil {
		t.Fatalf("RevokeStoreToken: %v", err)
	}
	if got := storeTokenIDs(t, dsn); strings.Join(got, ",") != "reviewer" {
		t.Errorf("tokens after revoking op = %v; want [reviewer]", got)
	}
}

// TestTokenEntryRefusals: a stored token that no tokens file could hold is refused with
// what is wrong.
func TestTokenEntryRefusals(t *testing.T) {
	ok := pgstore.Token{ID: "t1", SHA256: strings.Repeat("a", 64), Actor: "agent:a", Owner: "human:o", Grants: []string{"/abs/g.yaml"}, ExpiresMs: 1}
	for _, tc := range []struct {
		name string
		edit func(*pgstore.Token)
		want string
	}{
		{"bad id", func(p *pgstore.Token) { p.ID = "a b" }, "invalid id"},
		{"bad actor", func(p *pgstore.Token) { p.Actor = "nokind" }, "actor: "},
		{"bad owner", func(p *pgstore.Token) { p.Owner = "robot:x" }, `unknown kind "robot"`},
		{"relative grant", func(p *pgstore.Token) { p.Grants = []string{"rel.yaml"} }, "grant file rel.yaml is not an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.edit(&p)
			_, err := tokenEntry(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("tokenEntry = %v; want an error containing %q", err, tc.want)
			}
		})
	}
	if e, err := tokenEntry(ok); err != nil || e.Role != tokens.RoleAgent {
		t.Fatalf("tokenEntry(valid) = %+v, %v", e, err)
	}
}
