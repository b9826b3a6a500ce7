// Command mcpfloor is the floor of bench/mcp.sh: an MCP server over stdio on the same
// go-sdk as `sharedos mcp`, with one tool that answers a constant 2 KiB text (the size of
// the file the benchmark reads) without authorizing, auditing or reading anything. What
// the TypeScript client, the transport and the SDK cost on this machine is in its figures;
// what sharedos adds is the difference.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type readArgs struct {
	Path []string `json:"path"`
}

type readOut struct {
	Content string `json:"content"`
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "mcpfloor", Version: "1"}, nil)
	body := strings.Repeat("x", 2048)
	mcp.AddTool(s, &mcp.Tool{Name: "files.read", Description: "constant 2 KiB text"},
		func(context.Context, *mcp.CallToolRequest, readArgs) (*mcp.CallToolResult, readOut, error) {
			return nil, readOut{Content: body}, nil
		})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfloor:", err)
		os.Exit(1)
	}
}
