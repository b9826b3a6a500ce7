package sqlitestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

var (
	alice = kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	bob   = kernel.Address{Kind: kernel.KindHuman, ID: "bob"}
)

func actxFor(world string, owner kernel.Address) kernel.AccessContext {
	return kernel.AccessContext{World: world, Owner: owner, Actor: kernel.Address{Kind: kernel.KindAgent, ID: "helper"}}
}

func TestApplyUpdate(t *testing.T) {
	t.Parallel()
	type step struct {
		update  kernel.ToolNamespaceUpdate
		want    []string // the result (nil: an error is expected)
		wantErr error
	}
	tests := []struct {
		name  string
		opts  Options
		steps []step
		// final stored selection
		final []string
	}{
		{
			name: "starts from the defaults",
			opts: Options{DefaultNamespaces: []string{"repo", "files"}},
			steps: []step{
				{update: kernel.ToolNamespaceUpdate{Enable: []string{"web"}}, want: []string{"files", "repo", "web"}},
				{update: kernel.ToolNamespaceUpdate{Disable: []string{"repo"}}, want: []string{"files", "web"}},
			},
			final: []string{"files", "web"},
		},
		{
			name: "re-enabling and re-disabling are no-ops",
			steps: []step{
				{update: kernel.ToolNamespaceUpdate{Enable: []string{"files"}}, want: []string{"files"}},
				{update: kernel.ToolNamespaceUpdate{Enable: []string{"files"}}, want: []string{"files"}},
				{update: kernel.ToolNamespaceUpdate{Disable: []string{"web"}}, want: []string{"files"}},
			},
			final: []string{"files"},
		},
		{
			name: "disabling everything stores an empty selection, not the defaults",
			opts: Options{DefaultNamespaces: []string{"files"}},
			steps: []step{
				{update: kernel.ToolNamespaceUpdate{Disable: []string{"files"}}, want: []string{}},
			},
			final: []string{},
		},
		{
			name: "invalid updates store nothing",
			opts: Options{DefaultNamespaces: []string{"files"}},
			steps: []step{
				{update: kernel.ToolNamespaceUpdate{}, wantErr: kernel.ErrInvalidUpdate},
				{update: kernel.ToolNamespaceUpdate{Enable: []string{"a"}, Disable: []string{"a"}}, wantErr: kernel.ErrInvalidUpdate},
				{update: kernel.ToolNamespaceUpdate{Enable: []string{"a", "a"}}, wantErr: kernel.ErrInvalidUpdate},
				{update: kernel.ToolNamespaceUpdate{Enable: []string{""}}, wantErr: kernel.ErrInvalidUpdate},
				{update: kernel.ToolNamespaceUpdate{Enable: make([]string, 257)}, wantErr: kernel.ErrInvalidUpdate},
			},
			final: nil,
		},
		{
			name: "an invalid update after a valid one leaves the stored selection",
			steps: []step{
				{update: kernel.ToolNamespaceUpdate{Enable: []string{"files"}}, want: []string{"files"}},
				{update: kernel.ToolNamespaceUpdate{Enable: []string{"x"}, Disable: []string{"x"}}, wantErr: kernel.ErrInvalidUpdate},
			},
			final: []string{"files"},
		},
		{
			name: "names are trimmed and sorted like the kernel",
			steps: []step{
				{update: kernel.ToolNamespaceUpdate{Enable: []string{" web ", "Files", "files"}}, want: []string{"files", "Files", "web"}},
			},
			final: []string{"files", "Files", "web"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openTest(t, tt.opts)
			ctx := context.Background()
			for i, st := range tt.steps {
				got, err := s.ApplyUpdate(ctx, actxFor("w1", alice), st.update)
				if st.wantErr != nil {
					if !errors.Is(err, st.wantErr) {
						t.Fatalf("step %d: err = %v, want %v", i, err, st.wantErr)
					}
					continue
				}
				if err != nil || !reflect.DeepEqual(got, st.want) {
					t.Fatalf("step %d: ApplyUpdate = %q, %v; want %q", i, got, err, st.want)
				}
			}
			sel, stored, err := s.Selection(ctx, "w1", alice)
			if err != nil {
				t.Fatal(err)
			}
			if tt.final == nil {
				if stored {
					t.Fatalf("selection %q was stored", sel)
				}
				return
			}
			if !stored || !reflect.DeepEqual(sel, tt.final) {
				t.Fatalf("Selection = %q (stored %v), want %q stored", sel, stored, tt.final)
			}
		})
	}
}

func TestApplyUpdateDoesNotMutateArgument(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	u := kernel.ToolNamespaceUpdate{Enable: []string{" files "}}
	if _, err := s.ApplyUpdate(context.Background(), actxFor("w", alice), u); err != nil {
		t.Fatal(err)
	}
	if u.Enable[0] != " files " {
		t.Errorf("update was modified: %q", u.Enable)
	}
}

func TestApplyUpdateKeyedByWorldAndOwner(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{DefaultNamespaces: []string{"files"}})
	ctx := context.Background()
	if _, err := s.ApplyUpdate(ctx, actxFor("w1", alice), kernel.ToolNamespaceUpdate{Enable: []string{"repo"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		world      string
		owner      kernel.Address
		want       []string
		wantStored bool
	}{
		{"w1", alice, []string{"files", "repo"}, true},
		{"w2", alice, []string{"files"}, false},
		{"w1", bob, []string{"files"}, false},
		{"w1", kernel.Address{Kind: kernel.KindAgent, ID: "alice"}, []string{"files"}, false},
	}
	for _, tt := range tests {
		got, stored, err := s.Selection(ctx, tt.world, tt.owner)
		if err != nil || stored != tt.wantStored || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Selection(%s, %s) = %q, %v, %v; want %q, %v", tt.world, tt.owner, got, stored, err, tt.want, tt.wantStored)
		}
	}
	var owner string
	if err := s.db.QueryRow("SELECT owner FROM namespace_settings").Scan(&owner); err != nil || owner != "human:alice" {
		t.Errorf("stored owner = %q, %v; want human:alice", owner, err)
	}
}

func TestSelectionDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want []string
	}{
		{"none", Options{}, []string{}},
		{"sorted", Options{DefaultNamespaces: []string{"repo", "files"}}, []string{"files", "repo"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := openTest(t, tt.opts)
			got, stored, err := s.Selection(context.Background(), "w", alice)
			if err != nil || stored || !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Selection = %q, %v, %v; want %q, false", got, stored, err, tt.want)
			}
			// The returned slice must not alias the store's defaults.
			if len(got) > 0 {
				got[0] = "mutated"
				again, _, _ := s.Selection(context.Background(), "w", alice)
				if again[0] == "mutated" {
					t.Fatal("Selection returned the store's own slice")
				}
			}
		})
	}
}

func TestApplyUpdateRejectsBadContext(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := context.Background()
	u := kernel.ToolNamespaceUpdate{Enable: []string{"files"}}
	for _, actx := range []kernel.AccessContext{actxFor("", alice), actxFor("w", kernel.Address{})} {
		if _, err := s.ApplyUpdate(ctx, actx, u); err == nil {
			t.Errorf("ApplyUpdate(%+v) succeeded", actx)
		}
	}
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM namespace_settings").Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows stored (%v)", n, err)
	}
	if _, _, err := s.Selection(ctx, "", alice); err == nil {
		t.Error("Selection with an empty world succeeded")
	}
}

// TestApplyUpdateAuditedIsOneTransaction: the selection and its audit record are stored
// together; when the record cannot be written, the selection is not changed either.
func TestApplyUpdateAuditedIsOneTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	actx := actxFor("w", alice)
	good := func(sel []string) kernel.AuditEvent {
		ev := event("ev-ns-1", kernel.EventNamespaceSelectionUpdated, kernel.OutcomeSucceeded, "2026-08-03T09:00:00Z")
		ev.Metadata = map[string]any{"enabledNamespaces": sel}
		return ev
	}
	if _, err := s.ApplyUpdateAudited(ctx, actx, kernel.ToolNamespaceUpdate{Enable: []string{"files"}}, good); err != nil {
		t.Fatal(err)
	}
	bad := func([]string) kernel.AuditEvent { return kernel.AuditEvent{} } // no id: refused by the audit table
	if _, err := s.ApplyUpdateAudited(ctx, actx, kernel.ToolNamespaceUpdate{Enable: []string{"repo"}}, bad); err == nil {
		t.Fatal("an update whose record fails was applied")
	}
	sel, _, err := s.Selection(ctx, "w", alice)
	if err != nil || !reflect.DeepEqual(sel, []string{"files"}) {
		t.Fatalf("selection %v %v: the failed update leaked", sel, err)
	}
	evs, err := s.ListAudit(ctx, AuditFilter{Types: []string{string(kernel.EventNamespaceSelectionUpdated)}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("audit %d events %v, want the one that went with its change", len(evs), err)
	}
}

// The selection cache (selCache): a read is served from the cache only while the stamp
// file is unchanged, old enough to trust and the read young enough; an update through any
// Store (another process's) is seen by the next read.
func TestSelectionCache(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	open := func() *Store {
		s, err := Open(ctx, path, Options{DefaultNamespaces: []string{"files"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	reader, writer := open(), open()
	read := func(want ...string) {
		t.Helper()
		got, _, err := reader.Selection(ctx, "w", alice)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Selection = %q, %v; want %q", got, err, want)
		}
	}
	read("files")
	if _, err := writer.ApplyUpdate(ctx, actxFor("w", alice), kernel.ToolNamespaceUpdate{Enable: []string{"repo"}}); err != nil {
		t.Fatal(err)
	}
	read("files", "repo") // the stamp changed: read again

	// With the stamp old enough, a read is a cache hit: a change behind the stamp's back
	// (no sharedos writes so) is not seen until the cached read is maxSelectionAge old.
	base := time.Now().Add(racyStamp + time.Second)
	reader.now = func() time.Time { return base }
	read("files", "repo")
	if _, err := writer.db.ExecContext(ctx, `UPDATE namespace_settings SET selection = '["sharedos"]'`); err != nil {
		t.Fatal(err)
	}
	reader.now = func() time.Time { return base.Add(maxSelectionAge / 2) }
	read("files", "repo")
	reader.now = func() time.Time { return base.Add(maxSelectionAge) }
	read("sharedos")

	// A stamp rewritten within racyStamp of the read is not trusted.
	reader.now = time.Now
	if _, err := writer.ApplyUpdate(ctx, actxFor("w", alice), kernel.ToolNamespaceUpdate{Enable: []string{"files"}}); err != nil {
		t.Fatal(err)
	}
	read("files", "sharedos")
	if _, err := writer.db.ExecContext(ctx, `UPDATE namespace_settings SET selection = '["repo"]'`); err != nil {
		t.Fatal(err)
	}
	read("repo")
}

// An update never writes through a stamp file that is a symbolic link.
func TestSelectionStampNotThroughLink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.db")
	if err := os.Symlink(victim, SelectionStampPath(path)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.ApplyUpdate(context.Background(), actxFor("w", alice), kernel.ToolNamespaceUpdate{Enable: []string{"repo"}}); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(victim); string(data) != "keep me\n" {
		t.Fatalf("the link's target was written: %q", data)
	}
}
