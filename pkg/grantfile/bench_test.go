package grantfile

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// genYAML writes a hand-written-style grant file of n grants (10 subjects, 4 issuers,
// two capabilities each, constraints, every tenth grant with metadata).
func genYAML(n int) string {
	var b strings.Builder
	b.WriteString("version: 1\ncontext:\n  world: bench\n  actor: agent:a0\n  authority: human:h0\ngrants:\n")
	for i := range n {
		fmt.Fprintf(&b, `  - id: g-%05d
    subject: agent:a%d
    issuer: human:h%d
    issuedAt: 2026-01-01T00:00:00Z
    capabilities:
      - resource: {namespace: files, path: [Workspace, project-%d, reports], owner: human:h%d}
        actions: [list, read, search, grep]
        scope: descendants
      - resource:
          namespace: repo
          path: [repos, r%d]
        actions: [repo.log, repo.diff]
        scope: exact
    constraints:
      purposes: [triage, review]
      expiresAt: 2027-01-01T00:00:00Z
      delegationDepth: 1
`, i, i%10, i%4, i, i%4, i%50)
		if i%10 == 0 {
			fmt.Fprintf(&b, "    metadata: {ticket: \"OPS-%d\", weight: 1.5, tags: [a, b]}\n", i)
		}
	}
	return b.String()
}

// genJSON converts the YAML set to the equivalent JSON file.
func genJSON(tb testing.TB, n int) string {
	f, err := Parse("gen.yaml", []byte(genYAML(n)))
	if err != nil {
		tb.Fatal(err)
	}
	parts := make([]string, len(f.Grants))
	for i, g := range f.Grants {
		parts[i] = FormatGrantJSON(g)
	}
	return `{"version": 1, "context": {"world": "bench", "actor": "agent:a0", "authority": "human:h0"}, "grants": [` + strings.Join(parts, ",\n") + "]}\n"
}

func TestGeneratedFilesAgree(t *testing.T) {
	t.Parallel()
	y, err := Parse("gen.yaml", []byte(genYAML(50)))
	if err != nil {
		t.Fatal(err)
	}
	j, err := Parse("gen.json", []byte(genJSON(t, 50)))
	if err != nil {
		t.Fatal(err)
	}
	for i := range y.Grants {
		if FormatGrantJSON(y.Grants[i]) != FormatGrantJSON(j.Grants[i]) {
			t.Fatalf("grant %d differs", i)
		}
	}
}

// BenchmarkLoadSet measures loading one 1,000-grant file: cold (read + parse + validate,
// no cache), and a cache hit (read + digest + decode the snapshot + index).
//
//	go test -run='^$' -bench=LoadSet -benchmem ./pkg/grantfile/
func BenchmarkLoadSet(b *testing.B) {
	const n = 1000
	for _, format := range []string{"yaml", "json"} {
		var data string
		if format == "yaml" {
			data = genYAML(n)
		} else {
			data = genJSON(b, n)
		}
		dir := writeFiles(b, map[string]string{"grants." + format: data})
		paths := []string{filepath.Join(dir, "grants."+format)}
		b.Run(format+"/cold", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := LoadSet(paths, SetOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		cache := SetOptions{CacheDir: filepath.Join(dir, "cache"), CacheKeyFile: filepath.Join(dir, "cache.key")}
		if _, err := LoadSet(paths, cache); err != nil {
			b.Fatal(err)
		}
		b.Run(format+"/cache-hit", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := LoadSet(paths, cache); err != nil {
					b.Fatal(err)
				}
			}
		})
		// What one CLI start-up sees: a cache hit on a fresh heap, with no garbage
		// collection in progress (the loop above keeps the collector busy, which makes
		// every pointer store pay a write barrier).
		b.Run(format+"/cache-hit-fresh-heap", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				runtime.GC()
				b.StartTimer()
				if _, err := LoadSet(paths, cache); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkLoadGrants measures the GrantSource over 1,000 grants (100 match the context).
func BenchmarkLoadGrants(b *testing.B) {
	dir := writeFiles(b, map[string]string{"g.yaml": genYAML(1000)})
	s, err := LoadSet([]string{filepath.Join(dir, "g.yaml")}, SetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	actx := kernel.AccessContext{World: "bench", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "a0"},
		Authority: kernel.Address{Kind: kernel.KindHuman, ID: "h0"}}
	for b.Loop() {
		gs, _ := s.LoadGrants(context.Background(), actx)
		if len(gs) != 50 {
			b.Fatalf("%d grants", len(gs))
		}
	}
}

// BenchmarkLoadSetCold10k measures a cache miss on a 10,000-grant file (a fresh CI
// machine): read + parse + validate + index, with the fast YAML reader and with the
// YAML library alone.
//
//	go test -run='^$' -bench=LoadSetCold10k -benchmem ./pkg/grantfile/
func BenchmarkLoadSetCold10k(b *testing.B) {
	data := genYAML(10000)
	dir := writeFiles(b, map[string]string{"grants.yaml": data})
	paths := []string{filepath.Join(dir, "grants.yaml")}
	for _, mode := range []string{"fast", "tree", "library"} {
		b.Run(mode, func(b *testing.B) {
			// fast: the direct path; tree: the fast reader's tree, then build; library:
			// the YAML library's tree, then build.
			fastYAMLEnabled, directEnabled = mode != "library", mode == "fast"
			defer func() { fastYAMLEnabled, directEnabled = true, true }()
			b.SetBytes(int64(len(data)))
			cpu0 := processCPU()
			for b.Loop() {
				s, err := LoadSet(paths, SetOptions{})
				if err != nil || s.Len() != 10000 {
					b.Fatal(s, err)
				}
			}
			// CPU time of the whole process (every thread, the collector's included) per
			// load: unlike ns/op, it does not grow when other processes share the cores.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
	// What one CLI start-up sees: one load on a fresh heap.
	for _, direct := range []bool{true, false} {
		b.Run(map[bool]string{true: "fast-fresh-heap", false: "tree-fresh-heap"}[direct], func(b *testing.B) {
			directEnabled = direct
			defer func() { directEnabled = true }()
			benchFreshHeap(b, paths, len(data), 10000)
		})
	}
}

// benchFreshHeap measures one cold load of paths per op (n grants), each on a fresh
// heap, reporting the process's CPU time per load beside ns/op.
func benchFreshHeap(b *testing.B, paths []string, size, n int) {
	b.SetBytes(int64(size))
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		runtime.GC()
		cpu0 := processCPU()
		b.StartTimer()
		s, err := LoadSet(paths, SetOptions{})
		if err != nil || s.Len() != n {
			b.Fatal(s, err)
		}
		cpu += processCPU() - cpu0
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}

// genCLIYAML is the grant file of bench/cli.sh's rows (n grants: files and repo
// capabilities over 100 folders, a flow resource and flow constraints each).
func genCLIYAML(n int) string {
	var b strings.Builder
	b.WriteString("version: 1\ncontext:\n  actor: agent:bench\n  owner: human:ops\ngrants:\n")
	for i := range n {
		ns, acts := "files", "[read, list, stat]"
		if i%4 == 3 {
			ns, acts = "repo", "[status, log]"
		}
		fmt.Fprintf(&b, "  - id: g-%04d\n    subject: agent:bench\n    issuer: human:ops\n    issuedAt: 2026-01-01T00:00:00Z\n", i)
		fmt.Fprintf(&b, "    capabilities:\n      - resource: {namespace: %s, path: [team-%02d, proj-%04d]}\n", ns, i%100, i)
		fmt.Fprintf(&b, "        actions: %s\n        scope: descendants\n", acts)
		b.WriteString("    constraints: {expiresAt: 2030-01-01T00:00:00Z, purposes: [cli, triage]}\n")
	}
	return b.String()
}

// BenchmarkCLIRow10k is the in-process part of bench/cli.sh's 10,000-grant row (issue
// 28): one cold load of its file on a fresh heap, by the direct path and by the tree
// path. B/op is what the load allocates (on this VM every fresh page costs ~16 µs).
//
//	go test -run='^$' -bench=CLIRow10k -benchmem ./pkg/grantfile/
func BenchmarkCLIRow10k(b *testing.B) {
	data := genCLIYAML(10000)
	dir := writeFiles(b, map[string]string{"grants10k.yaml": data})
	paths := []string{filepath.Join(dir, "grants10k.yaml")}
	for _, direct := range []bool{true, false} {
		b.Run(map[bool]string{true: "direct", false: "tree"}[direct], func(b *testing.B) {
			directEnabled = direct
			defer func() { directEnabled = true }()
			benchFreshHeap(b, paths, len(data), 10000)
		})
	}
}

// processCPU is the user plus system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
