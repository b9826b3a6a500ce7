package fsplane

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// memDigests is an in-memory kernel.FileDigestCache that counts its use.
type memDigests struct {
	mu             sync.Mutex
	m              map[[2]uint64]kernel.FileDigest
	lookups, store int
	fail           bool
}

func newMemDigests() *memDigests { return &memDigests{m: map[[2]uint64]kernel.FileDigest{}} }

func (c *memDigests) LookupDigest(_ context.Context, dev, ino uint64) (kernel.FileDigest, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lookups++
	if c.fail {
		return kernel.FileDigest{}, false, fmt.Errorf("cache down")
	}
	d, ok := c.m[[2]uint64{dev, ino}]
	return d, ok, nil
}

func (c *memDigests) StoreDigest(_ context.Context, d kernel.FileDigest) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.store++
	if c.fail {
		return fmt.Errorf("cache down")
	}
	c.m[[2]uint64{d.Stamp.Dev, d.Stamp.Ino}] = d
	return nil
}

func (c *memDigests) counts() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lookups, c.store
}

// digestEnv is an env whose provider reads at most 64 bytes, caches digests of files
// of 128 bytes or more, and whose racy rule sees the clock wall returns.
func digestEnv(t *testing.T, cache kernel.FileDigestCache, wall func() time.Time) *env {
	t.Helper()
	e := newEnv(t)
	p, err := NewProvider(e.root, ProviderOptions{MaxReadBytes: 64, Digests: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	p.digestMin, p.wallClock = 128, wall
	e.p = p
	hs, err := Tools(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		e.tools[h.Definition.Name] = h
	}
	return e
}

func later() time.Time { return time.Now().Add(time.Hour) }

func (e *env) versions(rel string) (read, stat string) {
	e.t.Helper()
	r := e.call("files.read", jobj{"path": pth(rel)})
	s := e.call("files.stat", jobj{"path": pth(rel)})
	if r.Status != kernel.StatusSucceeded || s.Status != kernel.StatusSucceeded {
		e.t.Fatalf("read %+v stat %+v", r.Error, s.Error)
	}
	return r.Output.(ReadOutput).Version, s.Output.(StatOutput).Version
}

func trueVersion(t *testing.T, full string) string {
	t.Helper()
	b, err := os.ReadFile(full)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return versionOfDigest(sum[:])
}

// TestDigestCacheUsed: a large file's digest is stored once and then trusted (no
// re-hash), by read and stat alike, and the version is the content's.
func TestDigestCacheUsed(t *testing.T) {
	cache := newMemDigests()
	e := digestEnv(t, cache, later)
	e.write("big.bin", string(randomBytes(1, 4096)))
	full := filepath.Join(e.root, "big.bin")
	want := trueVersion(t, full)
	for i := range 3 {
		r, s := e.versions("big.bin")
		if r != want || s != want {
			t.Fatalf("round %d: read %s stat %s, want %s", i, r, s, want)
		}
	}
	if lookups, stores := cache.counts(); stores != 1 || lookups != 6 {
		t.Errorf("lookups %d stores %d, want 6 and 1 (hashed once, then trusted)", lookups, stores)
	}
	// A small file (under the cache's size) never touches the cache.
	e.write("small.txt", "tiny")
	e.versions("small.txt")
	if lookups, stores := cache.counts(); stores != 1 || lookups != 6 {
		t.Errorf("a small file used the cache: lookups %d stores %d", lookups, stores)
	}
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return b
}

// TestDigestCacheVersionProperty: whatever changes a file's content — in place with the
// same size and the old mtime put back (touch -d), replaced by another inode with the same
// size and mtime, truncated and rewritten within the same second, written through a hard
// link, appended to — the version read and stat report afterwards is the new content's,
// never a cached one. Entries are trusted as soon as they are written (the racy rule's
// clock is an hour ahead), the most hostile setting for staleness.
func TestDigestCacheVersionProperty(t *testing.T) {
	cache := newMemDigests()
	e := digestEnv(t, cache, later)
	full := filepath.Join(e.root, "f.bin")
	link := filepath.Join(e.root, "link.bin")
	r := rand.New(rand.NewPCG(7, 11))
	content := randomBytes(100, 1024)
	if err := os.WriteFile(full, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(full, link); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range 120 {
		fi, err := os.Stat(full)
		if err != nil {
			t.Fatal(err)
		}
		oldMtime := fi.ModTime()
		before, _ := e.versions("f.bin")
		next := append([]byte(nil), content...)
		next[r.IntN(len(next))] ^= 1 << r.IntN(7) // one bit: same size
		kind := i % 5
		switch kind {
		case 0: // in place, same size, mtime put back
			f, err := os.OpenFile(full, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(next, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
		case 1: // another inode, same size and mtime
			tmp := filepath.Join(e.root, ".tmp")
			if err := os.WriteFile(tmp, next, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(tmp, oldMtime, oldMtime); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, full); err != nil {
				t.Fatal(err)
			}
			os.Remove(link)
			if err := os.Link(full, link); err != nil {
				t.Fatal(err)
			}
		case 2: // truncated and rewritten within the same second
			if err := os.Truncate(full, 0); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(full, next, 0o644); err != nil {
				t.Fatal(err)
			}
		case 3: // through the hard link
			if err := os.WriteFile(link, next, 0o644); err != nil {
				t.Fatal(err)
			}
		case 4: // appended to
			next = append(next, 'z')
			f, err := os.OpenFile(full, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{'z'})
			f.Close()
		}
		if kind != 4 {
			if err := os.Chtimes(full, oldMtime, oldMtime); err != nil { // touch -d back
				t.Fatal(err)
			}
		}
		content = next
		want := trueVersion(t, full)
		rv, sv := e.versions("f.bin")
		lv, _ := e.versions("link.bin")
		if rv != want || sv != want || lv != want {
			t.Fatalf("change %d (kind %d): read %s stat %s link %s, want %s", i, kind, rv, sv, lv, want)
		}
		if rv == before {
			t.Fatalf("change %d (kind %d): the version did not change", i, kind)
		}
		seen[rv] = true
	}
	if _, stores := cache.counts(); stores == 0 {
		t.Error("the cache was never used")
	}
}

// TestDigestCacheRacy: an entry recorded within the timestamp granularity of the file's
// times is never trusted, even with a matching stamp and a wrong digest planted in it;
// an entry recorded well after is.
func TestDigestCacheRacy(t *testing.T) {
	cache := newMemDigests()
	var wall time.Time
	e := digestEnv(t, cache, func() time.Time { return wall })
	e.write("f.bin", string(randomBytes(3, 512)))
	full := filepath.Join(e.root, "f.bin")
	want := trueVersion(t, full)
	fi, _ := os.Stat(full)
	wall = fi.ModTime() // hashed in the same tick as the write: racy
	e.versions("f.bin")
	_, stores := cache.counts()
	// Plant a wrong digest under the file's real stamp, recorded within the window.
	cache.mu.Lock()
	for k, d := range cache.m {
		d.Digest = sha256.Sum256([]byte("not the content"))
		cache.m[k] = d
	}
	cache.mu.Unlock()
	if r, s := e.versions("f.bin"); r != want || s != want {
		t.Fatalf("a racy entry was trusted: read %s stat %s, want %s", r, s, want)
	}
	if _, after := cache.counts(); after == stores {
		t.Error("a racy entry was not hashed again")
	}
	// Recorded two granularities after the file's times: trusted (here, the planted
	// wrong digest is reported — which is why nothing but a trusted stamp may write one).
	cache.mu.Lock()
	for k, d := range cache.m {
		d.Digest = sha256.Sum256([]byte("planted"))
		d.RecordedNs = fi.ModTime().Add(2 * RacyGranularity).UnixNano()
		cache.m[k] = d
	}
	cache.mu.Unlock()
	planted := sha256.Sum256([]byte("planted"))
	if r, _ := e.versions("f.bin"); r != versionOfDigest(planted[:]) {
		t.Errorf("a trusted entry was not used: %s", r)
	}
}

// TestWritePreconditionsIgnoreDigestCache: a write's expectedVersion is checked against
// the content it holds, never a cached digest: with a trusted but wrong entry planted,
// replace, append and delete with the cached version conflict and change nothing, and
// with the content's real version succeed.
func TestWritePreconditionsIgnoreDigestCache(t *testing.T) {
	for _, tool := range []string{"files.replace", "files.append", "files.delete"} {
		t.Run(tool, func(t *testing.T) {
			cache := newMemDigests()
			e := digestEnv(t, cache, later)
			body := string(randomBytes(5, 300))
			e.write("f.bin", body)
			full := filepath.Join(e.root, "f.bin")
			want := trueVersion(t, full)
			e.versions("f.bin") // store the entry
			cache.mu.Lock()
			for k, d := range cache.m {
				d.Digest = sha256.Sum256([]byte("stale"))
				cache.m[k] = d
			}
			cache.mu.Unlock()
			stale, _ := e.versions("f.bin")
			if stale == want {
				t.Fatal("setup: the planted entry is not used")
			}
			args := func(v string) jobj {
				a := jobj{"path": pth("f.bin"), "expectedVersion": v}
				if tool != "files.delete" {
					a["content"] = "new"
				}
				return a
			}
			res := e.call(tool, args(stale))
			if res.Status == kernel.StatusSucceeded || res.Error == nil || res.Error.Code != CodeVersionConflict {
				t.Fatalf("with the cached version: %+v, want version_conflict", res)
			}
			if got, _ := e.readFile("f.bin"); got != body {
				t.Fatal("a refused write changed the file")
			}
			if res := e.call(tool, args(want)); res.Status != kernel.StatusSucceeded {
				t.Fatalf("with the real version: %+v", res.Error)
			}
		})
	}
}

// TestDigestCacheErrors: a failing cache only means hashing.
func TestDigestCacheErrors(t *testing.T) {
	cache := newMemDigests()
	cache.fail = true
	e := digestEnv(t, cache, later)
	e.write("f.bin", string(randomBytes(9, 400)))
	want := trueVersion(t, filepath.Join(e.root, "f.bin"))
	if r, s := e.versions("f.bin"); r != want || s != want {
		t.Errorf("read %s stat %s, want %s", r, s, want)
	}
}
