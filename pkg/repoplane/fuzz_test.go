package repoplane

import (
	"crypto/sha1"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// FuzzParseArguments feeds arbitrary JSON to every repo tool's parser. It asserts: no
// panic; an error never comes with a result; an accepted call is a JSON object whose
// path and pathspec obey the segment vocabulary (never ".git"-free by accident: .git is
// the provider's refusal, the parser only guarantees canonical segments), whose message
// obeys the message rules, and which re-parses to the same value.
func FuzzParseArguments(f *testing.F) {
	seeds := []string{
		`{"path":[]}`, `{"path":["a","b"]}`, `{"path":[],"staged":true,"pathspec":[["src"],["a","b.go"]]}`,
		`{"path":[],"maxCount":20}`, `{"path":[],"maxCount":1e2}`, `{"path":[],"pathspec":[[".git","config"]]}`,
		`{"path":[],"pathspec":[["..","x"]]}`, `{"path":[],"message":" hi\tthere "}`, `{"path":[],"message":"a\nb"}`,
		`{"path":["\u0000"]}`, `{"path":[" x"]}`, `{"path":[],"pathspec":[[]]}`, `{"path":[],"x":null}`,
		`{"path":[],"message":"\u2028m\u2028"}`, `{"path":[],"maxCount":-0}`, `{"path":[],"pathspec":[["a\\b"]]}`,
		`null`, `[]`, `{"path":[],"path":["x"]}`,
	}
	for _, s := range seeds {
		for i := range 5 {
			f.Add(s, uint8(i))
		}
	}
	hs, err := Tools(&stubProvider{ns: "repo"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, args string, which uint8) {
		h := hs[int(which)%len(hs)]
		got, err := h.ParseArguments(json.RawMessage(args))
		if err != nil {
			if got != nil {
				t.Fatalf("result %#v beside error %v", got, err)
			}
			return
		}
		b, err := json.Marshal(got)
		if err != nil || len(b) == 0 || b[0] != '{' {
			t.Fatalf("not a JSON object: %s %v", b, err)
		}
		path, err := parsedPath(got)
		if err != nil || kernel.ValidatePath(path) != nil {
			t.Fatalf("bad path %q: %v", path, err)
		}
		var ps [][]string
		switch a := got.(type) {
		case DiffArgs:
			ps = a.Pathspec
		case StageArgs:
			ps = a.Pathspec
			if len(ps) == 0 {
				t.Fatal("stage accepted without a pathspec")
			}
		case CommitArgs:
			if a.Message != jscompat.JSTrim(a.Message) || a.Message == "" || jscompat.UTF16Len(a.Message) > 500 ||
				strings.ContainsFunc(a.Message, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
				t.Fatalf("bad message %q", a.Message)
			}
		case LogArgs:
			if a.MaxCount != nil && (*a.MaxCount < 1 || *a.MaxCount > 100) {
				t.Fatalf("bad maxCount %d", *a.MaxCount)
			}
		}
		if len(ps) > 64 {
			t.Fatalf("pathspec of %d entries", len(ps))
		}
		for _, p := range ps {
			if len(p) == 0 || kernel.ValidatePath(p) != nil {
				t.Fatalf("bad pathspec entry %q", p)
			}
		}
		again, err := h.ParseArguments(b)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		b2, _ := json.Marshal(again)
		if string(b2) != string(b) {
			t.Fatalf("re-parse changed %s to %s", b, b2)
		}
	})
}

// FuzzDecodeIndex feeds arbitrary bytes to the index decoder (an index is untrusted
// input). It asserts: no panic; no index beside an error; every accepted entry path is
// valid; and an accepted index survives an encode/decode round trip.
func FuzzDecodeIndex(f *testing.F) {
	base := &gitIndex{version: 2, entries: []*idxEntry{
		{name: "a/b.txt", mode: modeRegular, size: 3, hash: [20]byte{1}},
		{name: "a/c", mode: modeSymlink, hash: [20]byte{2}, ext: extSkipWorktree},
		{name: "d.txt", mode: modeExecutable, hash: [20]byte{3}},
	}, tree: &cacheTree{count: 3, hash: [20]byte{7}, children: []*cacheTree{{name: "a", count: -1}}}}
	f.Add(encodeIndex(base))
	unsum := encodeIndex(base)
	for i := len(unsum) - 20; i < len(unsum); i++ {
		unsum[i] = 0 // index.skipHash: no checksum
	}
	f.Add(unsum)
	f.Add([]byte("DIRC\x00\x00\x00\x04\x00\x00\x00\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		if len(data) >= 32 { // the same bytes with a valid checksum, to reach the structure
			fixed := append([]byte(nil), data...)
			sum := sha1.Sum(fixed[:len(fixed)-20])
			copy(fixed[len(fixed)-20:], sum[:])
			checkDecode(t, fixed)
		}
	})
}

func checkDecode(t *testing.T, data []byte) {
	idx, err := decodeIndex(data)
	if err != nil {
		if idx != nil {
			t.Fatal("index beside an error")
		}
		return
	}
	{
		for _, e := range idx.entries {
			if !validIndexPath(e.name) {
				t.Fatalf("accepted path %q", e.name)
			}
		}
		back, err := decodeIndex(encodeIndex(idx))
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if len(back.entries) != len(idx.entries) {
			t.Fatalf("%d entries became %d", len(idx.entries), len(back.entries))
		}
		for i := range idx.entries {
			if back.entries[i].name != idx.entries[i].name || back.entries[i].hash != idx.entries[i].hash {
				t.Fatalf("entry %d changed", i)
			}
		}
	}
}
