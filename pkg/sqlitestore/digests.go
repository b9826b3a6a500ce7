package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
)

var _ kernel.FileDigestCache = (*Store)(nil)

// LookupDigest returns the remembered content digest of the file (dev, ino)
// (kernel.FileDigestCache), or ok=false. Device and inode numbers are stored as the
// 64-bit integers they are (an inode above 2⁶³ reads back unchanged).
func (s *Store) LookupDigest(ctx context.Context, dev, ino uint64) (kernel.FileDigest, bool, error) {
	var d kernel.FileDigest
	var digest []byte
	err := s.db.QueryRowContext(ctx, `SELECT size, mtime_ns, ctime_ns, digest, recorded_ns FROM file_digests
		WHERE dev = ? AND ino = ?`, int64(dev), int64(ino)).Scan(&d.Stamp.Size, &d.Stamp.MtimeNs, &d.Stamp.CtimeNs, &digest, &d.RecordedNs)
	if errors.Is(err, sql.ErrNoRows) {
		return kernel.FileDigest{}, false, nil
	}
	if err != nil {
		return kernel.FileDigest{}, false, fmt.Errorf("read file digest: %w", err)
	}
	if len(digest) != len(d.Digest) {
		return kernel.FileDigest{}, false, fmt.Errorf("read file digest: %d bytes, want %d", len(digest), len(d.Digest))
	}
	copy(d.Digest[:], digest)
	d.Stamp.Dev, d.Stamp.Ino = dev, ino
	return d, true, nil
}

// StoreDigest records d as the entry of its file, replacing any other. It is a cache
// write: committed without forcing it to the disk (see Store), as losing it costs only a
// re-hash.
func (s *Store) StoreDigest(ctx context.Context, d kernel.FileDigest) error {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO file_digests (dev, ino, size, mtime_ns, ctime_ns, digest, recorded_ns)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (dev, ino) DO UPDATE SET size = excluded.size,
		mtime_ns = excluded.mtime_ns, ctime_ns = excluded.ctime_ns, digest = excluded.digest, recorded_ns = excluded.recorded_ns`,
		int64(d.Stamp.Dev), int64(d.Stamp.Ino), d.Stamp.Size, d.Stamp.MtimeNs, d.Stamp.CtimeNs, d.Digest[:], d.RecordedNs); err != nil {
		return fmt.Errorf("store file digest: %w", err)
	}
	return nil
}
