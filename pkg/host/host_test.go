package host

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	real, _ := filepath.EvalSymlinks(root)
	for p, want := range map[string]bool{
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

// TestNeeds: only a command that reaches the planes checks the root; only one that acts
// needs an actor (otherwise the owner, else LocalOperator stands for it).
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
	s.Root = dir
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
