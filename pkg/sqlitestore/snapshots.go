package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// PutSnapshot records a snapshot's metadata. A snapshot with the same scope (world,
// owner, root, path) and ID is an error wrapping ErrDuplicate, and nothing is written.
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
	var label sql.NullString
	if rec.Label != nil {
		label = sql.NullString{String: *rec.Label, Valid: true}
	}
	db, err := s.durable()
	if err != nil {
		return fmt.Errorf("put snapshot %s: %w", rec.ID, err)
	}
	res, err := db.ExecContext(ctx, `INSERT INTO snapshots (world, owner, root, path, id, kind, label, created_ms, entries)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (world, owner, root, path, id) DO NOTHING`,
		rec.World, ownerKey(rec.Owner), rec.Root, path, rec.ID, rec.Kind, label, rec.CreatedAt, string(entries))
	if err != nil {
		return fmt.Errorf("put snapshot %s: %w", rec.ID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("put snapshot %s: %w", rec.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("put snapshot %s: %w", rec.ID, ErrDuplicate)
	}
	return nil
}

// ownerKey is the stored form of an owner: "kind:id" ("" for the zero address).
func ownerKey(a kernel.Address) string {
	if a.IsZero() && a.ID == "" {
		return ""
	}
	return a.String()
}

// ListSnapshots returns the snapshots of exactly scope, newest first (by CreatedAt, then
// later insertion first), at most limit of them (limit <= 0: all).
func (s *Store) ListSnapshots(ctx context.Context, scope kernel.SnapshotScope, limit int) ([]kernel.SnapshotRecord, error) {
	p, err := encodePath(scope.Path)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	q := `SELECT id, kind, label, created_ms, entries FROM snapshots
		WHERE world = ? AND owner = ? AND root = ? AND path = ? ORDER BY created_ms DESC, seq DESC`
	args := []any{scope.World, ownerKey(scope.Owner), scope.Root, p}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	defer rows.Close()
	var out []kernel.SnapshotRecord
	for rows.Next() {
		rec, err := scanSnapshot(rows, scope)
		if err != nil {
			return nil, fmt.Errorf("list snapshots: %w", err)
		}
		out = append(out, *rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	return out, nil
}

// GetSnapshot returns the snapshot id of exactly scope, or (nil, nil) when there is none.
func (s *Store) GetSnapshot(ctx context.Context, scope kernel.SnapshotScope, id string) (*kernel.SnapshotRecord, error) {
	p, err := encodePath(scope.Path)
	if err != nil {
		return nil, fmt.Errorf("get snapshot %s: %w", id, err)
	}
	row := s.db.QueryRowContext(ctx, `SELECT id, kind, label, created_ms, entries FROM snapshots
		WHERE world = ? AND owner = ? AND root = ? AND path = ? AND id = ?`, scope.World, ownerKey(scope.Owner), scope.Root, p, id)
	rec, err := scanSnapshot(row, scope)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get snapshot %s: %w", id, err)
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
// scope.
func scanSnapshot(row interface{ Scan(...any) error }, scope kernel.SnapshotScope) (*kernel.SnapshotRecord, error) {
	var id, kind, entries string
	var created int64
	var label sql.NullString
	if err := row.Scan(&id, &kind, &label, &created, &entries); err != nil {
		return nil, err
	}
	return decodeSnapshot(scope, id, kind, label, created, entries)
}

// decodeSnapshot builds a record from its stored columns. A value that cannot be a
// snapshot's (entries that are not a JSON array of entries) is an error wrapping
// kernel.ErrSnapshotDamaged.
func decodeSnapshot(scope kernel.SnapshotScope, id, kind string, label sql.NullString, created int64, entries string) (*kernel.SnapshotRecord, error) {
	rec := kernel.SnapshotRecord{SnapshotScope: scope, ID: id, Kind: kind, CreatedAt: created}
	rec.Path = append([]string{}, scope.Path...)
	if err := json.Unmarshal([]byte(entries), &rec.Entries); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w: its entries do not decode: %v", id, kernel.ErrSnapshotDamaged, err)
	}
	if label.Valid {
		l := label.String
		rec.Label = &l
	}
	return &rec, nil
}
