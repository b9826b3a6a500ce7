package scenario

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.yaml.in/yaml/v3"
)

// mutation is a deliberate change of one grant: it widens or narrows what the grant
// allows. ok is false when it does not apply to this grant (it would change nothing).
type mutation struct {
	name  string
	apply func(g map[string]any, now string) (ok bool)
}

func firstCap(g map[string]any) map[string]any {
	caps, _ := g["capabilities"].([]any)
	c, _ := caps[0].(map[string]any)
	return c
}

func constraints(g map[string]any) map[string]any {
	c, _ := g["constraints"].(map[string]any)
	if c == nil {
		c = map[string]any{}
		g["constraints"] = c
	}
	return c
}

var mutations = []mutation{
	{"narrow: remove its first action", func(g map[string]any, _ string) bool {
		acts, _ := firstCap(g)["actions"].([]any)
		if len(acts) < 2 {
			return false
		}
		firstCap(g)["actions"] = acts[1:]
		return true
	}},
	{"narrow: a deeper path", func(g map[string]any, _ string) bool {
		res, _ := firstCap(g)["resource"].(map[string]any)
		path, _ := res["path"].([]any)
		res["path"] = append(slices.Clone(path), "mutant")
		return true
	}},
	{"narrow: expired at the scenario's instant", func(g map[string]any, now string) bool {
		constraints(g)["expiresAt"] = now
		return true
	}},
	{"widen: one more action (the namespace's delete or commit)", func(g map[string]any, _ string) bool {
		c := firstCap(g)
		res, _ := c["resource"].(map[string]any)
		extra := map[any]string{"files": "delete", "repo": "commit"}[res["namespace"]]
		acts, _ := c["actions"].([]any)
		if extra == "" || slices.Contains(acts, any(extra)) {
			return false
		}
		c["actions"] = append(slices.Clone(acts), extra)
		return true
	}},
	{"widen: the whole root", func(g map[string]any, _ string) bool {
		res, _ := firstCap(g)["resource"].(map[string]any)
		if path, _ := res["path"].([]any); len(path) == 0 {
			return false
		}
		res["path"] = []any{}
		firstCap(g)["scope"] = "descendants"
		return true
	}},
	{"widen or narrow: the other scope", func(g map[string]any, _ string) bool {
		c := firstCap(g)
		c["scope"] = map[any]string{"exact": "descendants", "descendants": "exact"}[c["scope"]]
		return true
	}},
	{"widen: no maxUses, purposes, expiry or notBefore", func(g map[string]any, _ string) bool {
		c := constraints(g)
		n := len(c)
		for _, k := range []string{"maxUses", "purposes", "expiresAt", "notBefore"} {
			delete(c, k)
		}
		return len(c) != n
	}},
	{"narrow: dropped", nil}, // handled by the loop: the grant is removed
}

// TestMutationsAreCaught: for each of the ten hand-written grant files with scenarios
// (testdata/mutation), every generated widening or narrowing of every grant makes at
// least one scenario fail — the scenarios pin the grants down from both sides. The
// unmutated files pass.
func TestMutationsAreCaught(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob("testdata/mutation/[0-9][0-9].yaml")
	if err != nil || len(paths) != 10 {
		t.Fatalf("want 10 scenario files, got %v %v", paths, err)
	}
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			t.Parallel()
			f, err := ParseFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if rep := Run(context.Background(), []*File{f}, Options{TempDir: t.TempDir()}); !rep.OK() {
				t.Fatalf("the unmutated scenarios fail: %v", failedKeys(rep))
			}
			data, err := os.ReadFile(f.GrantFiles[0])
			if err != nil {
				t.Fatal(err)
			}
			var doc map[string]any
			if err := yaml.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			grants, _ := doc["grants"].([]any)
			killed := 0
			for gi := range grants {
				for _, m := range mutations {
					var mutated map[string]any
					b, _ := json.Marshal(doc)
					_ = json.Unmarshal(b, &mutated)
					gs := mutated["grants"].([]any)
					if m.apply == nil {
						mutated["grants"] = slices.Delete(gs, gi, gi+1)
					} else if !m.apply(gs[gi].(map[string]any), f.Context.Now) {
						continue
					}
					out, _ := json.Marshal(mutated)
					gp := filepath.Join(t.TempDir(), "mutant.json")
					if err := os.WriteFile(gp, out, 0o644); err != nil {
						t.Fatal(err)
					}
					mf := *f
					mf.GrantFiles = []string{gp}
					rep := Run(context.Background(), []*File{&mf}, Options{TempDir: t.TempDir()})
					if rep.OK() {
						t.Errorf("grant %d, %s: every scenario still passes\n%s", gi, m.name, out)
						continue
					}
					killed++
				}
			}
			if killed < 5 {
				t.Fatalf("only %d mutants", killed)
			}
			t.Logf("%d mutants, all caught", killed)
		})
	}
}
