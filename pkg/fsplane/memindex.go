package fsplane

import (
	"context"
	"errors"
	"strings"
	"sync"
)

// MemoryIndex is a SnapshotIndex kept in memory, for tests and for callers without a
// database. It is safe for concurrent use.
type MemoryIndex struct {
	mu   sync.Mutex
	recs map[string][]SnapshotRecord // key: indexKey(scope); in insertion order
}

// NewMemoryIndex returns an empty MemoryIndex.
func NewMemoryIndex() *MemoryIndex { return &MemoryIndex{recs: map[string][]SnapshotRecord{}} }

func indexKey(s SnapshotScope) string {
	// NUL cannot occur in a world, an owner, a root or a path segment.
	return s.World + "\x00" + s.Owner.String() + "\x00" + s.Root + "\x00" + strings.Join(s.Path, "\x00")
}

func cloneRecord(r SnapshotRecord) SnapshotRecord {
	r.Path = clonePath(r.Path)
	if r.Label != nil {
		l := *r.Label
		r.Label = &l
	}
	es := make([]SnapshotEntry, len(r.Entries))
	for i, e := range r.Entries {
		e.Path = clonePath(e.Path)
		es[i] = e
	}
	r.Entries = es
	return r
}

// ErrSnapshotExists is returned by MemoryIndex.PutSnapshot for a duplicate id.
var ErrSnapshotExists = errors.New("snapshot already exists")

// PutSnapshot stores rec; it fails if its scope already holds its ID.
func (m *MemoryIndex) PutSnapshot(ctx context.Context, rec SnapshotRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := indexKey(rec.SnapshotScope)
	for _, r := range m.recs[k] {
		if r.ID == rec.ID {
			return ErrSnapshotExists
		}
	}
	m.recs[k] = append(m.recs[k], cloneRecord(rec))
	return nil
}

// ListSnapshots returns the snapshots of exactly scope, newest first (ties: later
// insertion first), at most limit (limit <= 0: all).
func (m *MemoryIndex) ListSnapshots(ctx context.Context, scope SnapshotScope, limit int) ([]SnapshotRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	src := m.recs[indexKey(scope)]
	order := make([]int, len(src))
	for i := range order {
		order[i] = len(src) - 1 - i // later insertion first
	}
	// Stable sort by CreatedAt descending keeps later insertions first on ties.
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && src[order[j]].CreatedAt > src[order[j-1]].CreatedAt; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var out []SnapshotRecord
	for _, i := range order {
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, cloneRecord(src[i]))
	}
	return out, nil
}

// GetSnapshot returns the snapshot, or (nil, nil) when there is none.
func (m *MemoryIndex) GetSnapshot(ctx context.Context, scope SnapshotScope, id string) (*SnapshotRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.recs[indexKey(scope)] {
		if r.ID == id {
			c := cloneRecord(r)
			return &c, nil
		}
	}
	return nil, nil
}
