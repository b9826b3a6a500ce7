// Package fakemcp is a fake upstream MCP server for the gateway's tests, built with the
// go-sdk: a test binary re-executes itself as one (Main), speaking MCP on stdin/stdout.
// Its behaviour is chosen by FAKEMCP_MODE:
//
//	normal (default)  tools with resource arguments (get_file_contents, create_issue,
//	                  search_code), struct_repo and struct_row (which read their
//	                  arguments as many Go servers do: encoding/json into a struct, keys
//	                  matched case-insensitively, numbers into int64), echo_args,
//	                  echo_env, huge, giant, slow, fail, fail_echo, add_tool,
//	                  exit (answers, then the process exits)
//	crash             writes to stderr and exits 3 before answering anything
//	hang              reads its input and never answers
//
// It is test support only: nothing in the product imports it.
package fakemcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ModeEnv selects the behaviour.
const ModeEnv = "FAKEMCP_MODE"

// Main runs the fake server on stdio and returns its exit code.
func Main() int {
	switch os.Getenv(ModeEnv) {
	case "crash":
		// a crash that prints its credential: the gateway must redact it
		fmt.Fprintln(os.Stderr, "fakemcp: cannot start: missing configuration (token "+os.Getenv("TOKEN")+")")
		return 3
	case "hang":
		_, _ = io.Copy(io.Discard, os.Stdin)
		select {}
	}
	s := NewServer()
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		return 1
	}
	return 0
}

// LogEnv names a file the server appends one line per tool call to ("name args").
const LogEnv = "FAKEMCP_LOG"

func logCall(name string, args json.RawMessage) {
	p := os.Getenv(LogEnv)
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s\n", name, args)
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func obj(props map[string]any, required ...string) map[string]any {
	m := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		m["required"] = required
	}
	return m
}

var str = map[string]any{"type": "string"}

// NewServer builds the fake server with its normal tools.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "fakemcp", Version: "1"}, nil)
	add := func(t *mcp.Tool, h func(args map[string]any) *mcp.CallToolResult) {
		s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			logCall(t.Name, req.Params.Arguments)
			var args map[string]any
			_ = json.Unmarshal(req.Params.Arguments, &args)
			if t.Name == "slow" {
				<-ctx.Done()
				logCall("slow-cancelled", nil)
				return nil, ctx.Err()
			}
			if t.Name == "echo_args" {
				return text(string(req.Params.Arguments)), nil
			}
			return h(args), nil
		})
	}
	add(&mcp.Tool{Name: "get_file_contents", Description: "Get the contents of a file in a repository.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Get file"},
		Meta:        mcp.Meta{"vendor/x": "kept"},
		InputSchema: obj(map[string]any{"owner": str, "repo": str, "path": str, "ref": str}, "owner", "repo", "path")},
		func(a map[string]any) *mcp.CallToolResult {
			return text(fmt.Sprintf("contents of %v/%v/%v", a["owner"], a["repo"], a["path"]))
		})
	add(&mcp.Tool{Name: "create_issue", Description: "Open an issue.",
		InputSchema:  obj(map[string]any{"owner": str, "repo": str, "title": str, "number": map[string]any{"type": "integer"}}, "owner", "repo", "title"),
		OutputSchema: obj(map[string]any{"number": map[string]any{"type": "integer"}, "title": str})},
		func(a map[string]any) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"number":7}`}},
				StructuredContent: map[string]any{"number": 7, "title": a["title"]}}
		})
	add(&mcp.Tool{Name: "search_code", Description: "Search code.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
		InputSchema: obj(map[string]any{"query": str}, "query")},
		func(a map[string]any) *mcp.CallToolResult { return text(fmt.Sprintf("results for %v", a["query"])) })
	// Many Go MCP servers decode a call's arguments with encoding/json into a struct,
	// which matches keys case-insensitively (the go-sdk's own typed handlers do not).
	s.AddTool(&mcp.Tool{Name: "struct_repo", Description: "Serve owner/repo, read into a Go struct.",
		InputSchema: obj(map[string]any{"owner": str, "repo": str}, "owner", "repo")},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			logCall("struct_repo", req.Params.Arguments)
			var in struct{ Owner, Repo string }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return text("served " + in.Owner + "/" + in.Repo), nil
		})
	s.AddTool(&mcp.Tool{Name: "struct_row", Description: "Serve a row by its int64 id, read into a Go struct.",
		InputSchema: obj(map[string]any{"id": map[string]any{"type": "integer"}}, "id")},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			logCall("struct_row", req.Params.Arguments)
			var in struct{ ID int64 }
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("row %d", in.ID)), nil
		})
	add(&mcp.Tool{Name: "echo_args", Description: "Echo the raw arguments.",
		InputSchema: map[string]any{"type": "object"}}, nil)
	add(&mcp.Tool{Name: "echo_env", Description: "Echo the environment.",
		InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult {
			env := append(os.Environ(), fmt.Sprintf("FAKEMCP_PID=%d", os.Getpid()))
			sort.Strings(env)
			return text(strings.Join(env, "\n"))
		})
	add(&mcp.Tool{Name: "huge", Description: "Return more than 4 MiB.", InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult { return text(strings.Repeat("x", 5<<20)) })
	add(&mcp.Tool{Name: "giant", Description: "Return 24 MiB (over the SDK's own 16 MiB frame limit too).", InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult { return text(strings.Repeat("y", 24<<20)) })
	add(&mcp.Tool{Name: "slow", Description: "Never finish.", InputSchema: map[string]any{"type": "object"}}, nil)
	add(&mcp.Tool{Name: "fail", Description: "Fail with a long message.", InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult {
			r := text("upstream says no: " + strings.Repeat("e", 100<<10))
			r.IsError = true
			return r
		})
	add(&mcp.Tool{Name: "fail_echo", Description: "Fail, echoing the credentials of its environment (bare, base64, URL-encoded) in its text, its structured content and on stderr.",
		InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult {
			tok := os.Getenv("TOKEN")
			_, bare, _ := strings.Cut(os.Getenv("AUTH"), "=") // AUTH is "prefix=" + a credential
			msg := fmt.Sprintf("failed with token %s (base64 %s, url %s) and auth %s (raw base64 %s)", tok,
				base64.StdEncoding.EncodeToString([]byte(tok)), url.QueryEscape(tok), bare,
				base64.RawURLEncoding.EncodeToString([]byte(bare)))
			fmt.Fprintln(os.Stderr, "fakemcp: "+msg)
			r := text(msg)
			r.IsError = true
			return r
		})
	add(&mcp.Tool{Name: "echo_secret", Description: "Succeed, with a credential of its environment in its text and structured content (as a key and as an escaped value).",
		InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult {
			_, bare, _ := strings.Cut(os.Getenv("AUTH"), "=")
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "auth <" + bare + ">"}},
				StructuredContent: map[string]any{bare: "key", "v": "<" + bare + ">", "n": 1}}
		})
	add(&mcp.Tool{Name: "add_tool", Description: "Add the tool late_tool (the list changes).", InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult {
			s.AddTool(&mcp.Tool{Name: "late_tool", Description: "Added mid-session.", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text("late"), nil })
			return text("added")
		})
	add(&mcp.Tool{Name: "exit", Description: "Answer, then exit (the connection drops).", InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult {
			go func() { time.Sleep(50 * time.Millisecond); os.Exit(0) }()
			return text("bye")
		})
	add(&mcp.Tool{Name: "bad name!", Description: "A name no tool name can hold.", InputSchema: map[string]any{"type": "object"}},
		func(map[string]any) *mcp.CallToolResult { return text("never") })
	return s
}

// Handler is the fake server over streamable HTTP; it requires the header
// "Authorization: Bearer <token>" when token is not empty.
func Handler(token string) http.Handler {
	s := NewServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
