package storetest

import (
	"context"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// The principals and worlds of the suite's records.
var (
	alice  = kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	bob    = kernel.Address{Kind: kernel.KindHuman, ID: "bob"}
	helper = kernel.Address{Kind: kernel.KindAgent, ID: "helper"}
	// aliceAgent has alice's id under another kind: an address is its kind and its id.
	aliceAgent = kernel.Address{Kind: kernel.KindAgent, ID: "alice"}
)

const (
	world1 = "storetest-w1"
	world2 = "storetest-w2"
)

// open opens a fresh store in a directory of its own; the store is closed when the
// subtest ends.
func open(t T, c Config) store.State {
	t.Helper()
	return openAt(t, c, t.TempDir())
}

// openAt opens the store kept in dir; it is closed when the subtest ends.
func openAt(t T, c Config, dir string) store.State {
	t.Helper()
	st := c.Open(t, dir)
	if st == nil {
		t.Fatalf("Open returned a nil store")
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// ctx is the context of every call of the suite.
var ctx = context.Background()

// actx is an access context of world and owner (the fields a store reads).
func actx(world string, owner kernel.Address) kernel.AccessContext {
	return kernel.AccessContext{World: world, Actor: helper, Authority: owner, Owner: owner, Purpose: "storetest",
		TraceID: "trace-1", Now: "2026-01-01T00:00:00Z"}
}

// event is an audit event that reads back as it was written.
func event(id string, typ kernel.AuditEventType, outcome kernel.AuditOutcome, at string) kernel.AuditEvent {
	return kernel.AuditEvent{Version: "1", ID: id, Type: typ, Outcome: outcome, At: at, TraceID: "trace-1",
		NamespaceID: world1, Actor: helper, Authority: alice, Owner: alice, Purpose: "storetest"}
}

// invoked is a tool.invoked event of id.
func invoked(id string) kernel.AuditEvent {
	return event(id, kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-01-01T00:00:00Z")
}

// unreadable is an event a store must refuse: it would not read back (a resource path
// outside the contract).
func unreadable(id string) kernel.AuditEvent {
	ev := invoked(id)
	ev.Resource = &kernel.ResourceRef{Namespace: "files", Path: []string{".."}}
	return ev
}

// allEvents lists the whole trail, oldest first.
func allEvents(t T, st store.State) []kernel.AuditEvent {
	t.Helper()
	evs, err := st.ListAudit(ctx, store.AuditFilter{Oldest: true})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	return evs
}

// ids are the ids of evs, in order.
func ids(evs []kernel.AuditEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// usageKey is the use counter of grant id of world1, issued by alice to helper.
func usageKey(id string) kernel.UsageKey {
	return kernel.UsageKey{World: world1, Issuer: alice, Subject: helper, GrantID: id}
}

// usage reads the count of key.
func usage(t T, st store.State, key kernel.UsageKey) int64 {
	t.Helper()
	n, err := st.GetUsage(ctx, key)
	if err != nil {
		t.Fatalf("GetUsage(%s): %v", key.GrantID, err)
	}
	return n
}

// selection reads the selection of (world, owner).
func selection(t T, st store.State, world string, owner kernel.Address) ([]string, bool) {
	t.Helper()
	sel, stored, err := st.Selection(ctx, world, owner)
	if err != nil {
		t.Fatalf("Selection(%s, %s): %v", world, owner, err)
	}
	return sel, stored
}

// sameStrings reports whether a and b hold the same strings in the same order (nil and
// empty alike).
func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// q quotes a list for messages.
func q(s []string) string { return fmt.Sprintf("%q", s) }
