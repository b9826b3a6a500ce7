package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/internal/mcpstdio"
)

// BenchmarkCallRead is a tools/call files.read round trip over the in-memory transport:
// a fresh kernel turn, the grant-file stat, the selection read, the decision, the audit
// records and the read.
func BenchmarkCallRead(b *testing.B) {
	e := newEnv(b, envOptions{})
	params := &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": []string{"notes", "todo.md"}}}
	ctx := context.Background()
	for b.Loop() {
		r, err := e.cs.CallTool(ctx, params)
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
	}
}

// BenchmarkListTools is a tools/list round trip.
func BenchmarkListTools(b *testing.B) {
	e := newEnv(b, envOptions{})
	ctx := context.Background()
	for b.Loop() {
		if _, err := e.cs.ListTools(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPoll is one list_changed poll: a turn and the dry-run published list.
func BenchmarkPoll(b *testing.B) {
	e := newEnv(b, envOptions{})
	ctx := context.Background()
	for b.Loop() {
		if _, _, err := e.srv.publishedNow(ctx, sessionBackend(e.sess)(nil)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStdio is a tools/call files.read round trip over a stdio transport on pipes, from
// a raw client that writes the request line and reads the answer line, so that the
// allocations counted are the server's: its transport, the SDK's dispatch, the gating.
func benchStdio(b *testing.B, transport func(r io.ReadCloser, w io.WriteCloser) mcp.Transport) {
	e := newEnv(b, envOptions{})
	inR, inW, err := os.Pipe()
	must(b, err)
	outR, outW, err := os.Pipe()
	must(b, err)
	done := make(chan error, 1)
	go func() { done <- e.srv.Run(context.Background(), transport(inR, outW)) }()
	br := bufio.NewReaderSize(outR, 1<<20)
	roundTrip := func(line string) {
		if _, err := io.WriteString(inW, line); err != nil {
			b.Fatal(err)
		}
		if ans, err := br.ReadSlice('\n'); err != nil || bytes.Contains(ans, []byte(`"isError":true`)) || bytes.Contains(ans, []byte(`"error"`)) {
			b.Fatalf("%s %v", ans, err)
		}
	}
	roundTrip(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}` + "\n")
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
		b.Fatal(err)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"files.read","arguments":{"path":["notes","todo.md"]}}}` + "\n"
	for b.Loop() {
		roundTrip(call)
	}
	b.StopTimer()
	_ = inW.Close()
	<-done
	_ = outR.Close()
}

// BenchmarkCallReadStdio: files.read over sharedos' stdio transport.
func BenchmarkCallReadStdio(b *testing.B) {
	benchStdio(b, func(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
		return &mcpstdio.Transport{Reader: r, Writer: w}
	})
}

// BenchmarkCallReadSDKStdio: the same over the SDK's stdio transport (mcp.IOTransport),
// for comparison.
func BenchmarkCallReadSDKStdio(b *testing.B) {
	benchStdio(b, func(r io.ReadCloser, w io.WriteCloser) mcp.Transport { return &mcp.IOTransport{Reader: r, Writer: w} })
}
