package httpapi_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// pgReplicas writes a root, grant file grants for agent:alice-bot and a tokens file
// (alice, op as in newFixture) under a new directory and returns a function that starts
// one more replica — an in-process serve with its own host and its own pgstore pool —
// over the PostgreSQL database dsn; each stops when t ends (or by its Close).
func pgReplicas(t *testing.T, dsn, grants string, cfgs ...func(*httpapi.Config)) (start func() (*servetest.Server, *fixture)) {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), tok: map[string]string{}, validate: validateResponse, state: dsn}
	f.root = filepath.Join(f.dir, "root")
	must(t, os.MkdirAll(filepath.Join(f.root, "drafts"), 0o755))
	cfgDir := filepath.Join(f.dir, "etc")
	must(t, os.MkdirAll(filepath.Join(cfgDir, "grants"), 0o755))
	must(t, os.WriteFile(filepath.Join(cfgDir, "grants", "alice.yaml"), []byte(grants), 0o600))
	f.tokensPath = filepath.Join(cfgDir, "tokens.yaml")
	for _, id := range []string{"alice", "op"} {
		tok, err := tokens.New()
		must(t, err)
		f.tok[id] = tok
		owner, _ := kernel.ParseAddress("human:alice")
		actor, _ := kernel.ParseAddress("agent:alice-bot")
		e := tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok),
			Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "test"}, Grants: []string{"grants/alice.yaml"}}
		if id == "op" {
			e.Role = tokens.RoleOperator
		}
		must(t, tokens.Append(f.tokensPath, e))
	}
	n := 0
	return func() (*servetest.Server, *fixture) {
		t.Helper()
		n++
		srv, err := servetest.Start(context.Background(), host.Settings{Root: f.root, State: dsn,
			StateDir: filepath.Join(f.dir, "local", string(rune('a'+n))), DefaultNamespaces: []string{"files", "sharedos"}},
			f.tokensPath, nil, func(hc *httpapi.Config) {
				hc.Logger = slog.New(slog.DiscardHandler)
				for _, c := range cfgs {
					c(hc)
				}
			})
		must(t, err)
		t.Cleanup(srv.Close)
		g := *f
		g.srv, g.url = srv.Tokens, srv.URL
		return srv, &g
	}
}

// execPG runs one statement on dsn.
func execPG(t *testing.T, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	must(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), sql)
	must(t, err)
}

// readyWithin polls /readyz until it answers want (bounded by limit, a test timeout, not
// a measured delay) and returns the last answer.
func readyWithin(f *fixture, want int, limit time.Duration) response {
	f.t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r := f.do("GET", "/readyz", "", "")
		if r.status == want || time.Now().After(deadline) {
			return r
		}
		time.Sleep(50 * time.Millisecond) // polling for a state, not waiting for time to pass
	}
}

// TestReadinessOnPostgres: serve on a PostgreSQL database whose schema lacks a
// migration starts, and /readyz is 503 naming it; once the schema is at head it is 200
// without a restart. The server stopped (a real outage: every connection dropped) ⇒
// 503 not_ready; started again ⇒ 200, the same serve process all along.
func TestReadinessOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a private PostgreSQL cluster")
	}
	pg := pgtest.StartPrivate(t)
	dsn := pg.DSN(t)
	if _, err := pgstore.Migrate(context.Background(), dsn); err != nil {
		t.Fatal(err)
	}
	last := pgstore.SchemaVersion
	execPG(t, dsn, "DELETE FROM "+pgstore.VersionTable+" WHERE version_id = "+itoa(last))
	_, f := pgReplicas(t, dsn, aliceGrants)()

	r := f.do("GET", "/readyz", "", "")
	if r.status != 503 || r.errCode(t) != "not_ready" || !strings.Contains(string(r.body), fmt.Sprintf("%05d_", last)) {
		t.Fatalf("readyz with migration %d pending: %d %s; want 503 naming it", last, r.status, r.body)
	}
	execPG(t, dsn, "INSERT INTO "+pgstore.VersionTable+" (version_id, is_applied) VALUES ("+itoa(last)+", true)")
	if r := f.do("GET", "/readyz", "", ""); r.status != 200 {
		t.Fatalf("readyz at head: %d %s", r.status, r.body)
	}

	pg.Stop(t)
	if r := f.do("GET", "/readyz", "", ""); r.status != 503 || r.errCode(t) != "not_ready" {
		t.Fatalf("readyz with the server stopped: %d %s", r.status, r.body)
	}
	if r := f.do("GET", "/healthz", "", ""); r.status != 200 {
		t.Fatalf("healthz with the server stopped: %d", r.status)
	}
	pg.Restart(t)
	if r := readyWithin(f, 200, 30*time.Second); r.status != 200 {
		t.Fatalf("readyz with the server back: %d %s", r.status, r.body)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
