package gateway

import (
	"encoding/json"
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
