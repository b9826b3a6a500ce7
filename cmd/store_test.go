package cmd

import (
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/tokens"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestNewCmdStoreMigrate: argv → options, reaching no backend (no settings resolved,
// nothing migrated).
func TestNewCmdStoreMigrate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv    []string
		wantErr string
	}{
		{argv: nil},
		{argv: []string{"postgres://db/x"}, wantErr: "takes no arguments"},
		{argv: []string{"--force"}, wantErr: "unknown flag"},
	} {
		ios, _, _, _ := Test()
		f := &Factory{IOStreams: ios, Env: func(string) string { return "" }, Clock: time.Now,
			Getwd: func() (string, error) { return "/work", nil }}
		var got *StoreMigrateOptions
		c := newStoreMigrateCmd(f, func(o *StoreMigrateOptions) error { got = o; return nil })
		c.SetArgs(tc.argv)
		c.SetOut(io.Discard)
		c.SetErr(io.Discard)
		c.SilenceUsage, c.SilenceErrors = true, true
		err := c.Execute()
		if f.settingsOK || f.store != nil || f.host != nil {
			t.Errorf("%q reached the backend", tc.argv)
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one containing %q", tc.argv, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got == nil || got.State == nil || got.Migrate == nil || got.Printer == nil {
			t.Errorf("%q: err %v, options %+v; want every function set", tc.argv, err, got)
		}
	}
}

// TestNewCmdStorePrune: argv → options, reaching no backend; an invalid --retention is a
// usage error before anything is opened.
func TestNewCmdStorePrune(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv      []string
		retention string
		wantErr   string
	}{
		{argv: nil},
		{argv: []string{"--retention", "90d"}, retention: "90d"},
		{argv: []string{"--retention", "720h"}, retention: "720h"},
		{argv: []string{"--retention", "0d"}, wantErr: "invalid --retention"},
		{argv: []string{"--retention", "-5h"}, wantErr: "invalid --retention"},
		{argv: []string{"--retention", "soon"}, wantErr: "invalid --retention"},
		{argv: []string{"90d"}, wantErr: "takes no arguments"},
	} {
		ios, _, _, _ := Test()
		f := &Factory{IOStreams: ios, Env: func(string) string { return "" }, Clock: time.Now,
			Getwd: func() (string, error) { return "/work", nil }}
		var got *StorePruneOptions
		c := newStorePruneCmd(f, func(o *StorePruneOptions) error { got = o; return nil })
		c.SetArgs(tc.argv)
		c.SetOut(io.Discard)
		c.SetErr(io.Discard)
		c.SilenceUsage, c.SilenceErrors = true, true
		err := c.Execute()
		if f.settingsOK || f.store != nil || f.host != nil {
			t.Errorf("%q reached the backend", tc.argv)
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
				t.Errorf("%q: error %v, want one containing %q (and no run)", tc.argv, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got == nil || got.Retention != tc.retention || got.Prune == nil || got.Settings == nil || got.Clock == nil {
			t.Errorf("%q: err %v, options %+v; want every function set and retention %q", tc.argv, err, got, tc.retention)
		}
	}
}

// run runs the command line with args and env (besides the process's), returning the
// exit code and the two streams.
func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	ios, _, out, errOut := Test()
	code := MainWith(args, ios, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

// TestStoreMigrate: `sharedos store migrate` against a real PostgreSQL: it migrates a
// fresh database (JSON result), says there is nothing to do the second time (the DSN
// taken from SHAREDOS_STATE), refuses a schema newer than this build's in one line
// (exit 1, state_unavailable, nothing changed), and refuses a SQLite file with a usage
// error. The password of the DSN is never printed.
func TestStoreMigrate(t *testing.T) {
	raw := pgtest.DSN(t)
	u, _ := url.Parse(raw)
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	dsn := u.String()
	home := t.TempDir()
	env := map[string]string{"HOME": home}

	code, out, errOut := runCLI(t, env, "store", "migrate", "--state", dsn, "-o", "json")
	if code != ExitOK {
		t.Fatalf("store migrate = exit %d, %s%s", code, out, errOut)
	}
	var res host.MigrateResult
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.From != 0 || res.To < 1 || len(res.Applied) == 0 {
		t.Errorf("store migrate -o json = %s (%v); want from 0, migrations applied", out, err)
	}
	if strings.Contains(out+errOut, "s3cret-pw") {
		t.Errorf("store migrate printed the password: %s%s", out, errOut)
	}

	env["SHAREDOS_STATE"] = dsn // read through the factory's Env
	code, out, errOut = runCLI(t, env, "store", "migrate", "-o", "table")
	if code != ExitOK || !strings.Contains(out, "nothing to migrate") || strings.Contains(out, "s3cret-pw") {
		t.Errorf("store migrate again = exit %d, %q %q; want exit 0 and nothing to migrate, no password", code, out, errOut)
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, raw)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "INSERT INTO sharedos_schema_version (version_id, is_applied) VALUES (999, true)"); err != nil {
		t.Fatalf("mark a newer schema: %v", err)
	}
	count := func() int {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM sharedos_schema_version").Scan(&n); err != nil {
			t.Fatalf("count versions: %v", err)
		}
		return n
	}
	before := count()
	code, out, errOut = runCLI(t, env, "store", "migrate", "-o", "table")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != ExitCommandFailed || !strings.Contains(lines[0], "newer") || !strings.Contains(lines[0], "999") || strings.Contains(errOut, "s3cret-pw") {
		t.Errorf("store migrate of a newer schema = exit %d, %q %q; want exit 1, one line naming version 999", code, out, errOut)
	}
	if after := count(); after != before {
		t.Errorf("a refused migration changed the version table: %d rows, then %d", before, after)
	}

	t.Setenv("SHAREDOS_STATE", "")
	code, _, errOut = runCLI(t, env, "store", "migrate", "--state", home+"/state.db")
	if code != ExitUsage || !strings.Contains(errOut, "not a PostgreSQL database") {
		t.Errorf("store migrate of a SQLite file = exit %d, %q; want exit 2, not a PostgreSQL database", code, errOut)
	}
	if _, err := os.Stat(home + "/state.db"); !os.IsNotExist(err) {
		t.Errorf("store migrate of a SQLite file created it (%v)", err)
	}
}

// TestStatePostgresSettings: --state postgres://… is kept as given (not made a path
// relative to the working directory, also from a config file), and the host's local
// files go to the default state folder.
func TestStatePostgresSettings(t *testing.T) {
	home := t.TempDir()
	cfg := home + "/config.yaml"
	if err := os.WriteFile(cfg, []byte("state: postgres://db.internal/sharedos\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"--state", "postgres://db.internal/sharedos", "version"},
		{"--config", cfg, "version"},
	} {
		ios, _, _, _ := Test()
		f := &Factory{IOStreams: ios, Env: func(k string) string { return map[string]string{"HOME": home}[k] }, Clock: time.Now,
			Getwd: func() (string, error) { return "/work", nil }}
		root := NewRootCmd(f)
		root.SetArgs(argv)
		if err := root.Execute(); err != nil {
			t.Fatalf("%q: %v", argv, err)
		}
		s, err := f.Settings()
		if err != nil {
			t.Fatalf("%q: settings: %v", argv, err)
		}
		if s.State != "postgres://db.internal/sharedos" || s.StateDir != home+"/.local/state/sharedos" || s.LocalDir() != s.StateDir {
			t.Errorf("%q: state %q, state dir %q; want the DSN as given and %s/.local/state/sharedos", argv, s.State, s.StateDir, home)
		}
	}
}

// TestStatePostgresNotTakenForAFile: --state postgres://… is opened as PostgreSQL by
// every command, never taken for a file: an unreachable server is refused in one line,
// exit 1 state_unavailable, without echoing the DSN's password and without creating
// anything (never a SQLite file at a path spelled like the DSN).
func TestStatePostgresNotTakenForAFile(t *testing.T) {
	home, wd := t.TempDir(), t.TempDir()
	t.Chdir(wd)
	for _, argv := range [][]string{
		{"namespaces", "list"},
		{"audit", "list"},
		{"tools", "list"},
	} {
		args := append([]string{"--state", "postgres://u:s3cret-pw@127.0.0.1:1/x", "--as", "agent:helper", "-o", "json"}, argv...)
		code, out, errOut := runCLI(t, map[string]string{"HOME": home}, args...)
		if code != ExitCommandFailed || !strings.Contains(errOut, "state_unavailable") || strings.Contains(out+errOut, "s3cret-pw") {
			t.Errorf("%q = exit %d, %q %q; want exit 1, state_unavailable, no password", argv, code, out, errOut)
		}
	}
	for _, dir := range []string{wd, home} {
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("a refused command created %v in %s", entries, dir)
		}
	}
}

// TestCommandsOnPostgres: the commands that open the state work on a migrated
// PostgreSQL store exactly as on SQLite — a namespace enabled by one process is seen by
// the next, the agent's listing sees the tools it enables, and the audit trail holds
// both commands' records — and nothing is written to a SQLite file.
func TestCommandsOnPostgres(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "examples", "grants", "reader.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dsn := pgtest.DSN(t)
	home, wd := t.TempDir(), t.TempDir()
	t.Chdir(wd)
	grants := filepath.Join(home, "agent.yaml")
	if err := os.WriteFile(grants, example, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": home}
	if code, out, errOut := runCLI(t, env, "store", "migrate", "--state", dsn); code != ExitOK {
		t.Fatalf("store migrate = exit %d, %s%s", code, out, errOut)
	}
	common := []string{"--state", dsn, "--grants", grants, "-o", "json"}
	if code, out, errOut := runCLI(t, env, append(common, "namespaces", "enable", "files")...); code != ExitOK {
		t.Fatalf("namespaces enable = exit %d, %s%s", code, out, errOut)
	}
	code, out, errOut := runCLI(t, env, append(common, "tools", "list")...)
	if code != ExitOK || !strings.Contains(out, `"files.read"`) {
		t.Fatalf("tools list = exit %d, %s%s; want files.read listed", code, out, errOut)
	}
	code, out, errOut = runCLI(t, env, append(common, "audit", "list")...)
	if code != ExitOK || !strings.Contains(out, "tool.namespace.selection.updated") || !strings.Contains(out, "tool.catalog.listed") {
		t.Fatalf("audit list = exit %d, %s%s; want the selection change and the listing", code, out, errOut)
	}
	if entries, _ := os.ReadDir(wd); len(entries) != 0 {
		t.Errorf("commands on PostgreSQL created %v in the working directory", entries)
	}
}

// TestTokensInStore: `tokens create|list|revoke --tokens store: --state postgres://…`
// keep the tokens in the state database: create prints the token once (the table holds
// its SHA-256 only, and its grant files as absolute paths), a duplicate id is refused
// (exit 2, nothing added), list shows it, revoke removes it (an unknown id: exit 2).
func TestTokensInStore(t *testing.T) {
	dsn := pgtest.DSN(t)
	home := t.TempDir()
	env := map[string]string{"HOME": home}
	if code, out, errOut := runCLI(t, env, "store", "migrate", "--state", dsn); code != ExitOK {
		t.Fatalf("store migrate = exit %d, %s%s", code, out, errOut)
	}
	grants := filepath.Join(home, "alice.yaml")
	if err := os.WriteFile(grants, []byte("version: 1\ncontext: {actor: agent:bot, owner: human:alice, purpose: triage}\ngrants: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, env, "--state", dsn, "--grants", grants, "tokens", "create", "--id", "alice", "--tokens", "store:", "-o", "json")
	if code != ExitOK {
		t.Fatalf("tokens create = exit %d, %s%s", code, out, errOut)
	}
	var created struct{ ID, Token string }
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.ID != "alice" || !strings.HasPrefix(created.Token, "sharedos_") {
		t.Fatalf("tokens create -o json = %s (%v)", out, err)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows := func() string {
		var s string
		if err := conn.QueryRow(ctx, "SELECT coalesce(string_agg(id || ' ' || sha256 || ' ' || actor || ' ' || array_to_string(grants, ','), ';' ORDER BY id), '') FROM tokens").Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := "alice " + tokens.Hash(created.Token) + " agent:bot " + grants
	if got := rows(); got != want {
		t.Errorf("tokens table = %q, want %q", got, want)
	}
	if strings.Contains(rows(), created.Token) {
		t.Errorf("the table holds the token itself")
	}
	code, _, errOut = runCLI(t, env, "--state", dsn, "--as", "agent:other", "tokens", "create", "--id", "alice", "--tokens", "store:", "-o", "table")
	if code != ExitUsage || !strings.Contains(errOut, `token "alice": duplicate token id`) || rows() != want {
		t.Errorf("duplicate create = exit %d, %q; want exit 2 naming it, nothing added", code, errOut)
	}
	code, out, errOut = runCLI(t, env, "--state", dsn, "tokens", "list", "--tokens", "store:", "-o", "json")
	if code != ExitOK || !strings.Contains(out, `"id": "alice"`) || !strings.Contains(out, `"actor": "agent:bot"`) || strings.Contains(out, created.Token) {
		t.Errorf("tokens list = exit %d, %s%s", code, out, errOut)
	}
	code, _, errOut = runCLI(t, env, "--state", dsn, "tokens", "revoke", "bob", "--tokens", "store:", "-o", "table")
	if code != ExitUsage || !strings.Contains(errOut, `token "bob": no such token`) || rows() != want {
		t.Errorf("revoke of an unknown id = exit %d, %q; want exit 2, nothing removed", code, errOut)
	}
	code, out, errOut = runCLI(t, env, "--state", dsn, "tokens", "revoke", "alice", "--tokens", "store:", "-o", "table")
	if code != ExitOK || rows() != "" {
		t.Errorf("tokens revoke = exit %d, %s%s; table %q", code, out, errOut, rows())
	}
}
