package grantfile

import (
	"context"
	"github.com/sharedos/sharedos/pkg/kernel"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

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
	data, err := encodeSnapshot(files, hashes)
	if err != nil {
		t.Fatal(err)
	}
	got, gotHashes, err := decodeSnapshot(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, files) || !reflect.DeepEqual(gotHashes, hashes) {
		t.Errorf("snapshot round trip changed the files or hashes")
	}
	// Every truncation and every single-byte change is detected.
	for i := 0; i < len(data); i += 7 {
		if _, _, err := decodeSnapshot(data[:i]); err == nil {
			t.Fatalf("truncation at %d accepted", i)
		}
		bad := append([]byte(nil), data...)
		bad[i] ^= 0x20
		if _, _, err := decodeSnapshot(bad); err == nil {
			t.Fatalf("flipped byte %d accepted", i)
		}
	}
}

func TestCache(t *testing.T) {
	t.Parallel()
	src := writeFiles(t, map[string]string{
		"a.yaml": string(readFixture(t, "full.yaml")),
		"b.json": `{"version": 1, "grants": [` + jsonGrant1("b1") + `]}`,
	})
	cache := filepath.Join(t.TempDir(), "cache")
	paths := []string{filepath.Join(src, "a.yaml"), filepath.Join(src, "b.json")}
	opts := SetOptions{CacheDir: cache}
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
	// snapshot under the same key.
	planted := ref.Files()
	planted[0].Grants[0].Capabilities[0].Actions = []string{"planted"}
	data, err := encodeSnapshot(planted, nil)
	if err != nil {
		t.Fatal(err)
	}
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
		raw, err := os.ReadFile(entry)
		if err != nil {
			t.Fatal(err)
		}
		if files, _, err := decodeSnapshot(raw); err != nil || !reflect.DeepEqual(files, ref.Files()) {
			t.Fatalf("corrupt entry was not rewritten: %v", err)
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
	s, err := LoadSet([]string{filepath.Join("testdata", "full.yaml")}, SetOptions{CacheDir: blocker})
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
	cache := filepath.Join(t.TempDir(), "cache")
	ctx := context.Background()
	s, err := LoadSet(paths, SetOptions{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	s.index()
	for k := range s.scope {
		actx := kernel.AccessContext{NamespaceID: k.world, Actor: k.subject, Authority: k.issuer}
		snap, err := s.LoadGrantSnapshot(ctx, actx)
		if err != nil || len(snap.Grants) == 0 {
			t.Fatalf("snapshot %+v %v", snap, err)
		}
		if want := kernel.HashGrants(snap.Grants); snap.Hash != want {
			t.Fatalf("hash %s, want the kernel's %s", snap.Hash, want)
		}
		// The hit serves the hash from the cache entry: plant another one to prove it.
		entry := cacheEntries(t, cache)[0]
		files := s.Files()
		data, err := encodeSnapshot(files, map[scopeKey]string{k: "planted"})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(entry, data, 0o600); err != nil {
			t.Fatal(err)
		}
		hit, err := LoadSet(paths, SetOptions{CacheDir: cache})
		if err != nil {
			t.Fatal(err)
		}
		if snap, _ := hit.LoadGrantSnapshot(ctx, actx); snap.Hash != "planted" {
			t.Fatalf("cache hit recomputed the hash: %s", snap.Hash)
		}
		break
	}
}
