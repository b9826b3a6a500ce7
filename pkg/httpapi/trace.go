package httpapi

import (
	"context"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext reads a W3C traceparent (and tracestate).
var traceContext propagation.TraceContext

// startTrace accepts the request's W3C traceparent and, with a Tracer configured, starts
// the request's server span (its parent: the traceparent's span; without one, a new
// trace). It returns the request's context and the trace id the kernel is given when the
// request names none of its own (X-Sharedos-Trace-Id, or a call's traceId): the span's
// trace id — the traceparent's when present — so the audit record and the trace join.
// Without a Tracer, a valid traceparent's trace id is still the kernel's; without
// either, "" (the host's own).
func (h *handler) startTrace(r *http.Request) (context.Context, trace.Span, string) {
	ctx := r.Context()
	if r.Header.Get("Traceparent") != "" {
		ctx = traceContext.Extract(ctx, propagation.HeaderCarrier(r.Header))
	}
	var span trace.Span
	if h.cfg.Tracer != nil {
		ctx, span = h.cfg.Tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ctx, span, ""
	}
	return ctx, span, sc.TraceID().String()
}

// endTrace ends the request's span, named by its route (a bounded name), with its status
// and decision.
func endTrace(span trace.Span, rq *request, route string, status int) {
	if span == nil {
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	span.SetName(rq.r.Method + " " + route)
	span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", status),
		attribute.String("sharedos.request_id", rq.id))
	if rq.p != nil {
		span.SetAttributes(attribute.String("sharedos.token", rq.p.ID()))
	}
	if rq.decision.outcome != "" {
		span.SetAttributes(attribute.String("sharedos.decision.outcome", rq.decision.outcome),
			attribute.String("sharedos.decision.code", rq.decision.code))
	}
	if rq.trace != "" {
		span.SetAttributes(attribute.String("sharedos.trace_id", rq.trace))
	}
	if status >= 500 {
		span.SetStatus(codes.Error, "HTTP "+strconv.Itoa(status))
	}
	span.End()
}
