package mcpserver

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawConn is a raw NDJSON client of a server session over pipes.
type rawConn struct {
	t   *testing.T
	in  *os.File
	out *bufio.Scanner
}

func newRawConn(t *testing.T, e *env) *rawConn {
	t.Helper()
	inR, inW, err := os.Pipe()
	must(t, err)
	outR, outW, err := os.Pipe()
	must(t, err)
	go func() { _ = e.srv.Run(context.Background(), &mcp.IOTransport{Reader: inR, Writer: outW}) }()
	t.Cleanup(func() { _ = inW.Close(); _ = outR.Close() })
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	return &rawConn{t: t, in: inW, out: sc}
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	_, err := c.in.Write([]byte(line + "\n"))
	must(c.t, err)
}

// recv reads the next message (skipping notifications) as a generic JSON object.
func (c *rawConn) recv() map[string]any {
	c.t.Helper()
	done := make(chan map[string]any, 1)
	go func() {
		for c.out.Scan() {
			var m map[string]any
			if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
				c.t.Errorf("non-JSON line %q", c.out.Bytes())
				break
			}
			if _, isNote := m["method"]; isNote {
				continue
			}
			done <- m
			return
		}
		done <- nil
	}()
	select {
	case m := <-done:
		if m == nil {
			c.t.Fatal("the session ended")
		}
		return m
	case <-time.After(5 * time.Second):
		c.t.Fatal("no answer")
	}
	return nil
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestWireShapes pins the wire for protocol 2025-06-18: spec 30 §3.5–3.6's shapes, and
// the SDK deviations we accept (docs/mcp.md): initialize is required first;
// annotations.idempotentHint is always sent (false when undeclared); isError is omitted on
// success; unknown methods are -32601.
func TestWireShapes(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := newRawConn(t, e)

	// Accepted: a request before initialize is a JSON-RPC error (spec 30: not required).
	c.send(`{"jsonrpc":"2.0","id":0,"method":"tools/list"}`)
	if m := c.recv(); m["error"] == nil {
		t.Fatalf("tools/list before initialize answered %v", m)
	}

	c.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	init := c.recv()["result"].(map[string]any)
	if init["protocolVersion"] != "2025-06-18" {
		t.Fatalf("negotiated %v", init["protocolVersion"])
	}
	if tools, _ := init["capabilities"].(map[string]any)["tools"].(map[string]any); tools["listChanged"] != true {
		t.Fatalf("capabilities %v", init["capabilities"])
	}
	c.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	c.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	list := c.recv()["result"].(map[string]any)
	if meta, _ := list["_meta"].(map[string]any); len(meta[MetaCatalogHash].(string)) != 64 {
		t.Fatalf("tools/list _meta %v", list["_meta"])
	}
	if _, ok := list["nextCursor"]; ok {
		t.Fatal("the list is paginated")
	}
	allowed := []string{"_meta", "annotations", "description", "inputSchema", "name", "outputSchema"}
	for _, raw := range list["tools"].([]any) {
		tool := raw.(map[string]any)
		for _, k := range keys(tool) {
			if !slices.Contains(allowed, k) {
				t.Errorf("%s publishes %q", tool["name"], k)
			}
		}
		ann := tool["annotations"].(map[string]any)
		if _, ok := ann["readOnlyHint"]; !ok {
			t.Errorf("%s: no readOnlyHint", tool["name"])
		}
		if _, ok := ann["openWorldHint"]; ok {
			t.Errorf("%s: openWorldHint sent", tool["name"])
		}
		// Accepted deviation: the SDK always sends idempotentHint (our tools declare none).
		if ann["idempotentHint"] != false {
			t.Errorf("%s: idempotentHint %v (the accepted SDK form is false)", tool["name"], ann["idempotentHint"])
		}
		meta := tool["_meta"].(map[string]any)
		if !slices.Equal(keys(meta), []string{MetaNamespace, MetaSource}) {
			t.Errorf("%s _meta %v", tool["name"], meta)
		}
	}

	c.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"files.create","arguments":{"path":["notes","x.md"],"content":"x"}}}`)
	denied := c.recv()["result"].(map[string]any)
	if denied["isError"] != true || !slices.Equal(keys(denied), []string{"_meta", "content", "isError"}) {
		t.Fatalf("denied result %v", denied)
	}
	if meta := denied["_meta"].(map[string]any); !slices.Equal(keys(meta), []string{MetaCode, MetaGate, MetaStatus}) {
		t.Fatalf("denied _meta %v", meta)
	}

	c.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"files.read","arguments":{"path":["notes","todo.md"]}}}`)
	ok := c.recv()["result"].(map[string]any)
	// Accepted deviation: isError is omitted (not false) on success.
	if !slices.Equal(keys(ok), []string{"content", "structuredContent"}) {
		t.Fatalf("succeeded result keys %v", keys(ok))
	}

	c.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"no.such.tool"}}`)
	if r := c.recv(); r["result"].(map[string]any)["isError"] != true {
		t.Fatalf("unknown tool %v", r)
	}

	c.send(`{"jsonrpc":"2.0","id":6,"method":"no/such/method"}`)
	if m := c.recv(); int(m["error"].(map[string]any)["code"].(float64)) != -32601 {
		t.Fatalf("unknown method %v", m)
	}
	c.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"files.read","arguments":[1]}}`)
	if m := c.recv(); int(m["error"].(map[string]any)["code"].(float64)) != -32602 {
		t.Fatalf("array arguments %v", m)
	}
}
