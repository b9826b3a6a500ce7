package fsplane

import (
	"context"
	"crypto/sha256"
	"io"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"golang.org/x/sys/unix"
)

// DigestCacheMinSize is the least file size whose digest files.read and files.stat
// look up in and store to the digest cache (ProviderOptions.Digests): a smaller file is
// hashed faster than a lookup.
const DigestCacheMinSize = 1 << 20

// RacyGranularity is the timestamp granularity the digest cache's racy rule assumes
// (2 s, FAT's; finer file systems lose nothing but a re-hash): an entry is trusted only
// when the file's modification and status-change times are older than the instant the
// entry's hashing started by more than this, as git treats a "racily clean" index entry.
// A file written within that window of its hashing may have changed after it without its
// stamp changing, so it is hashed again.
const RacyGranularity = 2 * time.Second

// stampOf is the cache stamp of a stat.
func stampOf(st *unix.Stat_t) kernel.FileStamp {
	return kernel.FileStamp{Dev: uint64(st.Dev), Ino: uint64(st.Ino), Size: st.Size, //nolint:unconvert // int32 on some systems
		MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano()}
}

// trusted reports whether entry d may stand for the content of a file whose stamp is
// now: the same stamp, and not racy (see RacyGranularity).
func trusted(d kernel.FileDigest, now kernel.FileStamp) bool {
	limit := d.RecordedNs - int64(RacyGranularity)
	return d.Stamp == now && now.MtimeNs < limit && now.CtimeNs < limit
}

// sameStamp reports whether the open file fd still has stamp s.
func sameStamp(fd int, s kernel.FileStamp) bool {
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && stampOf(&st) == s
}

// wholeVersion is the version of the whole content of the open regular file fd (stat st,
// taken at open), of which head, the first bytes, was read already and the rest is to be
// read from fd's offset. For a file of DigestCacheMinSize or more with a digest cache, a
// trusted entry is used without reading the rest; otherwise the rest is hashed, and the
// digest stored when the file's stamp did not change while it was read. Cache errors
// only mean hashing. Write preconditions never use this (they hash what they hold
// locked).
func (p *Provider) wholeVersion(ctx context.Context, fd int, st *unix.Stat_t, head []byte) (string, error) {
	cache := p.digests
	if st.Size < p.digestMin {
		cache = nil
	}
	stamp := stampOf(st)
	if cache != nil {
		if d, ok, err := cache.LookupDigest(ctx, stamp.Dev, stamp.Ino); err == nil && ok && trusted(d, stamp) && sameStamp(fd, stamp) {
			return versionOfDigest(d.Digest[:]), nil
		}
	}
	start := p.wall()
	h := sha256.New()
	h.Write(head)
	if _, err := io.Copy(h, fdReader(fd)); err != nil {
		return "", err
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if cache != nil && sameStamp(fd, stamp) {
		_ = cache.StoreDigest(ctx, kernel.FileDigest{Stamp: stamp, Digest: sum, RecordedNs: start.UnixNano()})
	}
	return versionOfDigest(sum[:]), nil
}

// wall is the wall clock the racy rule compares file timestamps with.
func (p *Provider) wall() time.Time {
	if p.wallClock != nil {
		return p.wallClock()
	}
	return time.Now()
}
