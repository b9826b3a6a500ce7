package grantfile

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// The snapshot cache stores the validated files of a set in a compact binary form,
// authenticated:
//
//	magic | digest | payload | HMAC-SHA256(key, magic | digest | payload)
//
// digest is the SHA-256 of cacheVersion and every (path, content) pair the entry was
// built from, in order (a changed file, a different path or a different order is a
// different digest); it is also the entry's name. key is the secret of the cache key
// file (SetOptions.CacheKeyFile). An entry is trusted only when its digest is the one of
// the bytes just read and its MAC verifies under the key: whoever can write the cache
// directory but not read the key file can delete or damage entries (they are then
// rebuilt from the source), never forge one. Bump cacheVersion whenever parsing or the
// encoding changes meaning.
//
// Each entry written is also hard-linked as the latest entry of its list of paths
// (latestPath: named by the SHA-256 of cacheVersion and the paths alone), so that a load
// can read, authenticate and decode the entry it will most likely use while the digest of
// the files is still being computed: the latest entry is used only if the digest it
// carries is the one computed (else the entry named by the digest is read, as without
// it). It is a hint where to look, never a reason to trust.
const (
	cacheVersion = "sharedos/grantfile snapshot v3"
	cacheMagic   = "SOSGF\x00\x03\n"
	cacheExt     = ".grants"
	latestExt    = ".latest"          // the latest entry of a list of paths (a hard link)
	cacheMaxAge  = 7 * 24 * time.Hour // entries not written for this long are pruned on writes
	cacheKeySize = 32                 // bytes of secret in the key file
)

// cacheKey digests the paths and contents of a set, in order.
func cacheKey[T string | []byte](paths []string, datas []T) [32]byte {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte(cacheVersion))
	buf := make([]byte, 32<<10)
	for i, p := range paths {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(datas[i])))])
		for d := datas[i]; len(d) > 0; { // through a small buffer: no copy of a whole file
			k := copy(buf, d)
			h.Write(buf[:k])
			d = d[k:]
		}
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// streamCacheKey is cacheKey of the files at paths, streamed through one small buffer.
// ok=false when a file cannot be opened, is not a regular file, is larger than
// MaxFileSize or does not hold as many bytes as it said when opened.
func streamCacheKey(paths []string) (key [32]byte, ok bool) {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte(cacheVersion))
	buf := make([]byte, 32<<10)
	for _, p := range paths {
		if !streamFile(h, p, buf, n[:]) {
			return key, false
		}
	}
	h.Sum(key[:0])
	return key, true
}

func streamFile(h hash.Hash, path string, buf, n []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() || info.Size() > MaxFileSize {
		return false
	}
	h.Write(n[:binary.PutUvarint(n, uint64(len(path)))])
	h.Write([]byte(path))
	h.Write(n[:binary.PutUvarint(n, uint64(info.Size()))])
	left := info.Size()
	for {
		k, err := f.Read(buf)
		if int64(k) > left {
			return false // grew while read
		}
		h.Write(buf[:k])
		left -= int64(k)
		if err == io.EOF {
			return left == 0
		}
		if err != nil {
			return false
		}
	}
}

func cachePath(dir string, key [32]byte) string {
	return filepath.Join(dir, hex.EncodeToString(key[:])+cacheExt)
}

// latestPath names the latest entry written for paths (in that order).
func latestPath(dir string, paths []string) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write([]byte(cacheVersion))
	for _, p := range paths {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p)))])
		h.Write([]byte(p))
	}
	return filepath.Join(dir, hex.EncodeToString(h.Sum(nil))+latestExt)
}

// usableCacheDir reports whether dir may hold the cache: it does not exist yet (it is
// created on the first write), or it is a directory and not a symbolic link. A symbolic
// link could point into a tree an agent can write (the files plane's root), so the cache
// is then not used at all.
func usableCacheDir(dir string) bool {
	info, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	return err == nil && info.IsDir() && info.Mode()&fs.ModeSymlink == 0
}

// loadCacheKey returns the secret of the key file at path; with create, it creates the
// file (mode 0600, cacheKeySize random bytes, its directory 0700 if missing) when it
// does not exist (without, a missing file is an error: nothing is written before a set
// loaded cleanly). It refuses a key file that is a symbolic link, not a regular file,
// readable or writable by group or others, or not exactly cacheKeySize bytes.
func loadCacheKey(path string, create bool) ([]byte, error) {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) && create {
		if err := createCacheKey(path); err != nil {
			return nil, err
		}
		info, err = os.Lstat(path)
	}
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("cache key file %s is not a regular file", path)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("cache key file %s is accessible to group or others (%v)", path, info.Mode().Perm())
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(key) != cacheKeySize {
		return nil, fmt.Errorf("cache key file %s holds %d bytes, not %d", path, len(key), cacheKeySize)
	}
	return key, nil
}

// createCacheKey writes a new key file without ever exposing a partial one: the secret
// goes to a temporary file that is then hard-linked to path (which fails if another
// process created it meanwhile; its key is then used).
func createCacheKey(path string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	secret := make([]byte, cacheKeySize)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-key-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	werr := tmp.Chmod(0o600)
	if werr == nil {
		_, werr = tmp.Write(secret)
	}
	if werr == nil {
		werr = tmp.Sync()
	}
	if cerr := tmp.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return werr
	}
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// entryMAC authenticates magic | digest | payload.
func entryMAC(key []byte, digest [32]byte, payload []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(cacheMagic))
	m.Write(digest[:])
	m.Write(payload)
	return m.Sum(nil)
}

// sealEntry frames payload as a cache entry for digest.
func sealEntry(key []byte, digest [32]byte, payload []byte) []byte {
	out := make([]byte, 0, len(cacheMagic)+len(digest)+len(payload)+sha256.Size)
	out = append(out, cacheMagic...)
	out = append(out, digest[:]...)
	out = append(out, payload...)
	return append(out, entryMAC(key, digest, payload)...)
}

// openEntry returns the payload of a cache entry if it is one for digest and its MAC
// verifies under key.
func openEntry(key []byte, digest [32]byte, entry []byte) ([]byte, bool) {
	head := len(cacheMagic) + len(digest)
	if len(entry) < head+sha256.Size || !bytes.HasPrefix(entry, []byte(cacheMagic)) ||
		!bytes.Equal(entry[len(cacheMagic):head], digest[:]) {
		return nil, false
	}
	payload := entry[head : len(entry)-sha256.Size]
	if !hmac.Equal(entry[len(entry)-sha256.Size:], entryMAC(key, digest, payload)) {
		return nil, false
	}
	return payload, true
}

// openAnyEntry returns the digest and payload of a cache entry whose MAC verifies under
// key, whatever digest it carries (the caller compares it).
func openAnyEntry(key []byte, entry []byte) (digest [32]byte, payload []byte, ok bool) {
	head := len(cacheMagic) + len(digest)
	if len(entry) < head+sha256.Size || !bytes.HasPrefix(entry, []byte(cacheMagic)) {
		return digest, nil, false
	}
	copy(digest[:], entry[len(cacheMagic):head])
	payload, ok = openEntry(key, digest, entry)
	return digest, payload, ok
}

// cached is a decoded, authenticated cache entry.
type cached struct {
	digest [32]byte
	files  []*File
	hashes map[scopeKey]string
}

// readEntryAt reads, authenticates and decodes the entry at path for paths; ok=false on a
// miss or any problem with the entry. The decoded files share the bytes read, which
// nothing else holds.
func readEntryAt(path string, macKey []byte, paths []string) (c cached, ok bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return c, false
	}
	var payload []byte
	if c.digest, payload, ok = openAnyEntry(macKey, data); !ok {
		return c, false
	}
	c.files, c.hashes, err = decodeSnapshot(payload)
	if err != nil || len(c.files) != len(paths) {
		return c, false
	}
	for i, f := range c.files {
		if f.Path != paths[i] {
			return c, false
		}
	}
	return c, true
}

// readCache returns the files of the cached snapshot for key, or ok=false on a miss or
// any problem with the entry (which the caller then rewrites).
func readCache(dir string, macKey []byte, key [32]byte, paths []string) ([]*File, map[scopeKey]string, bool) {
	c, ok := readEntryAt(cachePath(dir, key), macKey, paths)
	if !ok || c.digest != key {
		return nil, nil, false
	}
	return c.files, c.hashes, true
}

// linkLatest makes the entry for key the latest entry of paths (a hard link, replaced
// atomically); failures are ignored (the next load reads the entry by its digest).
func linkLatest(dir string, key [32]byte, paths []string) {
	tmp := filepath.Join(dir, ".tmp-"+hex.EncodeToString(key[:8])+"-"+randomSuffix()+latestExt)
	if err := os.Link(cachePath(dir, key), tmp); err != nil {
		return
	}
	if err := os.Rename(tmp, latestPath(dir, paths)); err != nil {
		os.Remove(tmp)
	}
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeCache stores the files under key, atomically (temporary file + rename), and
// makes it the latest entry of paths. The entry is encoded and authenticated as it is
// written, through one buffer of cacheFlush bytes (as sealEntry frames a payload), so
// that a large set's entry is never held whole in memory.
func writeCache(dir string, macKey []byte, key [32]byte, files []*File, hashes map[scopeKey]string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if !usableCacheDir(dir) {
		return errors.New("cache directory is a symbolic link")
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*"+cacheExt)
	if err != nil {
		return err
	}
	mac := hmac.New(sha256.New, macKey)
	mac.Write([]byte(cacheMagic))
	mac.Write(key[:])
	buf := make([]byte, 0, cacheFlush+4<<10)
	buf = append(append(buf, cacheMagic...), key[:]...)
	head := len(buf)
	var werr error
	flush := func(b []byte) []byte {
		if werr == nil {
			mac.Write(b[head:])
			_, werr = tmp.Write(b)
		}
		head = 0
		return b[:0]
	}
	buf, err = appendSnapshotFlushing(buf, files, hashes, flush)
	if err == nil {
		buf = flush(buf)
		_, err = tmp.Write(mac.Sum(buf))
	}
	if werr == nil {
		werr = err
	}
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(tmp.Name(), cachePath(dir, key))
	}
	if werr != nil {
		os.Remove(tmp.Name())
		return werr
	}
	linkLatest(dir, key, pathsOf(files))
	pruneCache(dir)
	return nil
}

// cacheFlush is the size from which writeCache hands the encoded bytes to the file.
const cacheFlush = 64 << 10

func pathsOf(files []*File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out
}

// pruneCache removes entries, latest links (and stray temporary files) older than
// cacheMaxAge.
func pruneCache(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-cacheMaxAge)
	for _, e := range ents {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), cacheExt) && !strings.HasSuffix(e.Name(), latestExt) {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// ---------------------------------------------------------------------------------------
// encoding

type encoder struct{ b []byte }

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string) {
	e.uint(uint64(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) flag(b bool) {
	if b {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}
func (e *encoder) strs(ss []string) {
	e.flag(ss != nil)
	if ss != nil {
		e.uint(uint64(len(ss)))
		for _, s := range ss {
			e.str(s)
		}
	}
}
func (e *encoder) addr(a kernel.Address) {
	e.str(string(a.Kind))
	e.str(a.ID)
}
func (e *encoder) optAddr(a *kernel.Address) {
	e.flag(a != nil)
	if a != nil {
		e.addr(*a)
	}
}
func (e *encoder) optInt(p *int64) {
	e.flag(p != nil)
	if p != nil {
		e.int(*p)
	}
}

// encodeSnapshot encodes the payload of a cache entry (sealEntry frames it).
func encodeSnapshot(files []*File, hashes map[scopeKey]string) ([]byte, error) {
	return appendSnapshot(make([]byte, 0, 64<<10), files, hashes)
}

// appendSnapshot appends the payload of a cache entry to dst.
func appendSnapshot(dst []byte, files []*File, hashes map[scopeKey]string) ([]byte, error) {
	return appendSnapshotFlushing(dst, files, hashes, nil)
}

// appendSnapshotFlushing is appendSnapshot that, when flush is not nil, hands the buffer
// to flush whenever it holds cacheFlush bytes or more, going on with what flush returns.
func appendSnapshotFlushing(dst []byte, files []*File, hashes map[scopeKey]string, flush func([]byte) []byte) ([]byte, error) {
	e := &encoder{b: dst}
	e.uint(uint64(len(files)))
	for _, f := range files {
		e.str(f.Path)
		e.str(f.Context.World)
		e.optAddr(f.Context.Actor)
		e.optAddr(f.Context.Owner)
		e.optAddr(f.Context.Authority)
		e.str(f.Context.Purpose)
		e.uint(uint64(len(f.Grants)))
		for i := range f.Grants {
			if err := e.grant(&f.Grants[i]); err != nil {
				return nil, err
			}
			if flush != nil && len(e.b) >= cacheFlush {
				e.b = flush(e.b)
			}
		}
		ids := make([]string, 0, len(f.Derived))
		for id, v := range f.Derived {
			if v {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		e.strs(ids)
	}
	// The authority hash of each (world, subject, issuer) scope, in a stable order.
	keys := make([]scopeKey, 0, len(hashes))
	for k := range hashes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b scopeKey) int {
		return strings.Compare(a.world+"\x00"+a.subject.String()+"\x00"+a.issuer.String(), b.world+"\x00"+b.subject.String()+"\x00"+b.issuer.String())
	})
	e.uint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k.world)
		e.addr(k.subject)
		e.addr(k.issuer)
		e.str(hashes[k])
	}
	return e.b, nil
}

func (e *encoder) grant(g *kernel.CapabilityGrant) error {
	e.str(g.ID)
	e.str(g.NamespaceID)
	e.addr(g.Subject)
	e.addr(g.Issuer)
	e.uint(uint64(len(g.Capabilities)))
	for _, c := range g.Capabilities {
		e.str(c.Resource.Namespace)
		e.strs(c.Resource.Path)
		e.optAddr(c.Resource.Owner)
		e.strs(c.Actions)
		e.str(string(c.Scope))
	}
	e.strs(g.Constraints.Purposes)
	e.str(g.Constraints.NotBefore)
	e.str(g.Constraints.ExpiresAt)
	e.optInt(g.Constraints.MaxUses)
	e.optInt(g.Constraints.DelegationDepth)
	e.str(g.IssuedAt)
	e.str(g.RevokedAt)
	e.str(g.ParentGrantID)
	e.flag(g.Metadata != nil)
	if g.Metadata != nil {
		return e.value(g.Metadata)
	}
	return nil
}

// Tags of the JSON values of metadata.
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagNumber
	tagString
	tagArray
	tagObject
)

// value encodes a JSON value as the kernel's decoder produces it (map[string]any,
// []any, string, json.Number, bool, nil); anything else is refused (no snapshot).
func (e *encoder) value(v any) error {
	switch x := v.(type) {
	case nil:
		e.b = append(e.b, tagNull)
	case bool:
		if x {
			e.b = append(e.b, tagTrue)
		} else {
			e.b = append(e.b, tagFalse)
		}
	case json.Number:
		e.b = append(e.b, tagNumber)
		e.str(string(x))
	case string:
		e.b = append(e.b, tagString)
		e.str(x)
	case []any:
		e.b = append(e.b, tagArray)
		e.uint(uint64(len(x)))
		for _, item := range x {
			if err := e.value(item); err != nil {
				return err
			}
		}
	case map[string]any:
		e.b = append(e.b, tagObject)
		e.uint(uint64(len(x)))
		for k, item := range x {
			e.str(k)
			if err := e.value(item); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("metadata value of type %T cannot be cached", v)
	}
	return nil
}

var errCorrupt = errors.New("corrupt grant snapshot")

// decoder reads a snapshot held in one string: every decoded string is a substring of
// it, so decoding allocates little. Any inconsistency sets bad.
type decoder struct {
	s     string
	off   int
	bad   bool
	depth int

	// Slabs the decoded grants' small slices and pointers are cut from (capacity-limited,
	// so an append never reaches a neighbour), to keep a cache hit to a few allocations.
	strPool []string
	addrs   []kernel.Address
	ints    []int64
	caps    []kernel.Capability
}

const slabSize = 4096

func (d *decoder) strSlab(n int) []string {
	if n > len(d.strPool) {
		d.strPool = make([]string, max(n, slabSize))
	}
	out := d.strPool[:n:n]
	d.strPool = d.strPool[n:]
	return out
}

func (d *decoder) newAddr() *kernel.Address {
	if len(d.addrs) == 0 {
		d.addrs = make([]kernel.Address, slabSize/4)
	}
	a := &d.addrs[0]
	d.addrs = d.addrs[1:]
	return a
}

func (d *decoder) newInt() *int64 {
	if len(d.ints) == 0 {
		d.ints = make([]int64, slabSize/4)
	}
	p := &d.ints[0]
	d.ints = d.ints[1:]
	return p
}

func (d *decoder) capSlab(n int) []kernel.Capability {
	if n > len(d.caps) {
		d.caps = make([]kernel.Capability, max(n, slabSize/4))
	}
	out := d.caps[:n:n]
	d.caps = d.caps[n:]
	return out
}

func (d *decoder) uint() uint64 {
	var v uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.off >= len(d.s) {
			d.bad = true
			return 0
		}
		c := d.s[d.off]
		d.off++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return v
		}
	}
	d.bad = true
	return 0
}

func (d *decoder) int() int64 {
	u := d.uint()
	v := int64(u >> 1)
	if u&1 != 0 {
		v = ^v
	}
	return v
}

// count reads a length that cannot exceed the bytes left (each element takes ≥ 1 byte).
func (d *decoder) count() int {
	n := d.uint()
	if d.bad || n > uint64(len(d.s)-d.off) {
		d.bad = true
		return 0
	}
	return int(n)
}

func (d *decoder) str() string {
	n := d.count()
	if d.bad {
		return ""
	}
	s := d.s[d.off : d.off+n]
	d.off += n
	return s
}

func (d *decoder) flag() bool {
	if d.off >= len(d.s) {
		d.bad = true
		return false
	}
	c := d.s[d.off]
	d.off++
	if c > 1 {
		d.bad = true
	}
	return c == 1
}

func (d *decoder) strs() []string {
	if !d.flag() {
		return nil
	}
	n := d.count()
	if d.bad {
		return nil
	}
	out := d.strSlab(n)
	for i := range out {
		out[i] = d.str()
	}
	return out
}

func (d *decoder) addr() kernel.Address {
	return kernel.Address{Kind: kernel.AddressKind(d.str()), ID: d.str()}
}

func (d *decoder) optAddr() *kernel.Address {
	if !d.flag() {
		return nil
	}
	a := d.newAddr()
	*a = d.addr()
	return a
}

func (d *decoder) optInt() *int64 {
	if !d.flag() {
		return nil
	}
	p := d.newInt()
	*p = d.int()
	return p
}

// decodeSnapshot decodes an authenticated payload (openEntry). It still checks every
// length and tag, so a payload that is inconsistent is refused, never a panic. The
// payload is copied once into a string and the decoded strings are slices of it (one
// allocation for the entry, not one per string; no unsafe: the module imports none).
func decodeSnapshot(payload []byte) ([]*File, map[scopeKey]string, error) {
	d := &decoder{s: string(payload)}
	files := make([]*File, d.count())
	for i := range files {
		if d.bad {
			return nil, nil, errCorrupt
		}
		f := &File{Path: d.str()}
		f.Context.World = d.str()
		f.Context.Actor = d.optAddr()
		f.Context.Owner = d.optAddr()
		f.Context.Authority = d.optAddr()
		f.Context.Purpose = d.str()
		f.Grants = make([]kernel.CapabilityGrant, d.count())
		for j := range f.Grants {
			if d.bad {
				return nil, nil, errCorrupt
			}
			if err := d.grant(&f.Grants[j]); err != nil {
				return nil, nil, err
			}
		}
		ids := d.strs()
		f.Derived = make(map[string]bool, len(ids))
		for _, id := range ids {
			f.Derived[id] = true
		}
		files[i] = f
	}
	n := d.count()
	hashes := make(map[scopeKey]string, n)
	for i := 0; i < n && !d.bad; i++ {
		k := scopeKey{world: d.str()}
		k.subject = d.addr()
		k.issuer = d.addr()
		hashes[k] = d.str()
	}
	if d.bad || d.off != len(d.s) {
		return nil, nil, errCorrupt
	}
	return files, hashes, nil
}

func (d *decoder) grant(g *kernel.CapabilityGrant) error {
	g.ID = d.str()
	g.NamespaceID = d.str()
	g.Subject = d.addr()
	g.Issuer = d.addr()
	g.Capabilities = d.capSlab(d.count())
	for i := range g.Capabilities {
		c := &g.Capabilities[i]
		c.Resource.Namespace = d.str()
		c.Resource.Path = d.strs()
		c.Resource.Owner = d.optAddr()
		c.Actions = d.strs()
		c.Scope = kernel.Scope(d.str())
		if d.bad {
			return errCorrupt
		}
	}
	g.Constraints.Purposes = d.strs()
	g.Constraints.NotBefore = d.str()
	g.Constraints.ExpiresAt = d.str()
	g.Constraints.MaxUses = d.optInt()
	g.Constraints.DelegationDepth = d.optInt()
	g.IssuedAt = d.str()
	g.RevokedAt = d.str()
	g.ParentGrantID = d.str()
	if d.flag() {
		m, ok := d.value().(map[string]any)
		if !ok {
			return errCorrupt
		}
		g.Metadata = m
	}
	if d.bad {
		return errCorrupt
	}
	return nil
}

// maxValueDepth bounds metadata nesting (encoding/json's own limit).
const maxValueDepth = 10000

func (d *decoder) value() any {
	if d.off >= len(d.s) || d.depth > maxValueDepth {
		d.bad = true
		return nil
	}
	tag := d.s[d.off]
	d.off++
	switch tag {
	case tagNull:
		return nil
	case tagFalse:
		return false
	case tagTrue:
		return true
	case tagNumber:
		return json.Number(d.str())
	case tagString:
		return d.str()
	case tagArray:
		n := d.count()
		a := make([]any, n)
		d.depth++
		for i := range a {
			if a[i] = d.value(); d.bad {
				return nil
			}
		}
		d.depth--
		return a
	case tagObject:
		n := d.count()
		m := make(map[string]any, n)
		d.depth++
		for range n {
			k := d.str()
			if m[k] = d.value(); d.bad {
				return nil
			}
		}
		d.depth--
		if len(m) != n {
			d.bad = true
		}
		return m
	}
	d.bad = true
	return nil
}
