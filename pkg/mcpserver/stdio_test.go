package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioRaw runs e's server over a StdioTransport on pipes and returns the client's
// ends: what it writes and what it reads, and the Run result.
func stdioRaw(t *testing.T, e *env, maxLine int) (*os.File, *bufio.Scanner, chan error) {
	t.Helper()
	inR, inW, err := os.Pipe()
	must(t, err)
	outR, outW, err := os.Pipe()
	must(t, err)
	done := make(chan error, 1)
	go func() {
		done <- e.srv.Run(context.Background(), &StdioTransport{Reader: inR, Writer: outW, MaxLineLength: maxLine})
	}()
	t.Cleanup(func() { _ = inW.Close(); _ = outR.Close() })
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	return inW, sc, done
}

func nextAnswer(t *testing.T, sc *bufio.Scanner) map[string]any {
	t.Helper()
	ch := make(chan map[string]any, 1)
	go func() {
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				break
			}
			if _, note := m["method"]; note {
				continue
			}
			ch <- m
			return
		}
		ch <- nil
	}()
	select {
	case m := <-ch:
		if m == nil {
			t.Fatal("the session ended")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	return nil
}

func waitRun(t *testing.T, done chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end")
	}
	return nil
}

const initLine = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`

// The SDK's dispatch over our transport: initialize, a call answered in full, blank
// lines skipped, a message continued over several lines accepted, and the end of input
// ends the session.
func TestStdioTransportServesTheSDKProtocol(t *testing.T) {
	e := newEnv(t, envOptions{})
	in, out, done := stdioRaw(t, e, 0)
	write := func(s string) { _, err := io.WriteString(in, s); must(t, err) }
	write(initLine + "\n\n")
	if r := nextAnswer(t, out)["result"].(map[string]any); r["protocolVersion"] != "2025-06-18" {
		t.Fatalf("initialize answered %v", r)
	}
	write(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\r\n")
	write("{\"jsonrpc\":\"2.0\",\"id\":2,\n \"method\":\"tools/call\",\n \"params\":{\"name\":\"files.read\",\"arguments\":{\"path\":[\"notes\",\"todo.md\"]}}}\n")
	m := nextAnswer(t, out)
	if m["id"] != 2.0 {
		t.Fatalf("answer %v", m)
	}
	res := m["result"].(map[string]any)
	if res["isError"] == true || !strings.Contains(mustJSON(t, res), "buy milk") {
		t.Fatalf("files.read answered %v", res)
	}
	must(t, in.Close())
	if err := waitRun(t, done); err != nil && err != io.EOF {
		t.Logf("Run ended with %v", err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	must(t, err)
	return string(b)
}

// A message longer than MaxLineLength is a read error naming the bound (the SDK then
// ends the session); so is a JSON-RPC batch.
func TestStdioTransportRefusesOversizeAndBatches(t *testing.T) {
	for name, c := range map[string]struct {
		line string
		want string
	}{
		"oversize": {`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 300) + `"}}`, "longer than 256 bytes"},
		"batch":    {`[{"jsonrpc":"2.0","id":2,"method":"tools/list"}]`, "batches are not supported"},
	} {
		t.Run(name, func(t *testing.T) {
			tr := &StdioTransport{MaxLineLength: 256}
			inR, inW, err := os.Pipe()
			must(t, err)
			outR, outW, err := os.Pipe()
			must(t, err)
			defer inW.Close()
			defer outR.Close()
			tr.Reader, tr.Writer = inR, outW
			conn, err := tr.Connect(context.Background())
			must(t, err)
			_, err = io.WriteString(inW, c.line+"\n")
			must(t, err)
			_, err = conn.Read(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Read = %v, want an error with %q", err, c.want)
			}
			must(t, conn.Close())
		})
	}
}

// keepOpen is a reader whose Close does nothing, like the CLI's stdin (a read of it
// cannot be interrupted by closing it).
type keepOpen struct{ io.Reader }

func (keepOpen) Close() error { return nil }

// Close unblocks a Read waiting for input, even when closing the reader does not.
func TestStdioTransportCloseUnblocksRead(t *testing.T) {
	inR, inW, err := os.Pipe()
	must(t, err)
	defer inW.Close()
	defer inR.Close()
	_, outW, err := os.Pipe()
	must(t, err)
	conn, err := (&StdioTransport{Reader: keepOpen{inR}, Writer: outW}).Connect(context.Background())
	must(t, err)
	got := make(chan error, 1)
	go func() { _, err := conn.Read(context.Background()); got <- err }()
	must(t, conn.Close())
	select {
	case err := <-got:
		if err == nil {
			t.Fatal("Read returned a message after Close")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read still blocked after Close")
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// stdioBench is a client session to e's server over pipes, the server on transport.
func stdioBench(b *testing.B, server func(r io.ReadCloser, w io.WriteCloser) mcp.Transport) *mcp.ClientSession {
	e := newEnv(b, envOptions{})
	inR, inW, err := os.Pipe()
	must(b, err)
	outR, outW, err := os.Pipe()
	must(b, err)
	go func() { _ = e.srv.Run(context.Background(), server(inR, outW)) }()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	must(b, err)
	b.Cleanup(func() { _ = cs.Close() })
	return cs
}

// BenchmarkCallReadStdio: a tools/call files.read round trip over OS pipes, the server
// on the SDK's IOTransport or on ours (the client is the SDK's on both).
func BenchmarkCallReadStdio(b *testing.B) {
	for _, c := range []struct {
		name string
		t    func(r io.ReadCloser, w io.WriteCloser) mcp.Transport
	}{
		{"sdk", func(r io.ReadCloser, w io.WriteCloser) mcp.Transport { return &mcp.IOTransport{Reader: r, Writer: w} }},
		{"ours", func(r io.ReadCloser, w io.WriteCloser) mcp.Transport { return &StdioTransport{Reader: r, Writer: w} }},
	} {
		b.Run(c.name, func(b *testing.B) {
			cs := stdioBench(b, c.t)
			params := &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": []string{"notes", "todo.md"}}}
			b.ReportAllocs()
			for b.Loop() {
				r, err := cs.CallTool(context.Background(), params)
				if err != nil || r.IsError {
					b.Fatal(err, r)
				}
			}
		})
	}
}
