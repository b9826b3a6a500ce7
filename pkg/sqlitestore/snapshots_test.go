package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

func scope(root string, path []string) kernel.SnapshotScope {
	return kernel.SnapshotScope{World: "w", Owner: alice, Root: root, Path: path}
}

func snap(id, root string, path []string, created int64) kernel.SnapshotRecord {
	if path == nil {
		path = []string{}
	}
	return kernel.SnapshotRecord{SnapshotScope: scope(root, path), ID: id, Kind: "directory", CreatedAt: created,
		Entries: []kernel.SnapshotEntry{{Path: []string{"a.txt"}, Blob: "ab12", Size: 3}, {Path: []string{"d", "b.txt"}, Blob: "cd34", Size: 0}}}
}

func snapIDs(recs []kernel.SnapshotRecord) []string {
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestSnapshotIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	label := "before refactor"
	file := kernel.SnapshotRecord{SnapshotScope: scope("/r", []string{"docs", "x.md"}), ID: "f1", Kind: "file", Label: &label,
		CreatedAt: 500, Entries: []kernel.SnapshotEntry{{Path: []string{}, Blob: "ff", Size: 9}}}
	recs := []kernel.SnapshotRecord{
		snap("s1", "/r", []string{"docs"}, 100),
		snap("s2", "/r", []string{"docs"}, 300),
		snap("s3", "/r", []string{"docs"}, 200),
		snap("s4", "/r", []string{"docs"}, 300), // same createdAt as s2, inserted later
		snap("s5", "/r", []string{"docs", "sub"}, 900),
		snap("s6", "/other", []string{"docs"}, 900),
		snap("s7", "/r", nil, 50),
		snap("s8", "/r", []string{"do", "cs"}, 950),
		file,
	}
	for _, r := range recs {
		if err := s.PutSnapshot(ctx, r); err != nil {
			t.Fatalf("PutSnapshot(%s): %v", r.ID, err)
		}
	}
	tests := []struct {
		name  string
		root  string
		path  []string
		limit int
		want  []string
	}{
		{"newest first, ties by later insertion", "/r", []string{"docs"}, 0, []string{"s4", "s2", "s3", "s1"}},
		{"negative limit is all", "/r", []string{"docs"}, -1, []string{"s4", "s2", "s3", "s1"}},
		{"limit", "/r", []string{"docs"}, 2, []string{"s4", "s2"}},
		{"exact path only", "/r", []string{"docs", "sub"}, 0, []string{"s5"}},
		{"other root", "/other", []string{"docs"}, 0, []string{"s6"}},
		{"root path, nil", "/r", nil, 0, []string{"s7"}},
		{"root path, empty", "/r", []string{}, 0, []string{"s7"}},
		{"segments are not joined", "/r", []string{"do", "cs"}, 0, []string{"s8"}},
		{"none", "/r", []string{"nothing"}, 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := s.ListSnapshots(ctx, scope(tt.root, tt.path), tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if ids := snapIDs(got); !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ListSnapshots = %v, want %v", ids, tt.want)
			}
		})
	}

	got, err := s.GetSnapshot(ctx, scope("/r", []string{"docs", "x.md"}), "f1")
	if err != nil || got == nil || !reflect.DeepEqual(*got, file) {
		t.Errorf("GetSnapshot = %+v, %v; want %+v", got, err, file)
	}
	got, err = s.GetSnapshot(ctx, scope("/r", []string{"docs"}), "s3")
	if err != nil || got == nil || !reflect.DeepEqual(*got, recs[2]) {
		t.Errorf("GetSnapshot = %+v, %v; want %+v", got, err, recs[2])
	}
	for _, miss := range []struct {
		root string
		path []string
		id   string
	}{{"/r", []string{"docs"}, "nope"}, {"/r", []string{"docs", "sub"}, "s1"}, {"/other", []string{"docs"}, "s1"}} {
		if got, err := s.GetSnapshot(ctx, scope(miss.root, miss.path), miss.id); got != nil || err != nil {
			t.Errorf("GetSnapshot(%v) = %+v, %v; want nil, nil", miss, got, err)
		}
	}
}

func TestPutSnapshotDuplicates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	first := snap("s1", "/r", []string{"docs"}, 100)
	if err := s.PutSnapshot(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := snap("s1", "/r", []string{"docs"}, 999)
	again.Kind = "file"
	if err := s.PutSnapshot(ctx, again); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate PutSnapshot = %v, want ErrDuplicate", err)
	}
	got, err := s.GetSnapshot(ctx, scope("/r", []string{"docs"}), "s1")
	if err != nil || got == nil || !reflect.DeepEqual(*got, first) {
		t.Errorf("the duplicate changed the record: %+v, %v", got, err)
	}
	// The same id under another path or root is another snapshot.
	for _, r := range []kernel.SnapshotRecord{snap("s1", "/r", []string{"docs", "sub"}, 1), snap("s1", "/x", []string{"docs"}, 1)} {
		if err := s.PutSnapshot(ctx, r); err != nil {
			t.Errorf("PutSnapshot(%s %v) = %v", r.Root, r.Path, err)
		}
	}
	for _, bad := range []kernel.SnapshotRecord{snap("", "/r", nil, 1), snap("s9", "", nil, 1)} {
		if err := s.PutSnapshot(ctx, bad); err == nil {
			t.Errorf("PutSnapshot(%+v) succeeded", bad)
		}
	}
}

func TestSnapshotsBelongToWorldAndOwner(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	bob := kernel.Address{Kind: kernel.KindHuman, ID: "bob"}
	aliceAgent := kernel.Address{Kind: kernel.KindAgent, ID: "alice"}
	mine := snap("s1", "/r", []string{"docs"}, 100)
	if err := s.PutSnapshot(ctx, mine); err != nil {
		t.Fatal(err)
	}
	for _, other := range []kernel.SnapshotScope{
		{World: "w", Owner: bob, Root: "/r", Path: []string{"docs"}},
		{World: "w", Owner: aliceAgent, Root: "/r", Path: []string{"docs"}}, // same id, other kind
		{World: "w2", Owner: alice, Root: "/r", Path: []string{"docs"}},
		{World: "", Owner: kernel.Address{}, Root: "/r", Path: []string{"docs"}},
	} {
		if recs, err := s.ListSnapshots(ctx, other, 0); err != nil || len(recs) != 0 {
			t.Errorf("ListSnapshots(%+v) = %v, %v; want none", other, snapIDs(recs), err)
		}
		if rec, err := s.GetSnapshot(ctx, other, "s1"); err != nil || rec != nil {
			t.Errorf("GetSnapshot(%+v) = %+v, %v; want nil", other, rec, err)
		}
		// The same id in another scope is another snapshot.
		again := mine
		again.SnapshotScope = other
		if err := s.PutSnapshot(ctx, again); err != nil {
			t.Errorf("PutSnapshot(%+v) = %v", other, err)
		}
	}
	if recs, err := s.ListSnapshots(ctx, mine.SnapshotScope, 0); err != nil || len(recs) != 1 || !reflect.DeepEqual(recs[0], mine) {
		t.Errorf("ListSnapshots(own) = %+v, %v", recs, err)
	}
}

func TestSnapshotMigrationFromVersion1(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", dsn(path, dsnParams))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{migrations[0], fmt.Sprintf("PRAGMA application_id = %d", applicationID), "PRAGMA user_version = 1",
		`INSERT INTO snapshots (root, path, id, kind, label, created_ms, entries) VALUES ('/r', '["docs"]', 'old', 'directory', NULL, 5, '[]')`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	if err := s.db.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("user_version = %d (%v), want %d", v, err, len(migrations))
	}
	// The old snapshot's owner is unknown: nobody sees it.
	if recs, err := s.ListSnapshots(ctx, scope("/r", []string{"docs"}), 0); err != nil || len(recs) != 0 {
		t.Errorf("a pre-migration snapshot is visible to alice: %v, %v", snapIDs(recs), err)
	}
	var n int
	s.db.QueryRow("SELECT count(*) FROM snapshots WHERE id = 'old' AND world = '' AND owner = ''").Scan(&n)
	if n != 1 {
		t.Errorf("the migration lost the old record (count %d)", n)
	}
	if err := s.PutSnapshot(ctx, snap("old", "/r", []string{"docs"}, 9)); err != nil {
		t.Errorf("PutSnapshot after the migration: %v", err)
	}
}

func TestDamagedSnapshotRecord(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	if _, err := s.db.Exec(`INSERT INTO snapshots (world, owner, root, path, id, kind, label, created_ms, entries)
		VALUES ('w', 'human:alice', '/r', '["docs"]', 'bad', 'directory', NULL, 5, '{"not":"an array"}')`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetSnapshot(ctx, scope("/r", []string{"docs"}), "bad"); !errors.Is(err, kernel.ErrSnapshotDamaged) {
		t.Errorf("GetSnapshot of a damaged record = %v, want ErrSnapshotDamaged", err)
	}
	if _, err := s.ListSnapshots(ctx, scope("/r", []string{"docs"}), 0); !errors.Is(err, kernel.ErrSnapshotDamaged) {
		t.Errorf("ListSnapshots with a damaged record = %v, want ErrSnapshotDamaged", err)
	}
}

// FuzzDecodeSnapshot feeds the decoder of stored snapshot rows arbitrary column values:
// it never panics, and what it accepts encodes back to entries it decodes the same.
func FuzzDecodeSnapshot(f *testing.F) {
	for _, seed := range []string{
		`[]`, `null`, `[{"path":["a.txt"],"blob":"ab12","size":3},{"path":["d","b.txt"],"blob":"cd34","size":0}]`,
		`[{"path":[],"blob":"` + strings.Repeat("f", 64) + `","size":9}]`, `{"not":"an array"}`, `[{"path":"x"}]`,
		`[{"path":["a"],"size":-1}]`, `[{"path":["a"],"size":1e99}]`, `[{"path":null,"blob":null}]`, "\xff",
	} {
		f.Add("directory", seed, int64(5), true, "label")
	}
	f.Fuzz(func(t *testing.T, kind, entries string, created int64, hasLabel bool, label string) {
		sc := scope("/r", []string{"docs"})
		rec, err := decodeSnapshot(sc, "id", kind, sql.NullString{String: label, Valid: hasLabel}, created, entries)
		if err != nil {
			if !errors.Is(err, kernel.ErrSnapshotDamaged) {
				t.Fatalf("decode error does not wrap ErrSnapshotDamaged: %v", err)
			}
			return
		}
		if !reflect.DeepEqual(rec.SnapshotScope, sc) || rec.CreatedAt != created || (rec.Label != nil) != hasLabel {
			t.Fatalf("decoded record lost its columns: %+v", rec)
		}
		again, err := json.Marshal(rec.Entries)
		if err != nil {
			t.Fatal(err)
		}
		rec2, err := decodeSnapshot(sc, "id", kind, sql.NullString{}, created, string(again))
		if err != nil || !reflect.DeepEqual(rec2.Entries, rec.Entries) {
			t.Fatalf("entries do not round-trip: %v: %+v vs %+v", err, rec.Entries, rec2)
		}
		_ = rec.Validate() // must not panic on anything the decoder accepts
	})
}
