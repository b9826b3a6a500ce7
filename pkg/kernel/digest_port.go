package kernel

import "context"

// FileStamp is what a stat says about a regular file that its content digest may be
// remembered by: the device and inode that identify it, its size, and its modification
// and status-change times in nanoseconds. Any write changes the status-change time, and
// no system call sets it back (touch -d sets the modification time only), so a stamp
// that matches says the content is unchanged — except within the file system's timestamp
// granularity of the moment it was recorded, which the racy rule of the plane that uses
// it (git's) covers.
type FileStamp struct {
	Dev, Ino uint64
	Size     int64
	MtimeNs  int64
	CtimeNs  int64
}

// FileDigest is a remembered SHA-256 digest of a file's content: the stamp the file had
// when it was hashed, and the wall-clock instant (Unix nanoseconds) the hashing started.
type FileDigest struct {
	Stamp      FileStamp
	Digest     [32]byte
	RecordedNs int64
}

// FileDigestCache remembers one content digest per file (device and inode), so that a
// plane reporting a version of a large file need not hash all of it every time. It is an
// optimization only: the plane decides whether an entry can be trusted (same stamp, not
// racy), a lookup or store error only means hashing, and nothing may ever decide a
// write's precondition from it.
type FileDigestCache interface {
	// LookupDigest returns the entry of the file (dev, ino), or ok=false.
	LookupDigest(ctx context.Context, dev, ino uint64) (d FileDigest, ok bool, err error)
	// StoreDigest records d as the entry of its file, replacing any other.
	StoreDigest(ctx context.Context, d FileDigest) error
}
