package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// GetGatewayCatalog reads the cached upstream tool list stored under key (a gateway
// server's config digest and owner) and when it was stored; ok=false when there is none.
func (s *Store) GetGatewayCatalog(ctx context.Context, key string) (data []byte, storedAt time.Time, ok bool, err error) {
	var ms int64
	var tools string
	err = s.db.QueryRowContext(ctx, `SELECT stored_ms, tools FROM gateway_catalogs WHERE key = ?`, key).Scan(&ms, &tools)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, time.Time{}, false, nil
	}
	if err != nil {
		return nil, time.Time{}, false, fmt.Errorf("read gateway catalogue: %w", err)
	}
	return []byte(tools), time.UnixMilli(ms), true, nil
}

// PutGatewayCatalog stores (or replaces) the upstream tool list under key.
func (s *Store) PutGatewayCatalog(ctx context.Context, key string, data []byte, at time.Time) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO gateway_catalogs (key, stored_ms, tools) VALUES (?, ?, ?)
ON CONFLICT (key) DO UPDATE SET stored_ms = excluded.stored_ms, tools = excluded.tools`, key, at.UnixMilli(), string(data))
	if err != nil {
		return fmt.Errorf("write gateway catalogue: %w", err)
	}
	return nil
}
