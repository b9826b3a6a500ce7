package cmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// --otel-traces FILE: a span under a traceparent's span context lands in FILE, in that
// trace, once the tracer stops; a file that cannot be opened is a usage error.
func TestOpenTraces(t *testing.T) {
	path := filepath.Join(t.TempDir(), "spans.json")
	tracer, stop, err := openTraces(path)
	if err != nil {
		t.Fatal(err)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	parent := trace.ContextWithRemoteSpanContext(context.Background(),
		trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true}))
	_, span := tracer.Start(parent, "GET /v1/tools")
	span.End()
	if err := stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(b); !strings.Contains(s, `"TraceID":"4bf92f3577b34da6a3ce929d0e0e4736"`) || !strings.Contains(s, `"Name":"GET /v1/tools"`) {
		t.Fatalf("spans file:\n%s", s)
	}
	if _, _, err := openTraces(filepath.Join(t.TempDir(), "no", "such", "dir", "x.json")); err == nil || exitCodeOf(err) != ExitUsage {
		t.Fatalf("unopenable file: %v", err)
	}
}
