package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

const sessionGrants = `version: 1
context: {actor: agent:helper, owner: human:alice}
grants:
  - id: g-read
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [read]
        scope: descendants
  - id: g-escalate
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos, path: [escalation]}
        actions: [request]
        scope: exact
    constraints: {maxUses: 1}
`

const sessionGrantsWithList = sessionGrants + `  - id: g-list
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list]
        scope: descendants
`

func openSession(t *testing.T, clock func() time.Time, now string) (*Session, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	grants := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(grants, []byte(sessionGrants), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &Settings{Root: root, State: filepath.Join(dir, "state", "state.db"), Grants: []string{grants},
		DefaultNamespaces: []string{"files"}, Now: now}
	p, err := Prepare(s, time.Now, Needs{Planes: true, Actor: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	h, err := p.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.NewSession(clock)
	if err != nil {
		t.Fatal(err)
	}
	return sess, grants
}

func listNames(t *testing.T, s *Session) []string {
	t.Helper()
	turn, err := s.Begin(context.Background(), map[string]any{"surface": "test"})
	if err != nil {
		t.Fatal(err)
	}
	defs, err := turn.ListTools(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(defs))
	for i := range defs {
		out[i] = defs[i].Name
	}
	return out
}

// TestSessionReloadsGrants: an edited grant file (even rewritten within the same second
// with the same size) is the authority of the very next operation.
func TestSessionReloadsGrants(t *testing.T) {
	sess, grants := openSession(t, time.Now, "")
	if got := listNames(t, sess); !slices.Equal(got, []string{"files.read"}) {
		t.Fatalf("list %v", got)
	}
	d0, err := sess.InputsDigest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	reloads := 0
	sess.OnReload = func(err error) {
		reloads++
		if err != nil {
			t.Errorf("reload error: %v", err)
		}
	}
	if err := os.WriteFile(grants, []byte(sessionGrantsWithList), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, sess); !slices.Equal(got, []string{"files.list", "files.read"}) {
		t.Fatalf("list after the edit %v", got)
	}
	d1, _ := sess.InputsDigest(context.Background())
	if d1 == d0 {
		t.Fatal("the inputs digest did not change with the grant file")
	}
	// Same size, same second: the content is still hashed (racy window).
	same := strings.Replace(sessionGrantsWithList, "actions: [list]", "actions: [stat]", 1)
	if err := os.WriteFile(grants, []byte(same), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, sess); !slices.Equal(got, []string{"files.read", "files.stat"}) {
		t.Fatalf("list after a same-size edit %v", got)
	}
	listNames(t, sess)
	if reloads != 2 {
		t.Fatalf("%d reloads, want 2 (an unchanged file is not reloaded)", reloads)
	}
	// A vanished file fails closed.
	if err := os.Remove(grants); err != nil {
		t.Fatal(err)
	}
	sess.OnReload = nil
	if got := listNames(t, sess); len(got) != 0 {
		t.Fatalf("list with the grant file gone %v", got)
	}
}

// TestSessionSelectionAndInstant: the selection is re-read per operation (a change by
// another store handle shows at once), and each turn has its own instant unless pinned.
func TestSessionSelectionAndInstant(t *testing.T) {
	var tick int64 = 1_800_000_000_000
	clock := func() time.Time { tick += 1000; return time.UnixMilli(tick) }
	sess, _ := openSession(t, clock, "")
	t1, err := sess.Begin(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t2, _ := sess.Begin(context.Background(), nil)
	if t1.Context().Now == t2.Context().Now {
		t.Fatalf("two operations at one instant %s", t1.Context().Now)
	}
	other, err := sqlitestore.Open(context.Background(), sess.Host().Settings.State, sqlitestore.Options{DefaultNamespaces: []string{"files"}})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	d0, _ := sess.InputsDigest(context.Background())
	if _, err := other.ApplyUpdate(context.Background(), t1.Context(), kernel.ToolNamespaceUpdate{Disable: []string{"files"}}); err != nil {
		t.Fatal(err)
	}
	if got := listNames(t, sess); len(got) != 0 {
		t.Fatalf("list after disable %v", got)
	}
	if d1, _ := sess.InputsDigest(context.Background()); d1 == d0 {
		t.Fatal("the inputs digest did not change with the selection")
	}

	pinned, _ := openSession(t, clock, "2026-08-03T09:00:00Z")
	a, _ := pinned.Begin(context.Background(), nil)
	b, _ := pinned.Begin(context.Background(), nil)
	if a.Context().Now != "2026-08-03T09:00:00.000Z" || b.Context().Now != a.Context().Now {
		t.Fatalf("--now not pinned: %s %s", a.Context().Now, b.Context().Now)
	}
}

// TestSessionEscalationStatus: an escalation recorded through the session is found by its
// call id, pending; an unknown id has no status.
func TestSessionEscalationStatus(t *testing.T) {
	sess, _ := openSession(t, time.Now, "")
	ctx := context.Background()
	turn, err := sess.Begin(ctx, map[string]any{"surface": "test"})
	if err != nil {
		t.Fatal(err)
	}
	call := func(id, reason string) kernel.ToolCall {
		args, _ := json.Marshal(map[string]string{"reason": reason})
		return kernel.ToolCall{ID: id, Tool: kernel.EscalationToolName, Arguments: args, TraceID: turn.Context().TraceID, RequestedAt: turn.Context().Now}
	}
	if _, err := sess.Host().Escalations().Escalate(ctx, turn, call("call-1", "need more")); err != nil {
		t.Fatal(err)
	}
	// the escalation grant allows one: a second escalation spends nothing and records nothing
	if _, err := sess.Host().Escalations().Escalate(ctx, turn, call("call-2", "again")); !errors.Is(err, kernel.ErrEscalationRefused) {
		t.Fatalf("a second escalation on a maxUses:1 grant: %v", err)
	}
	if st, _, err := sess.EscalationStatus(ctx, "call-1"); err != nil || st != "pending" {
		t.Fatalf("status %q, %v", st, err)
	}
	if st, _, err := sess.EscalationStatus(ctx, "call-2"); err != nil || st != "" {
		t.Fatalf("unknown id status %q, %v", st, err)
	}
	evs, err := sess.Host().Store.ListAudit(ctx, sqlitestore.AuditFilter{Types: []string{string(kernel.EventEscalationRequested)}})
	if err != nil || len(evs) != 1 || evs[0].Metadata["surface"] != "test" {
		t.Fatalf("escalation audit %+v, %v", evs, err)
	}
}
