package corpus

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/scenario"
)

// TestCorpusThroughTheRunner: the decision corpus, converted into scenario files, runs
// through `sharedos test`'s runner and every converted case passes; the cases the format
// cannot express are exactly the listed ones, each with its reason
// (testdata/not_expressible.txt; regenerate with
// `go run ./tools/corpus2scenario testdata/conformance/cases.json DIR 2>&1 | grep '^not expressible' | sed 's/^not expressible: //'`).
func TestCorpusThroughTheRunner(t *testing.T) {
	data, err := os.ReadFile("../../testdata/conformance/cases.json")
	if err != nil {
		t.Fatal(err)
	}
	files, skipped, err := Convert(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 44 {
		t.Fatalf("only %d cases converted", len(files))
	}
	dir := t.TempDir()
	var paths []string
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	sort.Strings(paths)
	rep := scenario.RunFiles(context.Background(), paths, scenario.Options{TempDir: t.TempDir()})
	if !rep.OK() || rep.Passed != len(files) {
		var b strings.Builder
		rep.WriteText(&b, false)
		t.Fatalf("%s\n%s", rep.Summary(), b.String())
	}
	var got []string
	for _, s := range skipped {
		got = append(got, s.ID+": "+s.Reason)
	}
	want, err := os.ReadFile("testdata/not_expressible.txt")
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(got, "\n") + "\n"; g != string(want) {
		t.Fatalf("the cases not expressible changed:\n%s\nwant:\n%s", g, want)
	}
	for _, s := range skipped {
		if s.Reason == "" {
			t.Fatalf("%s: no reason", s.ID)
		}
	}
}

// TestConvertRefusesToWeaken: a case that names a double, a provider or a seeded
// snapshot is never converted; one with a malformed grant neither.
func TestConvertRefusesToWeaken(t *testing.T) {
	base := `{"id":"x","title":"x","world":{"grants":%s,"enabledToolNamespaces":["files"],"files":{},"repos":[],
"registrations":{"standardOs":["files","repo"],"escalationTool":false,"contextProviders":[]},
"infrastructure":{"grantSource":"%s","usageStore":"memory","delegationResolver":"store"},"namespaceSettings":{"ceiling":null},
"context":{"namespaceId":"w","actor":{"kind":"agent","agentId":"a"},"authority":{"kind":"human","userId":"o"},"owner":{"kind":"human","userId":"o"},"purpose":"p","traceId":"t","now":"2026-09-01T12:00:00.000Z"}},
"steps":[%s]}`
	for _, c := range []struct{ grants, source, step, want string }{
		{"[]", "throws", `{"op":"list","expect":{"outcome":"allowed","visibleTools":[]}}`, "grant source double throws"},
		{`[{"id":"bad"}]`, "filtering", `{"op":"list","expect":{"outcome":"allowed","visibleTools":[]}}`, "strict grant-file parser refuses"},
		{"[]", "filtering", `{"op":"call","tool":"files.snapshot.restore","arguments":{},"expect":{"outcome":"denied"}}`, "snapshot tools"},
		{"[]", "filtering", `{"op":"call","tool":"files.read","traceId":"other","arguments":{},"expect":{"outcome":"denied"}}`, "another traceId"},
		{"[]", "filtering", `{"op":"namespaces.get","expect":{"outcome":"allowed"}}`, "no step that returns the namespace catalogue"},
	} {
		src := []byte("[" + sprintf(base, c.grants, c.source, c.step) + "]")
		files, skipped, err := Convert(src)
		if err != nil || len(files) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0].Reason, c.want) {
			t.Errorf("%s: files %d skipped %+v err %v", c.want, len(files), skipped, err)
		}
	}
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }
