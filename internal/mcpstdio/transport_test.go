package mcpstdio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// describe is a message as the server would see it, every field spelled out (the id's
// Go type included), for comparing the two transports.
func describe(msg jsonrpc.Message) string {
	switch m := msg.(type) {
	case *jsonrpc.Request:
		return fmt.Sprintf("request id=%T(%v) method=%q params=%q", m.ID.Raw(), m.ID.Raw(), m.Method, m.Params)
	case *jsonrpc.Response:
		return fmt.Sprintf("response id=%T(%v) result=%q error=%v", m.ID.Raw(), m.ID.Raw(), m.Result, m.Error)
	}
	return fmt.Sprintf("%T", msg)
}

// readMessages reads a connection until its first error and returns what it read, the error
// last.
func readMessages(t testing.TB, tr mcp.Transport) []string {
	t.Helper()
	conn, err := tr.Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var got []string
	for i := 0; i < 1000; i++ {
		msg, err := conn.Read(context.Background())
		if err != nil {
			return append(got, "error: "+err.Error())
		}
		got = append(got, describe(msg))
	}
	t.Fatal("more than 1000 messages")
	return nil
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriter) Close() error                { return nil }

// FuzzDecodeLine checks the fast decoder against the SDK: a message it takes is the
// message jsonrpc.DecodeMessage makes of the same bytes, and over a whole input the two
// transports read the same messages and end with the same error. The inputs stay under
// 512 bytes, so that the SDK's decoder has read all of them when it checks what follows
// a value (with less, that check depends on where its reads stopped).
func FuzzDecodeLine(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"files.read","arguments":{"path":["a"]}}}` + "\n",
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\r\n",
		`{"jsonrpc":"2.0","id":"a-1","result":{"x":[1,2,{"y":"\u00e9"}]}}`,
		`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}` + "\n",
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\n",
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":1e2,"method":"ping"}` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"ping"} {"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n",
		"  \n{\"jsonrpc\":\"2.0\",\n\"id\":3,\"method\":\"ping\"}\n\n",
		`{"jsonrpc":"1.0","id":1,"method":"ping"}` + "\n",
		`{"Jsonrpc":"2.0","ID":1,"Method":"ping"}` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/list"}` + "\n",
		`{"jsonrpc":"2.0","id":null,"method":"x","params":null}` + "\n",
		`{"jsonrpc":"2.0","id":-0,"method":"m\u00e9","params":[]}` + "\n",
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{\"a\":\"\xff\"}}\n",
		`null` + "\n" + `[]` + "\n",
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\r" + `{"jsonrpc":"2.0","id":2,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}  ` + "\n",
		`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\r \n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 500 {
			return
		}
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			if msg, ok := decodeLine(data[:i+1], false); ok {
				want, err := jsonrpc.DecodeMessage(data[:i])
				if err != nil {
					t.Fatalf("decodeLine took %q, which the SDK refuses: %v", data[:i+1], err)
				}
				if describe(msg) != describe(want) {
					t.Fatalf("decodeLine(%q) = %s, the SDK's %s", data[:i+1], describe(msg), describe(want))
				}
			}
		}
		sdk := readMessages(t, &mcp.IOTransport{Reader: io.NopCloser(bytes.NewReader(data)), Writer: nopWriter{}})
		ours := readMessages(t, &Transport{Reader: io.NopCloser(bytes.NewReader(data)), Writer: nopWriter{}})
		if !slices.Equal(sdk, ours) {
			t.Fatalf("input %q:\nSDK:  %s\nours: %s", data, strings.Join(sdk, "\n      "), strings.Join(ours, "\n      "))
		}
	})
}

// A step of a differential session: bytes the client writes (in chunks of at most
// chunk bytes, each a read of its own; 0: one write), then the number of lines it waits
// for before the next step.
type step struct {
	write string
	chunk int
	lines int
}

// diffResult is what a differential session showed: the lines the server wrote (sorted
// within each step: answers to concurrent requests may come back in any order), what the
// server's dispatch received (sorted), and how the session ended.
type diffResult struct {
	lines []string
	seen  []string
	end   string
}

// runDifferential runs an mcp.Server with one tool over tr, fed by steps through a pipe,
// and returns what it showed. The input ends (EOF) after the last step.
func runDifferential(t *testing.T, steps []step, connect func(r io.ReadCloser, w io.WriteCloser) mcp.Transport) diffResult {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "diff", Version: "0"}, nil)
	type echoIn struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(len(in.Text), ":", in.Text[:min(len(in.Text), 16)])}}}, nil, nil
	})
	var mu sync.Mutex
	var seen []string
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			p, _ := json.Marshal(req.GetParams())
			if len(p) > 200 {
				p = append(p[:200:200], fmt.Sprintf("…(%d bytes)", len(p))...)
			}
			mu.Lock()
			seen = append(seen, method+" "+string(p))
			mu.Unlock()
			return next(ctx, method, req)
		}
	})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ss, err := srv.Connect(context.Background(), connect(inR, outW), nil)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var got diffResult
	for _, s := range steps {
		data := []byte(s.write)
		for len(data) > 0 {
			n := len(data)
			if s.chunk > 0 {
				n = min(n, s.chunk)
			}
			if _, err := inW.Write(data[:n]); err != nil {
				break // the session ended
			}
			data = data[n:]
		}
		var group []string
		for range s.lines {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("the session ended before %d lines: %q", s.lines, group)
				}
				group = append(group, l)
			case <-time.After(time.Minute):
				t.Fatalf("no line within a minute (after %q)", group)
			}
		}
		slices.Sort(group)
		got.lines = append(got.lines, group...)
	}
	_ = inW.Close()
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err := <-done:
		got.end = fmt.Sprint(err)
	case <-time.After(time.Minute):
		t.Fatal("the session did not end within a minute")
	}
	_ = outR.Close()
	for l := range lines {
		got.lines = append(got.lines, "after the end: "+l)
	}
	mu.Lock()
	got.seen = slices.Sorted(slices.Values(seen))
	mu.Unlock()
	return got
}

func initMsg(id any, version string) string {
	b, _ := json.Marshal(id)
	return `{"jsonrpc":"2.0","id":` + string(b) + `,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}` + "\n"
}

const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n"

func callMsg(id any, text string) string {
	b, _ := json.Marshal(id)
	t, _ := json.Marshal(text)
	return `{"jsonrpc":"2.0","id":` + string(b) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":` + string(t) + `}}}` + "\n"
}

// TestStdioTransportMatchesTheSDKs feeds the same byte streams to the SDK's stdio
// transport and to ours, under the same server, and compares what the server received,
// what it answered, byte for byte, and how the session ended.
func TestStdioTransportMatchesTheSDKs(t *testing.T) {
	huge := strings.Repeat("x", 3<<20)
	pretty := "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 5,\n  \"method\": \"tools/call\",\n  \"params\": {\"name\": \"echo\", \"arguments\": {\"text\": \"pretty\"}}\n}\n"
	cases := []struct {
		name  string
		limit int
		steps []step
	}{
		{name: "valid", steps: []step{
			{write: initMsg(1, "2025-06-18"), lines: 1}, {write: initialized},
			{write: `{"jsonrpc":"2.0","id":"l","method":"tools/list"}` + "\n", lines: 1},
			{write: callMsg(2, "hello") + callMsg("s-3", "é \u2028 <tag>") + `{"jsonrpc":"2.0","id":4,"method":"ping"}` + "\n", lines: 3},
			{write: `{"jsonrpc":"2.0","id":99,"result":{}}` + "\n" + `{"jsonrpc":"2.0","id":6,"method":"ping"}` + "\n", lines: 1},
		}},
		{name: "split reads, CRLF, blank lines, leading spaces", steps: []step{
			{write: initMsg(1, "2025-06-18"), chunk: 3, lines: 1}, {write: "\r\n  \n" + initialized, chunk: 1},
			{write: "   " + strings.TrimSuffix(callMsg(2, "split"), "\n") + "\r\n", chunk: 7, lines: 1},
			{write: callMsg(3, "a") + callMsg(4, "b"), chunk: 50, lines: 2},
		}},
		{name: "odd ids and a message over several lines", steps: []step{
			{write: initMsg("init", "2025-06-18"), lines: 1}, {write: initialized},
			{write: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}` + "\n", lines: 1},
			{write: `{"jsonrpc":"2.0","id":1e3,"method":"ping"}` + "\n", lines: 1},
			{write: `{"jsonrpc":"2.0","id":"\u0041","method":"ping"}` + "\n", lines: 1},
			{write: pretty, lines: 1},
			{write: callMsg(7, "after"), lines: 1},
		}},
		{name: "an error response from the client, then more", steps: []step{
			{write: initMsg(1, "2025-06-18"), lines: 1}, {write: initialized},
			{write: `{"jsonrpc":"2.0","id":42,"error":{"code":-32000,"message":"no"}}` + "\n"},
			{write: callMsg(2, "still here"), lines: 1},
		}},
		{name: "batches before 2025-06-18", steps: []step{
			{write: `[{"jsonrpc":"2.0","id":"p","method":"ping"}]` + "\n", lines: 1},
			{write: initMsg(1, "2025-03-26"), lines: 1}, {write: initialized},
			{write: "[" + strings.TrimSuffix(callMsg(2, "one"), "\n") + "," + strings.TrimSuffix(callMsg(3, "two"), "\n") + "]\n", lines: 1},
			// a notification in a batch: the SDK tracks it under the empty id and never
			// completes the batch, so the call's answer is never written
			{write: `[{"jsonrpc":"2.0","method":"notifications/initialized"},` + strings.TrimSuffix(callMsg(4, "lost"), "\n") + "]\n"},
			{write: callMsg(5, "single"), lines: 1},
		}},
		{name: "a batch after 2025-06-18 ends the session", steps: []step{
			{write: initMsg(1, "2025-06-18"), lines: 1}, {write: initialized},
			{write: `[{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\n"},
		}},
		{name: "a batch after the newest version", steps: []step{
			{write: initMsg(1, "2025-11-25"), lines: 1}, {write: initialized},
			{write: `[{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\n"},
		}},
		{name: "an empty batch", steps: []step{{write: "[]\n"}}},
		{name: "null", steps: []step{{write: "null\n"}}},
		{name: "a duplicate id in a batch", steps: []step{
			{write: initMsg(1, "2024-11-05"), lines: 1},
			{write: `[{"jsonrpc":"2.0","id":2,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\n"},
		}},
		{name: "malformed JSON", steps: []step{
			{write: initMsg(1, "2025-06-18"), lines: 1}, {write: initialized},
			{write: `{"jsonrpc":"2.0","id":2,"method":` + "\n"},
		}},
		{name: "not JSON", steps: []step{{write: "hello\n"}}},
		{name: "trailing data", steps: []step{{write: `{"jsonrpc":"2.0","id":1,"method":"ping"} x` + "\n"}}},
		{name: "spaces after a message", steps: []step{{write: `{"jsonrpc":"2.0","id":1,"method":"ping"}  ` + "\n"}}},
		{name: "two values on a line", steps: []step{{write: `{"jsonrpc":"2.0","id":1,"method":"ping"}{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n"}}},
		{name: "a wrong version tag", steps: []step{{write: `{"jsonrpc":"1.0","id":1,"method":"ping"}` + "\n"}}},
		{name: "a response without an id", steps: []step{{write: `{"jsonrpc":"2.0","result":{}}` + "\n"}}},
		{name: "the end of input inside a message", steps: []step{
			{write: initMsg(1, "2025-06-18"), lines: 1}, {write: `{"jsonrpc":"2.0","id":2,`},
		}},
		{name: "the last message without a newline", steps: []step{
			{write: initMsg(1, "2025-06-18"), lines: 1}, {write: initialized},
			{write: strings.TrimSuffix(callMsg(2, "last"), "\n"), lines: 1},
		}},
		{name: "a huge message", steps: []step{
			{write: initMsg(1, "2025-06-18"), lines: 1}, {write: initialized},
			{write: callMsg(2, huge), chunk: 100_000, lines: 1},
			{write: callMsg(3, "small again"), lines: 1},
		}},
		{name: "a message over the limit", limit: 64 << 10, steps: []step{
			{write: initMsg(1, "2025-06-18"), lines: 1}, {write: initialized},
			{write: callMsg(2, huge[:100_000])},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sdk := runDifferential(t, c.steps, func(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
				return &mcp.IOTransport{Reader: r, Writer: w, MaxLineLength: c.limit}
			})
			ours := runDifferential(t, c.steps, func(r io.ReadCloser, w io.WriteCloser) mcp.Transport {
				return &Transport{Reader: r, Writer: w, MaxLineLength: c.limit}
			})
			if !slices.Equal(sdk.lines, ours.lines) {
				t.Errorf("answers differ:\nSDK:  %.300q\nours: %.300q", sdk.lines, ours.lines)
			}
			if !slices.Equal(sdk.seen, ours.seen) {
				t.Errorf("received messages differ:\nSDK:  %q\nours: %q", sdk.seen, ours.seen)
			}
			if sdk.end != ours.end {
				t.Errorf("the session ended with %q, the SDK's with %q", ours.end, sdk.end)
			}
			t.Logf("%d answers, %d received, ended with %q", len(ours.lines), len(ours.seen), ours.end)
		})
	}
}

// blockingReader is a reader whose Close does not unblock its Read (as the CLI's stdin).
type blockingReader struct{ unblock chan struct{} }

func (r blockingReader) Read([]byte) (int, error) { <-r.unblock; return 0, io.EOF }
func (r blockingReader) Close() error             { return nil }

// Close unblocks a Read that waits for input even when closing the reader does not.
func TestStdioCloseUnblocksRead(t *testing.T) {
	r := blockingReader{unblock: make(chan struct{})}
	defer close(r.unblock)
	conn, err := (&Transport{Reader: r, Writer: nopWriter{}}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := conn.Read(context.Background())
		done <- err
	}()
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != io.EOF {
			t.Fatalf("Read after Close: %v, want io.EOF", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Close did not unblock Read")
	}
	if err := conn.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// chunkWriter writes each call's bytes in pieces of one byte, yielding in between, so
// that two unsynchronized writers would interleave their bytes.
type chunkWriter struct {
	mu  sync.Mutex
	out bytes.Buffer
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	for _, b := range p {
		w.mu.Lock()
		w.out.WriteByte(b)
		w.mu.Unlock()
		runtime.Gosched()
	}
	return len(p), nil
}
func (w *chunkWriter) Close() error { return nil }

// Concurrent Writes come out as whole lines, one message each.
func TestStdioConcurrentWrites(t *testing.T) {
	w := &chunkWriter{}
	conn, err := (&Transport{Reader: io.NopCloser(strings.NewReader("")), Writer: w}).Connect(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 20 {
				id, _ := jsonrpc.MakeID(float64(g*100 + i))
				if err := conn.Write(context.Background(), &jsonrpc.Response{ID: id, Result: json.RawMessage(`{"text":"` + strings.Repeat("y", 40) + `"}`)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(w.out.String(), "\n"), "\n")
	if len(lines) != 160 {
		t.Fatalf("%d lines, want 160", len(lines))
	}
	for _, l := range lines {
		if msg, err := jsonrpc.DecodeMessage([]byte(l)); err != nil {
			t.Fatalf("line %q: %v", l, err)
		} else if _, ok := msg.(*jsonrpc.Response); !ok {
			t.Fatalf("line %q is not a response", l)
		}
	}
}

// The fast decoder takes the messages of an ordinary session (a test of the benchmark's
// premise, not of behaviour: what it declines still decodes, by the SDK's path).
func TestDecodeLineTakesOrdinaryMessages(t *testing.T) {
	for _, l := range []string{
		initMsg(1, "2025-06-18"), initialized, callMsg(2, "x"), callMsg("s", "y"),
		`{"jsonrpc":"2.0","id":3,"result":{"action":"accept"}}` + "\n",
	} {
		if _, ok := decodeLine([]byte(l), false); !ok {
			t.Errorf("decodeLine declined %q", l)
		}
	}
}
