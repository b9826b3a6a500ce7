package gateway

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// FuzzParsePointer: no panic; a parsed pointer renders back to its input, and every
// Lookup either finds a value or does not.
func FuzzParsePointer(f *testing.F) {
	for _, s := range []string{"", "/", "/a", "/a~0b~1c", "/~", "/a/0", "x", "/\x00"} {
		f.Add(s, `{"a":{"b":[1,"x"]},"":{"~/":true}}`)
	}
	f.Fuzz(func(t *testing.T, ptr, doc string) {
		p, err := ParsePointer(ptr)
		if err != nil {
			if p != nil {
				t.Fatal("a partial pointer beside the error")
			}
			return
		}
		if p.String() != ptr {
			t.Fatalf("round trip %q → %q", ptr, p.String())
		}
		if v, err := DecodeArguments([]byte(doc)); err == nil {
			p.Lookup(v)
		}
	})
}

// FuzzResolve: a template resolves to canonical segments only, or refuses; never both.
func FuzzResolve(f *testing.F) {
	f.Add(`{"owner":"acme","repo":"app","path":"src/main.go"}`, "/")
	f.Add(`{"owner":"a","repo":"..","path":"x"}`, "/")
	f.Add(`{"owner":1e3,"repo":"b","path":"a//b"}`, ".")
	f.Add(`{"owner":"a","repo":"b","path":" x/y "}`, "/")
	f.Fuzz(func(t *testing.T, args, sep string) {
		if sep == "" {
			sep = "/"
		}
		m := &ToolMap{Namespace: "github", Path: []Elem{{Arg: ptrOf("/owner")}, {Arg: ptrOf("/repo")}, {Literal: "contents"}, {Arg: ptrOf("/path"), Split: sep}}}
		v, err := DecodeArguments([]byte(args))
		if err != nil {
			return
		}
		path, err := m.Resolve(v)
		if err != nil {
			if path != nil {
				t.Fatal("a partial path beside the error")
			}
			return
		}
		if err := kernel.ValidatePath(path); err != nil {
			t.Fatalf("resolved a non-canonical path %q: %v", path, err)
		}
		if len(path) < 4 || path[2] != "contents" {
			t.Fatalf("path %q lost the template's shape", path)
		}
	})
}

func ptrOf(s string) *Pointer { p, _ := ParsePointer(s); return &p }

// FuzzParseConfig: no panic; an error is one line with the file name and no partial
// config; a parsed config holds only valid servers (ids, namespaces, literal segments,
// exactly one transport, credentials by reference).
func FuzzParseConfig(f *testing.F) {
	f.Add(goodConfig)
	f.Add("mcpServers:\n  - id: a\n    command: [x]\n    env: {T: abc}\n")
	f.Add("- id: a\n  url: https://h/\n  headers: {A: {fromFile: ~/t}}\n")
	f.Add("mcpServers:\n  - id: a\n    command: [x]\n    tools:\n      t: {action: read, resource: {path: [.., {arg: /a, split: ''}]}}\n")
	f.Fuzz(func(t *testing.T, doc string) {
		cfg, err := ParseBytes("/c.yaml", []byte(doc), ParseOptions{Home: "/h"})
		if err != nil {
			if cfg != nil {
				t.Fatal("a partial config beside the error")
			}
			if !strings.HasPrefix(err.Error(), "/c.yaml") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q", err)
			}
			return
		}
		for _, s := range cfg.Servers {
			if !validID(s.ID) || !validID(s.Namespace) || (len(s.Command) > 0) == (s.URL != "") {
				t.Fatalf("invalid server accepted: %+v", s)
			}
			for _, m := range []map[string]Secret{s.Env, s.Headers} {
				for _, sec := range m {
					if (sec.FromEnv == "") == (sec.FromFile == "") {
						t.Fatalf("a credential not by reference: %+v", sec)
					}
				}
			}
			for _, tm := range s.Tools {
				for _, e := range tm.Path {
					if e.Arg == nil && kernel.ValidatePathSegment(e.Literal) != nil {
						t.Fatalf("non-canonical literal %q", e.Literal)
					}
				}
			}
			_ = s.Digest()
		}
		if b, err := json.Marshal(cfg.Namespaces()); err != nil || len(b) == 0 {
			t.Fatal(err)
		}
	})
}

// FuzzAuthorizedIsWhatUpstreamReads: for every argument object, either the call is
// refused invalid_tool_arguments, or the resource the template resolved is exactly what
// each reference reader of the forwarded arguments reads: encoding/json into a Go struct
// (keys matched case-insensitively, the id into int64 and into float64) and a
// json.Number decode (keys matched exactly).
func FuzzAuthorizedIsWhatUpstreamReads(f *testing.F) {
	for _, s := range []string{
		`{"owner":"acme","repo":"app","id":7}`,
		`{"owner":"acme","repo":"app","Repo":"secret","id":1}`,
		`{"owner":"acme","repo":"app","id":9007199254740993}`,
		`{"owner":"acme","repo":"app","id":-0}`,
		`{"owner":"acme","repo":"app","id":1e3}`,
		`{"owner":"acme","repo":"app","id":"12"}`,
		`{"owner":"acme","repo":"a\u0070p","id":1,"ID":2}`,
		`{"owner":"acme","repo":"app","id":9223372036854775807}`,
		`{"\u212aey":"x","owner":"a","repo":"b","id":3}`,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, args string, int64Mode bool) {
		mode := NumberSafe
		if int64Mode {
			mode = NumberInt64
		}
		e := &Entry{schema: &lazySchema{doc: map[string]any{"type": "object"}},
			mapping: &ToolMap{Namespace: "db", Path: []Elem{{Arg: ptrOf("/owner")}, {Arg: ptrOf("/repo")}, {Arg: ptrOf("/id"), Number: mode}}}}
		parsed, err := e.parse(json.RawMessage(args))
		if err != nil {
			return
		}
		pc := parsed.(*parsedCall)
		if len(pc.path) != 3 {
			t.Fatalf("path %q", pc.path)
		}
		// a Go upstream: encoding/json into a struct
		var st struct {
			Owner, Repo string
			ID          json.RawMessage
		}
		if err := json.Unmarshal(pc.raw, &st); err != nil {
			t.Fatalf("forwarded arguments %s do not decode: %v", pc.raw, err)
		}
		if st.Owner != pc.path[0] || st.Repo != pc.path[1] {
			t.Fatalf("authorized %q, a struct-decoding upstream reads %s/%s (forwarded %s)", pc.path, st.Owner, st.Repo, pc.raw)
		}
		var idStr string
		if json.Unmarshal(st.ID, &idStr) == nil {
			if idStr != pc.path[2] {
				t.Fatalf("authorized id %q, upstream reads %q", pc.path[2], idStr)
			}
		} else {
			var i64 int64
			if err := json.Unmarshal(st.ID, &i64); err != nil || strconv.FormatInt(i64, 10) != pc.path[2] {
				t.Fatalf("authorized id %q, an int64 reader reads %d (%v)", pc.path[2], i64, err)
			}
			var f64 float64
			if err := json.Unmarshal(st.ID, &f64); err != nil {
				t.Fatal(err)
			}
			if mode == NumberSafe && strconv.FormatFloat(f64, 'f', -1, 64) != pc.path[2] {
				t.Fatalf("authorized id %q, a float64 reader reads %v", pc.path[2], f64)
			}
		}
		// an exact-key reader of the forwarded bytes
		var m map[string]any
		d := json.NewDecoder(strings.NewReader(string(pc.raw)))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatal(err)
		}
		for i, k := range []string{"owner", "repo", "id"} {
			var got string
			switch v := m[k].(type) {
			case string:
				got = v
			case json.Number:
				got = string(v)
			}
			if got != pc.path[i] {
				t.Fatalf("authorized %q, the forwarded %s has %s=%v", pc.path, pc.raw, k, m[k])
			}
		}
	})
}
