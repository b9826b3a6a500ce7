package cmd

import (
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestFixGrantNamesTheAuthority: with an authority other than the owner, the suggested
// grant is issued by the authority (not the owner), and appending it makes the call
// allowed; issued by the owner it would be refused (issuer).
func TestFixGrantNamesTheAuthority(t *testing.T) {
	t.Parallel()
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	ops := kernel.Address{Kind: kernel.KindService, ID: "ops"}
	actx := kernel.AccessContext{World: "w", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "a"}, Authority: ops,
		Owner: alice, Purpose: "p", TraceID: "t", Now: "2026-08-03T09:00:00.000Z", EnabledToolNamespaces: []string{}}
	req := kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a.md"}}, Action: "read"}
	g := fixGrant(actx, req, nil)
	if g.Issuer != ops || g.Subject != actx.Actor {
		t.Fatalf("fix grant issuer %s subject %s, want issuer %s subject %s", g.Issuer, g.Subject, ops, actx.Actor)
	}
	f, err := grantfile.Parse("fix.yaml", []byte("version: 1\ngrants:\n"+grantfile.FormatGrantYAML(g)))
	if err != nil {
		t.Fatal(err)
	}
	var z kernel.Authorizer
	if d, _ := z.Authorize(t.Context(), kernel.NewAuthority(f.Grants, actx, 0), actx, req, kernel.AuthorizeOptions{}); !d.Allowed {
		t.Fatalf("the fix grant does not allow the call: %s", d.ReasonCode)
	}
	byOwner := g
	byOwner.Issuer = alice
	d, diag := z.Authorize(t.Context(), kernel.NewAuthority([]kernel.CapabilityGrant{byOwner}, kernel.AccessContext{World: "w", Actor: actx.Actor, Authority: alice,
		Owner: alice, Purpose: "p", TraceID: "t", Now: actx.Now}, 0), actx, req, kernel.AuthorizeOptions{})
	if d.Allowed || len(diag.RejectedGrants) != 1 || diag.RejectedGrants[0].Reason != kernel.RejectIssuer {
		t.Fatalf("a grant issued by the owner: %s %+v, want refused (issuer)", d.ReasonCode, diag)
	}
}

// TestEffectWithoutAuditExitsNonZero: when a call took effect but its tool.invoked
// record could not be written (here a trigger makes the audit table refuse it, as a full
// disk would), tools call prints the result, warns on stderr and exits 1 — never a quiet
// success. A read changes nothing until its output is reported, so a read whose records
// cannot be written (here the shared spool refuses them) reports no output: it fails
// audit_unavailable (exit 4).
func TestEffectWithoutAuditExitsNonZero(t *testing.T) {
	dir, env := sandbox(t)
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.md"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	grants := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(grants, []byte("version: 1\ncontext: {actor: agent:a, owner: human:o}\ngrants:\n"+
		"  - id: g\n    subject: agent:a\n    issuer: human:o\n    capabilities:\n"+
		"      - resource: {namespace: files, path: []}\n        actions: [read, create]\n        scope: descendants\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--root", root, "--grants", grants, "--namespaces", "files"}
	if code, _, errOut := run1(t, env, append(args, "tools", "list")...); code != 0 {
		t.Fatalf("list: %d %s", code, errOut)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "state", "sharedos", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TRIGGER full_disk BEFORE INSERT ON audit_events WHEN NEW.type = 'tool.invoked'
		BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	code, out, errOut := run1(t, env, append(args, "tools", "call", "files.create", "-a", "path=b.md", "-a", "content=hi")...)
	if code != ExitCommandFailed || !strings.Contains(out, `"status": "succeeded"`) ||
		!strings.Contains(errOut, "took effect but its audit record could not be written") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
	if !strings.Contains(out, kernel.AuditUnavailableKey) {
		t.Fatalf("the result is not marked: %s", out)
	}
	if b, err := os.ReadFile(filepath.Join(root, "b.md")); err != nil || string(b) != "hi" {
		t.Fatalf("the effect: %q, %v", b, err)
	}
	// A read's records go to the shared spool (sqlitestore.EnableSharedSpool): make it
	// refuse them, as a full disk would (a directory where the file should be).
	spool := filepath.Join(dir, "state", "sharedos", "state.db-spool", "shared.log")
	if err := os.Remove(spool); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = run1(t, env, append(args, "tools", "call", "files.read", "-a", "path=a.md")...)
	if code != ExitToolFailed || !strings.Contains(out, `"code": "audit_unavailable"`) || strings.Contains(out, "hello") {
		t.Fatalf("read without its records: exit %d\nstdout %s\nstderr %s", code, out, errOut)
	}
}

// TestReadOnlyCommandWritesNoDatabase: a command that changes nothing (tools list, a
// read) writes nothing to the state database — its records go to the shared spool
// (sqlitestore.EnableSharedSpool), so SQLite has nothing to sync when it exits — and the
// next reader of the trail sees them all the same.
func TestReadOnlyCommandWritesNoDatabase(t *testing.T) {
	dir, env := sandbox(t)
	root, grants := readFixture(t, dir)
	state := filepath.Join(dir, "state.db")
	args := []string{"--root", root, "--grants", grants, "--namespaces", "files", "--state", state}
	if code, _, errOut := run1(t, env, append(args, "tools", "list")...); code != 0 {
		t.Fatalf("list: %d %s", code, errOut)
	}
	if code, _, errOut := run1(t, env, append(args, "tools", "call", "files.read", "-a", "path=notes/todo.md")...); code != 0 {
		t.Fatalf("read: %d %s", code, errOut)
	}
	db, err := sql.Open("sqlite", state)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM audit_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if n != 0 {
		t.Fatalf("%d audit rows written to the database by commands that changed nothing", n)
	}
	code, out, errOut := run1(t, env, append(args, "audit", "list", "-o", "json")...)
	if code != 0 || !strings.Contains(out, `"tool.catalog.listed"`) || !strings.Contains(out, `"tool.invoked"`) {
		t.Fatalf("audit list: %d\n%s\n%s", code, out, errOut)
	}
}
