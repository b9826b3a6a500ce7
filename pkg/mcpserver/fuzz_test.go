package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

// FuzzCallTool drives the middleware's tools/call handling with arbitrary names and raw
// argument bytes (non-objects, invalid JSON, huge names, invalid UTF-8). It asserts no
// panic; a JSON-RPC error only for malformed params, and then nothing audited; and never
// an allow the kernel did not decide: every non-error result has the kernel's
// tool.invoked succeeded event for its call id.
func FuzzCallTool(f *testing.F) {
	for _, seed := range []struct{ name, args string }{
		{"files.read", `{"path":["notes","todo.md"]}`},
		{"files_read", `{"path":["notes","todo.md"]}`},
		{"files.list", `{"path":[]}`},
		{"files.create", `{"path":["drafts","f.md"],"content":"x"}`},
		{"files.create", `{"path":["notes","f.md"],"content":"x"}`},
		{"files.delete", `{"path":["drafts","f.md"]}`},
		{"sharedos.escalate", `{"reason":"r"}`},
		{"files.read", `[1,2]`},
		{"files.read", `"x"`},
		{"files.read", `null`},
		{"files.read", `{`},
		{"files.read", ` {"path":["notes","todo.md"]} `},
		{"", `{}`},
		{strings.Repeat("n", 300), `{}`},
		{"bad\xffname", `{}`},
		{"files.read", "{\"path\":[\"notes\",\"\xff\"]}"},
	} {
		f.Add(seed.name, []byte(seed.args))
	}
	e := newEnv(f, envOptions{})
	st := &session{id: "fuzz", meta: map[string]any{"surface": "mcp", "session": "fuzz"}}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, name string, args []byte) {
		before, err := e.host.Store.ListAudit(ctx, sqlitestore.AuditFilter{Limit: 1})
		must(t, err)
		res, err := e.srv.callTool(ctx, st, &mcp.CallToolParamsRaw{Name: name, Arguments: json.RawMessage(args)})
		if err != nil {
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("error %v is not -32602", err)
			}
			after, err := e.host.Store.ListAudit(ctx, sqlitestore.AuditFilter{Limit: 1})
			must(t, err)
			if len(after) != len(before) || (len(after) == 1 && after[0].ID != before[0].ID) {
				t.Fatal("malformed params were audited")
			}
			return
		}
		r, ok := res.(*mcp.CallToolResult)
		if !ok || r == nil || len(r.Content) != 1 {
			t.Fatalf("result %#v", res)
		}
		if r.IsError {
			if r.Meta[MetaStatus] != string(kernel.StatusDenied) && r.Meta[MetaStatus] != string(kernel.StatusFailed) {
				t.Fatalf("isError with status %v", r.Meta[MetaStatus])
			}
			return
		}
		id, _ := e.lastID.Load().(string)
		evs, err := e.host.Store.ListAudit(ctx, sqlitestore.AuditFilter{OperationID: id,
			Types: []string{string(kernel.EventToolInvoked)}})
		must(t, err)
		if len(evs) != 1 || evs[0].Outcome != kernel.OutcomeSucceeded {
			t.Fatalf("an allowed result (%q) without the kernel's succeeded tool.invoked for call %s: %+v", name, id, evs)
		}
	})
}
