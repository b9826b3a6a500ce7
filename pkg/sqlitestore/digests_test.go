package sqlitestore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestFileDigests: an entry reads back exactly (inode and device numbers above 2⁶³
// included), a second store replaces the first, another file has its own entry, and a
// missing one is ok=false.
func TestFileDigests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	if _, ok, err := s.LookupDigest(ctx, 1, 2); ok || err != nil {
		t.Fatalf("empty cache: ok=%v err=%v", ok, err)
	}
	d := kernel.FileDigest{Stamp: kernel.FileStamp{Dev: math.MaxUint64, Ino: 1<<63 + 5, Size: 100 << 20,
		MtimeNs: 1_700_000_000_123_456_789, CtimeNs: 1_700_000_001_000_000_001}, Digest: sha256.Sum256([]byte("a")),
		RecordedNs: 1_700_000_009_000_000_000}
	if err := s.StoreDigest(ctx, d); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.LookupDigest(ctx, d.Stamp.Dev, d.Stamp.Ino)
	if err != nil || !ok || got != d {
		t.Fatalf("LookupDigest = %+v, %v, %v; want %+v", got, ok, err, d)
	}
	d2 := d
	d2.Stamp.Size, d2.Digest, d2.RecordedNs = 7, sha256.Sum256([]byte("b")), d.RecordedNs+1
	if err := s.StoreDigest(ctx, d2); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.LookupDigest(ctx, d.Stamp.Dev, d.Stamp.Ino); got != d2 {
		t.Errorf("after a second store = %+v, want %+v", got, d2)
	}
	other := d
	other.Stamp.Ino++
	if err := s.StoreDigest(ctx, other); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := s.LookupDigest(ctx, d.Stamp.Dev, d.Stamp.Ino); got != d2 {
		t.Errorf("another file's entry replaced this one: %+v", got)
	}
	var n int
	if err := s.db.QueryRow("SELECT count(*) FROM file_digests").Scan(&n); err != nil || n != 2 {
		t.Errorf("%d entries (%v), want 2", n, err)
	}
}

// TestFileDigestsMigration: a database of the previous schema gains the cache table and
// keeps its data.
func TestFileDigestsMigration(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", dsn(path, dsnParams))
	if err != nil {
		t.Fatal(err)
	}
	prev := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "CREATE TABLE file_digests") })
	if prev < 0 {
		t.Fatal("no file_digests migration")
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations[:prev] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", prev)); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO namespace_settings (world, owner, selection) VALUES ('w', 'human:o', '["files"]')`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.StoreDigest(ctx, kernel.FileDigest{Stamp: kernel.FileStamp{Dev: 1, Ino: 2}}); err != nil {
		t.Errorf("the migrated database has no usable cache table: %v", err)
	}
	if sel, stored, err := s.Selection(ctx, "w", kernel.Address{Kind: kernel.KindHuman, ID: "o"}); err != nil || !stored || len(sel) != 1 {
		t.Errorf("data lost in the migration: %v %v %v", sel, stored, err)
	}
}
