package cmd

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/sharedos/sharedos/internal/logbuf"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/mcphttp"
)

// ServeOptions are the options of `serve`.
type ServeOptions struct {
	IO       *IOStreams
	Settings func() (*Settings, error)
	Getwd    func() (string, error)
	Clock    func() time.Time
	// Prepare checks the run's inputs (the ephemeral token's context).
	Prepare func() error

	LogFormat string
	HTTP      MCPHTTPOptions
	// MCP mounts the MCP server of `mcp --listen` at /mcp beside /v1.
	MCP bool
	// IdempotencyWindow is how long an Idempotency-Key's response is kept.
	IdempotencyWindow time.Duration
	// IdempotencyLease is the lease of an Idempotency-Key's claim (httpapi.Config).
	IdempotencyLease time.Duration
	// OTelTraces is the file of the OpenTelemetry spans ("": no tracing; openTraces).
	OTelTraces string
}

func newServeCmd(f *Factory, runF func(context.Context, *ServeOptions) error) *cobra.Command {
	opts := &ServeOptions{IO: f.IOStreams, Settings: f.Settings, Getwd: f.Getwd, Clock: f.Clock,
		Prepare: func() error {
			_, err := f.prepared(host.Needs{Planes: true, Actor: true})
			return err
		}}
	c := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP /v1 API (and, with --mcp, MCP at /mcp) to agents and hosts",
		Long: `Serve the HTTP /v1 API on --listen HOST:PORT: GET /v1/tools, GET|PUT /v1/tools/namespaces,
POST /v1/tools/invoke, POST /v1/tools/explain, POST /v1/authorize, GET /v1/reach, and
/health without credentials. Operators get /healthz (the process is up), /readyz (the
state database is reachable and its schema current: 503 otherwise), /metrics (Prometheus)
and /v1/openapi.json (the contract), also without credentials, and one JSON access log
line per request on stderr (request id, token id, route, status, latency, the decision).
Tokens with role operator may also use /v1/admin/… (escalations, audit, namespace
settings of any world and owner). Every request carries 'Authorization: Bearer TOKEN'; each token
of the tokens file (--tokens FILE, see 'sharedos tokens') runs under its own context and
grant files, exactly as for 'sharedos mcp --listen' (the same file, the same rules:
401 for a missing, unknown or expired token, revocation on the next request, 413 over
4 MiB). Without a tokens file one ephemeral token, bound to this invocation's context, is
printed on stderr.

POST /v1/tools/invoke honours an Idempotency-Key header: the same key with the same call
returns the stored result verbatim without running or spending again (kept in the state
database for --idempotency-window, default 24h, so every serve process over that database
shares it); the same key with another call is 409 replay_conflict, and while the first
still runs, 409 replay_pending. A key whose server stopped while running its call is
taken over by a retry once its claim's lease (--idempotency-lease, default 30s; renewed
while the call runs) has run out — unless the call had spent its use: then the key is 409
replay_interrupted, never run again.

A refused call is a 200 result (status denied), never an HTTP error; errors of a request
use the envelope {"error":{"code","message","requestId"}}. Every response carries
x-request-id and cache-control: no-store.

With --mcp the same process also serves MCP over streamable HTTP at /mcp, with the same
tokens. Off loopback it needs --tls-cert and --tls-key (or --insecure-listen). SIGTERM or
SIGINT lets in-flight requests finish (up to 10 s) and stops.

--otel-traces FILE (off by default) appends one OpenTelemetry span per request to FILE
(JSON); a request's W3C traceparent is its parent, and the kernel's trace id, when the
request names none, is the span's trace id, so audit records and traces join.`,
		Example: `  sharedos --root ~/project serve --listen 127.0.0.1:8080 --tokens ~/.config/sharedos/tokens.yaml
  sharedos --root ~/project serve --listen 127.0.0.1:8080 --tokens tokens.yaml --mcp`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if opts.HTTP.Listen == "" {
				return usageError("pass --listen HOST:PORT, e.g. --listen 127.0.0.1:8080", "serve needs --listen")
			}
			if opts.IdempotencyWindow <= 0 {
				return usageError("pass a positive duration, e.g. --idempotency-window 24h", "invalid --idempotency-window %s", opts.IdempotencyWindow)
			}
			if opts.IdempotencyLease <= 0 {
				return usageError("pass a positive duration, e.g. --idempotency-lease 30s", "invalid --idempotency-lease %s", opts.IdempotencyLease)
			}
			if opts.LogFormat != "text" && opts.LogFormat != "json" {
				return usageError("pass --log-format text or --log-format json", "invalid --log-format %q", opts.LogFormat)
			}
			if err := opts.HTTP.check(); err != nil {
				return err
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runServe(c.Context(), opts)
		},
	}
	c.Flags().StringVar(&opts.LogFormat, "log-format", "json", "log format on stderr: text or json")
	_ = c.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringVar(&opts.HTTP.Listen, "listen", "", "serve on HOST:PORT (required)")
	c.Flags().StringVar(&opts.HTTP.Tokens, "tokens", "", "tokens file, or store: for the tokens of the PostgreSQL state database (default SHAREDOS_TOKENS, else the config key tokens; none: one ephemeral token)")
	c.Flags().StringVar(&opts.HTTP.TLSCert, "tls-cert", "", "PEM certificate (with --tls-key)")
	c.Flags().StringVar(&opts.HTTP.TLSKey, "tls-key", "", "PEM private key (with --tls-cert)")
	c.Flags().BoolVar(&opts.HTTP.InsecureListen, "insecure-listen", false, "allow --listen off loopback without TLS (logs a warning)")
	c.Flags().BoolVar(&opts.MCP, "mcp", false, "also serve MCP over streamable HTTP at /mcp, with the same tokens")
	c.Flags().DurationVar(&opts.IdempotencyWindow, "idempotency-window", httpapi.DefaultIdempotencyWindow, "how long the response of a POST /v1/tools/invoke with an Idempotency-Key is kept and replayed")
	c.Flags().DurationVar(&opts.IdempotencyLease, "idempotency-lease", httpapi.DefaultIdempotencyLease, "how long after its server was last heard of a running Idempotency-Key's claim may be taken over by a retry")
	c.Flags().StringVar(&opts.OTelTraces, "otel-traces", "", "append an OpenTelemetry span per request (JSON, W3C traceparent honoured) to this file (default: no tracing)")
	c.Flags().IntVar(&opts.HTTP.MaxSessions, "max-sessions", 0, "open MCP sessions per token with --mcp (default: config mcp.maxSessions, else 64)")
	return c
}

// runServe serves /v1 (and /mcp) until SIGTERM or SIGINT, then drains.
func runServe(ctx context.Context, opts *ServeOptions) error {
	// The access log (a line per request) leaves through a goroutine of its own, many
	// lines a write: slog's handler holds its mutex across each Write (internal/logbuf).
	// Everything serve prints on stderr goes through it, in order; Close writes the rest.
	errOut := logbuf.New(opts.IO.ErrOut, 0)
	defer errOut.Close()
	log := serverLogger(errOut, opts.LogFormat, opts.Settings)
	var tracer trace.Tracer
	if opts.OTelTraces != "" {
		t, stop, err := openTraces(opts.OTelTraces)
		if err != nil {
			return err
		}
		defer func() { _ = stop(context.WithoutCancel(ctx)) }()
		tracer = t
	}
	env := listenEnv{IO: opts.IO, Settings: opts.Settings, Getwd: opts.Getwd, Clock: opts.Clock, Prepare: opts.Prepare}
	return listenAndServe(ctx, env, &opts.HTTP, log, httpSurface{
		what: "serving the HTTP /v1 API", path: "/v1",
		handler: func(srv *mcphttp.Server) http.Handler {
			authenticate, enter := httpapi.Tokens(srv)
			cfg := httpapi.Config{Authenticate: authenticate, Enter: enter, Logger: log, IdempotencyWindow: opts.IdempotencyWindow, IdempotencyLease: opts.IdempotencyLease, Clock: opts.Clock,
				Ready: srv.Ready, Metrics: httpapi.NewMetrics(), Tracer: tracer, Revisions: httpapi.StoreRevisions(srv)}
			if opts.MCP {
				cfg.MCP = srv.Handler()
			}
			return httpapi.New(cfg)
		},
		ephemeral: func(url, token string) {
			fmt.Fprintf(errOut, "sharedos: no tokens file: one ephemeral token, valid until this server stops, runs under this invocation's context\ntoken: %s\nurl:   %s\n", token, url)
		},
	})
}
