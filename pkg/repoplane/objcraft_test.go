package repoplane

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// Crafting hostile repositories: objects and packs written byte by byte, so the tests
// can build in milliseconds what would take gigabytes to produce with git (a 3 GiB
// blob is a 3 MiB zlib stream here), and delta chains git would never write.

// Names of the huge fixtures, computed once with git itself:
//
//	head -c 3221225472 /dev/zero | git hash-object --stdin
//	(printf '%s' "$hugeCommitHeader"; head -c 2147483648 /dev/zero | tr '\0' a) |
//	    git hash-object -t commit --literally --stdin
const (
	hugeBlobSize     int64 = 3 << 30
	hugeBlobName           = "1077662767e8de998abc7dbe3649b8df9a2baf72"
	hugeCommitHeader       = "tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor A <a@example.invalid> 1700000000 +0000\ncommitter A <a@example.invalid> 1700000000 +0000\n\n"
	hugeCommitMsg    int64 = 2 << 30
	hugeCommitName         = "7877b4ea7542b32601c035514159c92607264684"
	emptyTreeName          = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
)

// zlibOf compresses data as one zlib stream.
func zlibOf(data []byte) []byte {
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// zlibRepeated returns the zlib stream of prefix followed by n bytes c (n a multiple of
// 1 MiB, at least 2 MiB) without compressing n bytes: a deflate block that encodes one
// MiB of c, following a MiB of c, is repeated (it only refers back to bytes c).
func zlibRepeated(prefix []byte, c byte, n int64) []byte {
	const unit = 1 << 20
	if n%unit != 0 || n < 2*unit {
		panic("zlibRepeated: n must be a multiple of 1 MiB, at least 2 MiB")
	}
	var b bytes.Buffer
	b.Write([]byte{0x78, 0x9c})
	fw, _ := flate.NewWriter(&b, flate.BestCompression)
	fw.Write(prefix)
	fw.Flush()
	chunk := bytes.Repeat([]byte{c}, unit)
	fw.Write(chunk)
	fw.Flush()
	mark := b.Len()
	fw.Write(chunk)
	fw.Flush()
	block := bytes.Clone(b.Bytes()[mark:])
	for i := int64(2); i < n/unit; i++ {
		b.Write(block)
	}
	fw.Close() // the final (empty) block
	return binary.BigEndian.AppendUint32(b.Bytes(), adlerExtend(adler32.Checksum(prefix), c, n))
}

// adlerExtend is the Adler-32 of a stream with checksum sum followed by n bytes c.
func adlerExtend(sum uint32, c byte, n int64) uint32 {
	const m = 65521
	a, b := uint64(sum&0xffff), uint64(sum>>16)
	nm := uint64(n) % m
	// n(n+1)/2 mod m
	var tri uint64
	if n%2 == 0 {
		tri = (uint64(n/2) % m) * (uint64(n+1) % m) % m
	} else {
		tri = nm * (uint64((n+1)/2) % m) % m
	}
	b = (b + nm*a%m + uint64(c)*tri%m) % m
	a = (a + nm*uint64(c)%m) % m
	return uint32(b<<16 | a)
}

func typeName(t byte) string { return kindName(plumbing.ObjectType(t)) }

// objName is git's name of an object.
func objName(t byte, data []byte) plumbing.Hash { return objectHash(plumbing.ObjectType(t), data) }

// looseFile writes a loose object from its compressed stream.
func looseFile(t testing.TB, gitDir string, h plumbing.Hash, z []byte) {
	t.Helper()
	s := h.String()
	p := filepath.Join(gitDir, "objects", s[:2], s[2:])
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, z, 0o444); err != nil {
		t.Fatal(err)
	}
}

// loose stores data as a loose object and returns its name.
func loose(t testing.TB, gitDir string, typ byte, data []byte) plumbing.Hash {
	t.Helper()
	h := objName(typ, data)
	looseFile(t, gitDir, h, zlibOf(append([]byte(fmt.Sprintf("%s %d\x00", typeName(typ), len(data))), data...)))
	return h
}

// packObj is one entry of a crafted pack.
type packObj struct {
	typ  byte // packCommit…packTag, packOfsDelta or packRefDelta
	size int64
	z    []byte        // compressed data
	base int           // deltas: index of the base entry
	name plumbing.Hash // of the object the entry resolves to
}

func packHeader(typ byte, size int64) []byte {
	c := typ<<4 | byte(size&15)
	size >>= 4
	var b []byte
	for size > 0 {
		b = append(b, c|0x80)
		c = byte(size & 0x7f)
		size >>= 7
	}
	return append(b, c)
}

func ofsEncode(rel int64) []byte {
	var tmp [16]byte
	pos := len(tmp) - 1
	tmp[pos] = byte(rel & 127)
	for rel >>= 7; rel > 0; rel >>= 7 {
		rel--
		pos--
		tmp[pos] = 128 | byte(rel&127)
	}
	return tmp[pos:]
}

// writePack writes objs as a pack with its version 2 index into gitDir and returns the
// pack's path.
func writePack(t testing.TB, gitDir string, objs []packObj) string {
	t.Helper()
	var body bytes.Buffer
	body.WriteString("PACK")
	body.Write(binary.BigEndian.AppendUint32(nil, 2))
	body.Write(binary.BigEndian.AppendUint32(nil, uint32(len(objs))))
	offs := make([]int64, len(objs))
	crcs := make([]uint32, len(objs))
	for i, o := range objs {
		offs[i] = int64(body.Len())
		start := body.Len()
		body.Write(packHeader(o.typ, o.size))
		switch o.typ {
		case packOfsDelta:
			body.Write(ofsEncode(offs[i] - offs[o.base]))
		case packRefDelta:
			body.Write(objs[o.base].name[:])
		}
		body.Write(o.z)
		crcs[i] = crc32.ChecksumIEEE(body.Bytes()[start:])
	}
	sum := sha1.Sum(body.Bytes())
	body.Write(sum[:])

	order := make([]int, len(objs))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return bytes.Compare(objs[order[a]].name[:], objs[order[b]].name[:]) < 0 })
	var idx bytes.Buffer
	idx.WriteString("\xfftOc")
	idx.Write(binary.BigEndian.AppendUint32(nil, 2))
	var fan [256]uint32
	for _, o := range objs {
		for b := int(o.name[0]); b < 256; b++ {
			fan[b]++
		}
	}
	for _, v := range fan {
		idx.Write(binary.BigEndian.AppendUint32(nil, v))
	}
	for _, i := range order {
		idx.Write(objs[i].name[:])
	}
	for _, i := range order {
		idx.Write(binary.BigEndian.AppendUint32(nil, crcs[i]))
	}
	var large []int64
	for _, i := range order {
		if offs[i] < 1<<31 {
			idx.Write(binary.BigEndian.AppendUint32(nil, uint32(offs[i])))
		} else {
			idx.Write(binary.BigEndian.AppendUint32(nil, 1<<31|uint32(len(large))))
			large = append(large, offs[i])
		}
	}
	for _, o := range large {
		idx.Write(binary.BigEndian.AppendUint64(nil, uint64(o)))
	}
	idx.Write(sum[:])
	isum := sha1.Sum(idx.Bytes())
	idx.Write(isum[:])

	dir := filepath.Join(gitDir, "objects", "pack")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "pack-"+hex.EncodeToString(sum[:]))
	if err := os.WriteFile(base+".pack", body.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".idx", idx.Bytes(), 0o444); err != nil {
		t.Fatal(err)
	}
	return base + ".pack"
}

// baseEntry is a pack entry holding data whole.
func baseEntry(typ byte, data []byte) packObj {
	return packObj{typ: typ, size: int64(len(data)), z: zlibOf(data), name: objName(typ, data)}
}

func leb(v int64) []byte {
	var b []byte
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// makeDelta encodes dst as a delta of src: the common prefix is copied, the rest
// inserted.
func makeDelta(src, dst []byte) []byte {
	d := append(leb(int64(len(src))), leb(int64(len(dst)))...)
	p := 0
	for p < len(src) && p < len(dst) && p < 0xffff && src[p] == dst[p] {
		p++
	}
	if p > 0 {
		d = append(d, 0x80|0x10|0x20, byte(p), byte(p>>8)) // offset 0, size p
	}
	for rest := dst[p:]; len(rest) > 0; {
		n := min(len(rest), 127)
		d = append(d, byte(n))
		d = append(d, rest[:n]...)
		rest = rest[n:]
	}
	return d
}

// deltaChain returns a base entry of type typ holding content(0) followed by depth
// delta entries, entry i producing content(i) as a delta of entry i-1 (offset deltas,
// or reference deltas when ref).
func deltaChain(typ byte, depth int, content func(i int) []byte, ref bool) []packObj {
	objs := []packObj{baseEntry(typ, content(0))}
	var zb bytes.Buffer
	zw := zlib.NewWriter(&zb)
	prev := content(0)
	dt := byte(packOfsDelta)
	if ref {
		dt = packRefDelta
	}
	for i := 1; i <= depth; i++ {
		cur := content(i)
		d := makeDelta(prev, cur)
		zb.Reset()
		zw.Reset(&zb)
		zw.Write(d)
		zw.Close()
		objs = append(objs, packObj{typ: dt, size: int64(len(d)), z: bytes.Clone(zb.Bytes()), base: i - 1, name: objName(typ, cur)})
		prev = cur
	}
	return objs
}

// chainCommit is the content of the i-th commit of a crafted delta chain.
func chainCommit(i int) []byte {
	return fmt.Appendf(nil, "tree %s\nauthor A <a@example.invalid> 1700000000 +0000\ncommitter A <a@example.invalid> 1700000000 +0000\n\nchain %07d\n", emptyTreeName, i)
}

// --- assembling a repository by hand --------------------------------------------------

type treeEnt struct {
	name string
	mode filemode.FileMode
	hash plumbing.Hash
}

// treeData encodes a tree (entries given in git order).
func treeData(ents ...treeEnt) []byte {
	var b bytes.Buffer
	for _, e := range ents {
		fmt.Fprintf(&b, "%o %s\x00", uint32(e.mode), e.name)
		b.Write(e.hash[:])
	}
	return b.Bytes()
}

func commitData(tree plumbing.Hash, msg string) []byte {
	return fmt.Appendf(nil, "tree %s\nauthor A <a@example.invalid> 1700000000 +0000\ncommitter A <a@example.invalid> 1700000000 +0000\n\n%s", tree, msg)
}

// setBranch points refs/heads/main (HEAD's branch) at h.
func setBranch(t testing.TB, gitDir string, h plumbing.Hash) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(gitDir, "refs", "heads", "main"), []byte(h.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// setIndex writes .git/index with the given entries (zero stat data: every file is
// re-hashed by status).
func setIndex(t testing.TB, gitDir string, ents ...treeEnt) {
	t.Helper()
	idx := &index.Index{Version: 2}
	for _, e := range ents {
		idx.Entries = append(idx.Entries, &index.Entry{Name: e.name, Hash: e.hash, Mode: e.mode})
	}
	sort.Slice(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	f, err := os.Create(filepath.Join(gitDir, "index"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := index.NewEncoder(f).Encode(idx); err != nil {
		t.Fatal(err)
	}
}

// TestWriteHostileFixtures writes the three crafted repositories of issue 8 item 13
// into $REPOPLANE_CRAFT_DIR (for measuring the memory of each operation on them with
// BenchmarkExternal): blob3g (a 3 GiB zero blob in HEAD and the index, modified in the
// working tree), commit2g (HEAD a commit with a 2 GiB message) and chain2m (HEAD a
// commit at the end of a 2,000,000-deep delta chain). Each is a pack git accepts.
func TestWriteHostileFixtures(t *testing.T) {
	dir := os.Getenv("REPOPLANE_CRAFT_DIR")
	if dir == "" {
		t.Skip("REPOPLANE_CRAFT_DIR is not set")
	}
	mk := func(name string) string {
		d := filepath.Join(dir, name)
		if _, err := os.Lstat(d); err == nil {
			return "" // written before
		}
		initRepo(t, d)
		return filepath.Join(d, ".git")
	}
	for _, name := range []string{"blob3g", "blob3g-loose"} {
		g := mk(name)
		if g == "" {
			continue
		}
		huge := plumbing.NewHash(hugeBlobName)
		if name == "blob3g" {
			writePack(t, g, []packObj{hugeBlobEntry()})
		} else {
			looseFile(t, g, huge, zlibRepeated([]byte(fmt.Sprintf("blob %d\x00", hugeBlobSize)), 0, hugeBlobSize))
		}
		tree := loose(t, g, packTree, treeData(treeEnt{"big.bin", filemode.Regular, huge}))
		setBranch(t, g, loose(t, g, packCommit, commitData(tree, "huge blob\n")))
		setIndex(t, g, treeEnt{"big.bin", filemode.Regular, huge})
		writeFile(t, filepath.Join(dir, name, "big.bin"), "small now\n")
	}
	if g := mk("commit2g"); g != "" {
		header := []byte(hugeCommitHeader)
		writePack(t, g, []packObj{baseEntry(packTree, nil),
			{typ: packCommit, size: int64(len(header)) + hugeCommitMsg, z: zlibRepeated(header, 'a', hugeCommitMsg), name: plumbing.NewHash(hugeCommitName)}})
		setBranch(t, g, plumbing.NewHash(hugeCommitName))
	}
	if g := mk("chain2m"); g != "" {
		objs := append([]packObj{baseEntry(packTree, nil)}, deltaChain(packCommit, 2_000_000, chainCommit, false)...)
		for i := 2; i < len(objs); i++ {
			objs[i].base++
		}
		writePack(t, g, objs)
		setBranch(t, g, objs[len(objs)-1].name)
	}
}
