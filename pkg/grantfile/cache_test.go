package grantfile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// sourceDigest is the digest an entry for the files at paths must carry.
func sourceDigest(t *testing.T, paths []string) [32]byte {
	t.Helper()
	datas := make([][]byte, len(paths))
	for i, p := range paths {
		d, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		datas[i] = d
	}
	return cacheKey(paths, datas)
}

// sealedEntry builds a cache entry for paths holding files, sealed with the key file's key.
func sealedEntry(t *testing.T, keyFile string, paths []string, files []*File, hashes map[scopeKey]string) []byte {
	t.Helper()
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := encodeSnapshot(files, hashes)
	if err != nil {
		t.Fatal(err)
	}
	return sealEntry(key, sourceDigest(t, paths), payload)
}

// readEntry opens and decodes the entry for paths with the real key.
func readEntry(t *testing.T, opts SetOptions, paths []string) ([]*File, bool) {
	t.Helper()
	key, err := os.ReadFile(opts.CacheKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	files, _, ok := readCache(opts.CacheDir, key, sourceDigest(t, paths), paths)
	return files, ok
}

func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+cacheExt))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSnapshotRoundTrip(t *testing.T) {
	t.Parallel()
	var files []*File
	for _, name := range []string{"full.yaml", "full.json", "example.yaml"} {
		files = append(files, mustParse(t, name, string(readFixture(t, name))))
	}
	files[0].Derived["g-child"] = true
	hashes := map[scopeKey]string{{world: "w", subject: kernel.Address{Kind: kernel.KindAgent, ID: "a"},
		issuer: kernel.Address{Kind: kernel.KindHuman, ID: "h"}}: "abc"}
	payload, err := encodeSnapshot(files, hashes)
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, cacheKeySize)
	digest := sha256.Sum256([]byte("source"))
	data := sealEntry(key, digest, payload)
	opened, ok := openEntry(key, digest, data)
	if !ok {
		t.Fatal("sealed entry does not open")
	}
	got, gotHashes, err := decodeSnapshot(opened)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, files) || !reflect.DeepEqual(gotHashes, hashes) {
		t.Errorf("snapshot round trip changed the files or hashes")
	}
	// Every truncation and every single-byte change is detected, and so is another key
	// or another digest.
	for i := 0; i < len(data); i += 7 {
		if _, ok := openEntry(key, digest, data[:i]); ok {
			t.Fatalf("truncation at %d accepted", i)
		}
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x20
		if _, ok := openEntry(key, digest, bad); ok {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
	other := append([]byte(nil), key...)
	other[0] ^= 1
	if _, ok := openEntry(other, digest, data); ok {
		t.Fatal("entry opened under another key")
	}
	if _, ok := openEntry(key, sha256.Sum256([]byte("other source")), data); ok {
		t.Fatal("entry opened for another digest")
	}
}

func TestCache(t *testing.T) {
	t.Parallel()
	src := writeFiles(t, map[string]string{
		"a.yaml": string(readFixture(t, "full.yaml")),
		"b.json": `{"version": 1, "grants": [` + jsonGrant1("b1") + `]}`,
	})
	state := t.TempDir()
	cache := filepath.Join(state, "cache")
	paths := []string{filepath.Join(src, "a.yaml"), filepath.Join(src, "b.json")}
	opts := SetOptions{CacheDir: cache, CacheKeyFile: filepath.Join(state, "cache.key")}
	ref, err := LoadSet(paths, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Miss: the set is parsed and one entry written.
	s, err := LoadSet(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	entries := cacheEntries(t, cache)
	if len(entries) != 1 || !reflect.DeepEqual(s.Files(), ref.Files()) || !reflect.DeepEqual(s.Context(), ref.Context()) {
		t.Fatalf("after a miss: %d entries", len(entries))
	}
	entry := entries[0]

	// Hit: the snapshot is what is served. Prove it by planting a different (valid)
	// snapshot under the same name, sealed with the real key.
	planted := ref.Files()
	planted[0].Grants[0].Capabilities[0].Actions = []string{"planted"}
	data := sealedEntry(t, opts.CacheKeyFile, paths, planted, nil)
	if err := os.WriteFile(entry, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = LoadSet(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Files()[0].Grants[0].Capabilities[0].Actions; !reflect.DeepEqual(got, []string{"planted"}) {
		t.Fatalf("cache hit not used: actions %v", got)
	}

	// Corrupt entries are ignored and rewritten.
	for _, corrupt := range [][]byte{nil, []byte("garbage"), data[:len(data)/2], append(append([]byte(nil), data[:len(data)-1]...), data[len(data)-1]^1)} {
		if err := os.WriteFile(entry, corrupt, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err = LoadSet(paths, opts)
		if err != nil {
			t.Fatalf("corrupt entry: %v", err)
		}
		if !reflect.DeepEqual(s.Files(), ref.Files()) {
			t.Fatal("corrupt entry: wrong content served")
		}
		if files, ok := readEntry(t, opts, paths); !ok || !reflect.DeepEqual(files, ref.Files()) {
			t.Fatal("corrupt entry was not rewritten")
		}
	}

	// A changed file is a different key: parsed again, a second entry.
	changed := `{"version": 1, "grants": [` + jsonGrant1("b1") + "," + jsonGrant1("extra") + `]}`
	if err := os.WriteFile(paths[1], []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = LoadSet(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	if s.Len() != ref.Len()+1 || len(cacheEntries(t, cache)) != 2 {
		t.Fatalf("changed file: %d grants, %d entries", s.Len(), len(cacheEntries(t, cache)))
	}
	// So is a different order of the same files (the grants' order changes).
	if _, err := LoadSet([]string{paths[1], paths[0]}, opts); err != nil {
		t.Fatal(err)
	}
	if n := len(cacheEntries(t, cache)); n != 3 {
		t.Fatalf("reordered paths: %d entries, want 3", n)
	}

	// An invalid set is never cached.
	if err := os.WriteFile(paths[1], []byte(`{"version": 1, "grants": [{"id": "x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSet(paths, opts); err == nil {
		t.Fatal("invalid file accepted")
	}
	if n := len(cacheEntries(t, cache)); n != 3 {
		t.Fatalf("invalid set: %d entries, want 3", n)
	}
	if tmp, _ := filepath.Glob(filepath.Join(cache, ".tmp-*")); len(tmp) != 0 {
		t.Errorf("temporary files left behind: %v", tmp)
	}
}

func TestCacheUnwritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	blocker := filepath.Join(dir, "cache")
	if err := os.WriteFile(blocker, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSet([]string{filepath.Join("testdata", "full.yaml")}, SetOptions{CacheDir: blocker, CacheKeyFile: filepath.Join(dir, "key")})
	if err != nil || s.Len() != 3 {
		t.Fatalf("LoadSet with an unusable cache dir = %v, %v", s, err)
	}
}

// TestSnapshotHashes: the set is a kernel.SnapshotGrantSource whose authority hash is the
// kernel's for the same grants, computed once and carried by the cache.
func TestSnapshotHashes(t *testing.T) {
	t.Parallel()
	src := writeFiles(t, map[string]string{"a.yaml": string(readFixture(t, "full.yaml"))})
	paths := []string{filepath.Join(src, "a.yaml")}
	state := t.TempDir()
	cache := filepath.Join(state, "cache")
	opts := SetOptions{CacheDir: cache, CacheKeyFile: filepath.Join(state, "key")}
	ctx := context.Background()
	s, err := LoadSet(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	s.index()
	for k := range s.scope {
		actx := kernel.AccessContext{World: k.world, Actor: k.subject, Authority: k.issuer}
		snap, err := s.LoadGrantSnapshot(ctx, actx)
		if err != nil || len(snap.Grants) == 0 {
			t.Fatalf("snapshot %+v %v", snap, err)
		}
		if want := kernel.HashGrants(snap.Grants); snap.Hash != want {
			t.Fatalf("hash %s, want the kernel's %s", snap.Hash, want)
		}
		// The hit serves the hash from the cache entry: plant another one to prove it.
		entry := cacheEntries(t, cache)[0]
		data := sealedEntry(t, opts.CacheKeyFile, paths, s.Files(), map[scopeKey]string{k: "planted"})
		if err := os.WriteFile(entry, data, 0o600); err != nil {
			t.Fatal(err)
		}
		hit, err := LoadSet(paths, opts)
		if err != nil {
			t.Fatal(err)
		}
		if snap, _ := hit.LoadGrantSnapshot(ctx, actx); snap.Hash != "planted" {
			t.Fatalf("cache hit recomputed the hash: %s", snap.Hash)
		}
		break
	}
}

// TestCacheAuthenticated: whoever can write the cache directory (but not read the key
// file) cannot make LoadSet serve anything but the source's grants.
func TestCacheAuthenticated(t *testing.T) {
	t.Parallel()
	src := writeFiles(t, map[string]string{"g.yaml": string(readFixture(t, "full.yaml"))})
	paths := []string{filepath.Join(src, "g.yaml")}
	ref, err := LoadSet(paths, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// forged is the set with every capability widened to "*".
	forged := ref.Files()
	for _, f := range forged {
		for i := range f.Grants {
			for j := range f.Grants[i].Capabilities {
				f.Grants[i].Capabilities[j].Actions = []string{"*"}
			}
		}
	}
	forgedPayload, err := encodeSnapshot(forged, nil)
	if err != nil {
		t.Fatal(err)
	}
	wideOK := func(t *testing.T, s *Set) {
		t.Helper()
		if !reflect.DeepEqual(s.Files(), ref.Files()) {
			t.Fatal("a forged cache entry was trusted")
		}
	}
	newState := func(t *testing.T) SetOptions {
		state := t.TempDir()
		opts := SetOptions{CacheDir: filepath.Join(state, "cache"), CacheKeyFile: filepath.Join(state, "cache.key")}
		if _, err := LoadSet(paths, opts); err != nil { // creates the key and the entry
			t.Fatal(err)
		}
		return opts
	}

	forgeries := map[string]func(t *testing.T, opts SetOptions) []byte{
		"wrong key": func(t *testing.T, opts SetOptions) []byte {
			return sealEntry(make([]byte, cacheKeySize), sourceDigest(t, paths), forgedPayload)
		},
		"no MAC (the unauthenticated v2 layout)": func(t *testing.T, opts SetOptions) []byte {
			return append([]byte("SOSGF\x00\x02\n"), forgedPayload...)
		},
		"MAC of the real key, built from other bytes": func(t *testing.T, opts SetOptions) []byte {
			key, _ := os.ReadFile(opts.CacheKeyFile)
			return sealEntry(key, sha256.Sum256([]byte("other source")), forgedPayload)
		},
		"MAC truncated": func(t *testing.T, opts SetOptions) []byte {
			e := sealedEntry(t, opts.CacheKeyFile, paths, forged, nil)
			return e[:len(e)-1]
		},
		"payload replaced, MAC kept": func(t *testing.T, opts SetOptions) []byte {
			good, _ := os.ReadFile(cachePath(opts.CacheDir, sourceDigest(t, paths)))
			e := sealedEntry(t, opts.CacheKeyFile, paths, forged, nil)
			return append(e[:len(e)-sha256.Size], good[len(good)-sha256.Size:]...)
		},
	}
	for name, forge := range forgeries {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := newState(t)
			entry := cachePath(opts.CacheDir, sourceDigest(t, paths))
			if err := os.WriteFile(entry, forge(t, opts), 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := LoadSet(paths, opts)
			if err != nil {
				t.Fatal(err)
			}
			wideOK(t, s)
			if files, ok := readEntry(t, opts, paths); !ok || !reflect.DeepEqual(files, ref.Files()) {
				t.Fatal("the forged entry was not rebuilt from the source")
			}
		})
	}

	t.Run("key file created 0600 with 32 random bytes", func(t *testing.T) {
		t.Parallel()
		opts := newState(t)
		info, err := os.Lstat(opts.CacheKeyFile)
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm() != 0o600 || info.Size() != cacheKeySize {
			t.Fatalf("key file %v, %v", info, err)
		}
		other := newState(t)
		a, _ := os.ReadFile(opts.CacheKeyFile)
		b, _ := os.ReadFile(other.CacheKeyFile)
		if bytes.Equal(a, b) {
			t.Fatal("two key files hold the same secret")
		}
		// The key survives: a second load is a hit with the same key.
		if _, err := LoadSet(paths, opts); err != nil {
			t.Fatal(err)
		}
		if again, _ := os.ReadFile(opts.CacheKeyFile); !bytes.Equal(a, again) {
			t.Fatal("the key changed")
		}
	})

	// A cache that cannot be trusted is not used at all: a planted entry sealed with the
	// real key is ignored, and nothing is written.
	unusable := map[string]func(t *testing.T, opts SetOptions) SetOptions{
		"cache dir is a symlink": func(t *testing.T, opts SetOptions) SetOptions {
			link := filepath.Join(t.TempDir(), "cache-link")
			if err := os.Symlink(opts.CacheDir, link); err != nil {
				t.Fatal(err)
			}
			opts.CacheDir = link
			return opts
		},
		"key file readable by others": func(t *testing.T, opts SetOptions) SetOptions {
			if err := os.Chmod(opts.CacheKeyFile, 0o644); err != nil {
				t.Fatal(err)
			}
			return opts
		},
		"key file is a symlink": func(t *testing.T, opts SetOptions) SetOptions {
			link := filepath.Join(t.TempDir(), "key-link")
			if err := os.Symlink(opts.CacheKeyFile, link); err != nil {
				t.Fatal(err)
			}
			opts.CacheKeyFile = link
			return opts
		},
		"key file of the wrong size": func(t *testing.T, opts SetOptions) SetOptions {
			key, _ := os.ReadFile(opts.CacheKeyFile)
			if err := os.WriteFile(opts.CacheKeyFile, append(key, 0), 0o600); err != nil {
				t.Fatal(err)
			}
			return opts
		},
		"no key file option": func(t *testing.T, opts SetOptions) SetOptions {
			opts.CacheKeyFile = ""
			return opts
		},
	}
	for name, setup := range unusable {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := newState(t)
			entry := cachePath(opts.CacheDir, sourceDigest(t, paths))
			planted := sealedEntry(t, opts.CacheKeyFile, paths, forged, nil)
			if err := os.WriteFile(entry, planted, 0o600); err != nil {
				t.Fatal(err)
			}
			bad := setup(t, opts)
			s, err := LoadSet(paths, bad)
			if err != nil {
				t.Fatal(err)
			}
			wideOK(t, s)
			if now, _ := os.ReadFile(entry); !bytes.Equal(now, planted) {
				t.Fatal("an unusable cache was written")
			}
		})
	}
}

// TestRefusedSetWritesNothing: loading a refused grant file creates neither the cache
// key file nor its directory (bad input never touches the state directory).
func TestRefusedSetWritesNothing(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\ngrants:\n  - id: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	_, err := LoadSet([]string{bad}, SetOptions{CacheDir: filepath.Join(state, "cache", "grants"), CacheKeyFile: filepath.Join(state, "cache", "grants.key")})
	if err == nil {
		t.Fatal("a broken file loaded")
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Fatalf("the refused load created %s (%v)", state, err)
	}
}

// TestCacheWriteBehind: with WriteBehind the entry of a miss (and the key file, and the
// authority hashes it holds) is written on another goroutine while the set is already
// served; after Wait it is there and a hit serves the same set and hashes. A refused set
// still writes nothing, and a hit has nothing to wait for.
func TestCacheWriteBehind(t *testing.T) {
	t.Parallel()
	src := writeFiles(t, map[string]string{"a.yaml": string(readFixture(t, "full.yaml"))})
	paths := []string{filepath.Join(src, "a.yaml")}
	state := t.TempDir()
	opts := SetOptions{CacheDir: filepath.Join(state, "cache"), CacheKeyFile: filepath.Join(state, "cache", "grants.key"), WriteBehind: true}
	ref, err := LoadSet(paths, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := LoadSet(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ref.index()
	for k := range ref.scope { // served (hashes included) while the entry is written
		actx := kernel.AccessContext{World: k.world, Actor: k.subject, Authority: k.issuer}
		want, _ := ref.LoadGrantSnapshot(ctx, actx)
		if got, _ := s.LoadGrantSnapshot(ctx, actx); got.Hash != want.Hash || !reflect.DeepEqual(got.Grants, want.Grants) {
			t.Fatalf("scope %v served %+v, want %+v", k, got, want)
		}
	}
	s.Wait()
	if files, ok := readEntry(t, opts, paths); !ok || !reflect.DeepEqual(files, ref.Files()) {
		t.Fatal("no entry after Wait")
	}
	hit, err := LoadSet(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	if hit.written != nil {
		t.Error("a hit writes behind")
	}
	hit.Wait()
	if !reflect.DeepEqual(hit.Files(), ref.Files()) || !reflect.DeepEqual(hit.hashes, s.allHashes()) {
		t.Fatal("the hit serves another set or other hashes")
	}

	bad := filepath.Join(src, "bad.yaml")
	if err := os.WriteFile(bad, []byte("version: 1\ngrants:\n  - id: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "state")
	if _, err := LoadSet([]string{bad}, SetOptions{CacheDir: filepath.Join(other, "cache"), CacheKeyFile: filepath.Join(other, "key"), WriteBehind: true}); err == nil {
		t.Fatal("a broken file loaded")
	}
	if _, err := os.Stat(other); !os.IsNotExist(err) {
		t.Fatalf("the refused load created %s (%v)", other, err)
	}
}

// TestCacheLatest: the latest entry of a list of paths is a hard link to the entry last
// written (or hit) for them; it is used when it carries the digest of the files just
// read, and only then: after a change (or a change back) the entry the digest names is
// used, and one that does not authenticate is ignored.
func TestCacheLatest(t *testing.T) {
	t.Parallel()
	v1 := string(readFixture(t, "full.yaml"))
	src := writeFiles(t, map[string]string{"a.yaml": v1})
	paths := []string{filepath.Join(src, "a.yaml")}
	state := t.TempDir()
	opts := SetOptions{CacheDir: filepath.Join(state, "cache"), CacheKeyFile: filepath.Join(state, "cache.key")}
	ref, err := LoadSet(paths, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	latest := latestPath(opts.CacheDir, paths)
	linked := func(t *testing.T) bool {
		t.Helper()
		a, err1 := os.Stat(latest)
		b, err2 := os.Stat(cachePath(opts.CacheDir, sourceDigest(t, paths)))
		return err1 == nil && err2 == nil && os.SameFile(a, b)
	}
	if _, err := LoadSet(paths, opts); err != nil {
		t.Fatal(err)
	}
	if !linked(t) {
		t.Fatal("the entry written is not the latest")
	}

	// The latest entry is what a hit reads: plant another valid one there only.
	planted := ref.Files()
	planted[0].Grants[0].Capabilities[0].Actions = []string{"planted"}
	if err := os.Remove(latest); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(latest, sealedEntry(t, opts.CacheKeyFile, paths, planted, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSet(paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Files()[0].Grants[0].Capabilities[0].Actions; !reflect.DeepEqual(got, []string{"planted"}) {
		t.Fatalf("the latest entry was not used: actions %v", got)
	}

	// One that does not authenticate is ignored: the entry named by the digest is used.
	if err := os.WriteFile(latest, sealEntry(make([]byte, cacheKeySize), sourceDigest(t, paths), mustEncode(t, planted)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err = LoadSet(paths, opts); err != nil || !reflect.DeepEqual(s.Files(), ref.Files()) {
		t.Fatalf("a forged latest entry was used (%v)", err)
	}
	if !linked(t) {
		t.Fatal("a hit by digest did not make its entry the latest")
	}

	// A changed file: the latest entry (of the old content) is not used.
	v2 := strings.Replace(v1, "triage", "other-purpose", 1)
	if v2 == v1 {
		t.Fatal("the fixture changed its purposes; pick another edit")
	}
	if err := os.WriteFile(paths[0], []byte(v2), 0o600); err != nil {
		t.Fatal(err)
	}
	ref2, err := LoadSet(paths, SetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s, err = LoadSet(paths, opts); err != nil || !reflect.DeepEqual(s.Files(), ref2.Files()) {
		t.Fatalf("changed file: the old content was served (%v)", err)
	}
	if !linked(t) {
		t.Fatal("the new entry is not the latest")
	}
	// And back: the old entry, by its digest, is used and becomes the latest again.
	if err := os.WriteFile(paths[0], []byte(v1), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err = LoadSet(paths, opts); err != nil || !reflect.DeepEqual(s.Files(), ref.Files()) {
		t.Fatalf("changed back: the newer content was served (%v)", err)
	}
	if !linked(t) || len(cacheEntries(t, opts.CacheDir)) != 2 {
		t.Fatalf("changed back: linked=%v, %d entries", linked(t), len(cacheEntries(t, opts.CacheDir)))
	}
}

func mustEncode(t *testing.T, files []*File) []byte {
	t.Helper()
	p, err := encodeSnapshot(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStreamCacheKey: the digest a hit streams from the files is the digest of their
// bytes (cacheKey), and a path readFile would not read as a grant file is no digest.
func TestStreamCacheKey(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("# a comment line of a grant file\n", 5000) // several buffers
	src := writeFiles(t, map[string]string{"a.yaml": string(readFixture(t, "full.yaml")), "empty.yaml": "", "big.yaml": big})
	for _, names := range [][]string{{"a.yaml"}, {"empty.yaml"}, {"big.yaml", "a.yaml"}, {"a.yaml", "big.yaml", "empty.yaml"}} {
		paths := make([]string, len(names))
		for i, n := range names {
			paths[i] = filepath.Join(src, n)
		}
		got, ok := streamCacheKey(paths)
		if want := sourceDigest(t, paths); !ok || got != want {
			t.Errorf("%v: streamed digest %x (ok=%v), want %x", names, got, ok, want)
		}
	}
	for _, p := range []string{src, filepath.Join(src, "missing.yaml")} {
		if _, ok := streamCacheKey([]string{filepath.Join(src, "a.yaml"), p}); ok {
			t.Errorf("%s: streamed a digest", p)
		}
	}
}

// TestWriteCacheStreamsTheSealedEntry: an entry large enough to be written in several
// pieces (cacheFlush) is byte for byte the sealed entry of the whole payload: the same
// framing and the MAC of the same bytes, so readCache takes it.
func TestWriteCacheStreamsTheSealedEntry(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"g.yaml": genCLIYAML(3000)}) // no metadata: an encoding without maps is one byte string
	paths := []string{filepath.Join(dir, "g.yaml")}
	f, err := Load(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	files := []*File{f}
	s := newSet(files)
	hashes := s.allHashes()
	macKey := bytes.Repeat([]byte{7}, cacheKeySize)
	key := sourceDigest(t, paths)
	cacheDir := filepath.Join(dir, "cache")
	if err := writeCache(cacheDir, macKey, key, files, hashes); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(cachePath(cacheDir, key))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := encodeSnapshot(files, hashes)
	if err != nil {
		t.Fatal(err)
	}
	if len(payload) < 3*cacheFlush {
		t.Fatalf("the payload (%d bytes) is written in one piece", len(payload))
	}
	if want := sealEntry(macKey, key, payload); !bytes.Equal(got, want) {
		t.Fatalf("the entry written (%d bytes) is not the sealed payload (%d bytes)", len(got), len(want))
	}
	if back, _, ok := readCache(cacheDir, macKey, key, paths); !ok || !reflect.DeepEqual(back, files) {
		t.Fatal("readCache does not take the entry back")
	}
}
