package fsplane

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// unusualNames are real file names that are not valid path segments (spec 20 §1.2):
// no tool can name them in a path, but they exist and must not be hidden.
var unusualNames = []string{"tab\there.txt", `back\slash.txt`, " lead.txt", "trail.txt ", "\xffnot-utf8.txt"}

// TestUnaddressableNamesAreShown: list, grep and search show every name (a tab, a
// backslash, leading or trailing spaces, bytes that are not UTF-8), in files and in
// directories, marked addressable:false; a path naming one is still refused
// invalid_path. .git and temporary files stay hidden.
func TestUnaddressableNamesAreShown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("d/ok.txt", "needle plain")
	for _, n := range unusualNames {
		e.write("d/"+n, "needle in "+n)
	}
	e.write("d/sub dir /inner.txt", "needle inside a padded directory")
	e.write("d/.git/HEAD", "needle git")
	e.write("d/"+TempPrefix+"x", "needle temp")

	ls := e.ok("files.list", jobj{"path": pth("d")})
	got := map[string]any{}
	for _, x := range ls["entries"].([]any) {
		m := x.(map[string]any)
		got[m["name"].(string)] = m["addressable"]
	}
	want := map[string]any{"ok.txt": nil, "sub dir ": false}
	for _, n := range unusualNames {
		want[displayName(n)] = false
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("list = %v\nwant %v", got, want)
	}

	g := e.ok("files.grep", jobj{"path": pth("d"), "pattern": "needle"})
	var paths []string
	for _, x := range g["matches"].([]any) {
		m := x.(map[string]any)
		p := fmt.Sprint(m["path"])
		if (m["addressable"] == nil) != (p == "[d ok.txt]") {
			t.Fatalf("grep match %v: addressable %v", p, m["addressable"])
		}
		paths = append(paths, p)
	}
	if len(paths) != len(unusualNames)+2 {
		t.Fatalf("grep found %d files, want %d: %v", len(paths), len(unusualNames)+2, paths)
	}
	if !sort.StringsAreSorted(paths) {
		t.Fatalf("grep not in path order: %v", paths)
	}

	s := e.ok("files.search", jobj{"path": pth("d"), "query": "needle"})
	if hits := s["hits"].([]any); len(hits) != len(unusualNames)+2 {
		t.Fatalf("search found %d files, want %d: %v", len(hits), len(unusualNames)+2, hits)
	}
	for _, x := range s["hits"].([]any) {
		m := x.(map[string]any)
		if (m["addressable"] == nil) != (fmt.Sprint(m["path"]) == "[d ok.txt]") {
			t.Fatalf("search hit %v: addressable %v", m["path"], m["addressable"])
		}
	}

	// The names still cannot be addressed (the contract's segment rules), and nothing
	// changed.
	for _, n := range unusualNames[:4] {
		rr := e.op(ActionRead, pth("d", n), nil)
		if rr.Status != kernel.StatusDenied || rr.Error.Code != CodeInvalidPath {
			t.Fatalf("read %q: %+v", n, rr)
		}
		if b, err := os.ReadFile(filepath.Join(e.root, "d", n)); err != nil || string(b) != "needle in "+n {
			t.Fatalf("%q changed: %q %v", n, b, err)
		}
	}
}

// TestGrepFlagsInvalidUTF8AndStripsBOM: a line (or context line) that is not valid
// UTF-8 is shown with U+FFFD and flagged invalidUtf8; a leading UTF-8 byte order mark
// is not part of the first line's text (as rg).
func TestGrepFlagsInvalidUTF8AndStripsBOM(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("latin1.txt", "caf\xe9 needle\nplain needle\nafter \xff\nneedle last\n")
	e.write("bom.txt", "\xef\xbb\xbfneedle first\nsecond\n")
	g := e.ok("files.grep", jobj{"path": pth("latin1.txt"), "pattern": "needle"})
	ms := g["matches"].([]any)
	if len(ms) != 3 {
		t.Fatalf("matches = %v", ms)
	}
	m0, m1 := ms[0].(map[string]any), ms[1].(map[string]any)
	if m0["text"] != "caf\uFFFD needle" || m0["invalidUtf8"] != true {
		t.Fatalf("latin-1 line = %v", m0)
	}
	if m1["text"] != "plain needle" || m1["invalidUtf8"] != nil {
		t.Fatalf("valid line flagged: %v", m1)
	}
	// A context line that is not UTF-8 flags the match too.
	g = e.ok("files.grep", jobj{"path": pth("latin1.txt"), "pattern": "needle last", "contextBefore": 1})
	m := g["matches"].([]any)[0].(map[string]any)
	if m["invalidUtf8"] != true || fmt.Sprint(m["context"]) != "[after \uFFFD needle last]" {
		t.Fatalf("context = %v", m)
	}
	// The BOM.
	for _, pat := range []string{"needle first", "^needle"} {
		mode := ModeLiteral
		if strings.HasPrefix(pat, "^") {
			mode = ModeRegex
		}
		g = e.ok("files.grep", jobj{"path": pth("bom.txt"), "pattern": pat, "mode": mode})
		ms = g["matches"].([]any)
		if len(ms) != 1 || ms[0].(map[string]any)["text"] != "needle first" || ms[0].(map[string]any)["line"] != float64(1) {
			t.Fatalf("%s in a BOM file = %v", pat, ms)
		}
	}
	g = e.ok("files.grep", jobj{"path": pth("bom.txt"), "pattern": "\ufeff"})
	if len(g["matches"].([]any)) != 0 {
		t.Fatalf("the BOM itself matched: %v", g)
	}
}

// TestOutputSchemasPinTheNewFields pins the output fields this package adds to the
// spec's shapes: addressable (list entries, grep matches, search hits), invalidUtf8
// (grep matches) and search's truncated — each optional, each in a closed object.
func TestOutputSchemasPinTheNewFields(t *testing.T) {
	t.Parallel()
	props := func(s map[string]any, path ...string) string {
		for _, p := range path {
			s = s["properties"].(map[string]any)[p].(map[string]any)["items"].(map[string]any)
		}
		var ks []string
		for k := range s["properties"].(map[string]any) {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		if s["additionalProperties"] != false {
			t.Fatalf("%v is not closed", path)
		}
		return fmt.Sprint(ks, " required ", s["required"])
	}
	for _, c := range []struct {
		schema map[string]any
		path   []string
		want   string
	}{
		{listOutputSchema(), []string{"entries"}, "[addressable kind name] required [name kind]"},
		{grepOutputSchema(), []string{"matches"}, "[addressable context invalidUtf8 line path text truncated] required [path line text context]"},
		{grepOutputSchema(), nil, "[matches path truncated] required [path matches truncated]"},
		{searchOutputSchema(), []string{"hits"}, "[addressable excerpt path score version] required [path score excerpt version]"},
		{searchOutputSchema(), nil, "[hits path truncated] required [path hits]"},
	} {
		if got := props(c.schema, c.path...); got != c.want {
			t.Errorf("%v: %s, want %s", c.path, got, c.want)
		}
	}
}
