package repoplane

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"

	"github.com/sharedos/sharedos/pkg/kernel"
)

const frozenSecret = "TOP-SECRET-CONTENT"

// newFrozenEnv is a repository holding two frozen paths (the directory private/ and the
// file src/secret.md), each with committed, staged, unstaged and untracked changes,
// beside ordinary changes and siblings whose names merely start like a frozen one.
func newFrozenEnv(t *testing.T, frozen ...[]string) *testEnv {
	t.Helper()
	e := newEnv(t)
	e.write("private/a.md", frozenSecret+" a\n")
	e.write("private/staged.md", frozenSecret+" staged\n")
	e.write("src/secret.md", frozenSecret+" s\n")
	e.write("src/ok.md", "ok\n")
	e.write("privateer.md", "not frozen\n")
	e.write("public.md", "public\n")
	commitAll(t, e.dir, "init")
	e.write("private/staged.md", frozenSecret+" staged 2\n")
	e.write("src/secret.md", frozenSecret+" s 2\n")
	e.stage("private/staged.md", "src/secret.md") // before the paths are frozen
	os.Remove(filepath.Join(e.dir, "private", "a.md"))
	e.write("private/new.md", frozenSecret+" untracked\n")
	e.write("src/secret.md", frozenSecret+" s 3\n")
	e.write("src/ok.md", "ok 2\n")
	e.write("privateer.md", "not frozen 2\n")
	e.write("public.md", "public 2\n")
	e.setProvider(ProviderOptions{Frozen: frozen})
	return e
}

// leaks reports whether an output mentions a frozen path's name or content.
func leaks(t *testing.T, out any) bool {
	t.Helper()
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Contains(s, frozenSecret) || strings.Contains(s, `"private"`) || strings.Contains(s, "secret.md")
}

func TestFrozenPathsOmittedFromStatusAndDiff(t *testing.T) {
	e := newFrozenEnv(t, []string{"repo", "private"}, []string{"repo", "src", "secret.md"}, []string{"elsewhere"})
	st := e.status()
	if leaks(t, st) {
		t.Fatalf("status shows a frozen path: %v", porcelain(st))
	}
	sameLines(t, porcelain(st), []string{".M privateer.md", ".M public.md", ".M src/ok.md"})
	for _, staged := range []bool{false, true} {
		d := e.ok(ActionDiff, DiffInput{Staged: staged}).(DiffOutput)
		if leaks(t, d) {
			t.Fatalf("diff staged=%v shows a frozen path: %+v", staged, d.Files)
		}
		if !staged && len(d.Files) != 3 {
			t.Fatalf("unstaged diff lost the ordinary changes: %+v", d.Files)
		}
	}
	// a pathspec naming the frozen path shows nothing either
	d := e.ok(ActionDiff, DiffInput{Pathspec: specOf("private", "src")}).(DiffOutput)
	if leaks(t, d) || len(d.Files) != 1 || d.Files[0].pathString() != "src/ok.md" {
		t.Fatalf("diff with a pathspec: %+v", d.Files)
	}

	// the same repository without the frozen paths shows them (the test sees them)
	e.setProvider(ProviderOptions{})
	if !leaks(t, e.status()) || !leaks(t, e.ok(ActionDiff, DiffInput{Staged: true})) {
		t.Fatal("the fixture has no frozen changes to hide")
	}
}

func TestFrozenPathsNeverStaged(t *testing.T) {
	e := newFrozenEnv(t, []string{"repo", "private"}, []string{"repo", "src", "secret.md"})
	index := filepath.Join(e.dir, ".git", "index")
	for _, ps := range []string{"private", "private/new.md", "private/a.md", "src/secret.md"} {
		before, _ := os.ReadFile(index)
		snap := snapshot(t, e.root)
		pe := e.fail(ActionStage, StageInput{Pathspec: specOf(ps)}, kernel.StatusDenied, CodeHostPolicyDenied)
		if !strings.Contains(pe.Message, "frozen") {
			t.Fatal(pe.Message)
		}
		after, _ := os.ReadFile(index)
		if string(before) != string(after) || snapshot(t, e.root) != snap {
			t.Fatalf("refused stage of %s changed the repository", ps)
		}
	}
	// a refused entry refuses the whole request, ordinary entries included
	e.fail(ActionStage, StageInput{Pathspec: specOf("public.md", "private")}, kernel.StatusDenied, CodeHostPolicyDenied)

	// staging the directory holding a frozen file stages the rest only
	out := e.stage("src")
	if leaks(t, out) || len(out.Staged) != 1 || strings.Join(out.Staged[0].Path, "/") != "src/ok.md" {
		t.Fatalf("stage src: %+v", out.Staged)
	}
	e.setProvider(ProviderOptions{})
	got := e.ok(ActionDiff, DiffInput{Staged: true, Pathspec: specOf("src/secret.md")}).(DiffOutput)
	if len(got.Files) != 1 || !strings.Contains(got.Files[0].Patch, "+"+frozenSecret+" s 2") {
		t.Fatalf("the frozen file's index entry changed: %+v", got.Files)
	}
	if _, err := os.Stat(filepath.Join(e.dir, ".git", "index.lock")); err == nil {
		t.Fatal("index.lock left behind")
	}
}

func TestFrozenRepositoryRefused(t *testing.T) {
	for name, f := range map[string][]string{
		"the repository itself": {"repo"},
		"an ancestor":           {},
		"its .git":              {"repo", ".git", "objects"},
	} {
		t.Run(name, func(t *testing.T) {
			e := newFrozenEnv(t, f)
			snap := snapshot(t, e.root)
			for action, input := range map[string]any{ActionStatus: nil, ActionDiff: DiffInput{}, ActionLog: nil,
				ActionStage: StageInput{Pathspec: specOf("public.md")}, ActionCommit: CommitInput{Message: "m"}} {
				pe := e.fail(action, input, kernel.StatusDenied, CodeHostPolicyDenied)
				if leaks(t, pe) {
					t.Fatal(pe.Message)
				}
			}
			if snapshot(t, e.root) != snap {
				t.Fatal("a refused operation changed the root")
			}
		})
	}
}

// TestFrozenMatchesWholeSegments: freezing "priv" or "src/secret" hides neither
// "private" nor "src/secret.md"; a frozen path in another repository changes nothing.
func TestFrozenMatchesWholeSegments(t *testing.T) {
	e := newFrozenEnv(t, []string{"repo", "priv"}, []string{"repo", "src", "secret"}, []string{"rep"}, []string{"repo2"})
	if !leaks(t, e.status()) {
		t.Fatal("a partial segment froze a path")
	}
	sameLines(t, porcelain(e.status()), porcelain(func() StatusOutput {
		e.setProvider(ProviderOptions{})
		return e.status()
	}()))
}

func TestFrozenOptionValidated(t *testing.T) {
	for _, f := range [][]string{{".."}, {"a", ""}, {"a/b"}} {
		if _, err := NewProvider(t.TempDir(), ProviderOptions{Frozen: [][]string{f}}); err == nil {
			t.Errorf("Frozen %q accepted", f)
		}
	}
	f := [][]string{{"a"}}
	p, err := NewProvider(t.TempDir(), ProviderOptions{Frozen: f})
	if err != nil {
		t.Fatal(err)
	}
	f[0][0] = "b"
	if p.opts.Frozen[0][0] != "a" {
		t.Fatal("the provider keeps the caller's slice")
	}
}

// TestFrozenConflictHidden: an unmerged (conflicted) frozen path is not listed by status.
func TestFrozenConflictHidden(t *testing.T) {
	e := newFrozenEnv(t, []string{"repo", "private"}, []string{"repo", "src", "secret.md"})
	g := filepath.Join(e.dir, ".git")
	f, err := os.Open(filepath.Join(g, "index"))
	if err != nil {
		t.Fatal(err)
	}
	idx := &index.Index{}
	if err := index.NewDecoder(f).Decode(idx); err != nil {
		t.Fatal(err)
	}
	f.Close()
	blob := loose(t, g, packBlob, []byte(frozenSecret+" conflict\n"))
	for _, st := range []index.Stage{index.AncestorMode, index.OurMode, index.TheirMode} {
		for _, name := range []string{"private/c.md", "public-c.md"} {
			idx.Entries = append(idx.Entries, &index.Entry{Name: name, Hash: blob, Mode: filemode.Regular, Stage: st})
		}
	}
	sort.SliceStable(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	idx.Cache = nil
	out, err := os.Create(filepath.Join(g, "index"))
	if err != nil {
		t.Fatal(err)
	}
	if err := index.NewEncoder(out).Encode(idx); err != nil {
		t.Fatal(err)
	}
	out.Close()
	st := e.status()
	if leaks(t, st) {
		t.Fatalf("status lists the frozen conflict: %v", porcelain(st))
	}
	if !containsLine(porcelain(st), "UU public-c.md") {
		t.Fatalf("the ordinary conflict is missing: %v", porcelain(st))
	}
}
