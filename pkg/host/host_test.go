package host

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func TestResolveExistingAndWithin(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"dangling":     filepath.Join(root, "new.db"),  // absolute, into the root
		"dangling-rel": "root/sub/new.db",              // relative to its directory
		"chain":        filepath.Join(dir, "dangling"), // a link to a dangling link
		"loop-a":       filepath.Join(dir, "loop-b"),   // a loop: no answer inside the root
		"loop-b":       filepath.Join(dir, "loop-a"),
		"outside":      filepath.Join(dir, "elsewhere", "x.db"),
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	real, _ := filepath.EvalSymlinks(root)
	for p, want := range map[string]bool{
		filepath.Join(dir, "dangling"):                true,
		filepath.Join(dir, "dangling-rel"):            true,
		filepath.Join(dir, "chain"):                   true,
		filepath.Join(dir, "loop-a"):                  false,
		filepath.Join(dir, "outside"):                 false,
		filepath.Join(dir, "link", "new", "state.db"): true,
		filepath.Join(root, "sub", "x"):               true,
		filepath.Join(dir, "rootx", "state.db"):       false,
		filepath.Join(dir, "state.db"):                false,
	} {
		if got := within(real, resolveExisting(p)); got != want {
			t.Errorf("within(root, %s) = %v, want %v", p, got, want)
		}
	}
}

// TestNeeds: only a command that reaches the planes requires the root to exist; only one
// that acts needs an actor (otherwise the owner, else LocalOperator stands for it).
func TestNeeds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := &Settings{Root: filepath.Join(dir, "missing"), State: filepath.Join(dir, "state", "state.db")}
	clock := func() time.Time { return time.Unix(0, 0) }
	p, err := Prepare(s, clock, Needs{})
	if err != nil {
		t.Fatalf("Needs{} checked the root: %v", err)
	}
	if !p.Fallback || p.Context.Actor.String() != LocalOperator || p.Context.Owner.String() != LocalOperator {
		t.Fatalf("fallback identity: %+v", p.Context)
	}
	p.Close()
	if _, err := Prepare(s, clock, Needs{Planes: true, Actor: true}); err == nil {
		t.Fatal("Needs{Planes} accepted a missing root")
	}
	s.Root = filepath.Join(dir, "root")
	if err := os.Mkdir(s.Root, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(s, clock, Needs{Actor: true}); !errors.Is(err, errNoActor) {
		t.Fatalf("Needs{Actor} without an actor: %v", err)
	}
	s.Owner = "human:alice"
	p, err = Prepare(s, clock, Needs{})
	if err != nil || p.Fallback || p.Context.Actor.String() != "human:alice" {
		t.Fatalf("owner as actor: %v %+v", err, p)
	}
	p.Close()
}

// TestStateBoundaryWithoutPlanes: the trust boundary holds for every host, planes or not
// (every host opens the state database): a state database inside the root, even one that
// does not exist yet, is refused by Prepare(Needs{}) and by CheckStateBoundary with the
// message of Needs{Planes}, and nothing is created.
func TestStateBoundaryWithoutPlanes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return time.Unix(0, 0) }
	for _, rootPath := range []string{root, filepath.Join(dir, "missing")} {
		s := &Settings{Root: rootPath, State: filepath.Join(rootPath, "sub", "state.db"), As: "agent:a"}
		_, planesErr := Prepare(s, clock, Needs{Planes: true, Actor: true})
		for name, err := range map[string]error{
			"Prepare(Needs{})":      func() error { _, err := Prepare(s, clock, Needs{}); return err }(),
			"Prepare(Needs{Actor})": func() error { _, err := Prepare(s, clock, Needs{Actor: true}); return err }(),
			"CheckStateBoundary":    CheckStateBoundary(s),
		} {
			var he *Error
			if !errors.As(err, &he) || he.Kind != KindUsage || !strings.Contains(he.Message, "state database") ||
				!strings.Contains(he.Message, "lies inside the root") {
				t.Errorf("root %s: %s: %v, want the state database refused", rootPath, name, err)
				continue
			}
			if rootPath == root && (planesErr == nil || err.Error() != planesErr.Error()) {
				t.Errorf("%s: %v, want the message of Needs{Planes}: %v", name, err, planesErr)
			}
		}
		if _, err := os.Stat(filepath.Join(rootPath, "sub")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("root %s: something was created in it: %v", rootPath, err)
		}
	}
}

// TestCloseReleasesEverything: after Close, the files plane's root and the state
// database the host opened are closed — a files tool fails, the store refuses writes.
func TestCloseReleasesEverything(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a.md"), []byte("a"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Settings{Root: root, State: filepath.Join(dir, "state", "state.db"), As: "agent:a"}
	p, err := Prepare(s, time.Now, Needs{Planes: true, Actor: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := p.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var read *kernel.ToolHandler
	for i := range p.tools {
		if p.tools[i].Definition.Name == "files.read" {
			read = &p.tools[i]
		}
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	actx := h.Turn.Context()
	raw := json.RawMessage(`{"path":["a.md"]}`)
	parsed, err := read.ParseArguments(raw)
	if err != nil {
		t.Fatal(err)
	}
	res, err := read.Invoke(context.Background(), actx, kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c", Tool: "files.read", Arguments: raw}, Parsed: parsed})
	if err == nil && res.Status == kernel.StatusSucceeded {
		t.Fatal("the files root is still open after Close")
	}
	if err := h.Store.Append(context.Background(), kernel.AuditEvent{Version: "1", ID: "x", Type: kernel.EventToolInvoked,
		Outcome: kernel.OutcomeSucceeded, At: actx.Now, TraceID: "t", NamespaceID: "w", Actor: actx.Actor,
		Authority: actx.Authority, Owner: actx.Owner, Purpose: "p"}); err == nil {
		t.Fatal("the state database is still open after Close")
	}
}

// TestPrepareOpenWithGrants: with or without the planes, the tools prepared while the
// inputs load are the ones the kernel registers, the authority prepared while the state
// database opens is the turn's, and Close returns only once the grant cache entry of a
// miss is written.
func TestPrepareOpenWithGrants(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	grants := filepath.Join(dir, "grants.yaml")
	if err := os.WriteFile(grants, []byte("version: 1\ncontext:\n  actor: agent:a\n  owner: human:o\ngrants:\n"+
		"  - id: g1\n    subject: agent:a\n    issuer: human:o\n    issuedAt: 2026-01-01T00:00:00Z\n"+
		"    capabilities:\n      - resource: {namespace: files, path: [docs]}\n        actions: [read, list]\n        scope: descendants\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, needs := range []Needs{{Actor: true}, {Planes: true, Actor: true}} {
		state := filepath.Join(dir, "state", string(rune('a'+i)), "state.db")
		s := &Settings{Root: root, State: state, Grants: []string{grants}, NamespacesSet: true, Namespaces: []string{"files"}}
		p, err := Prepare(s, time.Now, needs)
		if err != nil {
			t.Fatal(err)
		}
		h, err := p.Open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tools, err := h.Turn.ListTools(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := len(p.Definitions()); len(p.prepared) != want || len(tools) == 0 {
			t.Fatalf("%+v: %d prepared tools of %d, %d listed", needs, len(p.prepared), want, len(tools))
		}
		if auth := h.Turn.Authority(context.Background()); auth.GrantCount() != 1 || auth.Unavailable() != "" {
			t.Fatalf("%+v: authority of %d grants (%q)", needs, auth.GrantCount(), auth.Unavailable())
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		entries, _ := filepath.Glob(filepath.Join(filepath.Dir(state), "cache", "grants", "*.grants"))
		if len(entries) != 1 {
			t.Fatalf("%+v: %d grant cache entries after Close, want 1", needs, len(entries))
		}
	}
}
