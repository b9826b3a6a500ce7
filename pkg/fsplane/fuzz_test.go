package fsplane

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// fuzzWorld is a root with links and a repository, and an outside directory whose
// content must never show up or change.
func fuzzWorld(f *testing.F) (*Provider, string, string) {
	base := f.TempDir()
	root, outside := filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{root + "/a/b", root + "/.git", outside + "/d"} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(outside+"/secret.txt", []byte(secret), 0o644)
	os.WriteFile(outside+"/d/s.txt", []byte(secret), 0o644)
	os.WriteFile(root+"/a/b/f.txt", []byte("inside"), 0o644)
	os.WriteFile(root+"/.git/config", []byte("GITSECRET"), 0o644)
	os.Symlink(outside, root+"/out")
	os.Symlink("..", root+"/a/up")
	os.Symlink(outside+"/secret.txt", root+"/a/s.txt")
	p, err := NewProvider(root, ProviderOptions{SnapshotDir: filepath.Join(base, "snaps")})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	return p, root, outside
}

func outsideState(outside string) string {
	var sb strings.Builder
	filepath.Walk(outside, func(p string, info os.FileInfo, err error) error {
		if err == nil {
			sb.WriteString(p)
			if info.Mode().IsRegular() {
				b, _ := os.ReadFile(p)
				sb.Write(b)
			}
		}
		return nil
	})
	return sb.String()
}

// FuzzProviderPath feeds arbitrary segment paths to every read action and to create,
// through a non-tool caller: never a panic, never protected content in an output,
// never a change outside the root, and the path rules always win.
func FuzzProviderPath(f *testing.F) {
	p, _, outside := fuzzWorld(f)
	before := outsideState(outside)
	for _, s := range [][3]string{
		{"a", "b", "f.txt"}, {"out", "secret.txt", ""}, {"a", "up", "out"}, {"a", "s.txt", ""}, {"..", "outside", ""},
		{".git", "config", ""}, {".GIT", "", ""}, {"a\x00", "b", ""}, {"a/../..", "", ""}, {"a", "up", "a"},
		{TempPrefix + "x", "", ""}, {"a", "b", strings.Repeat("y", 256)}, {" a", "", ""}, {"\u2028", "x", ""},
		{"a", "b", "new.txt"}, {"out", "d", "s.txt"}, {"c:", "..\\..", ""}, {"a", "b", "f.txt\n"},
	} {
		for a := uint8(0); a < 6; a++ {
			f.Add(s[0], s[1], s[2], a)
		}
	}
	actions := []string{ActionRead, ActionStat, ActionList, ActionGrep, ActionSearch, ActionCreate}
	f.Fuzz(func(t *testing.T, s1, s2, s3 string, a uint8) {
		var path []string
		for _, s := range []string{s1, s2, s3} {
			if s != "" {
				path = append(path, s)
			}
		}
		if path == nil {
			path = []string{}
		}
		action := actions[int(a)%len(actions)]
		var in any
		switch action {
		case ActionGrep:
			in = GrepInput{Pattern: "SECRET", Mode: ModeLiteral}
		case ActionSearch:
			in = SearchInput{Query: "secret"}
		case ActionCreate:
			in = WriteInput{Content: json.RawMessage(`"fuzz"`)}
		}
		rr, err := p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o",
			Resource: kernel.ResourceRef{Namespace: "files", Path: path}, Action: action, Input: in})
		if err != nil {
			t.Fatalf("provider fault: %v", err)
		}
		if rr.Status == kernel.StatusSucceeded {
			if rr.Error != nil {
				t.Fatal("error beside a success")
			}
		} else if rr.Error == nil || rr.Output != nil || rr.Error.Message == "" {
			t.Fatalf("bad failure result %+v", rr)
		}
		if kernel.ValidatePath(path) != nil {
			if rr.Status != kernel.StatusDenied || rr.Error.Code != CodeInvalidPath {
				t.Fatalf("invalid path %q: %s %+v", path, rr.Status, rr.Error)
			}
		} else {
			for _, s := range path {
				if isGitName(s) || isTempName(s) {
					if rr.Status != kernel.StatusDenied || rr.Error.Code != CodeNotPermitted {
						t.Fatalf("protected path %q: %s %+v", path, rr.Status, rr.Error)
					}
				}
			}
		}
		b, _ := json.Marshal(rr.Output)
		if strings.Contains(string(b), secret) || strings.Contains(string(b), "GITSECRET") {
			t.Fatalf("path %q leaked: %s", path, b)
		}
		if outsideState(outside) != before {
			t.Fatalf("path %q changed something outside the root", path)
		}
	})
}

// FuzzParseArguments checks every tool's argument parser: no panic, no partial result
// beside an error, and a parsed value that re-parses to itself (the kernel may hand it
// back as JSON).
func FuzzParseArguments(f *testing.F) {
	hs, _ := Tools(&recorder{ns: "files"})
	seeds := []string{`{"path":["a"]}`, `{"path":[]}`, `{"path":["a"],"query":"q","limit":3}`,
		`{"path":[],"pattern":"x","mode":"regex","caseSensitive":true,"contextBefore":2,"contextAfter":100}`,
		`{"path":["a"],"content":{"k":[1,2.5e3,null]},"metadata":{}}`, `{"path":["a"],"content":"x","expectedVersion":"v"}`,
		`{"path":["a"],"recursive":true}`, `{"path":[],"label":" l "}`, `{"path":["a"],"snapshotId":"s-1"}`,
		`{"path":[".."]}`, `{"path":["a\u0000"]}`, `{"path":["a"],"x":1}`, `{"path":null}`, `[]`, `{"path":["a"],"content":1e999}`,
		`{"path":["a"],"expectedVersion":" v"}`, `{"path":["a"],"limit":1.0}`, `{"path":[" "]}`, `{"path":["a"],"content":"\ud800"}`}
	for i := range hs {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, tool uint8, raw []byte) {
		h := hs[int(tool)%len(hs)]
		v, err := h.ParseArguments(raw)
		if err != nil {
			if v != nil {
				t.Fatal("partial result beside an error")
			}
			return
		}
		a := v.(toolArgs)
		if kernel.ValidatePath(a.argPath()) != nil {
			t.Fatalf("accepted an invalid path %q", a.argPath())
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		v2, err := h.ParseArguments(b)
		if err != nil {
			t.Fatalf("%s: re-parse of %s failed: %v", h.Definition.Name, b, err)
		}
		b2, _ := json.Marshal(v2)
		if string(b) != string(b2) {
			t.Fatalf("%s: not stable: %s vs %s", h.Definition.Name, b, b2)
		}
		if _, err := json.Marshal(a.providerInput()); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzGrep compares the fast line matcher with the naive one (split into lines, match
// each) for any pattern, text, mode and case flag.
func FuzzGrep(f *testing.F) {
	for _, s := range []struct {
		pat, text string
		regex, cs bool
	}{
		{"ships", "a\nships\nShips", false, false}, {"K", "\u212a\nk\nK", false, false}, {"s", "\u017f", true, false},
		{`^a$`, "a\nab\n\na", true, true}, {`\Aa`, "ba\na", true, false}, {`a\z`, "ab\na\n", true, true},
		{`\w+\s\w+`, "foo\nbar baz", true, false}, {"x*", "\n\n", true, false}, {"é", "É\né", false, false},
		{`(?s)a.b`, "a\nb\naxb", true, true}, {"a\nb", "a\nb", false, true}, {`[^a]`, "a\n", true, false},
		{`(?i)k`, "\u212a", true, true}, {"aé", "AÉ", false, false}, {`\bfoo\b`, "foo\nxfoo", true, false},
	} {
		f.Add(s.pat, s.text, s.regex, s.cs)
	}
	f.Fuzz(func(t *testing.T, pat, text string, regex, cs bool) {
		if pat == "" || len(pat) > 64 || len(text) > 4096 || strings.IndexByte(text, 0) >= 0 {
			return
		}
		in := GrepInput{Pattern: pat, Mode: ModeLiteral, CaseSensitive: cs}
		if regex {
			in.Mode = ModeRegex
		}
		checkGrepAgrees(t, in, text)
	})
}

// FuzzSearch runs search over a one-file root with arbitrary queries and contents.
func FuzzSearch(f *testing.F) {
	base := f.TempDir()
	root := filepath.Join(base, "root")
	os.MkdirAll(root, 0o755)
	p, err := NewProvider(root, ProviderOptions{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { p.Close() })
	for _, s := range [][2]string{{"atlas", "Project Atlas"}, {"a b a", "b"}, {"İ", "i̇ İ"}, {"\u212a", "k"},
		{" ", "x"}, {"x y z", ""}, {"ß", "SS ß"}, {"é", "\xff\xfeé"}, {"f.txt", "name hit"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, query, text string) {
		if len(text) > 1<<16 {
			return
		}
		os.WriteFile(filepath.Join(root, "f.txt"), []byte(text), 0o644)
		in, err := decodeSearchInput(map[string]any{"query": query})
		if err != nil {
			if !utf8.ValidString(query) || strings.TrimSpace(query) == "" || jscompat.JSTrim(query) == "" || jscompat.UTF16Len(jscompat.JSTrim(query)) > maxQueryLen {
				return
			}
			if jscompat.JSTrim(query) == "" {
				return
			}
			t.Fatalf("query %q refused: %v", query, err)
		}
		rr, err := p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o",
			Resource: kernel.ResourceRef{Namespace: "files", Path: []string{}}, Action: ActionSearch, Input: in})
		if err != nil || rr.Status != kernel.StatusSucceeded {
			t.Fatalf("search %q: %v %+v", query, err, rr.Error)
		}
		out := rr.Output.(SearchOutput)
		if len(out.Hits) > 1 {
			t.Fatalf("%d hits for one file", len(out.Hits))
		}
		for _, h := range out.Hits {
			if h.Score <= 0 || h.Score > 1 || h.Version != Version([]byte(text)) || !utf8.ValidString(h.Excerpt) {
				t.Fatalf("bad hit %+v", h)
			}
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatal(err)
		}
	})
}
