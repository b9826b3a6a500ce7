package host

import (
	"context"
	"errors"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// withPassword is dsn with a password (the throwaway cluster trusts loopback, so any
// password is accepted): what must never be echoed.
func withPassword(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	return u.String()
}

// TestPostgresState: a host opens the PostgreSQL store a DSN names once it is migrated
// (MigrateState), with the settings' default namespaces; before, the open is refused as
// KindState with a hint that says to migrate, and neither the message nor the hint nor
// the migration's result echoes the DSN's password. A file is not migrated by
// MigrateState (KindUsage).
func TestPostgresState(t *testing.T) {
	ctx := context.Background()
	dsn := withPassword(t, pgtest.DSN(t))
	s := &Settings{State: dsn, StateDir: t.TempDir(), DefaultNamespaces: []string{"files"}}

	_, err := openPostgresState(ctx, s, WorkloadCommand)
	var he *Error
	if !errors.As(err, &he) || he.Kind != KindState || !strings.Contains(he.Hint, "sharedos store migrate") {
		t.Fatalf("open of an unmigrated database = %v; want a KindState error whose hint says to migrate", err)
	}
	if strings.Contains(he.Message+he.Hint+StateHint(s.State), "s3cret-pw") {
		t.Errorf("the refusal echoes the password: %s (%s)", he.Message, he.Hint)
	}

	res, err := MigrateState(ctx, dsn)
	if err != nil {
		t.Fatalf("MigrateState: %v", err)
	}
	if res.From != 0 || res.To < 1 || len(res.Applied) == 0 || strings.Contains(res.State, "s3cret-pw") {
		t.Errorf("MigrateState = %+v; want from 0, migrations applied, the DSN without its password", res)
	}
	st, err := openPostgresState(ctx, s, WorkloadCommand)
	if err != nil {
		t.Fatalf("open after migrating: %v", err)
	}
	defer st.Close()
	sel, stored, err := st.Selection(ctx, "default", kernel.Address{Kind: kernel.KindHuman, ID: "alice"})
	if err != nil || stored || !slices.Equal(sel, []string{"files"}) {
		t.Errorf("Selection = %v, %v, %v; want the default [files], not stored", sel, stored, err)
	}

	if _, err := MigrateState(ctx, "/var/lib/sharedos/state.db"); !errors.As(err, &he) || he.Kind != KindUsage {
		t.Errorf("MigrateState of a file = %v; want a KindUsage error", err)
	}
}
