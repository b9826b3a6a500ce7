package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// PutSnapshot records a snapshot's metadata. A snapshot with the same scope (world,
// owner, root, path) and ID is an error wrapping store.ErrDuplicate, and nothing is
// written.
func (s *Store) PutSnapshot(ctx context.Context, rec kernel.SnapshotRecord) error {
	if rec.ID == "" || rec.Root == "" {
		return errors.New("put snapshot: id and root are required")
	}
	path, err := encodePath(rec.Path)
	if err != nil {
		return fmt.Errorf("put snapshot %s: %w", rec.ID, err)
	}
	entries, err := json.Marshal(rec.Entries)
	if err != nil {
		return fmt.Errorf("put snapshot %s: encode entries: %w", rec.ID, err)
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO snapshots (world, owner, root, path, id, kind, label, created_ms, entries)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (world, owner, root, path, id) DO NOTHING`,
		rec.World, addressKey(rec.Owner), rec.Root, path, rec.ID, rec.Kind, rec.Label, rec.CreatedAt, string(entries))
	if err != nil {
		return fail("put snapshot "+rec.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("put snapshot %s: %w", rec.ID, store.ErrDuplicate)
	}
	return nil
}

// ListSnapshots returns the snapshots of exactly scope, newest first (by CreatedAt, then
// later insertion first), at most limit of them (limit <= 0: all).
func (s *Store) ListSnapshots(ctx context.Context, scope kernel.SnapshotScope, limit int) ([]kernel.SnapshotRecord, error) {
	p, err := encodePath(scope.Path)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	q := `SELECT id, kind, label, created_ms, entries FROM snapshots
		WHERE world = $1 AND owner = $2 AND root = $3 AND path = $4 ORDER BY created_ms DESC, seq DESC`
	args := []any{scope.World, addressKey(scope.Owner), scope.Root, p}
	if limit > 0 {
		q += " LIMIT $5"
		args = append(args, limit)
	}
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fail("list snapshots", err)
	}
	defer rows.Close()
	var out []kernel.SnapshotRecord
	for rows.Next() {
		rec, err := scanSnapshot(rows, scope)
		if err != nil {
			return nil, fail("list snapshots", err)
		}
		out = append(out, *rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fail("list snapshots", err)
	}
	return out, nil
}

// GetSnapshot returns the snapshot id of exactly scope, or (nil, nil) when there is none.
func (s *Store) GetSnapshot(ctx context.Context, scope kernel.SnapshotScope, id string) (*kernel.SnapshotRecord, error) {
	p, err := encodePath(scope.Path)
	if err != nil {
		return nil, fmt.Errorf("get snapshot %s: %w", id, err)
	}
	rec, err := scanSnapshot(s.pool.QueryRow(ctx, `SELECT id, kind, label, created_ms, entries FROM snapshots
		WHERE world = $1 AND owner = $2 AND root = $3 AND path = $4 AND id = $5`, scope.World, addressKey(scope.Owner), scope.Root, p, id), scope)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fail("get snapshot "+id, err)
	}
	return rec, nil
}

// encodePath is the stored form of a path: its JSON array text (nil and empty alike).
func encodePath(path []string) (string, error) {
	if path == nil {
		path = []string{}
	}
	b, err := json.Marshal(path)
	if err != nil {
		return "", fmt.Errorf("encode path: %w", err)
	}
	return string(b), nil
}

// scanSnapshot reads one row (id, kind, label, created_ms, entries) of a snapshot of
// scope. Entries that do not decode are an error wrapping kernel.ErrSnapshotDamaged.
func scanSnapshot(row pgx.Row, scope kernel.SnapshotScope) (*kernel.SnapshotRecord, error) {
	var id, kind, entries string
	var created int64
	var label *string
	if err := row.Scan(&id, &kind, &label, &created, &entries); err != nil {
		return nil, err
	}
	rec := kernel.SnapshotRecord{SnapshotScope: scope, ID: id, Kind: kind, CreatedAt: created, Label: label}
	rec.Path = append([]string{}, scope.Path...)
	if err := json.Unmarshal([]byte(entries), &rec.Entries); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w: its entries do not decode: %v", id, kernel.ErrSnapshotDamaged, err)
	}
	return &rec, nil
}

// LookupDigest returns the remembered content digest of the file (dev, ino), or
// ok=false. Device and inode numbers are stored as the 64-bit integers they are.
func (s *Store) LookupDigest(ctx context.Context, dev, ino uint64) (kernel.FileDigest, bool, error) {
	var d kernel.FileDigest
	var digest []byte
	err := s.pool.QueryRow(ctx, `SELECT size, mtime_ns, ctime_ns, digest, recorded_ns FROM file_digests
		WHERE dev = $1 AND ino = $2`, int64(dev), int64(ino)).Scan(&d.Stamp.Size, &d.Stamp.MtimeNs, &d.Stamp.CtimeNs, &digest, &d.RecordedNs)
	if errors.Is(err, pgx.ErrNoRows) {
		return kernel.FileDigest{}, false, nil
	}
	if err != nil {
		return kernel.FileDigest{}, false, fail("read file digest", err)
	}
	if len(digest) != len(d.Digest) {
		return kernel.FileDigest{}, false, fmt.Errorf("read file digest: %d bytes, want %d", len(digest), len(d.Digest))
	}
	copy(d.Digest[:], digest)
	d.Stamp.Dev, d.Stamp.Ino = dev, ino
	return d, true, nil
}

// StoreDigest records d as the entry of its file, replacing any other: a cache write,
// committed without waiting for the disk.
func (s *Store) StoreDigest(ctx context.Context, d kernel.FileDigest) error {
	err := s.inTx(ctx, true, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO file_digests (dev, ino, size, mtime_ns, ctime_ns, digest, recorded_ns)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (dev, ino) DO UPDATE SET size = excluded.size,
			mtime_ns = excluded.mtime_ns, ctime_ns = excluded.ctime_ns, digest = excluded.digest, recorded_ns = excluded.recorded_ns`,
			int64(d.Stamp.Dev), int64(d.Stamp.Ino), d.Stamp.Size, d.Stamp.MtimeNs, d.Stamp.CtimeNs, d.Digest[:], d.RecordedNs)
		return err
	})
	if err != nil {
		return fail("store file digest", err)
	}
	return nil
}

// GetGatewayCatalog reads the cached upstream tool list stored under key and when it was
// stored; ok=false when there is none.
func (s *Store) GetGatewayCatalog(ctx context.Context, key string) (data []byte, storedAt time.Time, ok bool, err error) {
	var ms int64
	var tools string
	err = s.pool.QueryRow(ctx, `SELECT stored_ms, tools FROM gateway_catalogs WHERE key = $1`, key).Scan(&ms, &tools)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, time.Time{}, false, nil
	}
	if err != nil {
		return nil, time.Time{}, false, fail("read gateway catalogue", err)
	}
	return []byte(tools), time.UnixMilli(ms), true, nil
}

// PutGatewayCatalog stores (or replaces) the upstream tool list under key: a cache
// write, committed without waiting for the disk.
func (s *Store) PutGatewayCatalog(ctx context.Context, key string, data []byte, at time.Time) error {
	err := s.inTx(ctx, true, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO gateway_catalogs (key, stored_ms, tools) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO UPDATE SET stored_ms = excluded.stored_ms, tools = excluded.tools`, key, at.UnixMilli(), string(data))
		return err
	})
	if err != nil {
		return fail("write gateway catalogue", err)
	}
	return nil
}
