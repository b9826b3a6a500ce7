// Command mcpfloor is the floor of bench/mcp.sh: an MCP server over stdio on the same
// go-sdk as `sharedos mcp`, with one tool that answers a constant 2 KiB text (the size of
// the file the benchmark reads) without authorizing, auditing or reading anything. What
// the TypeScript client, the transport and the SDK cost on this machine is in its figures;
// what sharedos adds is the difference.
//
// With MCPFLOOR=middleware, tools/call is answered by a receiving middleware (as
// `sharedos mcp` owns it) instead of a typed AddTool handler, so the SDK's argument
// decoding and schema validation are not counted: the floor of sharedos' own path. With
// MCPFLOOR=shape, the middleware answers exactly the result sharedos gives files.read
// (the output's JSON as text and the output as structuredContent, spec 30 §3.5): what
// the SDK costs for that answer, so that the difference is sharedos' gating alone.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type readArgs struct {
	Path []string `json:"path"`
}

// fileOut is files.read's output.
type fileOut struct {
	Path      []string `json:"path"`
	Version   string   `json:"version"`
	Truncated bool     `json:"truncated"`
	Encoding  string   `json:"encoding"`
	Content   string   `json:"content"`
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
	switch os.Getenv("MCPFLOOR") {
	case "middleware", "shape":
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: body}}}
		if os.Getenv("MCPFLOOR") == "shape" {
			// the very shape sharedos answers files.read with (spec 30 §3.5): the
			// output's JSON as the text, and the output as structuredContent
			out := fileOut{Path: []string{"notes", "a.md"}, Version: "1d1801f753ccd9fa57966c46f360585c", Encoding: "utf-8", Content: body}
			text, _ := json.Marshal(out)
			res = &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: out}
		}
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
