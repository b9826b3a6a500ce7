package fsplane

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// budgetEnv is an env whose provider (and tools) have the given output budget.
func budgetEnv(t *testing.T, budget int) *env {
	t.Helper()
	e := newEnv(t)
	p, err := NewProvider(e.root, ProviderOptions{SnapshotDir: e.snaps, MaxOutputBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	e.p = p
	hs, _ := Tools(p)
	for _, h := range hs {
		e.tools[h.Definition.Name] = h
	}
	return e
}

func jsonSize(t *testing.T, v any) int {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestGrepOutputBudget: a 19 MiB file whose every line matches, with 100 context lines
// each side, gives at most the default budget of JSON (it gave ~190 MiB), cut in path
// and line order with truncated:true.
func TestGrepOutputBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	line := strings.Repeat("needle & <html> ", 12) + "\n" // escapes count: & < > take 6 bytes each
	big := strings.Repeat(line, (19<<20)/len(line))
	e.write("big.txt", big)
	res := e.call("files.grep", jobj{"path": pth(), "pattern": "needle", "contextBefore": 100, "contextAfter": 100})
	if res.Status != kernel.StatusSucceeded {
		t.Fatalf("%+v", res.Error)
	}
	out := res.Output.(GrepOutput)
	if n := jsonSize(t, out); n > DefaultMaxOutputBytes {
		t.Fatalf("grep output is %d bytes, over the %d budget", n, DefaultMaxOutputBytes)
	}
	if !out.Truncated || len(out.Matches) == 0 {
		t.Fatalf("truncated=%v with %d matches", out.Truncated, len(out.Matches))
	}
	for i, m := range out.Matches {
		if m.Line != i+1 {
			t.Fatalf("match %d is line %d: not in order", i, m.Line)
		}
	}
	t.Logf("%d matches, %d bytes", len(out.Matches), jsonSize(t, out))
}

// TestGrepBudgetTrimsContext: a match whose context alone passes the budget keeps its
// matching line and the nearest context lines (marked truncated); the output stays
// within the budget.
func TestGrepBudgetTrimsContext(t *testing.T) {
	t.Parallel()
	const budget = 4 << 10
	e := budgetEnv(t, budget)
	var sb strings.Builder
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&sb, "before %02d %s\n", i, strings.Repeat("x", 100))
	}
	sb.WriteString("THE MATCH\n")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&sb, "after %02d %s\n", i, strings.Repeat("y", 100))
	}
	e.write("f.txt", sb.String())
	g := e.ok("files.grep", jobj{"path": pth("f.txt"), "pattern": "THE MATCH", "contextBefore": 100, "contextAfter": 100, "caseSensitive": true})
	if n := jsonSize(t, g); n > budget {
		t.Fatalf("%d bytes over %d", n, budget)
	}
	ms := g["matches"].([]any)
	if len(ms) != 1 || g["truncated"] != true {
		t.Fatalf("grep = %v", g)
	}
	m := ms[0].(map[string]any)
	ctx := toStrings(m["context"])
	if m["truncated"] != true || m["text"] != "THE MATCH" || len(ctx) < 5 || len(ctx) > 100 {
		t.Fatalf("match = %v", m)
	}
	// Centred on the match: the nearest lines are kept.
	i := 0
	for i < len(ctx) && ctx[i] != "THE MATCH" {
		i++
	}
	if i == len(ctx) || !strings.HasPrefix(ctx[i-1], "before 99") || !strings.HasPrefix(ctx[i+1], "after 00") || i-(len(ctx)-1-i) > 1 || (len(ctx)-1-i)-i > 1 {
		t.Fatalf("context not centred on the match: %d of %d: %v", i, len(ctx), ctx)
	}
}

// TestSearchAndListOutputBudget: search leaves hits out (truncated:true) and list
// entries out (truncated:true) to stay within the budget.
func TestSearchAndListOutputBudget(t *testing.T) {
	t.Parallel()
	const budget = 8 << 10
	e := budgetEnv(t, budget)
	for i := 0; i < 100; i++ {
		e.write(fmt.Sprintf("d/%s%03d.txt", strings.Repeat("long-name-", 10), i), strings.Repeat("needle <&> ", 40))
	}
	s := e.ok("files.search", jobj{"path": pth(), "query": "needle", "limit": 100})
	if n := jsonSize(t, s); n > budget || s["truncated"] != true || len(s["hits"].([]any)) == 0 || len(s["hits"].([]any)) == 100 {
		t.Fatalf("search: %d bytes, truncated %v, %d hits", n, s["truncated"], len(s["hits"].([]any)))
	}
	small := e.ok("files.search", jobj{"path": pth(), "query": "needle", "limit": 2})
	if small["truncated"] != nil {
		t.Fatalf("a search within budget says truncated: %v", small)
	}
	l := e.ok("files.list", jobj{"path": pth("d")})
	if n := jsonSize(t, l); n > budget || l["truncated"] != true || len(l["entries"].([]any)) == 0 || len(l["entries"].([]any)) == 100 {
		t.Fatalf("list: %d bytes, truncated %v, %d entries", n, l["truncated"], len(l["entries"].([]any)))
	}
	if e.ok("files.list", jobj{"path": pth()})["truncated"] != false {
		t.Fatal("a small listing says truncated")
	}
}

// TestReadOutputBudget: text that JSON escapes 6-fold (control characters) is cut, at a
// character boundary, so the content's encoding stays within the budget.
func TestReadOutputBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctl := strings.Repeat("\x01é", 100<<10) // 300 KiB of text; the limit keeps 256 KiB, 6 bytes per \x01
	e.write("ctl.txt", ctl)
	rd := e.call("files.read", jobj{"path": pth("ctl.txt")}).Output.(ReadOutput)
	if n := jsonSize(t, rd.Content); n > DefaultMaxOutputBytes {
		t.Fatalf("content encodes to %d bytes, over %d", n, DefaultMaxOutputBytes)
	}
	if !rd.Truncated || rd.Encoding != "utf-8" || !utf8.ValidString(rd.Content) || !strings.HasPrefix(ctl, rd.Content) || len(rd.Content) < 100<<10 {
		t.Fatalf("read: truncated %v, %s, %d bytes", rd.Truncated, rd.Encoding, len(rd.Content))
	}
	if rd.Version != Version([]byte(ctl)) {
		t.Fatal("the version must be the whole file's")
	}
	// Plain text is cut by the read limit only.
	e.write("plain.txt", strings.Repeat("a", 300<<10))
	rp := e.call("files.read", jobj{"path": pth("plain.txt")}).Output.(ReadOutput)
	if len(rp.Content) != DefaultMaxReadBytes || !rp.Truncated {
		t.Fatalf("plain read: %d bytes", len(rp.Content))
	}
}

// FuzzJSONStringLen: jsonStringLen is exactly encoding/json's length, and
// cutToJSONBudget returns the longest fitting prefix at a character boundary.
func FuzzJSONStringLen(f *testing.F) {
	for _, s := range []string{"", "a", "\x01\n\t\"\\", "<&>", "\u2028\u2029", "é\xff\xfe", "\x7f\u0080"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, s string, budget int) {
		b, _ := json.Marshal(s)
		if got := jsonStringLen(s); got != len(b) {
			t.Fatalf("%q: jsonStringLen %d, encoding/json %d", s, got, len(b))
		}
		if budget < 0 || budget > 1<<20 {
			return
		}
		p, cut := cutToJSONBudget(s, budget)
		if !strings.HasPrefix(s, p) || cut != (p != s) {
			t.Fatalf("%q budget %d: %q cut=%v", s, budget, p, cut)
		}
		if n := jsonStringLen(p); n > budget && p != "" {
			t.Fatalf("%q budget %d: prefix %q encodes to %d", s, budget, p, n)
		}
		if cut {
			// One more character would not fit.
			_, size := utf8.DecodeRuneInString(s[len(p):])
			if n := jsonStringLen(s[:len(p)+size]); n <= budget {
				t.Fatalf("%q budget %d: stopped early at %d (next fits: %d)", s, budget, len(p), n)
			}
		}
	})
}
