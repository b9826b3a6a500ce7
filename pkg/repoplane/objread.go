package repoplane

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Objects are read by this file, not by go-git's object storage: go-git inflates a
// loose object whole before looking at its size, and resolves a packed delta chain by
// recursion, so a few megabytes of crafted repository (a 3 GiB zero blob, a 2 GiB
// commit message, a delta chain millions deep) exhaust the memory or the stack of
// the host. Here every object's header (its type and size, and for a delta the size
// it produces) is read before anything is inflated, sizes are capped per kind, delta
// chains are walked iteratively with a bounded depth and a bounded amount of work,
// and every object read is checked against its name (its SHA-1).

// Limits of the object reader.
const (
	// maxCommitBytes caps a commit object (headers and message) that is read.
	maxCommitBytes = 1 << 20
	// maxTreeBytes caps a tree object (about 300,000 entries).
	maxTreeBytes = 16 << 20
	// maxBlobReadBytes caps a blob read for a diff; larger blobs are shown as binary.
	maxBlobReadBytes = maxTextBytes
	// maxDeltaDepth caps the links of a delta chain: git's pack-objects never writes
	// chains deeper than 4095 (its --depth is clamped there).
	maxDeltaDepth = 4095
	// maxChainObjectBytes caps every object a delta chain passes through on its way to
	// the one asked for (a small object may be a delta of a larger one).
	maxChainObjectBytes = 64 << 20
	// maxChainWork caps the bytes produced and inflated while resolving one chain.
	maxChainWork = 1 << 30
	// maxCommitReadBytes caps the commits one operation reads (log keeps the commits
	// it queued: an octopus merge of many large commits must not add up unbounded).
	maxCommitReadBytes = 64 << 20
	// maxTreeDepth caps the nesting of trees that are walked (git's core.maxTreeDepth).
	maxTreeDepth = 4096
)

// objectTooLargeError: the object asked for is larger than its kind's cap. Nothing of
// it was inflated.
type objectTooLargeError struct {
	hash  plumbing.Hash
	kind  string
	size  int64
	limit int64
}

func (e *objectTooLargeError) Error() string {
	return fmt.Sprintf("the %s %s is %d bytes, more than the %d bytes sharedos reads of such an object", e.kind, e.hash, e.size, e.limit)
}

// badObjectError: the object is corrupt, or stored in a way sharedos refuses to resolve
// (a delta chain too deep or too costly).
type badObjectError struct {
	hash plumbing.Hash
	msg  string
}

func (e *badObjectError) Error() string { return fmt.Sprintf("object %s: %s", e.hash, e.msg) }

// objectStore reads objects from .git/objects: loose objects and packs (version 2
// index files). Pack and index files are opened on first use and held until close.
type objectStore struct {
	git         *os.Root
	packs       []*packFile
	loaded      bool
	zr          io.ReadCloser // a reused zlib reader
	commitBytes int64         // of the commits read so far
}

// readerAtCloser is a pack or index file (an *os.File; memory in tests and fuzzing).
type readerAtCloser interface {
	io.ReaderAt
	io.Closer
}

type packFile struct {
	name      string
	idx, pack readerAtCloser
	idxSize   int64
	packSize  int64
	n         uint32
	fanout    [256]uint32
}

func (s *objectStore) close() {
	for _, p := range s.packs {
		_ = p.idx.Close()
		_ = p.pack.Close()
	}
	s.packs = nil
}

// objects returns the repository's object reader.
func (r *repo) objects() *objectStore {
	if r.objs == nil {
		r.objs = &objectStore{git: r.git}
	}
	return r.objs
}

// inflater returns a zlib reader over src, reusing the previous one.
func (s *objectStore) inflater(src io.Reader) (io.ReadCloser, error) {
	if s.zr != nil {
		if err := s.zr.(zlib.Resetter).Reset(src, nil); err != nil {
			return nil, err
		}
		return s.zr, nil
	}
	zr, err := zlib.NewReader(src)
	if err != nil {
		return nil, err
	}
	s.zr = zr
	return zr, nil
}

// kindName is the git name of a base object type.
func kindName(t plumbing.ObjectType) string {
	switch t {
	case plumbing.CommitObject:
		return "commit"
	case plumbing.TreeObject:
		return "tree"
	case plumbing.BlobObject:
		return "blob"
	case plumbing.TagObject:
		return "tag"
	}
	return "object"
}

// readObject returns the content of object h, which must be of type want and at most
// limit bytes (objectTooLargeError otherwise, before anything is inflated).
func (r *repo) readObject(h plumbing.Hash, want plumbing.ObjectType, limit int64) ([]byte, error) {
	s := r.objects()
	typ, data, err := s.readLoose(h, want, limit)
	if errors.Is(err, fs.ErrNotExist) {
		typ, data, err = s.readPacked(h, want, limit)
	}
	if err != nil {
		return nil, err
	}
	if typ != want {
		return nil, fmt.Errorf("object %s is a %s, not a %s: %w", h, kindName(typ), kindName(want), plumbing.ErrObjectNotFound)
	}
	if objectHash(typ, data) != h {
		return nil, &badObjectError{h, "its content does not match its name (the repository is corrupt)"}
	}
	return data, nil
}

// objectHash is git's object id of data as an object of type t.
func objectHash(t plumbing.ObjectType, data []byte) plumbing.Hash {
	hh := sha1.New()
	hh.Write([]byte(kindName(t) + " " + strconv.Itoa(len(data)) + "\x00"))
	hh.Write(data)
	var out plumbing.Hash
	copy(out[:], hh.Sum(nil))
	return out
}

// getCommit reads and decodes commit h (at most maxCommitBytes).
func (r *repo) getCommit(h plumbing.Hash) (*object.Commit, error) {
	data, err := r.readObject(h, plumbing.CommitObject, maxCommitBytes)
	if err != nil {
		return nil, err
	}
	s := r.objects()
	if s.commitBytes += int64(len(data)); s.commitBytes > maxCommitReadBytes {
		return nil, fmt.Errorf("commit %s: the operation would read more than %d bytes of commits; sharedos stops here", h, maxCommitReadBytes)
	}
	obj := &plumbing.MemoryObject{}
	obj.SetType(plumbing.CommitObject)
	if _, err := obj.Write(data); err != nil {
		return nil, err
	}
	c := &object.Commit{}
	if err := c.Decode(obj); err != nil {
		return nil, &badObjectError{h, "malformed commit: " + err.Error()}
	}
	return c, nil
}

// getTree reads and decodes tree h (at most maxTreeBytes).
func (r *repo) getTree(h plumbing.Hash) (*object.Tree, error) {
	data, err := r.readObject(h, plumbing.TreeObject, maxTreeBytes)
	if err != nil {
		return nil, err
	}
	obj := &plumbing.MemoryObject{}
	obj.SetType(plumbing.TreeObject)
	if _, err := obj.Write(data); err != nil {
		return nil, err
	}
	t := &object.Tree{}
	if err := t.Decode(obj); err != nil {
		return nil, &badObjectError{h, "malformed tree: " + err.Error()}
	}
	return t, nil
}

// --- loose objects ------------------------------------------------------------------

// maxLooseHeader is the longest "<type> <size>\0" header accepted.
const maxLooseHeader = 32

// parseLooseHeader parses the header of an inflated loose object ("blob 12\x00…"): its
// type, its size and the header's length including the NUL.
func parseLooseHeader(b []byte) (plumbing.ObjectType, int64, int, error) {
	end := bytes.IndexByte(b[:min(len(b), maxLooseHeader)], 0)
	if end < 0 {
		return 0, 0, 0, errors.New("no object header")
	}
	kind, num, ok := strings.Cut(string(b[:end]), " ")
	if !ok {
		return 0, 0, 0, errors.New("malformed object header")
	}
	var t plumbing.ObjectType
	switch kind {
	case "commit":
		t = plumbing.CommitObject
	case "tree":
		t = plumbing.TreeObject
	case "blob":
		t = plumbing.BlobObject
	case "tag":
		t = plumbing.TagObject
	default:
		return 0, 0, 0, fmt.Errorf("unknown object type %q", kind)
	}
	if num == "" || len(num) > 1 && num[0] == '0' {
		return 0, 0, 0, errors.New("malformed object size")
	}
	for _, c := range []byte(num) {
		if c < '0' || c > '9' {
			return 0, 0, 0, errors.New("malformed object size")
		}
	}
	size, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, 0, 0, errors.New("object size out of range")
	}
	return t, size, end + 1, nil
}

// readLoose reads a loose object (fs.ErrNotExist when there is none).
func (s *objectStore) readLoose(h plumbing.Hash, want plumbing.ObjectType, limit int64) (plumbing.ObjectType, []byte, error) {
	hex := h.String()
	f, err := s.git.OpenFile("objects/"+hex[:2]+"/"+hex[2:], openReadNoFollow, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || isNotDir(err) {
			return 0, nil, fs.ErrNotExist
		}
		return 0, nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, nil, &badObjectError{h, "the loose object is not a regular file"}
	}
	zr, err := s.inflater(bufio.NewReader(f))
	if err != nil {
		return 0, nil, &badObjectError{h, "the loose object cannot be inflated: " + err.Error()}
	}
	return decodeLoose(zr, h, want, limit)
}

// decodeLoose reads an inflated loose object: the header first, then (when the type is
// the one wanted and the size within limit) exactly the size it declares.
func decodeLoose(zr io.Reader, h plumbing.Hash, want plumbing.ObjectType, limit int64) (plumbing.ObjectType, []byte, error) {
	var hdr [maxLooseHeader]byte
	n, err := io.ReadFull(zr, hdr[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return 0, nil, &badObjectError{h, "the loose object cannot be inflated: " + err.Error()}
	}
	typ, size, hl, err := parseLooseHeader(hdr[:n])
	if err != nil {
		return 0, nil, &badObjectError{h, err.Error()}
	}
	if typ != want {
		return typ, nil, nil
	}
	if size > limit {
		return 0, nil, &objectTooLargeError{h, kindName(typ), size, limit}
	}
	if int64(n-hl) > size {
		return 0, nil, &badObjectError{h, "the loose object is longer than its header says"}
	}
	data, err := readExactly(io.MultiReader(bytes.NewReader(hdr[hl:n]), zr), size)
	if err != nil {
		return 0, nil, &badObjectError{h, "the loose object " + err.Error()}
	}
	return typ, data, nil
}

// readExactly reads size bytes and checks the stream (with its checksum) ends there.
// Memory grows with the bytes actually read, not with the size a header claims.
func readExactly(r io.Reader, size int64) ([]byte, error) {
	var data []byte
	if size <= 1<<20 {
		data = make([]byte, size)
		if n, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("is shorter than its header says (%d of %d bytes): %v", n, size, err)
		}
	} else {
		var buf bytes.Buffer
		buf.Grow(1 << 20)
		if n, err := io.CopyN(&buf, r, size); err != nil {
			return nil, fmt.Errorf("is shorter than its header says (%d of %d bytes): %v", n, size, err)
		}
		data = buf.Bytes()
	}
	if err := expectEnd(r); err != nil {
		return nil, err
	}
	return data, nil
}

// expectEnd checks that an inflated stream ends here, with a valid checksum.
func expectEnd(r io.Reader) error {
	var one [1]byte
	n, err := io.ReadFull(r, one[:])
	switch {
	case n > 0:
		return errors.New("the object holds more data than its header says")
	case errors.Is(err, io.EOF):
		return nil
	}
	return fmt.Errorf("the object's compressed data is damaged: %v", err)
}

// --- packs --------------------------------------------------------------------------

const (
	idxHeaderLen = 8 + 256*4
	packTrailer  = 20
)

// loadPacks opens every objects/pack/pack-*.idx with its .pack (once per operation).
func (s *objectStore) loadPacks() error {
	if s.loaded {
		return nil
	}
	s.loaded = true
	d, err := s.git.Open("objects/pack")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, n := range names {
		base, ok := strings.CutSuffix(n, ".idx")
		if !ok || !strings.HasPrefix(base, "pack-") {
			continue
		}
		p, err := s.openPack("objects/pack/" + base)
		if err != nil {
			return fmt.Errorf("pack %s: %w", base, err)
		}
		if p != nil {
			s.packs = append(s.packs, p)
		}
	}
	return nil
}

// openPack opens one index and its pack (nil, nil when the pack file is missing, as
// git ignores such an index) and checks their headers and sizes.
func (s *objectStore) openPack(base string) (p *packFile, err error) {
	open := func(name string) (*os.File, int64, error) {
		f, err := s.git.OpenFile(name, openReadNoFollow, 0)
		if err != nil {
			return nil, 0, err
		}
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			f.Close()
			return nil, 0, fmt.Errorf("%s is not a regular file", name)
		}
		return f, fi.Size(), nil
	}
	pk, psize, err := open(base + ".pack")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ix, isize, err := open(base + ".idx")
	if err != nil {
		pk.Close()
		return nil, err
	}
	p = &packFile{name: base, idx: ix, pack: pk, idxSize: isize, packSize: psize}
	defer func() {
		if err != nil {
			ix.Close()
			pk.Close()
		}
	}()
	var hdr [idxHeaderLen]byte
	if _, err := ix.ReadAt(hdr[:], 0); err != nil {
		return nil, errors.New("the index is truncated")
	}
	if string(hdr[:4]) != "\xfftOc" || binary.BigEndian.Uint32(hdr[4:8]) != 2 {
		return nil, errors.New("the index is not a version 2 pack index")
	}
	prev := uint32(0)
	for i := range p.fanout {
		v := binary.BigEndian.Uint32(hdr[8+4*i:])
		if v < prev {
			return nil, errors.New("the index's fan-out table is not sorted")
		}
		p.fanout[i], prev = v, v
	}
	p.n = p.fanout[255]
	least := int64(idxHeaderLen) + int64(p.n)*28 + 40
	if isize < least || (isize-least)%8 != 0 {
		return nil, errors.New("the index has the wrong size for its object count")
	}
	var ph [12]byte
	if _, err := pk.ReadAt(ph[:], 0); err != nil || psize < 12+packTrailer {
		return nil, errors.New("the pack is truncated")
	}
	if v := binary.BigEndian.Uint32(ph[4:8]); string(ph[:4]) != "PACK" || v != 2 && v != 3 {
		return nil, errors.New("the pack has no version 2 or 3 header")
	}
	if binary.BigEndian.Uint32(ph[8:12]) != p.n {
		return nil, errors.New("the pack and its index disagree on the object count")
	}
	return p, nil
}

// find returns the pack offset of h (-1 when the pack does not hold it), by binary
// search over the index file (nothing but the fan-out table is kept in memory).
func (p *packFile) find(h plumbing.Hash) (int64, error) {
	lo := uint32(0)
	if h[0] > 0 {
		lo = p.fanout[h[0]-1]
	}
	hi := p.fanout[h[0]]
	var name [20]byte
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, err := p.idx.ReadAt(name[:], idxHeaderLen+int64(mid)*20); err != nil {
			return 0, fmt.Errorf("read the index: %w", err)
		}
		switch c := bytes.Compare(name[:], h[:]); {
		case c == 0:
			return p.offsetAt(mid)
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return -1, nil
}

func (p *packFile) offsetAt(i uint32) (int64, error) {
	var b [8]byte
	if _, err := p.idx.ReadAt(b[:4], idxHeaderLen+int64(p.n)*24+int64(i)*4); err != nil {
		return 0, fmt.Errorf("read the index: %w", err)
	}
	off := int64(binary.BigEndian.Uint32(b[:4]))
	if off&0x80000000 != 0 {
		pos := idxHeaderLen + int64(p.n)*28 + (off&0x7fffffff)*8
		if pos+8 > p.idxSize-40 {
			return 0, errors.New("the index names a large offset it does not hold")
		}
		if _, err := p.idx.ReadAt(b[:], pos); err != nil {
			return 0, fmt.Errorf("read the index: %w", err)
		}
		u := binary.BigEndian.Uint64(b[:])
		if u > 1<<62 {
			return 0, errors.New("the index holds an offset out of range")
		}
		off = int64(u)
	}
	if off < 12 || off >= p.packSize-packTrailer {
		return 0, errors.New("the index holds an offset outside the pack")
	}
	return off, nil
}

// Pack entry types.
const (
	packCommit   = 1
	packTree     = 2
	packBlob     = 3
	packTag      = 4
	packOfsDelta = 6
	packRefDelta = 7
)

// parsePackEntryHeader parses the type-and-size header of a pack entry: the type, the
// size (of the object, or of the delta data for a delta) and the header's length.
func parsePackEntryHeader(b []byte) (byte, int64, int, error) {
	if len(b) == 0 {
		return 0, 0, 0, errors.New("truncated entry header")
	}
	c := b[0]
	typ := (c >> 4) & 7
	size := uint64(c & 15)
	shift := uint(4)
	i := 1
	for c&0x80 != 0 {
		if i >= len(b) {
			return 0, 0, 0, errors.New("truncated entry header")
		}
		if shift > 56 {
			return 0, 0, 0, errors.New("entry size out of range")
		}
		c = b[i]
		i++
		size |= uint64(c&0x7f) << shift
		shift += 7
	}
	if size > 1<<62 {
		return 0, 0, 0, errors.New("entry size out of range")
	}
	switch typ {
	case packCommit, packTree, packBlob, packTag, packOfsDelta, packRefDelta:
	default:
		return 0, 0, 0, fmt.Errorf("unknown entry type %d", typ)
	}
	return typ, int64(size), i, nil
}

// parseOfsDelta parses the base distance of an offset delta (git's offset encoding:
// each continuation adds one before shifting) and its length.
func parseOfsDelta(b []byte) (int64, int, error) {
	if len(b) == 0 {
		return 0, 0, errors.New("truncated delta base offset")
	}
	c := b[0]
	rel := uint64(c & 0x7f)
	i := 1
	for c&0x80 != 0 {
		if i >= len(b) {
			return 0, 0, errors.New("truncated delta base offset")
		}
		if rel >= 1<<55 {
			return 0, 0, errors.New("delta base offset out of range")
		}
		c = b[i]
		i++
		rel = (rel+1)<<7 | uint64(c&0x7f)
	}
	if rel == 0 || rel > 1<<62 {
		return 0, 0, errors.New("delta base offset out of range")
	}
	return int64(rel), i, nil
}

// parseDeltaSize reads one size of a delta's header (little-endian base 128).
func parseDeltaSize(b []byte) (int64, int, error) {
	var v uint64
	shift := uint(0)
	for i, c := range b {
		if shift > 56 {
			return 0, 0, errors.New("delta size out of range")
		}
		v |= uint64(c&0x7f) << shift
		shift += 7
		if c&0x80 == 0 {
			if v > 1<<62 {
				return 0, 0, errors.New("delta size out of range")
			}
			return int64(v), i + 1, nil
		}
	}
	return 0, 0, errors.New("truncated delta header")
}

// packEntry is the header of one pack entry.
type packEntry struct {
	off     int64 // of the entry
	dataOff int64 // of its compressed data
	typ     byte
	size    int64         // object size, or delta data size
	baseOff int64         // offset deltas: the base's entry
	baseRef plumbing.Hash // reference deltas: the base's name
}

func (p *packFile) entryAt(off int64) (packEntry, error) {
	var b [32]byte
	n, err := p.pack.ReadAt(b[:], off)
	if n == 0 && err != nil {
		return packEntry{}, fmt.Errorf("read the pack at %d: %w", off, err)
	}
	end := min(int64(n), p.packSize-packTrailer-off)
	if end <= 0 {
		return packEntry{}, errors.New("an entry lies outside the pack")
	}
	hb := b[:end]
	typ, size, hl, err := parsePackEntryHeader(hb)
	if err != nil {
		return packEntry{}, err
	}
	e := packEntry{off: off, typ: typ, size: size, dataOff: off + int64(hl)}
	switch typ {
	case packOfsDelta:
		rel, l, err := parseOfsDelta(hb[hl:])
		if err != nil {
			return packEntry{}, err
		}
		if rel >= off {
			return packEntry{}, errors.New("a delta names a base before the start of the pack")
		}
		e.baseOff = off - rel
		e.dataOff += int64(l)
	case packRefDelta:
		if len(hb) < hl+20 {
			return packEntry{}, errors.New("truncated delta base name")
		}
		copy(e.baseRef[:], hb[hl:hl+20])
		e.dataOff += 20
	}
	if e.dataOff >= p.packSize-packTrailer {
		return packEntry{}, errors.New("an entry's data lies outside the pack")
	}
	return e, nil
}

// inflateAt inflates exactly size bytes from the pack at off, checking the stream ends
// there.
func (s *objectStore) inflateAt(p *packFile, off, size int64) ([]byte, error) {
	zr, err := s.inflater(bufio.NewReader(io.NewSectionReader(p.pack, off, p.packSize-packTrailer-off)))
	if err != nil {
		return nil, err
	}
	data, err := readExactly(zr, size)
	if err != nil {
		return nil, fmt.Errorf("an entry at %d %v", off, err)
	}
	return data, nil
}

// deltaTarget inflates only the first bytes of a delta and returns the sizes of the
// base it applies to and of the object it produces.
func (s *objectStore) deltaTarget(p *packFile, e packEntry) (int64, int64, error) {
	zr, err := s.inflater(bufio.NewReaderSize(io.NewSectionReader(p.pack, e.dataOff, p.packSize-packTrailer-e.dataOff), 64))
	if err != nil {
		return 0, 0, err
	}
	var b [20]byte
	n, err := io.ReadFull(zr, b[:min(int64(len(b)), e.size)])
	if err != nil {
		return 0, 0, fmt.Errorf("the delta's compressed data is damaged: %v", err)
	}
	src, l, err := parseDeltaSize(b[:n])
	if err != nil {
		return 0, 0, err
	}
	dst, _, err := parseDeltaSize(b[l:n])
	if err != nil {
		return 0, 0, err
	}
	return src, dst, nil
}

// readPacked finds h in the packs and resolves it (fs.ErrNotExist when no pack has it).
func (s *objectStore) readPacked(h plumbing.Hash, want plumbing.ObjectType, limit int64) (plumbing.ObjectType, []byte, error) {
	if err := s.loadPacks(); err != nil {
		return 0, nil, err
	}
	for _, p := range s.packs {
		off, err := p.find(h)
		if err != nil {
			return 0, nil, &badObjectError{h, err.Error()}
		}
		if off >= 0 {
			return s.resolve(p, h, off, want, limit)
		}
	}
	return 0, nil, fmt.Errorf("object %s: %w", h, plumbing.ErrObjectNotFound)
}

// resolve reads the pack entry at off: the delta chain is walked by its headers first
// (depth, every intermediate size and the total work are bounded before anything is
// inflated), then the base is inflated and the deltas applied one after the other.
func (s *objectStore) resolve(p *packFile, h plumbing.Hash, off int64, want plumbing.ObjectType, limit int64) (plumbing.ObjectType, []byte, error) {
	bad := func(format string, args ...any) error { return &badObjectError{h, fmt.Sprintf(format, args...)} }
	type link struct {
		e        packEntry
		src, dst int64
	}
	var chain []link
	var work int64
	cur := off
	for {
		e, err := p.entryAt(cur)
		if err != nil {
			return 0, nil, bad("%v", err)
		}
		if e.typ != packOfsDelta && e.typ != packRefDelta {
			typ := plumbing.ObjectType(e.typ)
			if typ != want {
				return typ, nil, nil
			}
			if len(chain) == 0 {
				if e.size > limit {
					return 0, nil, &objectTooLargeError{h, kindName(typ), e.size, limit}
				}
			} else if e.size > maxChainObjectBytes {
				return 0, nil, bad("it is a delta of an object of %d bytes, more than the %d bytes sharedos resolves", e.size, maxChainObjectBytes)
			}
			if work += e.size; work > maxChainWork {
				return 0, nil, bad("resolving its delta chain would produce more than %d bytes", maxChainWork)
			}
			data, err := s.inflateAt(p, e.dataOff, e.size)
			if err != nil {
				return 0, nil, bad("%v", err)
			}
			for i := len(chain) - 1; i >= 0; i-- {
				l := chain[i]
				if int64(len(data)) != l.src {
					return 0, nil, bad("a delta expects a base of %d bytes, its base has %d", l.src, len(data))
				}
				delta, err := s.inflateAt(p, l.e.dataOff, l.e.size)
				if err != nil {
					return 0, nil, bad("%v", err)
				}
				if data, err = applyDelta(data, delta, l.dst); err != nil {
					return 0, nil, bad("%v", err)
				}
			}
			return typ, data, nil
		}
		if len(chain) >= maxDeltaDepth {
			return 0, nil, bad("it is stored as a delta chain deeper than %d links (git never writes one); sharedos does not resolve it", maxDeltaDepth)
		}
		if e.size > maxChainObjectBytes+maxChainObjectBytes/64+64 {
			return 0, nil, bad("a delta of its chain holds %d bytes, more than sharedos resolves", e.size)
		}
		src, dst, err := s.deltaTarget(p, e)
		if err != nil {
			return 0, nil, bad("%v", err)
		}
		if len(chain) == 0 && dst > limit {
			return 0, nil, &objectTooLargeError{h, kindName(want), dst, limit}
		}
		if dst > maxChainObjectBytes || src > maxChainObjectBytes {
			return 0, nil, bad("its delta chain passes through an object larger than the %d bytes sharedos resolves", maxChainObjectBytes)
		}
		if work += e.size + dst; work > maxChainWork {
			return 0, nil, bad("resolving its delta chain would produce more than %d bytes", maxChainWork)
		}
		chain = append(chain, link{e, src, dst})
		if e.typ == packOfsDelta {
			cur = e.baseOff
			continue
		}
		base, err := p.find(e.baseRef)
		if err != nil {
			return 0, nil, bad("%v", err)
		}
		if base < 0 {
			return 0, nil, bad("its delta base %s is not in its pack", e.baseRef)
		}
		cur = base
	}
}

// applyDelta applies a git delta to base; the result must have dst bytes.
func applyDelta(base, delta []byte, dst int64) ([]byte, error) {
	src, n, err := parseDeltaSize(delta)
	if err != nil {
		return nil, err
	}
	delta = delta[n:]
	if src != int64(len(base)) {
		return nil, fmt.Errorf("a delta expects a base of %d bytes, its base has %d", src, len(base))
	}
	size, n, err := parseDeltaSize(delta)
	if err != nil {
		return nil, err
	}
	delta = delta[n:]
	if size != dst {
		return nil, errors.New("a delta's size changed while it was read")
	}
	out := make([]byte, 0, size)
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		switch {
		case op&0x80 != 0: // copy from the base
			var off, cnt uint64
			for i := range 4 {
				if op&(1<<i) != 0 {
					if len(delta) == 0 {
						return nil, errors.New("truncated delta copy")
					}
					off |= uint64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			for i := range 3 {
				if op&(0x10<<i) != 0 {
					if len(delta) == 0 {
						return nil, errors.New("truncated delta copy")
					}
					cnt |= uint64(delta[0]) << (8 * i)
					delta = delta[1:]
				}
			}
			if cnt == 0 {
				cnt = 0x10000
			}
			if off+cnt > uint64(len(base)) || int64(len(out))+int64(cnt) > size {
				return nil, errors.New("a delta copies outside its base or beyond its size")
			}
			out = append(out, base[off:off+cnt]...)
		case op != 0: // insert op bytes
			if len(delta) < int(op) || int64(len(out))+int64(op) > size {
				return nil, errors.New("a delta inserts beyond its data or its size")
			}
			out = append(out, delta[:op]...)
			delta = delta[op:]
		default:
			return nil, errors.New("a delta holds the reserved instruction 0")
		}
	}
	if int64(len(out)) != size {
		return nil, errors.New("a delta produces fewer bytes than it says")
	}
	return out, nil
}

// readBlob reads a blob for a diff: nil (and no error) when it is larger than
// maxBlobReadBytes, which the diff then shows as binary without inflating it.
func (r *repo) readBlob(h plumbing.Hash) ([]byte, error) {
	r.objMu.Lock()
	data, err := r.readObject(h, plumbing.BlobObject, maxBlobReadBytes)
	r.objMu.Unlock()
	var tl *objectTooLargeError
	if errors.As(err, &tl) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("blob %s: %w", h, err)
	}
	return data, nil
}

// checkTreeDepth refuses to read a tree nested deeper than maxTreeDepth (prefix is its
// path, ending in "/").
func checkTreeDepth(prefix string) error {
	if strings.Count(prefix, "/") >= maxTreeDepth {
		return fmt.Errorf("%s…: trees are nested deeper than %d levels; sharedos does not walk them", prefix[:min(len(prefix), 200)], maxTreeDepth)
	}
	return nil
}
