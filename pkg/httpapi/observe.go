package httpapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// Metrics are the server's Prometheus metrics. Every label set is bounded: the route is
// its pattern (or "unknown"), the status a number, the decision's outcome and reason
// code come from the kernel's fixed vocabularies — never a tool argument, path, token or
// id.
type Metrics struct {
	requests  *counterVec
	latency   *histogramVec
	decisions *counterVec
	storeErrs *counter
}

// NewMetrics returns the metrics (served with the Go runtime's and the process's; the
// text format is written by promtext.go).
func NewMetrics() *Metrics {
	return &Metrics{
		requests: newCounterVec("sharedos_http_requests_total",
			"HTTP requests by route pattern, method and status.", "route", "method", "status"),
		latency: newHistogramVec("sharedos_http_request_duration_seconds",
			"HTTP request latency by route pattern.", []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}, "route"),
		decisions: newCounterVec("sharedos_decisions_total",
			"Kernel decisions answered (tool calls and authorize checks) by outcome and reason code.", "outcome", "code"),
		storeErrs: &counter{},
	}
}

// storeErrsHelp is the HELP text of sharedos_store_errors_total.
const storeErrsHelp = "Requests that failed because the state database was unavailable."

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		serveMetrics(w, []promFamily{m.requests.family(), m.latency.family(), m.decisions.family(),
			gauge("sharedos_store_errors_total", "counter", storeErrsHelp, float64(m.storeErrs.n.Load()))})
	})
}

// recorder is the response writer of one request: it keeps the status.
type recorder struct {
	http.ResponseWriter
	status int
	// revision, when set, is the x-sharedos-revision of the response, read as its
	// header is written (after the request's own writes).
	revision func() int64
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.stamp()
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.stamp()
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) stamp() {
	if r.revision != nil {
		r.Header().Set(HeaderRevision, strconv.FormatInt(r.revision(), 10))
	}
}

func (r *recorder) Flush() {
	if r.status == 0 {
		r.stamp()
	}
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// decision is what a request decided, for the access log and the metrics.
type decision struct {
	outcome, code string
}

// observe logs the request (one JSON line per request: request id, token id — never
// the token —, route, method, status, latency, the decision's outcome and code) and
// counts it.
func (h *handler) observe(rq *request, rec *recorder, route string, start time.Time) {
	d := time.Since(start)
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	attrs := []any{"requestId", rq.id, "route", route, "method", rq.r.Method, "status", status, "latencyMs", float64(d.Microseconds()) / 1000}
	if rq.p != nil {
		attrs = append(attrs, "token", rq.p.ID())
	}
	if rq.decision.outcome != "" {
		attrs = append(attrs, "outcome", rq.decision.outcome, "code", rq.decision.code)
	}
	h.log.Info("request", attrs...)
	if m := h.cfg.Metrics; m != nil {
		m.requests.WithLabelValues(route, rq.r.Method, strconv.Itoa(status)).Inc()
		m.latency.WithLabelValues(route).Observe(d.Seconds())
		if rq.decision.outcome != "" {
			m.decisions.WithLabelValues(rq.decision.outcome, rq.decision.code).Inc()
		}
		if rq.storeFailed {
			m.storeErrs.Inc()
		}
	}
}

// resultDecision is a tool result's decision.
func resultDecision(res kernel.ToolResult) decision {
	d := decision{outcome: string(res.Status), code: "ok"}
	if res.Error != nil {
		d.code = string(res.Error.Code)
	}
	return d
}

// ready answers /readyz: 200 when Config.Ready reports the store reachable, else 503.
func (h *handler) ready(w http.ResponseWriter, rq *request) {
	if h.cfg.Ready == nil {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	ctx, cancel := context.WithTimeout(rq.r.Context(), 2*time.Second)
	defer cancel()
	if err := h.cfg.Ready(ctx); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = errors.New("the state database did not answer within 2 s")
		}
		h.log.Warn("not ready", "requestId", rq.id, "err", err)
		msg := "The state database is unavailable."
		if errors.Is(err, store.ErrMigrationPending) {
			msg = "The state database is not ready: " + err.Error() // names the migrations, no secret
		}
		h.fail(w, rq, &Error{Status: http.StatusServiceUnavailable, Code: "not_ready", Message: msg})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
