package httpapi

// The Prometheus metrics of `serve`, written in the Prometheus text exposition format
// (version 0.0.4) by this file rather than by the Prometheus client library. Issue 28:
// the library, its protobuf and procfs dependencies and the runtime/expvar collectors it
// registers at package initialisation were the largest share of the start-up that every
// sharedos process pays (`sharedos version` included) — 48 packages and a read of the
// executable's own bytes — for metrics only `serve` exposes.
//
// What /metrics answers is what the library answered with the registry NewMetrics built
// (pkg/httpapi's promtext_test.go checks it against the library, which only that test
// links): the same families, HELP and TYPE lines, label order, number formatting, sort
// order, histogram buckets and cumulative counts, and the Go runtime's and the process's
// families of the library's default collectors with the same names and meaning. Two
// decisions where nothing asks for more: the body is never gzip-compressed (a scrape of
// a few kilobytes), and the exposition is always the text format (no protobuf or
// OpenMetrics negotiation), which every Prometheus server accepts.

import (
	"bufio"
	"bytes"
	"math"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// promContentType is the media type of the text exposition format (as the library sent it).
const promContentType = "text/plain; version=0.0.4; charset=utf-8; escaping=underscores"

// counter is a monotonically increasing float (counts here are whole numbers).
type counter struct{ n atomic.Uint64 }

// Inc adds one.
func (c *counter) Inc() { c.n.Add(1) }

// counterVec is a family of counters keyed by label values.
type counterVec struct {
	name, help string
	labels     []string
	mu         sync.Mutex
	children   map[string]*counterChild
}

type counterChild struct {
	values []string
	counter
}

func newCounterVec(name, help string, labels ...string) *counterVec {
	return &counterVec{name: name, help: help, labels: labels, children: map[string]*counterChild{}}
}

// WithLabelValues is the counter of these label values (created at 0 on first use).
func (v *counterVec) WithLabelValues(values ...string) *counter {
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.children[key]
	if c == nil {
		c = &counterChild{values: slices.Clone(values)}
		v.children[key] = c
	}
	return &c.counter
}

// histogram counts observations into cumulative buckets.
type histogram struct {
	upper  []float64
	mu     sync.Mutex
	counts []uint64 // per bucket, not cumulative; the last is +Inf
	sum    float64
	count  uint64
}

// Observe records one value.
func (h *histogram) Observe(v float64) {
	i, _ := slices.BinarySearch(h.upper, v) // the first bucket whose upper bound is >= v
	h.mu.Lock()
	h.counts[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

// histogramVec is a family of histograms keyed by label values.
type histogramVec struct {
	name, help string
	labels     []string
	buckets    []float64
	mu         sync.Mutex
	children   map[string]*histogramChild
}

type histogramChild struct {
	values []string
	histogram
}

func newHistogramVec(name, help string, buckets []float64, labels ...string) *histogramVec {
	return &histogramVec{name: name, help: help, labels: labels, buckets: buckets, children: map[string]*histogramChild{}}
}

// WithLabelValues is the histogram of these label values (created empty on first use).
func (v *histogramVec) WithLabelValues(values ...string) *histogram {
	key := strings.Join(values, "\xff")
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.children[key]
	if c == nil {
		c = &histogramChild{values: slices.Clone(values)}
		c.upper = v.buckets
		c.counts = make([]uint64, len(v.buckets)+1)
		v.children[key] = c
	}
	return &c.histogram
}

// promSample is one line of a family: the metric name's suffix, its label pairs (in
// the order written) and its value.
type promSample struct {
	suffix string
	labels [][2]string
	value  float64
}

// promFamily is one metric family as written.
type promFamily struct {
	name, help, typ string
	samples         []promSample
}

// labelPairs pairs names with values, sorted by name (as the library wrote them).
func labelPairs(names, values []string) [][2]string {
	out := make([][2]string, len(names))
	for i := range names {
		out[i] = [2]string{names[i], values[i]}
	}
	slices.SortFunc(out, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// labelSortKey orders the metrics of a family as the library did: by their label values,
// taken in the order of the sorted label names.
func labelSortKey(pairs [][2]string) string {
	var b strings.Builder
	for _, p := range pairs {
		b.WriteString(p[1])
		b.WriteByte(0)
	}
	return b.String()
}

func (v *counterVec) family() promFamily {
	f := promFamily{name: v.name, help: v.help, typ: "counter"}
	v.mu.Lock()
	type row struct {
		key   string
		pairs [][2]string
		n     uint64
	}
	rows := make([]row, 0, len(v.children))
	for _, c := range v.children {
		p := labelPairs(v.labels, c.values)
		rows = append(rows, row{labelSortKey(p), p, c.n.Load()})
	}
	v.mu.Unlock()
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.key, b.key) })
	for _, r := range rows {
		f.samples = append(f.samples, promSample{labels: r.pairs, value: float64(r.n)})
	}
	return f
}

func (v *histogramVec) family() promFamily {
	f := promFamily{name: v.name, help: v.help, typ: "histogram"}
	type row struct {
		key     string
		pairs   [][2]string
		samples []promSample
	}
	v.mu.Lock()
	rows := make([]row, 0, len(v.children))
	for _, c := range v.children {
		p := labelPairs(v.labels, c.values)
		c.mu.Lock()
		var cum uint64
		var samples []promSample
		for i, ub := range c.upper {
			cum += c.counts[i]
			samples = append(samples, promSample{"_bucket", append(slices.Clone(p), [2]string{"le", formatFloat(ub)}), float64(cum)})
		}
		samples = append(samples,
			promSample{"_bucket", append(slices.Clone(p), [2]string{"le", "+Inf"}), float64(c.count)},
			promSample{"_sum", p, c.sum},
			promSample{"_count", p, float64(c.count)})
		c.mu.Unlock()
		rows = append(rows, row{labelSortKey(p), p, samples})
	}
	v.mu.Unlock()
	slices.SortFunc(rows, func(a, b row) int { return strings.Compare(a.key, b.key) })
	for _, r := range rows {
		f.samples = append(f.samples, r.samples...)
	}
	return f
}

// formatFloat writes a value as the library's text format did (Go's shortest 'g', with
// +Inf, -Inf and NaN spelled out).
func formatFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case math.IsNaN(f):
		return "NaN"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
var labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

// writeFamilies writes the families sorted by name, each with its HELP and TYPE lines;
// a family without samples is left out, as the library did.
func writeFamilies(w *bufio.Writer, fams []promFamily) {
	slices.SortFunc(fams, func(a, b promFamily) int { return strings.Compare(a.name, b.name) })
	for _, f := range fams {
		if len(f.samples) == 0 {
			continue
		}
		w.WriteString("# HELP " + f.name + " " + helpEscaper.Replace(f.help) + "\n")
		w.WriteString("# TYPE " + f.name + " " + f.typ + "\n")
		for _, s := range f.samples {
			w.WriteString(f.name + s.suffix)
			if len(s.labels) > 0 {
				w.WriteByte('{')
				for i, l := range s.labels {
					if i > 0 {
						w.WriteByte(',')
					}
					w.WriteString(l[0] + `="` + labelEscaper.Replace(l[1]) + `"`)
				}
				w.WriteByte('}')
			}
			w.WriteString(" " + formatFloat(s.value) + "\n")
		}
	}
}

// gauge is a family of one unlabelled sample.
func gauge(name, typ, help string, v float64) promFamily {
	return promFamily{name: name, help: help, typ: typ, samples: []promSample{{value: v}}}
}

// goFamilies are the Go runtime's families of the library's default Go collector.
func goFamilies() []promFamily {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	gs := debug.GCStats{PauseQuantiles: make([]time.Duration, 5)}
	debug.ReadGCStats(&gs)
	rm := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(rm)
	u := func(s metrics.Sample) float64 {
		if s.Value.Kind() == metrics.KindUint64 {
			return float64(s.Value.Uint64())
		}
		return 0
	}
	threads, _ := runtime.ThreadCreateProfile(nil)
	summary := promFamily{name: "go_gc_duration_seconds", typ: "summary",
		help: "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles."}
	for i, q := range []string{"0", "0.25", "0.5", "0.75", "1"} {
		summary.samples = append(summary.samples, promSample{labels: [][2]string{{"quantile", q}}, value: gs.PauseQuantiles[i].Seconds()})
	}
	summary.samples = append(summary.samples, promSample{suffix: "_sum", value: gs.PauseTotal.Seconds()}, promSample{suffix: "_count", value: float64(gs.NumGC)})
	const g, c = "gauge", "counter"
	return []promFamily{
		summary,
		gauge("go_gc_gogc_percent", g, "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.", u(rm[0])),
		gauge("go_gc_gomemlimit_bytes", g, "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.", u(rm[1])),
		gauge("go_goroutines", g, "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		{name: "go_info", typ: g, help: "Information about the Go environment.", samples: []promSample{{labels: [][2]string{{"version", runtime.Version()}}, value: 1}}},
		gauge("go_memstats_alloc_bytes", g, "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", float64(ms.Alloc)),
		gauge("go_memstats_alloc_bytes_total", c, "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", float64(ms.TotalAlloc)),
		gauge("go_memstats_buck_hash_sys_bytes", g, "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", float64(ms.BuckHashSys)),
		gauge("go_memstats_frees_total", c, "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", float64(ms.Frees)),
		gauge("go_memstats_gc_sys_bytes", g, "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", float64(ms.GCSys)),
		gauge("go_memstats_heap_alloc_bytes", g, "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", float64(ms.HeapAlloc)),
		gauge("go_memstats_heap_idle_bytes", g, "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", float64(ms.HeapIdle)),
		gauge("go_memstats_heap_inuse_bytes", g, "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", float64(ms.HeapInuse)),
		gauge("go_memstats_heap_objects", g, "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", float64(ms.HeapObjects)),
		gauge("go_memstats_heap_released_bytes", g, "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", float64(ms.HeapReleased)),
		gauge("go_memstats_heap_sys_bytes", g, "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", float64(ms.HeapSys)),
		gauge("go_memstats_last_gc_time_seconds", g, "Number of seconds since 1970 of last garbage collection.", float64(ms.LastGC)/1e9),
		gauge("go_memstats_mallocs_total", c, "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", float64(ms.Mallocs)),
		gauge("go_memstats_mcache_inuse_bytes", g, "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", float64(ms.MCacheInuse)),
		gauge("go_memstats_mcache_sys_bytes", g, "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", float64(ms.MCacheSys)),
		gauge("go_memstats_mspan_inuse_bytes", g, "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", float64(ms.MSpanInuse)),
		gauge("go_memstats_mspan_sys_bytes", g, "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", float64(ms.MSpanSys)),
		gauge("go_memstats_next_gc_bytes", g, "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", float64(ms.NextGC)),
		gauge("go_memstats_other_sys_bytes", g, "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", float64(ms.OtherSys)),
		gauge("go_memstats_stack_inuse_bytes", g, "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", float64(ms.StackInuse)),
		gauge("go_memstats_stack_sys_bytes", g, "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", float64(ms.StackSys)),
		gauge("go_memstats_sys_bytes", g, "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", float64(ms.Sys)),
		gauge("go_sched_gomaxprocs_threads", g, "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.", float64(runtime.GOMAXPROCS(0))),
		gauge("go_threads", g, "Number of OS threads created.", float64(threads)),
	}
}

// userHZ is the unit of the CPU times in /proc/self/stat (the library assumed 100 too).
const userHZ = 100

// processFamilies are the families of the library's default process collector, read
// from /proc (Linux); elsewhere, or if /proc cannot be read, there are none.
func processFamilies() []promFamily {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return nil
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields are
	// counted after its closing parenthesis, from field 3 (state).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil
	}
	f := strings.Fields(string(stat[i+1:]))
	field := func(n int) float64 { // n: the field's number in proc(5)
		if n-3 >= len(f) {
			return 0
		}
		v, _ := strconv.ParseFloat(f[n-3], 64)
		return v
	}
	utime, stime, starttime, vsize, rss := field(14), field(15), field(22), field(23), field(24)
	var bootTime float64
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "btime "); ok {
				bootTime, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
			}
		}
	}
	maxFDs, maxVM := math.NaN(), math.NaN()
	if b, err := os.ReadFile("/proc/self/limits"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			limit := func() float64 { // the soft limit: the column after the name
				fs := strings.Fields(l[26:])
				if len(fs) == 0 {
					return math.NaN()
				}
				if fs[0] == "unlimited" {
					return math.MaxUint64 // as the library reported an unlimited one
				}
				v, err := strconv.ParseFloat(fs[0], 64)
				if err != nil {
					return math.NaN()
				}
				return v
			}
			switch {
			case len(l) > 26 && strings.HasPrefix(l, "Max open files"):
				maxFDs = limit()
			case len(l) > 26 && strings.HasPrefix(l, "Max address space"):
				maxVM = limit()
			}
		}
	}
	openFDs := 0.0
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		openFDs = float64(len(names)) // the listing's own descriptor included, as the library counted
	}
	var rx, tx float64
	if b, err := os.ReadFile("/proc/self/net/netstat"); err == nil {
		var header []string
		for _, l := range strings.Split(string(b), "\n") {
			rest, ok := strings.CutPrefix(l, "IpExt: ")
			if !ok {
				continue
			}
			fs := strings.Fields(rest)
			if header == nil {
				header = fs
				continue
			}
			for j, name := range header {
				if j < len(fs) {
					v, _ := strconv.ParseFloat(fs[j], 64)
					switch name {
					case "InOctets":
						rx = v
					case "OutOctets":
						tx = v
					}
				}
			}
		}
	}
	const g, c = "gauge", "counter"
	fams := []promFamily{
		gauge("process_cpu_seconds_total", c, "Total user and system CPU time spent in seconds.", (utime+stime)/userHZ),
		gauge("process_network_receive_bytes_total", c, "Number of bytes received by the process over the network.", rx),
		gauge("process_network_transmit_bytes_total", c, "Number of bytes sent by the process over the network.", tx),
		gauge("process_open_fds", g, "Number of open file descriptors.", openFDs),
		gauge("process_resident_memory_bytes", g, "Resident memory size in bytes.", rss*float64(os.Getpagesize())),
		gauge("process_start_time_seconds", g, "Start time of the process since unix epoch in seconds.", bootTime+starttime/userHZ),
		gauge("process_virtual_memory_bytes", g, "Virtual memory size in bytes.", vsize),
	}
	if !math.IsNaN(maxFDs) {
		fams = append(fams, gauge("process_max_fds", g, "Maximum number of open file descriptors.", maxFDs))
	}
	if !math.IsNaN(maxVM) {
		fams = append(fams, gauge("process_virtual_memory_max_bytes", g, "Maximum amount of virtual memory available in bytes.", maxVM))
	}
	return fams
}

// serveMetrics writes the exposition of fams (plus the Go runtime's and the process's).
func serveMetrics(w http.ResponseWriter, fams []promFamily) {
	fams = append(fams, goFamilies()...)
	fams = append(fams, processFamilies()...)
	w.Header().Set("Content-Type", promContentType)
	bw := bufio.NewWriter(w)
	writeFamilies(bw, fams)
	bw.Flush()
}
