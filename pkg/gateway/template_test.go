package gateway

import (
	"reflect"
	"strings"
	"testing"
)

func TestParsePointer(t *testing.T) {
	cases := []struct {
		in   string
		want Pointer
		err  bool
	}{
		{"", Pointer{}, false},
		{"/", Pointer{""}, false},
		{"/owner", Pointer{"owner"}, false},
		{"/a/b", Pointer{"a", "b"}, false},
		{"/a~1b", Pointer{"a/b"}, false},
		{"/m~0n", Pointer{"m~n"}, false},
		{"/~01", Pointer{"~1"}, false},
		{"owner", nil, true},
		{"/a~", nil, true},
		{"/a~2", nil, true},
	}
	for _, c := range cases {
		got, err := ParsePointer(c.in)
		if (err != nil) != c.err || (!c.err && !reflect.DeepEqual(got, c.want)) {
			t.Errorf("ParsePointer(%q) = %q, %v", c.in, got, err)
		}
		if err == nil && got.String() != c.in {
			t.Errorf("String(%q) = %q", c.in, got.String())
		}
	}
}

func TestLookup(t *testing.T) {
	doc, err := DecodeArguments([]byte(`{"a":{"b":[10,"x",{"c":1}]},"":"empty","a/b":"slash"}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		ptr  string
		want any
		ok   bool
	}{
		{"/a/b/1", "x", true},
		{"/a/b/2/c", "1", true},
		{"/", "empty", true},
		{"/a~1b", "slash", true},
		{"/a/b/3", nil, false},
		{"/a/b/01", nil, false},
		{"/a/b/-", nil, false},
		{"/a/b/+1", nil, false},
		{"/a/x", nil, false},
		{"/a/b/1/z", nil, false},
	}
	for _, c := range cases {
		p, _ := ParsePointer(c.ptr)
		v, ok := p.Lookup(doc)
		if ok != c.ok || (ok && stringOf(v) != c.want) {
			t.Errorf("Lookup(%s) = %v, %v", c.ptr, v, ok)
		}
	}
}

func stringOf(v any) any {
	if s, ok := v.(interface{ String() string }); ok {
		return s.String()
	}
	return v
}

func ptr(s string) *Pointer { p, _ := ParsePointer(s); return &p }

func TestResolve(t *testing.T) {
	m := &ToolMap{Namespace: "github", Path: []Elem{{Arg: ptr("/owner")}, {Arg: ptr("/repo")}, {Literal: "contents"}, {Arg: ptr("/path"), Split: "/"}}}
	num := &ToolMap{Path: []Elem{{Arg: ptr("/n")}}}
	fs := &ToolMap{Path: []Elem{{Arg: ptr("/path"), Split: "/", Root: "/srv/p"}}}
	slash := &ToolMap{Path: []Elem{{Arg: ptr("/path"), Split: "/", Root: "/"}}}
	num64 := &ToolMap{Path: []Elem{{Arg: ptr("/n"), Number: NumberInt64}}}
	cases := []struct {
		m    *ToolMap
		args string
		want []string
		err  string
	}{
		{m, `{"owner":"acme","repo":"app","path":"src/main.go"}`, []string{"acme", "app", "contents", "src", "main.go"}, ""},
		{m, `{"owner":"acme","repo":"app","path":"README"}`, []string{"acme", "app", "contents", "README"}, ""},
		{m, `{"owner":"acme","repo":"app"}`, nil, "argument /path is required"},
		{m, `{"owner":"acme","repo":"app","path":"a//b"}`, nil, `"a//b" has an empty name (a doubled or trailing "/"); paths are relative`},
		{m, `{"owner":"acme","repo":"app","path":"/a"}`, nil, `got the absolute path "/a"; paths are relative (to the directory the server serves)`},
		{m, `{"owner":"acme","repo":"app","path":"a/"}`, nil, `"a/" has an empty name`},
		{m, `{"owner":"acme","repo":"app","path":""}`, nil, `got an empty path; paths are relative`},
		// with a root: the absolute form the upstream hands out, under the root only
		{fs, `{"path":"/srv/p/src/main.go"}`, []string{"src", "main.go"}, ""},
		{fs, `{"path":"src/main.go"}`, []string{"src", "main.go"}, ""},
		{fs, `{"path":"/srv/p"}`, []string{}, ""},
		{fs, `{"path":"/srv/pother/x"}`, nil, `got "/srv/pother/x", which is outside /srv/p; paths are relative to /srv/p or absolute under it`},
		{fs, `{"path":"/etc/passwd"}`, nil, `which is outside /srv/p`},
		{fs, `{"path":"/srv/p/../etc"}`, nil, `has the piece "..", which cannot name a resource`},
		{fs, `{"path":"/srv/p//x"}`, nil, `has an empty name`},
		{fs, `{"path":"/srv/p/"}`, nil, `got an empty path`},
		{slash, `{"path":"/a/b"}`, []string{"a", "b"}, ""},
		{slash, `{"path":"//a"}`, nil, `has an empty name`},
		{m, `{"owner":"acme","repo":"app","path":"a/../b"}`, nil, "traversal marker"},
		{m, `{"owner":"acme","repo":"..","path":"x"}`, nil, "traversal marker"},
		{m, `{"owner":"acme","repo":" app","path":"x"}`, nil, "white space"},
		{m, `{"owner":"acme","repo":"a\\b","path":"x"}`, nil, "separator"},
		{m, `{"owner":"acme","repo":"a\u0001","path":"x"}`, nil, "control character"},
		{m, `{"owner":"acme","repo":"","path":"x"}`, nil, "1 to 256"},
		{m, `{"owner":"acme/evil","repo":"app","path":"x"}`, nil, "separator"},
		{m, `{"owner":true,"repo":"app","path":"x"}`, nil, "must be a string or a number"},
		{m, `{"owner":null,"repo":"app","path":"x"}`, nil, "must be a string or a number"},
		{m, `{"owner":["a"],"repo":"app","path":"x"}`, nil, "must be a string or a number"},
		{m, `{"owner":{"a":1},"repo":"app","path":"x"}`, nil, "must be a string or a number"},
		{num, `{"n":42}`, []string{"42"}, ""},
		{num, `{"n":-7}`, []string{"-7"}, ""},
		{num, `{"n":0}`, []string{"0"}, ""},
		// a number becomes a segment from its exact JSON text, or is refused
		{num, `{"n":42.0}`, nil, "without a fraction or an exponent"},
		{num, `{"n":1.0}`, nil, "without a fraction or an exponent"},
		{num, `{"n":1e3}`, nil, "without a fraction or an exponent"},
		{num, `{"n":1E3}`, nil, "without a fraction or an exponent"},
		{num, `{"n":-1.5e3}`, nil, "without a fraction or an exponent"},
		{num, `{"n":1e400}`, nil, "without a fraction or an exponent"},
		{num, `{"n":-0}`, nil, "negative zero"},
		// around 2^53: float64 readers round 2^53+1 to 2^53
		{num, `{"n":9007199254740991}`, []string{"9007199254740991"}, ""},
		{num, `{"n":-9007199254740991}`, []string{"-9007199254740991"}, ""},
		{num, `{"n":9007199254740992}`, nil, "outside ±9007199254740991"},
		{num, `{"n":9007199254740993}`, nil, "outside ±9007199254740991"},
		{num, `{"n":-9007199254740992}`, nil, "outside ±9007199254740991"},
		{num64, `{"n":9007199254740992}`, []string{"9007199254740992"}, ""},
		{num64, `{"n":9007199254740993}`, []string{"9007199254740993"}, ""},
		// around 2^63 and 2^64
		{num64, `{"n":9223372036854775807}`, []string{"9223372036854775807"}, ""},
		{num64, `{"n":-9223372036854775808}`, []string{"-9223372036854775808"}, ""},
		{num64, `{"n":9223372036854775808}`, nil, "not a 64-bit integer"},
		{num64, `{"n":-9223372036854775809}`, nil, "not a 64-bit integer"},
		{num, `{"n":18446744073709551615}`, nil, "not a 64-bit integer"},
		{num64, `{"n":18446744073709551616}`, nil, "not a 64-bit integer"},
		{num64, `{"n":1.0}`, nil, "without a fraction or an exponent"},
		{num64, `{"n":-0}`, nil, "negative zero"},
		{&ToolMap{Path: []Elem{{Arg: ptr("/p"), Split: "/"}}}, `{"p":"` + strings.Repeat("a/", 64) + `a"}`, nil, "at most 64"},
	}
	for _, c := range cases {
		args, err := DecodeArguments([]byte(c.args))
		if err != nil {
			t.Fatalf("%s: %v", c.args, err)
		}
		got, err := c.m.Resolve(args)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Resolve(%s) = %q, %v; want error %q", c.args, got, err, c.err)
			}
			if got != nil {
				t.Errorf("Resolve(%s): a partial path beside the error", c.args)
			}
		case err != nil || !reflect.DeepEqual(got, c.want):
			t.Errorf("Resolve(%s) = %q, %v; want %q", c.args, got, err, c.want)
		}
	}
}

func TestDecodeArguments(t *testing.T) {
	for _, bad := range []string{``, `[]`, `"x"`, `{"a":1} {}`, `{`, `null`, `{"repo":"app","repo":"other"}`, `{"a":{"b":1,"b":2}}`, `{"a":[{"c":1,"c":1}]}`,
		// keys equal under case folding: a Go upstream's struct decoding reads either
		`{"owner":"acme","repo":"app","Repo":"secret"}`, `{"repo":"app","REPO":"x"}`,
		`{"key":"a","\u212aey":"b"}`, // the Kelvin sign folds to k
		`{"Straße":1,"STRASSE":2,"strasse":3}`,
		`{"a":{"id":1,"ID":2}}`, `{"a":[{"x":1},{"name":1,"Name":2}]}`} {
		if v, err := DecodeArguments([]byte(bad)); err == nil {
			t.Errorf("DecodeArguments(%q) = %v", bad, v)
		}
	}
	for _, good := range []string{`{"repo":"app","repos":"x"}`, `{"a":{"id":1},"A1":{"id":2}}`, `{"ß":1,"ss":2}`} {
		if _, err := DecodeArguments([]byte(good)); err != nil {
			t.Errorf("DecodeArguments(%q): %v", good, err)
		}
	}
	v, err := DecodeArguments([]byte(`{"a":{"Id":1}, "b":[{"id":2}], "x":"<&>"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := checkFoldedKeys(v, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeArguments([]byte(`{"a":{"Id":1,"iD":2}}`)); err == nil || !strings.Contains(err.Error(), `"Id" and "iD" at /a differ only by letter case`) {
		t.Errorf("nested folded keys: %v", err)
	}
}

// EncodeArguments forwards the decoded value: exact number text, HTML characters as
// they are, and the caller's formatting gone.
func TestEncodeArguments(t *testing.T) {
	v, err := DecodeArguments([]byte(` { "n" : 9007199254740993, "f": 2.50, "s":"<\u0041&>" , "a":[1, {"b":null}] } `))
	if err != nil {
		t.Fatal(err)
	}
	got, err := EncodeArguments(v)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"a":[1,{"b":null}],"f":2.50,"n":9007199254740993,"s":"<A&>"}`; string(got) != want {
		t.Errorf("EncodeArguments = %s, want %s", got, want)
	}
	// a lone surrogate: Go reads U+FFFD where a JavaScript server would keep the
	// surrogate; the forwarded bytes say what the template read
	v, err = DecodeArguments([]byte(`{"repo":"a\ud800"}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ = EncodeArguments(v)
	if want := "{\"repo\":\"a\ufffd\"}"; string(got) != want {
		t.Errorf("EncodeArguments = %q, want %q", got, want)
	}
}
