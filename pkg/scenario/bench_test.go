package scenario

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// benchFiles writes n scenario files of one test with ten steps each (reads allowed and
// denied, a write, a listing, an explain, a namespace patch, an audit check) and returns
// their paths.
func benchFiles(b *testing.B, n int) []string {
	b.Helper()
	dir := b.TempDir()
	var paths []string
	for i := range n {
		src := head + fmt.Sprintf(`tests:
  - name: t%d
    steps:
      - {call: files.read, args: {path: [docs, a.md]}, expect: {status: succeeded, grant: g-read-docs}}
      - {call: files.read, args: {path: [docs, b.md]}, expect: {status: succeeded, output: {contains: bee}}}
      - {call: files.read, args: {path: [secret, s.md]}, expect: {status: denied, code: no_matching_grant}}
      - {call: files.list, args: {path: [docs]}, expect: {status: succeeded}}
      - {call: files.create, args: {path: [drafts, x.md], content: x}, expect: {status: succeeded, grant: g-draft-once}}
      - {call: files.create, args: {path: [drafts, y.md], content: y}, expect: {status: denied, cause: grant_exhausted}}
      - list: {}
        expect: {includes: [files.read], excludes: [files.delete]}
      - {explain: files.delete, args: {path: [docs, a.md]}, expect: {allowed: false, fixes: [add_grant]}}
      - namespaces: {disable: [files]}
        expect: {enabled: [sharedos]}
      - audit: {}
        expect: {contains: [{type: tool.invoked, outcome: denied, cause: grant_exhausted}]}
`, i)
		p := filepath.Join(dir, fmt.Sprintf("s%03d.yaml", i))
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// BenchmarkRun100Files: 100 scenario files × 10 steps, parsed and run in-process (each
// test on a fresh root copy and a fresh state database), with the CPU time (user and
// system) per run beside the wall time. Spec 70: well under a second.
//
//	go test -run '^$' -bench Run100Files -benchtime 5x -count 5 ./pkg/scenario
//	SCENARIO_BENCH_TMP=/tmp go test -run '^$' -bench Run100Files ...   # on a disk instead
func BenchmarkRun100Files(b *testing.B) {
	paths := benchFiles(b, 100)
	tmp := os.Getenv("SCENARIO_BENCH_TMP") // "": the runner's default
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for b.Loop() {
		rep := RunFiles(context.Background(), paths, Options{TempDir: tmp, Parallel: benchParallel()})
		if !rep.OK() || rep.Passed != 100 {
			b.Fatalf("%s: %v", rep.Summary(), failedKeys(rep))
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
	b.ReportMetric(1000, "steps/op")
}

// benchParallel is SCENARIO_BENCH_PARALLEL (0: the default).
func benchParallel() int {
	n, _ := strconv.Atoi(os.Getenv("SCENARIO_BENCH_PARALLEL"))
	return n
}
