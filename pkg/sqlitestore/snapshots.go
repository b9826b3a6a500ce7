package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/fsplane"
)

// PutSnapshot records a snapshot's metadata. A snapshot with the same (Root, Path, ID) is
// an error wrapping ErrDuplicate, and nothing is written.
func (s *Store) PutSnapshot(ctx context.Context, rec fsplane.SnapshotRecord) error {
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
	res, err := s.db.ExecContext(ctx, `INSERT INTO snapshots (root, path, id, kind, label, created_ms, entries)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (root, path, id) DO NOTHING`,
		rec.Root, path, rec.ID, rec.Kind, label, rec.CreatedAt, string(entries))
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

// ListSnapshots returns the snapshots of exactly (root, path), newest first (by CreatedAt,
// then later insertion first), at most limit of them (limit <= 0: all).
func (s *Store) ListSnapshots(ctx context.Context, root string, path []string, limit int) ([]fsplane.SnapshotRecord, error) {
	p, err := encodePath(path)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	q := `SELECT root, path, id, kind, label, created_ms, entries FROM snapshots
		WHERE root = ? AND path = ? ORDER BY created_ms DESC, seq DESC`
	args := []any{root, p}
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	defer rows.Close()
	var out []fsplane.SnapshotRecord
	for rows.Next() {
		rec, err := scanSnapshot(rows)
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

// GetSnapshot returns the snapshot (root, path, id), or (nil, nil) when there is none.
func (s *Store) GetSnapshot(ctx context.Context, root string, path []string, id string) (*fsplane.SnapshotRecord, error) {
	p, err := encodePath(path)
	if err != nil {
		return nil, fmt.Errorf("get snapshot %s: %w", id, err)
	}
	row := s.db.QueryRowContext(ctx, `SELECT root, path, id, kind, label, created_ms, entries FROM snapshots
		WHERE root = ? AND path = ? AND id = ?`, root, p, id)
	rec, err := scanSnapshot(row)
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

func scanSnapshot(row interface{ Scan(...any) error }) (*fsplane.SnapshotRecord, error) {
	var rec fsplane.SnapshotRecord
	var path, entries string
	var label sql.NullString
	if err := row.Scan(&rec.Root, &path, &rec.ID, &rec.Kind, &label, &rec.CreatedAt, &entries); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(path), &rec.Path); err != nil {
		return nil, fmt.Errorf("decode path of snapshot %s: %w", rec.ID, err)
	}
	if err := json.Unmarshal([]byte(entries), &rec.Entries); err != nil {
		return nil, fmt.Errorf("decode entries of snapshot %s: %w", rec.ID, err)
	}
	if label.Valid {
		l := label.String
		rec.Label = &l
	}
	return &rec, nil
}
