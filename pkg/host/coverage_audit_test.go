package host

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestEachAuditAndPruneAudit: EachAudit visits every recorded event oldest first a page
// at a time, stops at fn's first error and returns it as it is; PruneAudit deletes
// nothing before the oldest event and everything before a later instant, and refuses a
// state database inside the root with nothing deleted.
func TestEachAuditAndPruneAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fx := newServiceFixture(t, sessionGrants)
	for range 3 {
		out, err := fx.svc.Invoke(ctx, api.InvokeRequest{Tool: "files.read", Arguments: args(t, map[string]any{"path": []string{"docs", "a.md"}})})
		if err != nil || out.Result.Status != kernel.StatusSucceeded {
			t.Fatalf("invoke: %v %+v", err, out.Result)
		}
	}
	all, err := fx.svc.QueryAudit(ctx, api.AuditQuery{Oldest: true})
	if err != nil || len(all) < 3 {
		t.Fatalf("QueryAudit = %d events, %v; want at least 3", len(all), err)
	}
	count := func() int {
		t.Helper()
		var n int
		if err := fx.svc.EachAudit(ctx, api.AuditQuery{}, 2, func(kernel.AuditEvent) error { n++; return nil }); err != nil {
			t.Fatalf("EachAudit: %v", err)
		}
		return n
	}
	var ids []string
	if err := fx.svc.EachAudit(ctx, api.AuditQuery{}, 2, func(ev kernel.AuditEvent) error { ids = append(ids, ev.ID); return nil }); err != nil {
		t.Fatalf("EachAudit: %v", err)
	}
	if len(ids) != len(all) {
		t.Fatalf("EachAudit visited %d events; want %d", len(ids), len(all))
	}
	for i := range all {
		if ids[i] != all[i].ID {
			t.Fatalf("EachAudit order %v; want the oldest-first %v", ids, all)
		}
	}
	stop := errors.New("stop here")
	var seen int
	if err := fx.svc.EachAudit(ctx, api.AuditQuery{}, 1, func(kernel.AuditEvent) error { seen++; return stop }); err != stop || seen != 1 {
		t.Fatalf("EachAudit with a failing fn = %v after %d events; want %v after 1", err, seen, stop)
	}
	if got := fx.svc.EachAudit(ctx, api.AuditQuery{Limit: 2}, 0, func(kernel.AuditEvent) error { seen++; return nil }); got != nil || seen != 3 {
		t.Fatalf("EachAudit limit 2 = %v, %d calls in all; want nil, 3", got, seen)
	}

	root := filepath.Dir(filepath.Dir(fx.state))
	// A state database inside the root is refused before anything is opened or deleted.
	inside := &Settings{Root: root, State: fx.state}
	if _, err := PruneAudit(ctx, inside, time.Now().Add(time.Hour)); err == nil {
		t.Fatal("PruneAudit with the state database inside the root: no error")
	} else if he := (*Error)(nil); !errors.As(err, &he) || strings.Contains(he.Message, "\n") || !strings.Contains(he.Message, "state database") {
		t.Fatalf("PruneAudit inside the root = %v; want one line naming the state database", err)
	}
	if n := count(); n != len(all) {
		t.Fatalf("after the refused prune: %d events; want %d", n, len(all))
	}

	s := &Settings{Root: filepath.Join(root, "root"), State: fx.state}
	n, err := PruneAudit(ctx, s, time.Unix(0, 0))
	if err != nil || n != 0 || count() != len(all) {
		t.Fatalf("PruneAudit before 1970 = %d, %v; want 0 deleted, %d kept", n, err, len(all))
	}
	n, err = PruneAudit(ctx, s, time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil || n != int64(len(all)) || count() != 0 {
		t.Fatalf("PruneAudit before 2100 = %d, %v; want %d deleted, none kept", n, err, len(all))
	}
}

// TestSmallHelpers: helpers with one behaviour each.
func TestSmallHelpers(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state.db")
	_, err := MigrateState(context.Background(), state)
	var he *Error
	if !errors.As(err, &he) || he.Kind != KindUsage || he.Error() != "store migrate: "+state+" is not a PostgreSQL database" {
		t.Errorf("MigrateState(SQLite file) = %v; want KindUsage naming the file", err)
	}
	if m, _ := filepath.Glob(state + "*"); len(m) != 0 {
		t.Errorf("MigrateState of a file created %v", m)
	}

	_, err = definitionOnly("files").Invoke(context.Background(), kernel.ResourceOperation{})
	if err == nil || err.Error() != "this command does not reach the resource planes" {
		t.Errorf("definitionOnly.Invoke = %v", err)
	}
	if definitionOnly("files").Namespace() != "files" {
		t.Errorf("definitionOnly namespace")
	}

	plain := errors.New("plain")
	for _, tc := range []struct {
		in, want error
	}{
		{&fs.PathError{Op: "stat", Path: "/x", Err: fs.ErrPermission}, fs.ErrPermission},
		{plain, plain},
	} {
		if got := unwrapPathErr(tc.in); got != tc.want {
			t.Errorf("unwrapPathErr(%v) = %v; want %v", tc.in, got, tc.want)
		}
	}

	for _, tc := range []struct{ in, want string }{
		{"one", "one"},
		{"first\nlast", "last"},
		{"a\nb\n", ""},
	} {
		if got := lastLine(tc.in); got != tc.want {
			t.Errorf("lastLine(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// TestGatewayBeforeOpen: a prepared host with no MCP servers has no gateway and serves
// no gateway namespaces.
func TestGatewayBeforeOpen(t *testing.T) {
	t.Parallel()
	fx := newServiceFixture(t, sessionGrants)
	if fx.p.Gateway() != nil || fx.p.GatewayNamespaces() != nil || fx.p.MayProvide("files.read") {
		t.Errorf("Gateway = %v, GatewayNamespaces = %v; want none", fx.p.Gateway(), fx.p.GatewayNamespaces())
	}
}
