package gateway_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// BenchmarkGatedCall is one gated call as `sharedos mcp` makes it, minus the JSON-RPC
// framing: a fresh turn of a long-lived session (grant stat, selection read), the
// catalogue with the held upstream's tools, schema, template, authorization, audit and
// the upstream round trip over stdio. BenchmarkDirectCall is the same upstream call
// without sharedos; the difference is the gateway's cost (bench/gateway.sh measures it
// end to end).
func BenchmarkGatedCall(b *testing.B) {
	e := newEnv(b, fakeServer(b, "github", "normal", githubTools))
	h := e.open(host.Needs{HoldConnections: true})
	sess, err := h.NewSession(nil)
	if err != nil {
		b.Fatal(err)
	}
	args := json.RawMessage(`{"query":"x"}`)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		turn, err := sess.Begin(context.Background(), nil)
		if err != nil {
			b.Fatal(err)
		}
		actx := turn.Context()
		r := turn.InvokeTool(context.Background(), kernel.ToolCall{ID: "c", Tool: "github.search_code", Arguments: args, TraceID: actx.TraceID, RequestedAt: actx.Now})
		if r.Status != kernel.StatusSucceeded {
			b.Fatalf("%+v", r)
		}
	}
}

func BenchmarkDirectCall(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), fakeEnv+"=1")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search_code", Arguments: json.RawMessage(`{"query":"x"}`)}); err != nil {
			b.Fatal(err)
		}
	}
}
