package testscripts

import (
	"context"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// serveStart TOKENS NOW starts `sharedos serve` in the test process (internal/servetest)
// over the script's SHAREDOS_ROOT and SHAREDOS_STATE with the tokens file TOKENS, its
// instant pinned at NOW (RFC 3339: the server's --now, as the embedded runs'), and sets $SERVER to its
// URL: the remote mode of a script, whose commands then run with --server $SERVER and
// must print what the embedded commands print. The server stops with the script.
func serveStart(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: servestart TOKENS NOW")
	}
	ms, err := kernel.ParseTimestamp(args[1])
	ts.Check(err)
	now := time.UnixMilli(ms).UTC()
	srv, err := servetest.Start(context.Background(), host.Settings{Root: ts.MkAbs(ts.Getenv("SHAREDOS_ROOT")),
		State: ts.MkAbs(ts.Getenv("SHAREDOS_STATE")), Now: args[1]}, ts.MkAbs(args[0]), func() time.Time { return now }, nil)
	ts.Check(err)
	ts.Defer(srv.Close)
	ts.Setenv("SERVER", srv.URL)
}
