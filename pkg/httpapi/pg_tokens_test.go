package httpapi_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// storeTokenReplicas creates tokens ids in the state database dsn (--tokens store:,
// grant file aliceGrants, absolute) and returns a function that starts one more replica
// serving them.
func storeTokenReplicas(t *testing.T, dsn string, ids ...string) (start func() *fixture, tok map[string]string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	must(t, os.MkdirAll(filepath.Join(root, "drafts"), 0o755))
	grants := filepath.Join(dir, "etc", "grants", "alice.yaml")
	must(t, os.MkdirAll(filepath.Dir(grants), 0o755))
	must(t, os.WriteFile(grants, []byte(aliceGrants), 0o600))
	tok = map[string]string{}
	owner, _ := kernel.ParseAddress("human:alice")
	actor, _ := kernel.ParseAddress("agent:alice-bot")
	for _, id := range ids {
		tk, err := tokens.New()
		must(t, err)
		tok[id] = tk
		must(t, host.CreateStoreToken(context.Background(), dsn, tokens.NewEntry{ID: id, SHA256: tokens.Hash(tk),
			Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "test"}, Grants: []string{grants}}, time.Now()))
	}
	n := 0
	start = func() *fixture {
		t.Helper()
		n++
		srv, err := servetest.Start(context.Background(), host.Settings{Root: root, State: dsn,
			StateDir: filepath.Join(dir, "local", strconv.Itoa(n)), DefaultNamespaces: []string{"files", "sharedos"}},
			host.StoreTokens, nil, func(hc *httpapi.Config) { hc.Logger = slog.New(slog.DiscardHandler) })
		must(t, err)
		t.Cleanup(srv.Close)
		return &fixture{t: t, dir: dir, root: root, state: dsn, tok: tok, srv: srv.Tokens, url: srv.URL}
	}
	return start, tok
}

// until401 calls GET /v1/tools on f with token id until it is refused 401 (bounded by
// limit, a test timeout) and returns how long that took and whether it was.
func until401(f *fixture, id string, limit time.Duration) (time.Duration, bool) {
	t0 := time.Now()
	for time.Since(t0) < limit {
		if r := f.do("GET", "/v1/tools", id, ""); r.status == 401 {
			return time.Since(t0), true
		}
		time.Sleep(5 * time.Millisecond) // polling for a state, not waiting for time to pass
	}
	return time.Since(t0), false
}

// TestStoreTokensRevokedOnEveryReplica: with --tokens store:, tokens created in the
// state database serve on two replicas; a token revoked there (as `sharedos tokens
// revoke --tokens store:` does, through any machine) is refused 401 by both — by a
// request naming the revocation's revision at once, and by a plain request within the
// listener's notification (the delay is logged, not asserted). The other token still
// serves.
func TestStoreTokensRevokedOnEveryReplica(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL cluster and two replicas")
	}
	pg := pgtest.StartPrivate(t)
	dsn := pg.DSN(t)
	_, err := pgstore.Migrate(context.Background(), dsn)
	must(t, err)
	start, _ := storeTokenReplicas(t, dsn, "alice", "bob", "carol")
	a, b := start(), start()
	a.validate, b.validate = nil, nil
	for _, f := range []*fixture{a, b} {
		for _, id := range []string{"alice", "bob", "carol"} {
			if r := f.do("GET", "/v1/tools", id, ""); r.status != 200 {
				t.Fatalf("token %s before any revocation: %d %s", id, r.status, r.body)
			}
		}
	}
	must(t, host.RevokeStoreToken(context.Background(), dsn, "alice"))
	rev := countPG(t, dsn, "SELECT rev FROM sharedos_revision")
	for name, f := range map[string]*fixture{"A": a, "B": b} {
		if r := f.do("GET", "/v1/tools", "alice", "", httpapi.HeaderRevision, strconv.FormatInt(rev, 10)); r.status != 401 {
			t.Errorf("replica %s asked at the revocation's revision %d: %d; want 401", name, rev, r.status)
		}
	}
	must(t, host.RevokeStoreToken(context.Background(), dsn, "bob"))
	for name, f := range map[string]*fixture{"A": a, "B": b} {
		d, ok := until401(f, "bob", time.Minute)
		if !ok {
			t.Fatalf("replica %s still serves the revoked token bob after a minute", name)
		}
		t.Logf("bob revoked → refused by replica %s after %v (no revision named)", name, d)
	}
	if r := b.do("GET", "/v1/tools", "carol", ""); r.status != 200 {
		t.Errorf("carol, never revoked: %d", r.status)
	}
}

// TestStoreTokensPollCatchesUp: the notification of a revocation is lost (the token is
// deleted with the triggers off and the revision row moved by hand, as if its NOTIFY
// had gone while the listener reconnected — whose backend is killed too): the replica
// refuses the token all the same, by its poll.
func TestStoreTokensPollCatchesUp(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL cluster")
	}
	pg := pgtest.StartPrivate(t)
	dsn := pg.DSN(t)
	_, err := pgstore.Migrate(context.Background(), dsn)
	must(t, err)
	start, _ := storeTokenReplicas(t, dsn, "alice", "bob")
	a := start()
	a.validate = nil
	if r := a.do("GET", "/v1/tools", "alice", ""); r.status != 200 {
		t.Fatalf("alice: %d", r.status)
	}
	st := a.srv.State().(*pgstore.Store)
	deadline := time.Now().Add(time.Minute)
	for st.ListenerPID() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polling for a state
	}
	execPG(t, dsn, "SELECT pg_terminate_backend("+strconv.FormatUint(uint64(st.ListenerPID()), 10)+")")
	execPG(t, dsn, `BEGIN; SET LOCAL session_replication_role = replica; DELETE FROM tokens WHERE id = 'alice';
		UPDATE sharedos_revision SET rev = rev + 1; COMMIT`)
	d, ok := until401(a, "alice", time.Minute)
	if !ok {
		t.Fatal("the replica still serves alice a minute after a revocation whose notification was lost")
	}
	t.Logf("revocation without a notification → refused after %v", d)
	if r := a.do("GET", "/v1/tools", "bob", ""); r.status != 200 {
		t.Errorf("bob: %d", r.status)
	}
}
