package pgstore

import (
	"sync"
)

// selCache is the namespace selections this process read, each with the process's view
// of the revision it was read at (see Revision). A selection change bumps the revision
// in its transaction (migration 00003's trigger), so an entry read at view V holds every
// change numbered V or less: the view only reaches V once V is committed, and the read
// began after. The entry is used while the view is still V — no change this process
// knows of came since — and read again once the view passed it: at once for this
// process's own changes (a write raises the view as it commits), within the
// notification (or the listener's poll) for another replica's, and at once for a request
// that names the change's revision (AwaitRevision raises the view first). It is used
// only while the listener is connected and has read the revision within two poll
// intervals (revisions.current): while it is not, every call reads the database, as
// without a cache. So `POST /v1/authorize` (no spend) reads nothing from the database
// per request but for the decision record.
type selCache struct {
	mu sync.RWMutex
	m  map[selKey]selEntry
}

type selKey struct{ world, owner string }

type selEntry struct {
	sel    []string // not to be changed: copied out
	stored bool
	rev    int64
}

// maxSelCache bounds the cache; when full it is emptied (which only costs reads).
const maxSelCache = 4096

func (c *selCache) get(k selKey, rev int64) (selEntry, bool) {
	c.mu.RLock()
	e, ok := c.m[k]
	c.mu.RUnlock()
	return e, ok && e.rev == rev
}

func (c *selCache) put(k selKey, e selEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxSelCache {
		c.m = make(map[selKey]selEntry)
	}
	if old, ok := c.m[k]; ok && old.rev > e.rev {
		return // a newer read is there already
	}
	c.m[k] = e
}
