package storetest

import (
	"errors"
	"slices"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// withName is sel with name added, sorted as a selection is (the kernel's order).
func withName(t T, sel []string, name string) []string {
	t.Helper()
	out, err := kernel.ApplyToolNamespaceUpdate(sel, kernel.ToolNamespaceUpdate{Enable: []string{name}})
	if err != nil {
		t.Fatalf("ApplyToolNamespaceUpdate: %v", err)
	}
	return out
}

// testSettings: a selection is stored per (world, owner), read back sorted, defaults
// until one is stored; an invalid update or context stores nothing.
func testSettings(t T, c Config) {
	st := open(t, c)
	def, stored := selection(t, st, world1, alice)
	if stored {
		t.Errorf("a fresh store says a selection is stored for (%s, %s)", world1, alice)
	}
	if _, _, err := st.Selection(ctx, "", alice); err == nil {
		t.Errorf("Selection with an empty world succeeded")
	}
	if _, _, err := st.Selection(ctx, world1, kernel.Address{}); err == nil {
		t.Errorf("Selection with an invalid owner succeeded")
	}

	want := withName(t, def, "storetest-a")
	got, err := st.ApplyUpdate(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-a"}})
	if err != nil {
		t.Fatalf("ApplyUpdate: %v", err)
	}
	if !sameStrings(got, want) {
		t.Errorf("ApplyUpdate returned %s, want %s", q(got), q(want))
	}
	if sel, stored := selection(t, st, world1, alice); !stored || !sameStrings(sel, want) {
		t.Errorf("Selection after ApplyUpdate = %s (stored %v), want %s (stored)", q(sel), stored, q(want))
	}
	// The returned slice is the caller's.
	if sel, _ := selection(t, st, world1, alice); len(sel) > 0 {
		sel[0] = "changed-by-the-caller"
		if again, _ := selection(t, st, world1, alice); !sameStrings(again, want) {
			t.Errorf("changing a returned selection changed the stored one: %s", q(again))
		}
	}
	// Another owner, another world, another kind with the same id: untouched.
	for _, k := range []struct {
		world string
		owner kernel.Address
	}{{world1, bob}, {world2, alice}, {world1, aliceAgent}} {
		if sel, stored := selection(t, st, k.world, k.owner); stored || !sameStrings(sel, def) {
			t.Errorf("Selection(%s, %s) = %s (stored %v), want the default %s: a selection belongs to one (world, owner)",
				k.world, k.owner, q(sel), stored, q(def))
		}
	}

	// Disabling it again stores the default's names, stored.
	got, err = st.ApplyUpdate(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Disable: []string{"storetest-a"}})
	wantOff := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return n == "storetest-a" })
	if err != nil || !sameStrings(got, wantOff) {
		t.Errorf("ApplyUpdate(disable) = %s, %v; want %s", q(got), err, q(wantOff))
	}
	if sel, stored := selection(t, st, world1, alice); !stored || !sameStrings(sel, wantOff) {
		t.Errorf("Selection after disabling = %s (stored %v), want %s (stored)", q(sel), stored, q(wantOff))
	}

	// Refusals store nothing.
	if _, err := st.ApplyUpdate(ctx, actx(world1, bob), kernel.ToolNamespaceUpdate{Enable: []string{""}}); !errors.Is(err, kernel.ErrInvalidUpdate) {
		t.Errorf("ApplyUpdate with an invalid name = %v, want an error matching kernel.ErrInvalidUpdate", err)
	}
	if _, err := st.ApplyUpdate(ctx, actx(world1, bob), kernel.ToolNamespaceUpdate{}); err == nil {
		t.Errorf("ApplyUpdate with an empty patch succeeded")
	}
	if _, err := st.ApplyUpdate(ctx, actx("", bob), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-a"}}); err == nil {
		t.Errorf("ApplyUpdate with an empty world succeeded")
	}
	if _, err := st.ApplyUpdate(ctx, actx(world1, kernel.Address{}), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-a"}}); err == nil {
		t.Errorf("ApplyUpdate with an invalid owner succeeded")
	}
	if sel, stored := selection(t, st, world1, bob); stored || !sameStrings(sel, def) {
		t.Errorf("after refused updates Selection(%s, %s) = %s (stored %v), want the default, not stored", world1, bob, q(sel), stored)
	}
}

// testAuditedSettings: ApplyUpdateAudited stores a selection with its record, both or
// neither (kernel.AuditedSettingsStore).
func testAuditedSettings(t T, c Config) {
	st := open(t, c)
	as, ok := st.(kernel.AuditedSettingsStore)
	if !ok {
		t.Logf("the store is not a kernel.AuditedSettingsStore: nothing to check")
		return
	}
	def, _ := selection(t, st, world1, alice)
	want := withName(t, def, "storetest-a")
	var seen []string
	got, err := as.ApplyUpdateAudited(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-a"}},
		func(sel []string) kernel.AuditEvent {
			seen = slices.Clone(sel)
			return event("sel-1", kernel.EventNamespaceSelectionUpdated, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
		})
	if err != nil {
		t.Fatalf("ApplyUpdateAudited: %v", err)
	}
	if !sameStrings(got, want) || !sameStrings(seen, want) {
		t.Errorf("ApplyUpdateAudited returned %s and called event with %s; want %s both", q(got), q(seen), q(want))
	}
	if evs := allEvents(t, st); !sameStrings(ids(evs), []string{"sel-1"}) {
		t.Errorf("the trail after ApplyUpdateAudited holds %s, want [sel-1]", q(ids(evs)))
	}

	// A record that cannot be written undoes the selection.
	_, err = as.ApplyUpdateAudited(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-b"}},
		func([]string) kernel.AuditEvent { return unreadable("sel-2") })
	if err == nil {
		t.Errorf("ApplyUpdateAudited with a record that cannot be written succeeded")
	}
	if sel, _ := selection(t, st, world1, alice); !sameStrings(sel, want) {
		t.Errorf("a selection was stored without its record: %s, want %s", q(sel), q(want))
	}
	// A record that clashes with a recorded one (ErrDuplicate) undoes it too.
	_, err = as.ApplyUpdateAudited(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-b"}},
		func([]string) kernel.AuditEvent {
			return event("sel-1", kernel.EventNamespaceSelectionUpdated, kernel.OutcomeFailed, "2026-01-01T00:00:00Z")
		})
	if !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("ApplyUpdateAudited with another event under a recorded id = %v, want store.ErrDuplicate", err)
	}
	if sel, _ := selection(t, st, world1, alice); !sameStrings(sel, want) {
		t.Errorf("a selection was stored though its record was refused: %s, want %s", q(sel), q(want))
	}
	// An invalid patch never calls event and records nothing.
	called := false
	if _, err := as.ApplyUpdateAudited(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{""}},
		func([]string) kernel.AuditEvent { called = true; return invoked("sel-3") }); err == nil {
		t.Errorf("ApplyUpdateAudited with an invalid patch succeeded")
	}
	if evs := allEvents(t, st); !sameStrings(ids(evs), []string{"sel-1"}) || called {
		t.Errorf("after refused updates the trail holds %s (event called: %v), want [sel-1]", q(ids(evs)), called)
	}
}
