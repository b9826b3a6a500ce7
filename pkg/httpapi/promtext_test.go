package httpapi

import (
	"io"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// libraryMetrics is the registry NewMetrics built with the Prometheus client library
// before issue 28 (the library is linked by this test only, not by sharedos).
type libraryMetrics struct {
	reg                 *prometheus.Registry
	requests, decisions *prometheus.CounterVec
	latency             *prometheus.HistogramVec
	storeErrs           prometheus.Counter
}

func newLibraryMetrics() *libraryMetrics {
	m := &libraryMetrics{reg: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sharedos_http_requests_total",
		Help: "HTTP requests by route pattern, method and status."}, []string{"route", "method", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sharedos_http_request_duration_seconds",
		Help: "HTTP request latency by route pattern.", Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}},
		[]string{"route"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sharedos_decisions_total",
		Help: "Kernel decisions answered (tool calls and authorize checks) by outcome and reason code."}, []string{"outcome", "code"})
	m.storeErrs = prometheus.NewCounter(prometheus.CounterOpts{Name: "sharedos_store_errors_total",
		Help: "Requests that failed because the state database was unavailable."})
	m.reg.MustRegister(m.requests, m.latency, m.decisions, m.storeErrs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// TestMetricsTextMatchesTheLibrary: /metrics, written by promtext.go, is what the
// Prometheus client library wrote for the same observations — byte for byte for
// sharedos's own families (labels escaped and sorted, metrics in label order, buckets
// cumulative, bounds and values formatted alike), and the same Go runtime and process
// families (names, HELP, TYPE and label sets; their values move between two scrapes).
func TestMetricsTextMatchesTheLibrary(t *testing.T) {
	ours, lib := NewMetrics(), newLibraryMetrics()
	type req struct {
		route, method, status string
		seconds               float64
		outcome, code         string
		storeFailed           bool
	}
	for _, r := range []req{
		{"/v1/tools/invoke", "POST", "200", 0.0004, "denied", "tool_unavailable", false},
		{"/v1/tools/invoke", "POST", "200", 0.0005, "allowed", "ok", false},
		{"/v1/tools/invoke", "POST", "503", 0.001, "", "", true},
		{"/v1/admin/escalations/{id}", "GET", "404", 0.3, "", "", false},
		{"/v1/admin/escalations/{id}", "GET", "404", 7.5, "", "", false},
		{"unknown", "DELETE", "405", 0, "", "", false},
		{`/odd/"quoted"\back` + "\nline", "PUT", "400", 2.5, "denied", `we"ird\code`, true},
		{"/v1/grants", "GET", "200", 0.0123456789, "allowed", "ok", false},
		{"/v1/grants", "GET", "200", 1e-9, "allowed", "ok", false},
	} {
		ours.requests.WithLabelValues(r.route, r.method, r.status).Inc()
		lib.requests.WithLabelValues(r.route, r.method, r.status).Inc()
		ours.latency.WithLabelValues(r.route).Observe(r.seconds)
		lib.latency.WithLabelValues(r.route).Observe(r.seconds)
		if r.outcome != "" {
			ours.decisions.WithLabelValues(r.outcome, r.code).Inc()
			lib.decisions.WithLabelValues(r.outcome, r.code).Inc()
		}
		if r.storeFailed {
			ours.storeErrs.Inc()
			lib.storeErrs.Inc()
		}
	}
	scrapeOf := func(serve func(*httptest.ResponseRecorder)) (string, string) {
		rec := httptest.NewRecorder()
		serve(rec)
		b, _ := io.ReadAll(rec.Body)
		return rec.Header().Get("Content-Type"), string(b)
	}
	get := httptest.NewRequest("GET", "/metrics", nil)
	ourType, ourText := scrapeOf(func(w *httptest.ResponseRecorder) { ours.Handler().ServeHTTP(w, get) })
	libType, libText := scrapeOf(func(w *httptest.ResponseRecorder) {
		promhttp.HandlerFor(lib.reg, promhttp.HandlerOpts{}).ServeHTTP(w, get)
	})
	if ourType != libType {
		t.Errorf("Content-Type %q; the library sent %q", ourType, libType)
	}
	own := func(text string) []string {
		var out []string
		for _, l := range strings.Split(text, "\n") {
			if strings.Contains(l, "sharedos_") {
				out = append(out, l)
			}
		}
		return out
	}
	if got, want := own(ourText), own(libText); !slices.Equal(got, want) {
		t.Errorf("sharedos families differ from the library's:\n--- ours\n%s\n--- library\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The runtime's and the process's families: the lines with their values dropped.
	value := regexp.MustCompile(` [^ ]+$`)
	shape := func(text string) []string {
		var out []string
		for _, l := range strings.Split(text, "\n") {
			if l == "" || strings.Contains(l, "sharedos_") {
				continue
			}
			if !strings.HasPrefix(l, "#") {
				l = value.ReplaceAllString(l, "")
			}
			out = append(out, l)
		}
		return out
	}
	if got, want := shape(ourText), shape(libText); !slices.Equal(got, want) {
		t.Errorf("runtime and process families differ from the library's:\n--- ours\n%s\n--- library\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, name := range []string{"go_goroutines", "go_memstats_sys_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_start_time_seconds", "process_max_fds"} {
		if v := sampleValue(ourText, name); v == "" || v == "0" {
			t.Errorf("%s is %q; want a measured value", name, v)
		}
	}
}

// sampleValue is the value of the unlabelled sample name in an exposition.
func sampleValue(text, name string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return ""
}
