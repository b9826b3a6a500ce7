package kernel

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// SnapshotEntry is one file captured by a snapshot: its path relative to the snapshot's
// path, the SHA-256 (hex) of its content, which names its blob in the blob store, and
// its size in bytes.
type SnapshotEntry struct {
	Path []string `json:"path"`
	Blob string   `json:"blob"`
	Size int64    `json:"size"`
}

// SnapshotScope is what a snapshot belongs to: the world (AccessContext.World)
// and owner of the context that took it, the absolute path of the plane's root (one
// index may serve several roots) and the snapshotted path. A snapshot is visible only
// within its own scope: another owner or world never lists or restores it.
type SnapshotScope struct {
	World string
	Owner Address
	Root  string
	Path  []string
}

// SnapshotRecord is the metadata of one snapshot. Kind is "file" or "directory"; a
// file snapshot has exactly one entry, with an empty Path. CreatedAt is in Unix
// milliseconds.
type SnapshotRecord struct {
	SnapshotScope
	ID        string
	Kind      string
	Label     *string
	CreatedAt int64
	Entries   []SnapshotEntry
}

// SnapshotIndex is the port that stores snapshot metadata for a files plane (the
// blobs live beside it, content-addressed).
//
// PutSnapshot fails if a snapshot with the record's scope and ID already exists.
// ListSnapshots returns the snapshots of exactly scope (world, owner, root and path all
// equal), newest first (ties: later insertion first), at most limit (limit <= 0: all).
// GetSnapshot returns the snapshot id of exactly scope, or (nil, nil) when there is
// none. Any returned error is an outage of the index.
type SnapshotIndex interface {
	PutSnapshot(ctx context.Context, rec SnapshotRecord) error
	ListSnapshots(ctx context.Context, scope SnapshotScope, limit int) ([]SnapshotRecord, error)
	GetSnapshot(ctx context.Context, scope SnapshotScope, id string) (*SnapshotRecord, error)
}

// ErrSnapshotDamaged is wrapped by an index's error for a stored snapshot that cannot be
// decoded, and by SnapshotRecord.Validate: the record exists but cannot be used.
var ErrSnapshotDamaged = errors.New("snapshot record is damaged")

// Validate checks what a plane relies on before using a record read back from an index:
// a known kind, one entry with an empty path for a file snapshot, valid entry paths
// (each at most MaxPathSegments beyond the snapshot's path), SHA-256 hex blob names and
// sizes that are not negative. The error wraps ErrSnapshotDamaged and names the entry.
func (r SnapshotRecord) Validate() error {
	damaged := func(format string, args ...any) error {
		return fmt.Errorf("snapshot %s: %w: %s", r.ID, ErrSnapshotDamaged, fmt.Sprintf(format, args...))
	}
	switch r.Kind {
	case "file":
		if len(r.Entries) != 1 || len(r.Entries[0].Path) != 0 {
			return damaged("a file snapshot needs exactly one entry, with an empty path")
		}
	case "directory":
	default:
		return damaged("unknown kind %q", r.Kind)
	}
	for i, e := range r.Entries {
		if r.Kind == "directory" {
			if len(e.Path) == 0 {
				return damaged("entry %d has an empty path", i)
			}
			if err := ValidatePath(e.Path); err != nil {
				return damaged("entry %d: %v", i, err)
			}
		}
		if len(e.Blob) != 64 || strings.Trim(e.Blob, "0123456789abcdef") != "" {
			return damaged("entry %d: blob name %q is not a SHA-256 in lower-case hexadecimal", i, e.Blob)
		}
		if e.Size < 0 {
			return damaged("entry %d: negative size %d", i, e.Size)
		}
	}
	return nil
}
