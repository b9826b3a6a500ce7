package cmd

import (
	"context"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// openTraces opens serve's OpenTelemetry traces (--otel-traces FILE): each request's
// server span, one JSON document per span, appended to FILE (created 0600) by the
// stdout exporter in batches; stop flushes them and closes the file.
//
// Decision: a file, named by a flag, rather than an OTLP exporter configured by the
// OTEL_EXPORTER_OTLP_* variables. Tracing stays off unless asked for, needs no network
// and no collector to be tested, and the binary links no gRPC or protobuf stack; a
// collector can read the file (its file log receiver). The spans follow the request's
// W3C traceparent, and the kernel's trace id is the span's (pkg/httpapi, startTrace).
func openTraces(path string) (trace.Tracer, func(context.Context) error, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, nil, usageError("pass --otel-traces a file this process may write", "cannot open --otel-traces %s: %v", path, err)
	}
	exp, err := stdouttrace.New(stdouttrace.WithWriter(f))
	if err != nil {
		_ = f.Close()
		return nil, nil, internalError(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "sharedos"))))
	stop := func(ctx context.Context) error {
		err := tp.Shutdown(ctx)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	return tp.Tracer("github.com/sharedos/sharedos/pkg/httpapi"), stop, nil
}
