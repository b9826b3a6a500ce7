package sqlitestore

import (
	"sync"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// The selection cache. A session reads its namespace selection on every operation (spec
// 50 §2: a change made by another process takes effect on the next call), and a SQLite
// read is ~20 µs of a call; a stat is ~1 µs. Every selection update (ApplyUpdateAudited,
// in any process) rewrites a stamp file beside the database, STATE-selection, before it
// begins and after it commits, and a reader trusts its cached selection only while:
//
//   - the stamp's stat (size, modification and change time, inode) is the one it saw
//     before it read the selection it cached, and
//   - that stat was more than racyStamp older than the read (git's racy-timestamp rule:
//     a stamp rewritten within the file system's timestamp granularity of the read may
//     not show the rewrite), and
//   - the cached read is younger than maxSelectionAge (the bound should a writer die
//     between its commit and its second stamp, or an older sharedos, which does not
//     stamp, change a selection).
//
// Otherwise it reads the database again. The stamp taken before the read is what makes
// a rewrite during the read a miss next time. Where the stat carries no change time the
// cache is not used.

const (
	racyStamp       = 2 * time.Second
	maxSelectionAge = time.Second
)

type selKey struct{ world, owner string }

type selEntry struct {
	sel    []string
	stored bool
	stamp  fileStamp
	readAt time.Time
}

// fileStamp is what a stat of the stamp file says (ok false: it does not exist).
type fileStamp struct {
	ok           bool
	size         int64
	mtime, ctime int64
	ino          uint64
}

type selCache struct {
	mu sync.Mutex
	m  map[selKey]selEntry
}

// SelectionStampPath is the selection stamp file of the database at path (see selCache).
func SelectionStampPath(path string) string { return path + "-selection" }

// lookup returns the cached selection of k when it can be trusted with stamp st now.
func (c *selCache) lookup(k selKey, st fileStamp, now time.Time) ([]string, bool, bool) {
	c.mu.Lock()
	e, hit := c.m[k]
	c.mu.Unlock()
	if !hit || e.stamp != st || now.Sub(e.readAt) >= maxSelectionAge {
		return nil, false, false
	}
	if st.ok && e.readAt.Sub(time.Unix(0, max(st.mtime, st.ctime))) <= racyStamp {
		return nil, false, false
	}
	return e.sel, e.stored, true
}

func (c *selCache) store(k selKey, e selEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[selKey]selEntry{}
	}
	if len(c.m) >= 1024 {
		clear(c.m)
	}
	c.m[k] = e
}

func (c *selCache) forget() {
	c.mu.Lock()
	clear(c.m)
	c.mu.Unlock()
}

// stampSelection rewrites the stamp file (its content is a fresh id, so every rewrite
// changes its times), never through a symbolic link (openNoFollow). An error is ignored:
// readers then notice the change within maxSelectionAge.
func stampSelection(path string) {
	f, err := openNoFollow(SelectionStampPath(path))
	if err != nil {
		return
	}
	_, _ = f.Write([]byte(kernel.NewEventID() + "\n"))
	_ = f.Close()
}
