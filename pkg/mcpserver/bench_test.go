package mcpserver

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
