package sqlitestore

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/sharedos/sharedos/pkg/fsplane"
)

func snap(id, root string, path []string, created int64) fsplane.SnapshotRecord {
	return fsplane.SnapshotRecord{ID: id, Root: root, Path: path, Kind: "directory", CreatedAt: created,
		Entries: []fsplane.SnapshotEntry{{Path: []string{"a.txt"}, Blob: "ab12", Size: 3}, {Path: []string{"d", "b.txt"}, Blob: "cd34", Size: 0}}}
}

func snapIDs(recs []fsplane.SnapshotRecord) []string {
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
	file := fsplane.SnapshotRecord{ID: "f1", Root: "/r", Path: []string{"docs", "x.md"}, Kind: "file", Label: &label,
		CreatedAt: 500, Entries: []fsplane.SnapshotEntry{{Path: []string{}, Blob: "ff", Size: 9}}}
	recs := []fsplane.SnapshotRecord{
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
			got, err := s.ListSnapshots(ctx, tt.root, tt.path, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			if ids := snapIDs(got); !reflect.DeepEqual(ids, tt.want) {
				t.Errorf("ListSnapshots = %v, want %v", ids, tt.want)
			}
		})
	}

	got, err := s.GetSnapshot(ctx, "/r", []string{"docs", "x.md"}, "f1")
	if err != nil || got == nil || !reflect.DeepEqual(*got, file) {
		t.Errorf("GetSnapshot = %+v, %v; want %+v", got, err, file)
	}
	got, err = s.GetSnapshot(ctx, "/r", []string{"docs"}, "s3")
	if err != nil || got == nil || !reflect.DeepEqual(*got, recs[2]) {
		t.Errorf("GetSnapshot = %+v, %v; want %+v", got, err, recs[2])
	}
	for _, miss := range []struct {
		root string
		path []string
		id   string
	}{{"/r", []string{"docs"}, "nope"}, {"/r", []string{"docs", "sub"}, "s1"}, {"/other", []string{"docs"}, "s1"}} {
		if got, err := s.GetSnapshot(ctx, miss.root, miss.path, miss.id); got != nil || err != nil {
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
	got, err := s.GetSnapshot(ctx, "/r", []string{"docs"}, "s1")
	if err != nil || got == nil || !reflect.DeepEqual(*got, first) {
		t.Errorf("the duplicate changed the record: %+v, %v", got, err)
	}
	// The same id under another path or root is another snapshot.
	for _, r := range []fsplane.SnapshotRecord{snap("s1", "/r", []string{"docs", "sub"}, 1), snap("s1", "/x", []string{"docs"}, 1)} {
		if err := s.PutSnapshot(ctx, r); err != nil {
			t.Errorf("PutSnapshot(%s %v) = %v", r.Root, r.Path, err)
		}
	}
	for _, bad := range []fsplane.SnapshotRecord{snap("", "/r", nil, 1), snap("s9", "", nil, 1)} {
		if err := s.PutSnapshot(ctx, bad); err == nil {
			t.Errorf("PutSnapshot(%+v) succeeded", bad)
		}
	}
}
