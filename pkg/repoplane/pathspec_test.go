package repoplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestStagePathspecWholeSegments: staging "src" stages what lies in src/ and nothing
// from siblings whose names merely start with "src" (src-secret/, src.txt, srcs), be
// they tracked and modified, deleted, or untracked; a pathspec naming only such a
// prefix of an existing name is not_found and stages nothing.
func TestStagePathspecWholeSegments(t *testing.T) {
	e := newEnv(t)
	for _, f := range []string{"src/a.go", "src-secret/key", "src.txt", "srcs", "src-secret/gone", "src/sub/b.go"} {
		e.write(f, "v1 "+f+"\n")
	}
	commitAll(t, e.dir, "init")
	for _, f := range []string{"src/a.go", "src-secret/key", "src.txt", "srcs", "src/sub/b.go"} {
		e.write(f, "v2 "+f+"\n")
	}
	e.write("src-secret/new", "untracked\n")
	e.write("src.new", "untracked\n")
	os.Remove(filepath.Join(e.dir, "src-secret", "gone"))

	out := e.stage("src")
	var got []string
	for _, s := range out.Staged {
		got = append(got, s.Status+" "+strings.Join(s.Path, "/"))
	}
	sameLines(t, got, []string{"M src/a.go", "M src/sub/b.go"})
	sameLines(t, porcelain(e.status()), []string{".D src-secret/gone", ".M src-secret/key", ".M src.txt",
		"M. src/a.go", "M. src/sub/b.go", ".M srcs", "?? src-secret/new", "?? src.new"})

	// a prefix of names that exist, but not a path of its own
	index := filepath.Join(e.dir, ".git", "index")
	before, _ := os.ReadFile(index)
	for _, ps := range []string{"sr", "src-", "src-secre", "src/su"} {
		e.fail(ActionStage, StageInput{Pathspec: specOf(ps)}, kernel.StatusFailed, CodeNotFound)
		if after, _ := os.ReadFile(index); string(after) != string(before) {
			t.Fatalf("a refused stage of %s changed the index", ps)
		}
	}
	// the same holds for diff pathspecs
	d := e.ok(ActionDiff, DiffInput{Pathspec: specOf("src")}).(DiffOutput)
	if len(d.Files) != 0 {
		t.Fatalf("unstaged diff of src shows %v", d.Files)
	}
	d = e.ok(ActionDiff, DiffInput{Pathspec: specOf("src-secret")}).(DiffOutput)
	if len(d.Files) != 2 {
		t.Fatalf("unstaged diff of src-secret: %+v", d.Files)
	}
}

// TestPathspecMatchWholeSegments pins the matcher itself.
func TestPathspecMatchWholeSegments(t *testing.T) {
	s := newPathspec([][]string{{"src"}, {"a", "b"}})
	for p, want := range map[string]bool{"src": true, "src/x": true, "src/x/y": true, "src-secret": false,
		"src-secret/x": false, "src.txt": false, "srcs": false, "sr": false, "a/b": true, "a/b/c": true, "a/bc": false, "a": false} {
		if got := s.match(p); got != want {
			t.Errorf("match(%q) = %v", p, got)
		}
	}
	for d, want := range map[string]bool{"a": true, "src": true, "src-secret": false, "ab": false, "s": false} {
		if got := s.touchesDir(d); got != want {
			t.Errorf("touchesDir(%q) = %v", d, want)
		}
	}
	f := frozenSet{"src"}
	for p, want := range map[string]bool{"src": true, "src/x": true, "src-secret": false, "src.txt": false, "sr": false} {
		if got := f.covers(p); got != want {
			t.Errorf("covers(%q) = %v", p, got)
		}
	}
	if (frozenSet{}).covers("x") || frozenSet(nil).covers("") {
		t.Error("the empty frozen set covers something")
	}
}
