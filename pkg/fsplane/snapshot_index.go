package fsplane

import "context"

// SnapshotEntry is one file captured by a snapshot: its path relative to the snapshot's
// path, and the SHA-256 (hex) of its content, which names its blob in the blob store.
type SnapshotEntry struct {
	Path []string `json:"path"`
	Blob string   `json:"blob"`
	Size int64    `json:"size"`
}

// SnapshotRecord is the metadata of one snapshot. Root is the absolute path of the
// plane's root, so one index can serve several roots. Kind is "file" or "directory";
// a file snapshot has exactly one entry with an empty Path.
type SnapshotRecord struct {
	ID        string          `json:"id"`
	Root      string          `json:"root"`
	Path      []string        `json:"path"`
	Kind      string          `json:"kind"`
	Label     *string         `json:"label"`
	CreatedAt int64           `json:"createdAt"` // Unix milliseconds
	Entries   []SnapshotEntry `json:"entries"`
}

// SnapshotIndex stores snapshot metadata (the blobs live beside it, content-addressed).
//
// PutSnapshot fails if (Root, Path, ID) already exists. ListSnapshots returns the
// snapshots of exactly (root, path), newest first (ties: later insertion first), at most
// limit (limit <= 0: all). GetSnapshot returns (nil, nil) when there is no such snapshot.
// Any returned error is an outage of the index.
type SnapshotIndex interface {
	PutSnapshot(ctx context.Context, rec SnapshotRecord) error
	ListSnapshots(ctx context.Context, root string, path []string, limit int) ([]SnapshotRecord, error)
	GetSnapshot(ctx context.Context, root string, path []string, id string) (*SnapshotRecord, error)
}
