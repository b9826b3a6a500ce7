package gateway

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkBuildCatalog is what a CLI command pays per server to turn a cached tool list
// into its published tools (decode, definitions; schemas compile on first call).
func BenchmarkBuildCatalog(b *testing.B) {
	var tools []*mcp.Tool
	for _, name := range []string{"get_file_contents", "create_issue", "search_code", "echo_args", "echo_env", "huge", "slow", "fail", "add_tool", "exit"} {
		tools = append(tools, &mcp.Tool{Name: name, Description: "d", InputSchema: map[string]any{"type": "object",
			"properties": map[string]any{"owner": map[string]any{"type": "string"}, "repo": map[string]any{"type": "string"}}, "required": []any{"owner"}}})
	}
	data, _ := json.Marshal(tools)
	s := &Server{ID: "github", Namespace: "github", Unmapped: UnmappedGate, Tools: map[string]*ToolMap{}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var ts []*mcp.Tool
		if err := json.Unmarshal(data, &ts); err != nil {
			b.Fatal(err)
		}
		if c := buildCatalog(s, ts, false); len(c.byName) != 10 {
			b.Fatal(len(c.byName))
		}
	}
}
