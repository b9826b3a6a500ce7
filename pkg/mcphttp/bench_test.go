package mcphttp

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkHTTPCall16: files.read over streamable HTTP from 16 concurrent go-sdk client
// sessions of one token, in process (client and server share the CPU); ns/op is the
// server's throughput (one op = one call), not a call's latency.
func BenchmarkHTTPCall16(b *testing.B) {
	f := newFixture(b, fixtureOptions{})
	sessions := make([]*mcp.ClientSession, 16)
	for i := range sessions {
		sessions[i] = f.mustConnect(f.tok["alice"], nil)
	}
	params := &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": []string{"notes", "todo.md"}}}
	var next atomic.Int64
	b.SetParallelism(8) // 16 goroutines on 2 CPUs
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cs := sessions[int(next.Add(1)-1)%len(sessions)]
		for pb.Next() {
			r, err := cs.CallTool(context.Background(), params)
			if err != nil || r.IsError {
				b.Fatalf("%v %+v", err, r)
			}
		}
	})
}
