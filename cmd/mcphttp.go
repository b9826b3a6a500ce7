package cmd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/mcphttp"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// MCPHTTPOptions are the options of `mcp --listen`.
type MCPHTTPOptions struct {
	Listen         string
	Tokens         string
	TLSCert        string
	TLSKey         string
	InsecureListen bool
	MaxSessions    int

	// HostPart is Listen's host and Insecure the listen policy's verdict (serving plain
	// HTTP off loopback, to be warned about), as check found them.
	HostPart string
	Insecure bool
}

// check validates the flags of --listen: the address, the TLS pair, the listen policy
// and --max-sessions (nothing is read or opened).
func (o *MCPHTTPOptions) check() error {
	hostPart, port, err := net.SplitHostPort(o.Listen)
	if err != nil || port == "" {
		return usageError("pass --listen HOST:PORT, e.g. --listen 127.0.0.1:8765", "invalid --listen %q", o.Listen)
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return usageError("pass both --tls-cert FILE and --tls-key FILE", "--tls-cert and --tls-key go together")
	}
	if o.Insecure, err = listenPolicy(o.Listen, hostPart, o.TLSCert != "", o.InsecureListen); err != nil {
		return err
	}
	if o.MaxSessions < 0 {
		return usageError("pass --max-sessions N with N ≥ 1", "invalid --max-sessions %d", o.MaxSessions)
	}
	o.HostPart = hostPart
	return nil
}

// shutdownGrace bounds a graceful shutdown: in-flight calls get this long to finish.
const shutdownGrace = 10 * time.Second

// loopbackHost reports whether a listen host is loopback only ("localhost", 127.0.0.0/8,
// ::1). An empty host (":8080") listens on every address, so it is not.
func loopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(h, "[]"))
	return err == nil && ip.IsLoopback()
}

// listenPolicy decides whether a listen address may be served: loopback always; off
// loopback only with TLS, or with --insecure-listen, which must then be warned about
// (insecure=true).
func listenPolicy(listen, hostPart string, useTLS, insecureListen bool) (insecure bool, err error) {
	switch {
	case loopbackHost(hostPart) || useTLS:
		return false, nil
	case insecureListen:
		return true, nil
	}
	return false, usageError("pass --tls-cert FILE and --tls-key FILE, or --insecure-listen to serve plain HTTP off loopback anyway (bearer tokens then cross the network in clear)",
		"refusing to listen on %s without TLS: it is not a loopback address", listen)
}

// runMCPHTTP serves MCP over streamable HTTP until SIGTERM or SIGINT, then drains.
func runMCPHTTP(ctx context.Context, opts *MCPOptions, log *slog.Logger) error {
	return listenAndServe(ctx, listenEnv{IO: opts.IO, Settings: opts.Settings, Getwd: opts.Getwd, Clock: opts.Clock, Prepare: opts.Prepare},
		&opts.HTTP, log, httpSurface{
			what: "serving MCP over streamable HTTP", path: "/mcp",
			handler:   func(srv *mcphttp.Server) http.Handler { return srv.Handler() },
			ephemeral: func(url, token string) { printEphemeral(opts.IO, url, token) },
		})
}

// listenEnv is what listenAndServe needs of the run: its streams, settings, working
// directory and clock, and the check of the ephemeral token's context.
type listenEnv struct {
	IO       *IOStreams
	Settings func() (*Settings, error)
	Getwd    func() (string, error)
	Clock    func() time.Time
	// Prepare checks the run's inputs (the ephemeral token's context).
	Prepare func() error
}

// httpSurface is what differs between the HTTP surfaces that share the tokens file,
// listener and drain of listenAndServe (`mcp --listen`, `serve`).
type httpSurface struct {
	what, path string // the start-up log line; the path of the URL logged
	// handler is the surface's handler over the token server.
	handler func(srv *mcphttp.Server) http.Handler
	// ephemeral prints the ephemeral token (no tokens file).
	ephemeral func(url, token string)
	// config adjusts the token server's configuration (nil: none).
	config func(*mcphttp.Config)
}

// listenAndServe builds the token server (the tokens file's principals, or one ephemeral
// token bound to the CLI's context) over the listen options o (checked by o.check), serves
// sf's handler until SIGTERM or SIGINT, then drains: new requests are refused 503 while
// in-flight ones get shutdownGrace to finish.
func listenAndServe(ctx context.Context, env listenEnv, o *MCPHTTPOptions, log *slog.Logger, sf httpSurface) error {
	hostPart, useTLS, insecure := o.HostPart, o.TLSCert != "", o.Insecure
	var err error
	var cert tls.Certificate
	if useTLS {
		if cert, err = tls.LoadX509KeyPair(o.TLSCert, o.TLSKey); err != nil {
			return usageError("pass a PEM certificate and its private key", "--tls-cert/--tls-key: %v", err)
		}
	}
	s, err := env.Settings()
	if err != nil {
		return err
	}
	tokensPath := s.Tokens
	if host.IsStoreTokens(o.Tokens) {
		tokensPath = o.Tokens // the state database's tokens (host.StoreTokens)
	} else if o.Tokens != "" {
		if tokensPath, err = absPath(o.Tokens, env.Getwd); err != nil {
			return usageError("", "--tokens %s: %v", o.Tokens, err)
		}
	}
	base := s.Settings
	base.Tokens = tokensPath
	cfg := mcphttp.Config{Base: base, Tokens: tokensPath, Clock: env.Clock, Logger: log, Version: buildVersion().Version,
		OperatorHint: mcpHint, MaxSessions: o.MaxSessions}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = s.MCPMaxSessions
	}
	if sf.config != nil {
		sf.config(&cfg)
	}
	if tokensPath == "" {
		// One ephemeral token bound to the CLI's context: its inputs are checked (and its
		// warnings printed) as for stdio.
		if err := env.Prepare(); err != nil {
			return err
		}
		if cfg.EphemeralToken, err = tokens.New(); err != nil {
			return internalError(err)
		}
	}
	srv, err := mcphttp.New(ctx, cfg)
	if err != nil {
		return mcpHTTPError(err)
	}
	defer srv.Close()
	if insecure {
		log.Warn("serving plain HTTP off loopback (--insecure-listen): bearer tokens cross the network in clear", "listen", o.Listen)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return usageError("pick a free port, or an address of this machine", "listen on %s: %v", o.Listen, err)
	}
	hs := mcphttp.HTTPServer(sf.handler(srv), log)
	scheme := "http"
	if useTLS {
		scheme = "https"
		hs.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	url := scheme + "://" + urlHost(ln.Addr().String(), hostPart) + sf.path
	log.Info(sf.what, "url", url, "tokens", tokensPath)
	if cfg.EphemeralToken != "" {
		sf.ephemeral(url, cfg.EphemeralToken)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			return internalError(fmt.Errorf("serve %s: %w", o.Listen, err))
		}
		return nil
	case <-ctx.Done():
	}
	log.Info("shutting down: refusing new requests, letting in-flight calls finish", "grace", shutdownGrace.String())
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Drain(sctx); err != nil {
		log.Warn("shutdown", "err", err)
	}
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("shutdown: connections still open were closed", "err", err)
		_ = hs.Close()
	}
	log.Info("server stopped")
	return nil
}

// urlHost is the host:port of the URL a client uses: the listener's port, and the named
// host (a wildcard becomes 127.0.0.1).
func urlHost(addr, named string) string {
	_, port, _ := net.SplitHostPort(addr)
	switch named {
	case "", "0.0.0.0", "::", "[::]":
		named = "127.0.0.1"
	}
	return net.JoinHostPort(strings.Trim(named, "[]"), port)
}

// printEphemeral prints the ephemeral token and a ready client configuration on stderr.
func printEphemeral(ios *IOStreams, url, token string) {
	snippet, _ := httpJSONSnippet("claude-code", "sharedos", url, "", token)
	fmt.Fprintf(ios.ErrOut, `sharedos: no tokens file: one ephemeral token, valid until this server stops, runs under this invocation's context
token: %s
url:   %s
Claude Code (.mcp.json), or any client that takes a URL and an Authorization header:
%s`, token, url, snippet)
}

// mcpHTTPError translates the HTTP server's start-up errors.
func mcpHTTPError(err error) error {
	var te *mcphttp.TokenError
	if errors.As(err, &te) {
		e := hostError(te.Err)
		var ee *ExitError
		if errors.As(e, &ee) && te.ID != "" {
			ee.Message = fmt.Sprintf("token %q: %s", te.ID, ee.Message)
		}
		return e
	}
	var fe *tokens.Error
	if errors.As(err, &fe) {
		return tokensError(err)
	}
	return internalError(err)
}
