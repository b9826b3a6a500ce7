package fsplane

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The walk hands files to the workers, and the workers hand grep's results on, in
// batches (walkBatch): over several batches' worth of files in several directories,
// every file is searched once and the matches come back in path order, the last
// partial batch included.
func TestGrepAcrossBatchesKeepsEveryFileInOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var want []string
	for d := 0; d < 3; d++ {
		for f := 0; f < walkBatch+7; f++ {
			rel := fmt.Sprintf("d%d/f%03d.txt", d, f)
			e.write(rel, "first line\nthe needle here\n")
			want = append(want, rel)
		}
	}
	slices.Sort(want)
	out := e.ok("files.grep", jobj{"path": pth(), "pattern": "needle"})
	var got []string
	for _, m := range out["matches"].([]any) {
		mm := m.(map[string]any)
		var segs []string
		for _, s := range mm["path"].([]any) {
			segs = append(segs, s.(string))
		}
		got = append(got, strings.Join(segs, "/"))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("grep found %d files (want %d), first differences: got %v", len(got), len(want), got[:min(len(got), 5)])
	}
}
