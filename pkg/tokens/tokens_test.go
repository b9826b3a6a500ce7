package tokens

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

const hashA = "9f2c000000000000000000000000000000000000000000000000000000000001"
const hashB = "9f2c000000000000000000000000000000000000000000000000000000000002"

const valid = `# operators' tokens
version: 1
tokens:
  - id: alice-laptop   # Alice's laptop
    sha256: ` + hashA + `
    context: {actor: agent:helper, owner: human:alice, authority: human:alice, world: default, purpose: triage}
    grants: [grants/alice.yaml, /abs/b.yaml]
    expiresAt: 2027-01-01T00:00:00Z
  # the CI bot
  - id: ci
    sha256: ` + hashB + `
    context:
      actor: service:ci
`

func TestParseValid(t *testing.T) {
	f, err := Parse("/etc/sharedos/tokens.yaml", []byte(valid))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Entries) != 2 {
		t.Fatalf("entries %+v", f.Entries)
	}
	a := f.Entries[0]
	if a.ID != "alice-laptop" || a.SHA256 != hashA || a.Line != 4 || a.Context.Actor.String() != "agent:helper" ||
		a.Context.Owner.String() != "human:alice" || a.Context.Authority.String() != "human:alice" ||
		a.Context.World != "default" || a.Context.Purpose != "triage" {
		t.Fatalf("entry %+v", a)
	}
	if want := []string{"/etc/sharedos/grants/alice.yaml", "/abs/b.yaml"}; strings.Join(a.Grants, ",") != strings.Join(want, ",") {
		t.Fatalf("grants %v, want %v (relative to the tokens file)", a.Grants, want)
	}
	if !a.ExpiresAt.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("expiresAt %v", a.ExpiresAt)
	}
	b := f.Entries[1]
	if b.Context.Owner != nil || b.Context.Authority != nil || b.Grants != nil || !b.ExpiresAt.IsZero() {
		t.Fatalf("defaults %+v", b)
	}
	for _, src := range []string{"version: 1\n", "version: 1\ntokens:\n", "version: 1\ntokens: []\n"} {
		f, err := Parse("t.yaml", []byte(src))
		if err != nil || len(f.Entries) != 0 {
			t.Fatalf("%q: %v %v", src, f, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	entry := func(extra string) string {
		return "version: 1\ntokens:\n  - id: a\n    sha256: " + hashA + "\n    context: {actor: agent:x}\n" + extra
	}
	for _, tc := range []struct{ name, src, want string }{
		{"empty", "", "t.yaml:1: tokens file is empty"},
		{"not a mapping", "- a\n", "t.yaml:1: a tokens file is a mapping"},
		{"no version", "tokens: []\n", "t.yaml:1: version is missing"},
		{"version 2", "version: 2\n", "t.yaml:1: version must be 1"},
		{"version string", "version: \"1\"\n", "t.yaml:1: version must be 1"},
		{"unknown key", "version: 1\nextra: 1\n", `t.yaml:2: unknown key "extra"`},
		{"duplicate key", "version: 1\nversion: 1\n", `t.yaml:2: key "version" is given twice (first at line 1)`},
		{"syntax", "version: 1\ntokens: [\n", "t.yaml:"},
		{"invalid utf8", "version: 1\n# \xff\n", "t.yaml:2: tokens file is not valid UTF-8"},
		{"two documents", "version: 1\n---\nversion: 1\n", "one YAML document"},
		{"tokens not list", "version: 1\ntokens: {}\n", "t.yaml:2: tokens must be a list"},
		{"item not mapping", "version: 1\ntokens:\n  - x\n", "t.yaml:3: a token is a mapping"},
		{"bad id", strings.Replace(entry(""), "id: a", "id: 'a b'", 1), `t.yaml:3: id must be`},
		{"bad sha", strings.Replace(entry(""), hashA, "ABC", 1), `t.yaml:4: token "a": sha256 must be 64 lowercase hex digits`},
		{"upper sha", strings.Replace(entry(""), hashA, strings.ToUpper(hashA), 1), `sha256 must be 64 lowercase`},
		{"no sha", "version: 1\ntokens:\n  - id: a\n    context: {actor: agent:x}\n", `t.yaml:3: token "a": sha256 is missing`},
		{"no id", "version: 1\ntokens:\n  - sha256: " + hashA + "\n    context: {actor: agent:x}\n", `t.yaml:3: id is missing`},
		{"no context", "version: 1\ntokens:\n  - id: a\n    sha256: " + hashA + "\n", `token "a": context is missing`},
		{"no actor", strings.Replace(entry(""), "actor: agent:x", "owner: human:x", 1), `t.yaml:5: token "a": context.actor is missing`},
		{"bad actor", strings.Replace(entry(""), "agent:x", "robot:x", 1), `t.yaml:5: token "a": context.actor: "robot:x" is not an address`},
		{"bad owner", strings.Replace(entry(""), "actor: agent:x", "actor: agent:x, owner: nobody", 1), `context.owner: "nobody" is not an address`},
		{"context key", strings.Replace(entry(""), "actor: agent:x", "actor: agent:x, grants: x", 1), `unknown key context.grants`},
		{"context dup", strings.Replace(entry(""), "actor: agent:x", "actor: agent:x, actor: agent:y", 1), `context.actor is given twice`},
		{"world space", strings.Replace(entry(""), "actor: agent:x", "actor: agent:x, world: ' w'", 1), `context.world must be`},
		{"purpose long", strings.Replace(entry(""), "actor: agent:x", "actor: agent:x, purpose: "+strings.Repeat("p", 513), 1), `context.purpose must be`},
		{"context not map", strings.Replace(entry(""), "{actor: agent:x}", "agent:x", 1), `context must be a mapping`},
		{"grants scalar", entry("    grants: g.yaml\n"), `t.yaml:6: token "a": grants must be a list`},
		{"grants empty item", entry("    grants: ['']\n"), `t.yaml:6: token "a": grants must be a list`},
		{"expires bad", entry("    expiresAt: tomorrow\n"), `t.yaml:6: token "a": expiresAt must be an RFC 3339`},
		{"expires no offset", entry("    expiresAt: 2027-01-01T00:00:00\n"), `expiresAt must be an RFC 3339`},
		{"unknown entry key", entry("    token: secret\n"), `t.yaml:6: token "a": unknown key "token"`},
		{"dup entry key", entry("    sha256: " + hashB + "\n"), `t.yaml:6: token "a": key "sha256" is given twice (first at line 4)`},
		{"dup id", entry("  - id: a\n    sha256: " + hashB + "\n    context: {actor: agent:y}\n"), `t.yaml:6: token "a": id is given twice (first at line 3)`},
		{"dup hash", entry("  - id: b\n    sha256: " + hashA + "\n    context: {actor: agent:y}\n"), `t.yaml:6: token "b": sha256 is the same as the token's at line 3`},
		{"too large", "version: 1\n#" + strings.Repeat("x", MaxFileSize), "larger than 1 MiB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse("t.yaml", []byte(tc.src))
			if err == nil || f != nil {
				t.Fatalf("accepted: %+v", f)
			}
			var te *Error
			if !errors.As(err, &te) {
				t.Fatalf("%T", err)
			}
			if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q, want it to contain %q on one line", err, tc.want)
			}
		})
	}
}

func TestLookupAndExpiry(t *testing.T) {
	tokA, tokB := "sharedos_a", "sharedos_b"
	src := "version: 1\ntokens:\n  - id: a\n    sha256: " + Hash(tokA) + "\n    context: {actor: agent:a}\n    expiresAt: 2027-01-01T00:00:00Z\n" +
		"  - id: b\n    sha256: " + Hash(tokB) + "\n    context: {actor: agent:b}\n"
	f, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if e := f.Lookup(tokA); e == nil || e.ID != "a" {
		t.Fatalf("lookup a: %+v", e)
	}
	if e := f.Lookup(tokB); e == nil || e.ID != "b" {
		t.Fatalf("lookup b: %+v", e)
	}
	for _, bad := range []string{"", "sharedos_c", Hash(tokA), tokA + " "} {
		if e := f.Lookup(bad); e != nil {
			t.Fatalf("lookup %q matched %s", bad, e.ID)
		}
	}
	a := f.Get("a")
	if a.Expired(time.Date(2026, 12, 31, 23, 59, 59, 0, time.UTC)) || !a.Expired(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatal("expiry is at expiresAt")
	}
	if f.Get("b").Expired(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatal("no expiresAt never expires")
	}
}

func TestNew(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := New()
	if a == b || !strings.HasPrefix(a, Prefix) || len(a) != len(Prefix)+43 {
		t.Fatalf("tokens %q %q", a, b)
	}
}

func addr(s string) kernel.Address {
	a, err := kernel.ParseAddress(s)
	if err != nil {
		panic(err)
	}
	return a
}

func TestAppendRemoveKeepBytes(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "tokens.yaml")
	// a new file
	must(t, Append(p, NewEntry{ID: "one", SHA256: hashA, Context: Context{Actor: addr("agent:helper")}}))
	info, err := os.Stat(p)
	must(t, err)
	if info.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", info.Mode())
	}
	f, err := Load(p)
	must(t, err)
	if len(f.Entries) != 1 || f.Entries[0].ID != "one" {
		t.Fatalf("%+v", f.Entries)
	}

	// an existing file with comments and another key after tokens is kept byte for byte
	src := "# header comment\nversion: 1   # the version\ntokens:\n    - id: first  # keep me\n      sha256: " + hashA +
		"\n      context: {actor: agent:x}\n    # between\n"
	must(t, os.WriteFile(p, []byte(src), 0o640))
	must(t, os.Chmod(p, 0o640))
	owner := addr("human:alice")
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	must(t, Append(p, NewEntry{ID: "second", SHA256: hashB, Context: Context{Actor: addr("agent:y"), Owner: &owner, World: "w", Purpose: "needs: quoting #here"},
		Grants: []string{"g/a.yaml", "with space.yaml"}, ExpiresAt: exp}))
	got, _ := os.ReadFile(p)
	if !strings.HasPrefix(string(got), src) {
		t.Fatalf("existing bytes changed:\n%s", got)
	}
	f, err = Load(p)
	must(t, err)
	s := f.Get("second")
	if len(f.Entries) != 2 || s == nil || s.Context.Purpose != "needs: quoting #here" || s.Context.Owner.String() != "human:alice" ||
		!s.ExpiresAt.Equal(exp) || s.Grants[1] != filepath.Join(dir, "with space.yaml") {
		t.Fatalf("%+v", f.Entries)
	}
	if info, _ := os.Stat(p); info.Mode().Perm() != 0o640 {
		t.Fatalf("mode not kept: %v", info.Mode())
	}

	// a duplicate id is refused and nothing changes
	before, _ := os.ReadFile(p)
	err = Append(p, NewEntry{ID: "second", SHA256: strings.Repeat("c", 64), Context: Context{Actor: addr("agent:z")}})
	if !errors.Is(err, ErrDuplicate) {
		t.Fatalf("duplicate: %v", err)
	}
	err = Append(p, NewEntry{ID: "third", SHA256: hashB, Context: Context{Actor: addr("agent:z")}})
	if err == nil || !strings.Contains(err.Error(), "same sha256") {
		t.Fatalf("same hash: %v", err)
	}
	after, _ := os.ReadFile(p)
	if string(after) != string(before) {
		t.Fatal("a refused append changed the file")
	}

	// remove the first: the rest is byte-identical
	must(t, Remove(p, "first"))
	got, _ = os.ReadFile(p)
	if strings.Contains(string(got), "first") || !strings.HasPrefix(string(got), "# header comment\nversion: 1   # the version\ntokens:\n    - id: second\n") {
		t.Fatalf("after remove:\n%s", got)
	}
	if err := Remove(p, "first"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("remove again: %v", err)
	}
	must(t, Remove(p, "second"))
	f, err = Load(p)
	must(t, err)
	if len(f.Entries) != 0 {
		t.Fatalf("%+v", f.Entries)
	}
	// and append to the now empty list
	must(t, Append(p, NewEntry{ID: "again", SHA256: hashA, Context: Context{Actor: addr("agent:x")}}))
	f, err = Load(p)
	must(t, err)
	if len(f.Entries) != 1 {
		t.Fatalf("%+v", f.Entries)
	}
}

func TestAppendShapes(t *testing.T) {
	for _, tc := range []struct{ name, src, refuse string }{
		{"no tokens key", "version: 1\n", ""},
		{"no trailing newline", "version: 1\ntokens: []", ""},
		{"empty flow", "version: 1\ntokens: [] # none yet\n", ""},
		{"null", "version: 1\ntokens: ~\n", ""},
		{"bare key then other key", "tokens:\nversion: 1\n", ""},
		{"tokens before version", "tokens:\n  - id: x\n    sha256: " + hashB + "\n    context: {actor: agent:x}\nversion: 1\n", ""},
		{"crlf", "version: 1\r\ntokens:\r\n  - id: x\r\n    sha256: " + hashB + "\r\n    context: {actor: agent:x}\r\n", ""},
		{"flow with items", "version: 1\ntokens: [{id: x, sha256: " + hashB + ", context: {actor: agent:x}}]\n", "flow list"},
		{"invalid", "version: 2\n", "version must be 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tokens.yaml")
			must(t, os.WriteFile(p, []byte(tc.src), 0o600))
			err := Append(p, NewEntry{ID: "new", SHA256: hashA, Context: Context{Actor: addr("agent:n")}})
			got, _ := os.ReadFile(p)
			if tc.refuse != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refuse) {
					t.Fatalf("err %v, want %q", err, tc.refuse)
				}
				if string(got) != tc.src {
					t.Fatal("a refused append changed the file")
				}
				return
			}
			must(t, err)
			f, err := Load(p)
			must(t, err)
			if f.Get("new") == nil {
				t.Fatalf("not appended:\n%s", got)
			}
			if strings.Contains(tc.src, "\r\n") && strings.Count(string(got), "\n") != strings.Count(string(got), "\r\n") {
				t.Fatalf("line breaks not kept:\n%q", got)
			}
		})
	}
}

func TestAppendRefusals(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.yaml")
	for _, e := range []NewEntry{
		{ID: "bad id", SHA256: hashA, Context: Context{Actor: addr("agent:x")}},
		{ID: "", SHA256: hashA, Context: Context{Actor: addr("agent:x")}},
		{ID: "ok", SHA256: "nothex", Context: Context{Actor: addr("agent:x")}},
	} {
		if err := Append(p, e); err == nil {
			t.Fatalf("accepted %+v", e)
		}
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("a refused append created the file")
		}
	}
	if err := Remove(p, "x"); err == nil {
		t.Fatal("remove from a missing file")
	}
}

func TestWatcher(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.yaml")
	w := NewWatcher(p)
	if _, err := w.Current(); err == nil {
		t.Fatal("missing file accepted")
	}
	must(t, Append(p, NewEntry{ID: "a", SHA256: Hash("tok-a"), Context: Context{Actor: addr("agent:a")}}))
	f, err := w.Current()
	must(t, err)
	if f.Lookup("tok-a") == nil {
		t.Fatal("not loaded")
	}
	must(t, Remove(p, "a"))
	f, err = w.Current()
	must(t, err)
	if f.Lookup("tok-a") != nil {
		t.Fatal("revocation not seen on the next call")
	}
	must(t, os.WriteFile(p, []byte("version: 3\n"), 0o600))
	if f, err := w.Current(); err == nil || f != nil {
		t.Fatal("broken file accepted")
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzParse: no panic, a result or an error and never both, an error on one line naming
// the file, and every accepted entry valid (id, hash, actor).
func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte("version: 1\ntokens: []\n"))
	f.Add([]byte("version: 1\ntokens:\n  - id: a\n    sha256: " + hashA + "\n    context: {actor: agent:x}\n    expiresAt: 2027-01-01T00:00:00Z\n"))
	f.Add([]byte("version: 1\n# \xff\n"))
	f.Add([]byte("{version: 1, tokens: [{id: a}]}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data)
		if (file == nil) == (err == nil) {
			t.Fatalf("file %v err %v", file, err)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.yaml") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q", err)
			}
			return
		}
		ids := map[string]bool{}
		for _, e := range file.Entries {
			if !ValidID(e.ID) || !hexPattern().MatchString(e.SHA256) || e.Context.Actor.Validate() != nil || ids[e.ID] {
				t.Fatalf("invalid entry accepted %+v", e)
			}
			ids[e.ID] = true
		}
	})
}

// FuzzAppendRemove: for any file the parser accepts, Append adds exactly the new entry
// after the old ones (or refuses, leaving the file as it was), and Remove of that entry
// gives back exactly the old entries. Never a panic, never a half-written file.
func FuzzAppendRemove(f *testing.F) {
	f.Add([]byte(valid))
	f.Add([]byte("version: 1\n"))
	f.Add([]byte("version: 1\ntokens: [] # none\n"))
	f.Add([]byte("tokens:\n- id: x\n  sha256: " + hashB + "\n  context: {actor: agent:x}\nversion: 1\n"))
	f.Add([]byte("version: 1\r\ntokens:\r\n  - id: x\r\n    sha256: " + hashB + "\r\n    context: {actor: agent:x}\r\n"))
	f.Add([]byte("version: 1\ntokens: [{id: x, sha256: " + hashB + ", context: {actor: agent:x}}]\n"))
	dir := f.TempDir()
	n := 0
	f.Fuzz(func(t *testing.T, data []byte) {
		n++
		p := filepath.Join(dir, fmt.Sprintf("t%d.yaml", n))
		old, err := Parse(p, data)
		if err != nil {
			return
		}
		must(t, os.WriteFile(p, data, 0o600))
		e := NewEntry{ID: "fuzz-new", SHA256: strings.Repeat("e", 64), Context: Context{Actor: addr("agent:fuzz")}}
		if old.Get(e.ID) != nil {
			return
		}
		if err := Append(p, e); err != nil {
			if got, _ := os.ReadFile(p); string(got) != string(data) {
				t.Fatalf("a refused append changed the file: %v", err)
			}
			return
		}
		mid, err := Load(p)
		if err != nil {
			t.Fatalf("appended file does not parse: %v", err)
		}
		if len(mid.Entries) != len(old.Entries)+1 || !sameEntries(mid.Entries[:len(old.Entries)], old.Entries) || mid.Entries[len(old.Entries)].ID != e.ID {
			t.Fatalf("append: %+v, old %+v", mid.Entries, old.Entries)
		}
		if err := Remove(p, e.ID); err != nil {
			t.Fatalf("remove the appended entry: %v", err)
		}
		end, err := Load(p)
		if err != nil || !sameEntries(end.Entries, old.Entries) {
			t.Fatalf("remove: %v %+v, old %+v", err, end, old.Entries)
		}
	})
}

// TestWatcherSameStamp: a rewrite that leaves the stat as it was (same size, inode and
// modification time) within the racy window is still seen on the next call — the
// lock-free path of Current trusts a stat only once its read came 2 s after the
// modification.
func TestWatcherSameStamp(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens.yaml")
	must(t, Append(p, NewEntry{ID: "a", SHA256: Hash("tok-a"), Context: Context{Actor: addr("agent:a")}}))
	fi, err := os.Stat(p)
	must(t, err)
	w := NewWatcher(p)
	for range 2 { // the second call takes the lock-free path
		f, err := w.Current()
		must(t, err)
		if f.Lookup("tok-a") == nil {
			t.Fatal("not loaded")
		}
	}
	data, err := os.ReadFile(p)
	must(t, err)
	same := strings.Replace(string(data), Hash("tok-a"), Hash("tok-b"), 1) // same length
	if len(same) != len(data) || same == string(data) {
		t.Fatal("the rewrite must keep the size")
	}
	must(t, os.WriteFile(p, []byte(same), 0o600)) // in place: same inode
	must(t, os.Chtimes(p, fi.ModTime(), fi.ModTime()))
	f, err := w.Current()
	must(t, err)
	if f.Lookup("tok-a") != nil || f.Lookup("tok-b") == nil {
		t.Fatal("a rewrite within the racy window with an unchanged stat was not seen")
	}
}
