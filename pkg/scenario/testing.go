package scenario

import (
	"context"
	"strings"
	"testing"
)

// TestFiles runs the scenario files that patterns select (files, directories or globs, as
// `sharedos test` takes them; none: DefaultPattern) from `go test`: every scenario test
// is a subtest named after its file and test, a failing one reports what `sharedos test`
// prints (expected and observed, and the explanation of the failed call), a skipped
// one is skipped, and an invalid file fails t with its file:line.
func TestFiles(t *testing.T, patterns ...string) *Report {
	t.Helper()
	paths, err := Expand(patterns)
	if err != nil {
		t.Fatal(err)
	}
	rep := RunFiles(context.Background(), paths, Options{TempDir: t.TempDir()})
	for _, fr := range rep.Files {
		if fr.Err != nil {
			t.Errorf("%v", fr.Err)
			continue
		}
		for _, tr := range fr.Tests {
			t.Run(fr.Path+"/"+tr.Name, func(t *testing.T) {
				switch tr.Outcome {
				case Skipped:
					t.Skip(tr.Reason)
				case Errored:
					t.Errorf("%s:%d: %s", fr.Path, tr.Line, tr.Reason)
				case Failed:
					var b strings.Builder
					one := &Report{Files: []*FileResult{{Path: fr.Path, File: fr.File, Tests: []*TestResult{tr}}}}
					one.WriteText(&b, false)
					t.Error("\n" + b.String())
				}
			})
		}
	}
	return rep
}
