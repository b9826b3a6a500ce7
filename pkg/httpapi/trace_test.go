package httpapi_test

import (
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sharedos/sharedos/pkg/httpapi"
)

// A request with a W3C traceparent is traced as a child span of it, in its trace, and the
// kernel's trace id is the traceparent's: the audit record of the listing carries it.
func TestTraceparent(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	f := newFixtureWith(t, func(c *httpapi.Config) { c.Tracer = tp.Tracer("sharedos") })
	const traceID, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	r := f.do("GET", "/v1/tools", "alice", "", "Traceparent", "00-"+traceID+"-"+parent+"-01")
	if r.status != 200 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.SpanContext.TraceID().String() != traceID || s.Parent.SpanID().String() != parent || s.Name != "GET /v1/tools" {
		t.Fatalf("span %q trace %s parent %s, want GET /v1/tools in %s under %s", s.Name, s.SpanContext.TraceID(), s.Parent.SpanID(), traceID, parent)
	}
	r = f.do("GET", "/v1/admin/audit?traceId="+traceID, "op", "")
	if r.status != 200 || !strings.Contains(string(r.body), `"traceId":"`+traceID+`"`) {
		t.Fatalf("no audit record in the traceparent's trace: %d %s", r.status, r.body)
	}
	// without a traceparent the span starts a trace of its own, which is the kernel's
	exp.Reset()
	if r = f.do("GET", "/v1/tools", "alice", ""); r.status != 200 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	if spans = exp.GetSpans(); len(spans) != 1 || spans[0].Parent.IsValid() {
		t.Fatalf("spans without traceparent: %+v", spans)
	}
	own := spans[0].SpanContext.TraceID().String()
	if r = f.do("GET", "/v1/admin/audit?traceId="+own, "op", ""); !strings.Contains(string(r.body), `"traceId":"`+own+`"`) {
		t.Fatalf("no audit record in the span's trace %s: %s", own, r.body)
	}
}
