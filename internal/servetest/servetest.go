// Package servetest runs `sharedos serve` in process for tests: the /v1 handler (and
// /mcp) over a tokens file, on a loopback httptest server. It is what pkg/client's tests
// and the testscripts' remote mode talk to.
package servetest

import (
	"context"
	"net/http/httptest"
	"time"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/httpapi"
	"github.com/sharedos/sharedos/pkg/mcphttp"
)

// Server is a running in-process server.
type Server struct {
	URL    string
	Tokens *mcphttp.Server
	ts     *httptest.Server
}

// Start serves base's root and state with the tokens file at tokens (clock nil: the
// wall clock); cfg adjusts the handler's configuration (nil: none). Close stops it.
func Start(ctx context.Context, base host.Settings, tokens string, clock func() time.Time, cfg func(*httpapi.Config)) (*Server, error) {
	if clock == nil {
		clock = time.Now
	}
	base.Tokens = tokens
	srv, err := mcphttp.New(ctx, mcphttp.Config{Base: base, Tokens: tokens, Clock: clock})
	if err != nil {
		return nil, err
	}
	authenticate, enter := httpapi.Tokens(srv)
	hc := httpapi.Config{Authenticate: authenticate, Enter: enter, MCP: srv.Handler(), Clock: clock, Ready: srv.Ready,
		Metrics: httpapi.NewMetrics(), Revisions: httpapi.StoreRevisions(srv)}
	if cfg != nil {
		cfg(&hc)
	}
	ts := httptest.NewServer(httpapi.New(hc))
	return &Server{URL: ts.URL, Tokens: srv, ts: ts}, nil
}

// Close stops the server and releases its hosts.
func (s *Server) Close() {
	s.ts.CloseClientConnections()
	s.ts.Close()
	s.Tokens.Close()
}
