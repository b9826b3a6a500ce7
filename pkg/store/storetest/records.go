package storetest

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// snapshot is a directory snapshot id of scope, created at ms.
func snapshot(scope kernel.SnapshotScope, id string, ms int64, label *string) kernel.SnapshotRecord {
	return kernel.SnapshotRecord{SnapshotScope: scope, ID: id, Kind: "directory", Label: label, CreatedAt: ms,
		Entries: []kernel.SnapshotEntry{{Path: []string{"a.txt"}, Blob: strings.Repeat("ab", 32), Size: 3}}}
}

// sameSnapshot reports whether a and b are the same record; a nil path and an empty one
// are the same path.
func sameSnapshot(a, b kernel.SnapshotRecord) bool {
	norm := func(r kernel.SnapshotRecord) kernel.SnapshotRecord {
		r.Path = append([]string{}, r.Path...)
		r.Entries = slices.Clone(r.Entries)
		for i := range r.Entries {
			r.Entries[i].Path = append([]string{}, r.Entries[i].Path...)
		}
		return r
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// snapshotIDs are the ids of recs, in order.
func snapshotIDs(recs []kernel.SnapshotRecord) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.ID
	}
	return out
}

// testSnapshots: the snapshot index (kernel.SnapshotIndex): a snapshot belongs to its
// exact scope, is listed newest first, and is never replaced.
func testSnapshots(t T, c Config) {
	st := open(t, c)
	scope := kernel.SnapshotScope{World: world1, Owner: alice, Root: "/srv/root", Path: []string{"docs"}}
	if rec, err := st.GetSnapshot(ctx, scope, "s1"); err != nil || rec != nil {
		t.Errorf("GetSnapshot of a fresh store = %+v, %v; want nil, nil", rec, err)
	}
	if recs, err := st.ListSnapshots(ctx, scope, 0); err != nil || len(recs) != 0 {
		t.Errorf("ListSnapshots of a fresh store = %+v, %v; want none", recs, err)
	}
	label := "first"
	s1 := snapshot(scope, "s1", 100, &label)
	s2 := snapshot(scope, "s2", 200, nil)
	s3 := snapshot(scope, "s3", 200, nil) // same instant as s2, recorded later
	file := kernel.SnapshotRecord{SnapshotScope: scope, ID: "s4", Kind: "file", CreatedAt: 50,
		Entries: []kernel.SnapshotEntry{{Path: []string{}, Blob: strings.Repeat("cd", 32), Size: 0}}}
	for _, r := range []kernel.SnapshotRecord{s1, s2, s3, file} {
		if err := st.PutSnapshot(ctx, r); err != nil {
			t.Fatalf("PutSnapshot(%s): %v", r.ID, err)
		}
	}
	for _, r := range []kernel.SnapshotRecord{s1, s2, s3, file} {
		got, err := st.GetSnapshot(ctx, scope, r.ID)
		if err != nil || got == nil || !sameSnapshot(*got, r) {
			t.Errorf("GetSnapshot(%s) = %+v, %v; want %+v", r.ID, got, err, r)
		}
	}
	lists := []struct {
		limit int
		want  []string
	}{{0, []string{"s3", "s2", "s1", "s4"}}, {-1, []string{"s3", "s2", "s1", "s4"}}, {2, []string{"s3", "s2"}}}
	for _, l := range lists {
		recs, err := st.ListSnapshots(ctx, scope, l.limit)
		if got := snapshotIDs(recs); err != nil || !sameStrings(got, l.want) {
			t.Errorf("ListSnapshots(limit %d) = %s, %v; want %s (newest first, ties the later recorded first)", l.limit, q(got), err, q(l.want))
		}
	}
	// Never replaced.
	other := "other"
	if err := st.PutSnapshot(ctx, snapshot(scope, "s1", 300, &other)); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("PutSnapshot of a recorded id = %v, want store.ErrDuplicate", err)
	}
	if got, _ := st.GetSnapshot(ctx, scope, "s1"); got == nil || !sameSnapshot(*got, s1) {
		t.Errorf("a refused PutSnapshot changed s1: %+v", got)
	}
	for _, bad := range []kernel.SnapshotRecord{snapshot(scope, "", 1, nil), snapshot(kernel.SnapshotScope{World: world1, Owner: alice, Path: []string{"docs"}}, "s9", 1, nil)} {
		if err := st.PutSnapshot(ctx, bad); err == nil {
			t.Errorf("PutSnapshot without an id or a root succeeded: %+v", bad)
		}
	}
	// Each part of the scope is its own index; the same id may be recorded in another.
	for what, o := range map[string]kernel.SnapshotScope{
		"another world": {World: world2, Owner: alice, Root: scope.Root, Path: scope.Path},
		"another owner": {World: world1, Owner: bob, Root: scope.Root, Path: scope.Path},
		"another kind":  {World: world1, Owner: aliceAgent, Root: scope.Root, Path: scope.Path},
		"another root":  {World: world1, Owner: alice, Root: "/srv/other", Path: scope.Path},
		"another path":  {World: world1, Owner: alice, Root: scope.Root, Path: []string{"docs", "sub"}},
		"the root path": {World: world1, Owner: alice, Root: scope.Root},
	} {
		if got, err := st.GetSnapshot(ctx, o, "s1"); err != nil || got != nil {
			t.Errorf("%s: GetSnapshot(s1) = %+v, %v; want nil, nil", what, got, err)
		}
		if recs, err := st.ListSnapshots(ctx, o, 0); err != nil || len(recs) != 0 {
			t.Errorf("%s: ListSnapshots = %s, %v; want none", what, q(snapshotIDs(recs)), err)
		}
	}
	mine := snapshot(kernel.SnapshotScope{World: world1, Owner: bob, Root: scope.Root, Path: scope.Path}, "s1", 400, nil)
	if err := st.PutSnapshot(ctx, mine); err != nil {
		t.Errorf("PutSnapshot of the same id in another owner's scope: %v", err)
	}
	if recs, _ := st.ListSnapshots(ctx, mine.SnapshotScope, 0); len(recs) != 1 || !sameSnapshot(recs[0], mine) {
		t.Errorf("ListSnapshots of bob's scope = %+v, want only his s1", recs)
	}
	if recs, _ := st.ListSnapshots(ctx, scope, 0); !sameStrings(snapshotIDs(recs), []string{"s3", "s2", "s1", "s4"}) {
		t.Errorf("bob's snapshot changed alice's listing: %s", q(snapshotIDs(recs)))
	}
}

// testFileDigests: the digest cache (kernel.FileDigestCache) keeps one entry per
// (device, inode), the last stored, with every bit of the 64-bit numbers.
func testFileDigests(t T, c Config) {
	st := open(t, c)
	if _, ok, err := st.LookupDigest(ctx, 1, 2); err != nil || ok {
		t.Errorf("LookupDigest of a fresh store = ok %v, %v; want no entry", ok, err)
	}
	d := kernel.FileDigest{Stamp: kernel.FileStamp{Dev: 1, Ino: 2, Size: 1 << 20, MtimeNs: 1_700_000_000_123_456_789, CtimeNs: 1_700_000_001_000_000_001},
		Digest: [32]byte{1, 2, 3}, RecordedNs: 1_700_000_002_000_000_000}
	big := kernel.FileDigest{Stamp: kernel.FileStamp{Dev: math.MaxUint64, Ino: 1<<63 + 5, Size: 7, MtimeNs: -1, CtimeNs: 0},
		Digest: [32]byte{31: 0xff}, RecordedNs: 9}
	for _, e := range []kernel.FileDigest{d, big} {
		if err := st.StoreDigest(ctx, e); err != nil {
			t.Fatalf("StoreDigest: %v", err)
		}
		got, ok, err := st.LookupDigest(ctx, e.Stamp.Dev, e.Stamp.Ino)
		if err != nil || !ok || got != e {
			t.Errorf("LookupDigest(%d, %d) = %+v, %v, %v; want %+v", e.Stamp.Dev, e.Stamp.Ino, got, ok, err, e)
		}
	}
	next := d
	next.Stamp.Size, next.Digest, next.RecordedNs = 5, [32]byte{9}, d.RecordedNs+1
	if err := st.StoreDigest(ctx, next); err != nil {
		t.Fatalf("StoreDigest: %v", err)
	}
	if got, ok, err := st.LookupDigest(ctx, 1, 2); err != nil || !ok || got != next {
		t.Errorf("LookupDigest after a replacement = %+v, %v, %v; want %+v", got, ok, err, next)
	}
	for _, k := range [][2]uint64{{2, 1}, {1, 3}, {0, 2}} {
		if _, ok, err := st.LookupDigest(ctx, k[0], k[1]); err != nil || ok {
			t.Errorf("LookupDigest(%d, %d) = ok %v, %v; want no entry", k[0], k[1], ok, err)
		}
	}
}

// testGatewayCatalogs: the gateway's catalogue cache keeps one list per key, the last
// stored, with its instant to the millisecond.
func testGatewayCatalogs(t T, c Config) {
	st := open(t, c)
	if _, _, ok, err := st.GetGatewayCatalog(ctx, "k1"); err != nil || ok {
		t.Errorf("GetGatewayCatalog of a fresh store = ok %v, %v; want no entry", ok, err)
	}
	at := time.UnixMilli(1_700_000_000_123)
	put := func(key string, data []byte, at time.Time) {
		t.Helper()
		if err := st.PutGatewayCatalog(ctx, key, data, at); err != nil {
			t.Fatalf("PutGatewayCatalog(%s): %v", key, err)
		}
	}
	check := func(key string, want []byte, wantAt time.Time) {
		t.Helper()
		data, stored, ok, err := st.GetGatewayCatalog(ctx, key)
		if err != nil || !ok || !bytes.Equal(data, want) || !stored.Equal(wantAt) {
			t.Errorf("GetGatewayCatalog(%s) = %q at %v, ok %v, %v; want %q at %v", key, data, stored, ok, err, want, wantAt)
		}
	}
	put("k1", []byte(`[{"name":"a"}]`), at)
	put("k2", []byte(`[]`), at.Add(time.Second))
	check("k1", []byte(`[{"name":"a"}]`), at)
	check("k2", []byte(`[]`), at.Add(time.Second))
	put("k1", []byte(`[{"name":"b"}]`), at.Add(time.Minute))
	check("k1", []byte(`[{"name":"b"}]`), at.Add(time.Minute))
	check("k2", []byte(`[]`), at.Add(time.Second))
}

// testClosed: a closed store fails every method (an outage), never answering from what
// it read before.
func testClosed(t T, c Config) {
	st := open(t, c)
	// Read everything once, so that a store that caches has something to answer from.
	if _, err := st.ApplyUpdate(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-a"}}); err != nil {
		t.Fatalf("ApplyUpdate: %v", err)
	}
	selection(t, st, world1, alice)
	record(t, st, escalation(world1, alice, "c1"))
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	scope := kernel.SnapshotScope{World: world1, Owner: alice, Root: "/srv/root"}
	calls := map[string]func() error{
		"Selection": func() error { _, _, err := st.Selection(ctx, world1, alice); return err },
		"ApplyUpdate": func() error {
			_, err := st.ApplyUpdate(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-b"}})
			return err
		},
		"TryConsume":       func() error { _, err := st.TryConsume(ctx, usageKey("g1"), 3); return err },
		"GetUsage":         func() error { _, err := st.GetUsage(ctx, usageKey("g1")); return err },
		"Append":           func() error { return st.Append(ctx, invoked("e1")) },
		"ListAudit":        func() error { _, err := st.ListAudit(ctx, store.AuditFilter{}); return err },
		"LastAuditSeq":     func() error { _, err := st.LastAuditSeq(ctx); return err },
		"RecordEscalation": func() error { return st.RecordEscalation(ctx, escalation(world1, alice, "c2")) },
		"GetEscalation":    func() error { _, err := st.GetEscalation(ctx, 1); return err },
		"ListEscalations":  func() error { _, err := st.ListEscalations(ctx, store.EscalationFilter{}); return err },
		"ResolveEscalation": func() error {
			_, err := st.ResolveEscalation(ctx, 1, store.EscalationResolution{Status: store.EscalationApproved, ResolvedBy: alice}, invoked("e2"))
			return err
		},
		"PutSnapshot":       func() error { return st.PutSnapshot(ctx, snapshot(scope, "s1", 1, nil)) },
		"ListSnapshots":     func() error { _, err := st.ListSnapshots(ctx, scope, 0); return err },
		"GetSnapshot":       func() error { _, err := st.GetSnapshot(ctx, scope, "s1"); return err },
		"LookupDigest":      func() error { _, _, err := st.LookupDigest(ctx, 1, 2); return err },
		"StoreDigest":       func() error { return st.StoreDigest(ctx, kernel.FileDigest{Stamp: kernel.FileStamp{Dev: 1, Ino: 2}}) },
		"GetGatewayCatalog": func() error { _, _, _, err := st.GetGatewayCatalog(ctx, "k1"); return err },
		"PutGatewayCatalog": func() error { return st.PutGatewayCatalog(ctx, "k1", []byte("[]"), time.UnixMilli(1)) },
	}
	if as, ok := st.(kernel.AuditedSettingsStore); ok {
		calls["ApplyUpdateAudited"] = func() error {
			_, err := as.ApplyUpdateAudited(ctx, actx(world1, alice), kernel.ToolNamespaceUpdate{Enable: []string{"storetest-b"}},
				func([]string) kernel.AuditEvent { return invoked("e3") })
			return err
		}
	}
	if rs, ok := st.(kernel.ReservingUsageStore); ok {
		calls["ReserveUse"] = func() error {
			r, _, err := rs.ReserveUse(ctx, usageKey("g1"), 3)
			if r != nil {
				_ = r.Release()
			}
			return err
		}
	}
	if wa, ok := st.(kernel.WriteAheadAuditSink); ok {
		calls["AppendWriteAhead"] = func() error { return wa.AppendWriteAhead(ctx, invoked("e4")) }
	}
	if b, ok := st.(kernel.WriteAheadBatchAuditSink); ok {
		calls["AppendWriteAheadBatch"] = func() error { return b.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{invoked("e5")}) }
	}
	for name, call := range calls {
		if err := call(); err == nil {
			t.Errorf("%s on a closed store succeeded, want an error", name)
		}
	}
}
