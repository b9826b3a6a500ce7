// Command mcpfloor is the floor of bench/mcp.sh: an MCP server over stdio on the same
// go-sdk as `sharedos mcp`, with one tool that answers a constant 2 KiB text (the size of
// the file the benchmark reads) without authorizing, auditing or reading anything. What
// the TypeScript client, the transport and the SDK cost on this machine is in its figures;
// what sharedos adds is the difference.
//
// With MCPFLOOR=middleware, tools/call is answered by a receiving middleware (as
// `sharedos mcp` owns it) instead of a typed AddTool handler, so the SDK's argument
// decoding and schema validation are not counted: the floor of sharedos' own path.
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
	if os.Getenv("MCPFLOOR") == "middleware" {
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: body}}}
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/call" {
					return res, nil
				}
				return next(ctx, method, req)
			}
		})
	}
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "mcpfloor:", err)
		os.Exit(1)
	}
}
