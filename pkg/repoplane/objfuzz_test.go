package repoplane

import (
	"bytes"
	"compress/zlib"
	"errors"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// FuzzObjectHeaders feeds crafted bytes to every header parser of the object reader:
// none panics, lengths stay within the input, sizes are never negative, and a header
// that parses re-encodes to the same value.
func FuzzObjectHeaders(f *testing.F) {
	for _, s := range []string{"blob 12\x00", "commit 0\x00", "tree 99999999999999999999\x00", "tag 01\x00",
		"\x95\x0a", "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", "\x80\x80\x01", "\x3c", "\x06\x0c\x90\x06"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if typ, size, n, err := parseLooseHeader(b); err == nil {
			if size < 0 || n > len(b) || n < 1 || b[n-1] != 0 || kindName(typ) == "object" {
				t.Fatalf("loose %q: %v %d %d", b, typ, size, n)
			}
		}
		if typ, size, n, err := parsePackEntryHeader(b); err == nil {
			if size < 0 || n > len(b) || n < 1 || !bytes.Equal(packHeader(typ, size), b[:n]) && b[n-1] != 0 {
				t.Fatalf("entry %x: %d %d %d", b, typ, size, n)
			}
		}
		if rel, n, err := parseOfsDelta(b); err == nil {
			if rel <= 0 || n > len(b) || n < 1 {
				t.Fatalf("ofs %x: %d %d", b, rel, n)
			}
			if enc := ofsEncode(rel); !bytes.Equal(enc, b[:n]) {
				t.Fatalf("ofs %x decodes to %d, which encodes as %x", b[:n], rel, enc)
			}
		}
		if v, n, err := parseDeltaSize(b); err == nil && (v < 0 || n > len(b) || n < 1) {
			t.Fatalf("delta size %x: %d %d", b, v, n)
		}
	})
}

// FuzzApplyDelta applies crafted deltas to a crafted base: no panic, and a result is
// exactly the size the delta declares.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("hello world\n"), makeDelta([]byte("hello world\n"), []byte("hello there\n")))
	f.Add([]byte(""), []byte{0, 3, 3, 'a', 'b', 'c'})
	f.Add([]byte("abc"), []byte{3, 0x7f, 0x91, 0, 0x10})
	f.Fuzz(func(t *testing.T, base, delta []byte) {
		_, n, err := parseDeltaSize(delta)
		if err != nil {
			return
		}
		dst, _, err := parseDeltaSize(delta[n:])
		if err != nil || dst > 1<<20 {
			return
		}
		out, err := applyDelta(base, delta, dst)
		if err == nil && int64(len(out)) != dst {
			t.Fatalf("result of %d bytes, delta says %d", len(out), dst)
		}
	})
}

// FuzzLooseObject decodes crafted inflated loose objects: no panic, a result matches
// its header's size and never exceeds the limit, and a size over the limit is refused
// before its data is read.
func FuzzLooseObject(f *testing.F) {
	f.Add([]byte("blob 5\x00hello"), int64(10))
	f.Add([]byte("blob 5\x00hello!"), int64(10))
	f.Add([]byte("blob 3221225472\x00"), int64(10))
	f.Add([]byte("commit 3\x00abc"), int64(2))
	f.Fuzz(func(t *testing.T, raw []byte, limit int64) {
		if limit < 0 || limit > 1<<20 {
			return
		}
		zr, err := zlib.NewReader(bytes.NewReader(zlibOf(raw)))
		if err != nil {
			t.Fatal(err)
		}
		typ, data, err := decodeLoose(zr, plumbing.ZeroHash, plumbing.BlobObject, limit)
		var tl *objectTooLargeError
		switch {
		case errors.As(err, &tl):
			if tl.size <= limit {
				t.Fatalf("refused %d bytes under a limit of %d", tl.size, limit)
			}
		case err == nil && typ == plumbing.BlobObject:
			if int64(len(data)) > limit || !bytes.HasSuffix(raw, data) || bytes.IndexByte(raw, 0) != len(raw)-len(data)-1 {
				t.Fatalf("%q gave %q", raw, data)
			}
		}
	})
}

// FuzzPackEntry resolves an entry of a crafted pack (the fuzzer's bytes after a pack
// header): no panic, no result larger than the limit, and no more than a bounded
// amount of memory per resolution.
func FuzzPackEntry(f *testing.F) {
	chain := deltaChain(packBlob, 3, func(i int) []byte { return bytes.Repeat([]byte{'a' + byte(i)}, 40) }, false)
	var body bytes.Buffer
	offs := []int64{}
	for i, o := range chain {
		offs = append(offs, int64(12+body.Len()))
		body.Write(packHeader(o.typ, o.size))
		if o.typ == packOfsDelta {
			body.Write(ofsEncode(offs[i] - offs[o.base]))
		}
		body.Write(o.z)
	}
	f.Add(body.Bytes(), uint16(offs[3]-12))
	f.Add([]byte{0x30 | 0x0f, 0x78, 0x9c}, uint16(0))
	f.Fuzz(func(t *testing.T, entries []byte, at uint16) {
		data := append(append([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x01"), entries...), make([]byte, packTrailer)...)
		p := &packFile{name: "fuzz", pack: nopCloser{bytes.NewReader(data)}, idx: nopCloser{bytes.NewReader(nil)}, packSize: int64(len(data))}
		off := int64(12) + int64(at)
		if off >= p.packSize-packTrailer {
			return
		}
		s := &objectStore{}
		_, out, err := s.resolve(p, plumbing.ZeroHash, off, plumbing.BlobObject, 1<<16)
		if err == nil && len(out) > 1<<16 {
			t.Fatalf("a result of %d bytes over the limit", len(out))
		}
	})
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
