package repoplane

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// This file reads and writes git's index (the staging area, .git/index) itself rather
// than through go-git, for three reasons: every entry path is validated before anything
// is done with it (a hostile index naming "../x" or ".git/hooks/x" is refused), the
// cache-tree extension (TREE) survives with its invalidated nodes, so unchanged
// directories are compared with HEAD by one hash instead of a tree walk, and writes keep
// that extension, which go-git's encoder drops.

// Index entry modes (the object types git tracks).
const (
	modeRegular    = 0o100644
	modeExecutable = 0o100755
	modeSymlink    = 0o120000
	modeGitlink    = 0o160000
	modeTree       = 0o040000
)

const (
	flagAssumeValid = 0x8000
	flagExtended    = 0x4000
	extSkipWorktree = 0x4000
	extIntentToAdd  = 0x2000
)

// idxEntry is one index entry, with git's stat data kept exactly as stored.
type idxEntry struct {
	ctimeS, ctimeN, mtimeS, mtimeN uint32
	dev, ino, mode, uid, gid, size uint32
	hash                           [20]byte
	flags                          uint16 // stage and assume-valid bits; the length is recomputed
	ext                            uint16 // extended flags (v3+)
	name                           string
}

func (e *idxEntry) stage() int { return int(e.flags>>12) & 3 }

func (e *idxEntry) skipWorktree() bool { return e.ext&extSkipWorktree != 0 }

// assumeUnchanged is git update-index --assume-unchanged (CE_VALID).
func (e *idxEntry) assumeUnchanged() bool { return e.flags&flagAssumeValid != 0 }

func (e *idxEntry) intentToAdd() bool { return e.ext&extIntentToAdd != 0 }

// cacheTree is one node of the TREE extension. count < 0 marks an invalidated node
// (its hash is unknown); children are the subdirectories that have nodes.
type cacheTree struct {
	name     string
	count    int
	hash     [20]byte
	children []*cacheTree
}

func (t *cacheTree) child(name string) *cacheTree {
	if t == nil {
		return nil
	}
	for _, c := range t.children {
		if c.name == name {
			return c
		}
	}
	return nil
}

// invalidate marks every node on the way to the directory holding path as unknown.
func (t *cacheTree) invalidate(path string) {
	for t != nil {
		t.count = -1
		i := strings.IndexByte(path, '/')
		if i < 0 {
			return
		}
		t, path = t.child(path[:i]), path[i+1:]
	}
}

// gitIndex is a decoded index. Entries are sorted by name, then stage.
type gitIndex struct {
	version uint32
	entries []*idxEntry
	tree    *cacheTree
}

var errIndexCorrupt = errors.New("the index file is corrupt")

// errBadIndexPath reports an index entry whose path git itself would refuse.
type errBadIndexPath struct{ path string }

func (e errBadIndexPath) Error() string {
	return fmt.Sprintf("the repository records the path %q, which git itself refuses (.., .git or an absolute path)", e.path)
}

// errUnsupportedIndex reports an index feature sharedos does not read (split or sparse
// index): refusing is safer than misreading it.
type errUnsupportedIndex struct{ what string }

func (e errUnsupportedIndex) Error() string {
	return "the index uses an unsupported feature: " + e.what
}

var errSplitIndex = errUnsupportedIndex{"a split index (core.splitIndex, git update-index --split-index), which sharedos does not read; git update-index --no-split-index turns it off"}

// decodeIndex parses an index file. It verifies the trailing checksum (unless git wrote
// none, index.skipHash) and every entry path.
func decodeIndex(data []byte) (*gitIndex, error) {
	if len(data) < 12+20 || string(data[:4]) != "DIRC" {
		return nil, errIndexCorrupt
	}
	body, sum := data[:len(data)-20], data[len(data)-20:]
	if !bytes.Equal(sum, make([]byte, 20)) {
		if h := sha1.Sum(body); !bytes.Equal(h[:], sum) {
			return nil, fmt.Errorf("%w: checksum mismatch", errIndexCorrupt)
		}
	}
	idx := &gitIndex{version: binary.BigEndian.Uint32(body[4:8])}
	if idx.version < 2 || idx.version > 4 {
		return nil, errUnsupportedIndex{"version " + strconv.Itoa(int(idx.version))}
	}
	n := binary.BigEndian.Uint32(body[8:12])
	if uint64(n) > uint64(len(body))/62 {
		return nil, errIndexCorrupt
	}
	idx.entries = make([]*idxEntry, 0, n)
	all := string(body) // names of v2/v3 entries are slices of this one string
	pos := 12
	prev := ""
	store := make([]idxEntry, n)
	for i := range int(n) {
		if pos+62 > len(body) {
			return nil, errIndexCorrupt
		}
		b := body[pos:]
		e := &store[i]
		e.ctimeS, e.ctimeN = binary.BigEndian.Uint32(b[0:]), binary.BigEndian.Uint32(b[4:])
		e.mtimeS, e.mtimeN = binary.BigEndian.Uint32(b[8:]), binary.BigEndian.Uint32(b[12:])
		e.dev, e.ino = binary.BigEndian.Uint32(b[16:]), binary.BigEndian.Uint32(b[20:])
		e.mode, e.uid = binary.BigEndian.Uint32(b[24:]), binary.BigEndian.Uint32(b[28:])
		e.gid, e.size = binary.BigEndian.Uint32(b[32:]), binary.BigEndian.Uint32(b[36:])
		copy(e.hash[:], b[40:60])
		flags := binary.BigEndian.Uint16(b[60:])
		e.flags = flags &^ 0x0fff &^ flagExtended
		hdr := 62
		if flags&flagExtended != 0 {
			if idx.version < 3 || pos+64 > len(body) {
				return nil, errIndexCorrupt
			}
			e.ext = binary.BigEndian.Uint16(b[62:])
			hdr = 64
		}
		pos += hdr
		if idx.version == 4 {
			strip, used := readOffset(body[pos:])
			if used == 0 || strip > len(prev) {
				return nil, errIndexCorrupt
			}
			pos += used
			end := bytes.IndexByte(body[pos:], 0)
			if end < 0 {
				return nil, errIndexCorrupt
			}
			e.name = prev[:len(prev)-strip] + string(body[pos:pos+end])
			pos += end + 1
		} else {
			end := bytes.IndexByte(body[pos:], 0)
			if end < 0 {
				return nil, errIndexCorrupt
			}
			e.name = all[pos : pos+end]
			// entries are padded with 1..8 NULs to a multiple of 8 bytes
			pos += ((hdr + end + 8) &^ 7) - hdr
			if pos > len(body) {
				return nil, errIndexCorrupt
			}
		}
		if !validIndexPath(e.name) {
			if e.name == "" && bytes.Contains(body[pos:], []byte("link")) {
				// a split index names its replaced entries by position only
				return nil, errSplitIndex
			}
			return nil, errBadIndexPath{e.name}
		}
		if e.mode != modeRegular && e.mode != modeExecutable && e.mode != modeSymlink && e.mode != modeGitlink {
			// git normalises any other regular mode to 644
			if e.mode&0o170000 == 0o100000 {
				e.mode = modeRegular
			} else {
				return nil, fmt.Errorf("%w: entry %q has mode %o", errIndexCorrupt, e.name, e.mode)
			}
		}
		prev = e.name
		idx.entries = append(idx.entries, e)
	}
	for pos+8 <= len(body) {
		sig := string(body[pos : pos+4])
		size := int(binary.BigEndian.Uint32(body[pos+4:]))
		pos += 8
		if size < 0 || pos+size > len(body) {
			return nil, errIndexCorrupt
		}
		ext := body[pos : pos+size]
		pos += size
		switch {
		case sig == "TREE":
			t, err := decodeCacheTree(ext)
			if err == nil {
				idx.tree = t
			} // a bad cache tree is only a lost optimisation
		case sig[0] >= 'A' && sig[0] <= 'Z':
			// optional extension (REUC, UNTR, FSMN, EOIE, IEOT…): dropped on rewrite
		case sig == "link":
			return nil, errSplitIndex
		case sig == "sdir":
			return nil, errUnsupportedIndex{"a sparse index (index.sparse), which sharedos does not read; git sparse-checkout init --no-sparse-index turns it off"}
		default:
			return nil, errUnsupportedIndex{"extension " + strconv.Quote(sig)}
		}
	}
	if pos != len(body) {
		return nil, errIndexCorrupt
	}
	if !sort.SliceIsSorted(idx.entries, func(i, j int) bool { return entryLess(idx.entries[i], idx.entries[j]) }) {
		sort.SliceStable(idx.entries, func(i, j int) bool { return entryLess(idx.entries[i], idx.entries[j]) })
	}
	return idx, nil
}

func entryLess(a, b *idxEntry) bool {
	if a.name != b.name {
		return a.name < b.name
	}
	return a.stage() < b.stage()
}

// readOffset decodes the offset varint of index v4 (and ofs-delta): 7 bits per byte,
// big-endian, with an implicit +1 on every continuation.
func readOffset(b []byte) (int, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := int(c & 0x7f)
	i := 1
	for c&0x80 != 0 {
		if i >= len(b) || i > 8 {
			return 0, 0
		}
		c = b[i]
		i++
		v = ((v + 1) << 7) | int(c&0x7f)
	}
	return v, i
}

func decodeCacheTree(b []byte) (*cacheTree, error) {
	pos := 0
	var read func() (*cacheTree, error)
	depth := 0
	read = func() (*cacheTree, error) {
		depth++
		defer func() { depth-- }()
		if depth > 4096 {
			return nil, errIndexCorrupt
		}
		nul := bytes.IndexByte(b[pos:], 0)
		if nul < 0 {
			return nil, errIndexCorrupt
		}
		t := &cacheTree{name: string(b[pos : pos+nul])}
		pos += nul + 1
		nl := bytes.IndexByte(b[pos:], '\n')
		if nl < 0 {
			return nil, errIndexCorrupt
		}
		fields := strings.Fields(string(b[pos : pos+nl]))
		pos += nl + 1
		if len(fields) != 2 {
			return nil, errIndexCorrupt
		}
		cnt, err1 := strconv.Atoi(fields[0])
		subs, err2 := strconv.Atoi(fields[1])
		if err1 != nil || err2 != nil || subs < 0 || subs > len(b) {
			return nil, errIndexCorrupt
		}
		t.count = cnt
		if cnt >= 0 {
			if pos+20 > len(b) {
				return nil, errIndexCorrupt
			}
			copy(t.hash[:], b[pos:pos+20])
			pos += 20
		}
		for range subs {
			c, err := read()
			if err != nil {
				return nil, err
			}
			t.children = append(t.children, c)
		}
		return t, nil
	}
	t, err := read()
	if err != nil {
		return nil, err
	}
	if t.name != "" {
		return nil, errIndexCorrupt
	}
	return t, nil
}

// encodeIndex writes idx in format 2 (3 when an entry needs extended flags), with the
// cache tree when there is one, and the trailing checksum.
func encodeIndex(idx *gitIndex) []byte {
	version := uint32(2)
	for _, e := range idx.entries {
		if e.ext != 0 {
			version = 3
			break
		}
	}
	var buf bytes.Buffer
	buf.Grow(12 + len(idx.entries)*80)
	var hdr [12]byte
	copy(hdr[:], "DIRC")
	binary.BigEndian.PutUint32(hdr[4:], version)
	binary.BigEndian.PutUint32(hdr[8:], uint32(len(idx.entries)))
	buf.Write(hdr[:])
	var eb [64]byte
	for _, e := range idx.entries {
		for i, v := range []uint32{e.ctimeS, e.ctimeN, e.mtimeS, e.mtimeN, e.dev, e.ino, e.mode, e.uid, e.gid, e.size} {
			binary.BigEndian.PutUint32(eb[i*4:], v)
		}
		copy(eb[40:60], e.hash[:])
		flags := e.flags &^ 0x0fff &^ flagExtended
		if l := len(e.name); l < 0x0fff {
			flags |= uint16(l)
		} else {
			flags |= 0x0fff
		}
		n := 62
		if e.ext != 0 {
			flags |= flagExtended
			binary.BigEndian.PutUint16(eb[62:], e.ext)
			n = 64
		}
		binary.BigEndian.PutUint16(eb[60:], flags)
		buf.Write(eb[:n])
		buf.WriteString(e.name)
		pad := ((n + len(e.name) + 8) &^ 7) - n - len(e.name)
		buf.Write(make([]byte, pad))
	}
	if idx.tree != nil {
		var tb bytes.Buffer
		var write func(t *cacheTree)
		write = func(t *cacheTree) {
			tb.WriteString(t.name)
			tb.WriteByte(0)
			tb.WriteString(strconv.Itoa(t.count))
			tb.WriteByte(' ')
			tb.WriteString(strconv.Itoa(len(t.children)))
			tb.WriteByte('\n')
			if t.count >= 0 {
				tb.Write(t.hash[:])
			}
			for _, c := range t.children {
				write(c)
			}
		}
		write(idx.tree)
		var eh [8]byte
		copy(eh[:], "TREE")
		binary.BigEndian.PutUint32(eh[4:], uint32(tb.Len()))
		buf.Write(eh[:])
		buf.Write(tb.Bytes())
	}
	sum := sha1.Sum(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes()
}

// validIndexPath applies git's verify_path rules (with the NTFS and HFS protections on):
// a relative, slash-separated path of non-empty components, none of them ".", ".." or a
// spelling of ".git", and no NUL.
func validIndexPath(p string) bool {
	if p == "" || strings.IndexByte(p, 0) >= 0 {
		return false
	}
	for p != "" {
		i := strings.IndexByte(p, '/')
		c := p
		if i >= 0 {
			c, p = p[:i], p[i+1:]
			if p == "" {
				return false // trailing slash
			}
		} else {
			p = ""
		}
		if c == "" || c == "." || c == ".." || isDotGit(c) {
			return false
		}
	}
	return true
}

// isDotGit reports whether a path component names the git directory on any file system
// git protects against: ".git" in any case, with trailing dots or spaces (NTFS), with
// HFS+-ignorable code points inside, or its NTFS short name "git~1".
func isDotGit(c string) bool {
	if len(c) < 4 || strings.IndexByte(c, '.') < 0 && strings.IndexByte(c, '~') < 0 {
		return false
	}
	ascii := true
	for i := 0; i < len(c); i++ {
		if c[i] >= 0x80 {
			ascii = false
			break
		}
	}
	s := c
	if !ascii {
		var b strings.Builder
		for _, r := range c {
			switch {
			case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
				continue // ignored by HFS+
			}
			b.WriteRune(r)
		}
		s = b.String()
	}
	s = strings.TrimRight(s, ". ")
	return strings.EqualFold(s, ".git") || strings.EqualFold(s, "git~1")
}
