package mcpserver

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// operatorText is what text addressed to an agent must never contain: an operator
// command ("sharedos …"), the command that shows or writes grants (explain, --apply), or
// the grant files (security issue 20, item 7).
var operatorText = []string{"sharedos ", "explain", "--apply", "grants"}

// checkAgentFacing fails when the result as the client received it (content, _meta and
// structuredContent, in their wire JSON) holds operator text.
func checkAgentFacing(t *testing.T, what string, r *mcp.CallToolResult) {
	t.Helper()
	b, err := json.Marshal(r)
	must(t, err)
	wire := strings.ToLower(string(b))
	for _, bad := range operatorText {
		if strings.Contains(wire, bad) {
			t.Errorf("%s: the agent receives %q: %s", what, bad, b)
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

const onceGrant = `  - id: g-once
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [once]}
        actions: [create]
        scope: descendants
    constraints: {maxUses: 1}
`

// TestRefusalsOverMCPAreAgentFacing: every refusal an MCP client can provoke on a real
// host (a missing grant, a hidden, unknown or switched-off tool, an invalid request, bad
// arguments, a tool failure, the host ceiling, spent uses, a pending escalation, an
// authority outage) reaches the client without operator text, in the text, _meta or
// structuredContent; the text ends with what the agent can do — ask with
// sharedos.escalate where the session offers it, else that an operator must grant it.
// The operator's hint goes to the server's log, and the audit record keeps the refusal's
// code, gate and cause for `audit list` and `explain`.
func TestRefusalsOverMCPAreAgentFacing(t *testing.T) {
	for _, escalate := range []bool{false, true} {
		t.Run("escalate="+strconv.FormatBool(escalate), func(t *testing.T) {
			grants := baseGrants + onceGrant
			if escalate {
				grants += escalateGrant
			}
			logs := &lockedBuffer{}
			e := newEnv(t, envOptions{grants: grants, frozen: []string{"files:notes/frozen"},
				logger: slog.New(slog.NewTextHandler(logs, nil))})
			must(t, os.MkdirAll(filepath.Join(e.dir, "root", "once"), 0o755))
			must(t, os.MkdirAll(filepath.Join(e.dir, "root", "notes", "frozen"), 0o755))
			must(t, os.WriteFile(filepath.Join(e.dir, "root", "notes", "frozen", "a.md"), []byte("x"), 0o644))
			notPermitted := hintOperatorGrant
			if escalate {
				notPermitted = hintAskEscalate
			}
			seen := map[kernel.ErrorCode]bool{}
			check := func(what, tool string, args any, status kernel.ToolStatus, code kernel.ErrorCode, hint string) {
				t.Helper()
				before := len(e.audit())
				r := e.call(tool, args)
				rt := refusalOf(t, r, status, code)
				checkAgentFacing(t, what, r)
				if rt.Hint != hint {
					t.Errorf("%s: hint %q, want %q", what, rt.Hint, hint)
				}
				seen[code] = true
				// The audit record keeps the refusal: its code, for audit list and explain.
				var found bool
				for _, ev := range e.audit()[before:] {
					if ev.Type == kernel.EventToolInvoked && ev.Reason == code {
						found = true
					}
				}
				if !found {
					t.Errorf("%s: no tool.invoked record with reason %s", what, code)
				}
			}
			check("missing grant", "files.create", map[string]any{"path": []string{"notes", "x.md"}, "content": "x"},
				kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant), notPermitted)
			check("hidden tool", "files.delete", map[string]any{"path": []string{"drafts", "a.md"}},
				kernel.StatusDenied, kernel.CodeToolUnavailable, hintUnavailable+"; "+notPermitted)
			check("unknown tool", "nope.tool", nil, kernel.StatusDenied, kernel.CodeToolUnavailable, hintUnavailable)
			check("namespace off", "repo.status", nil, kernel.StatusDenied, kernel.CodeToolUnavailable, hintUnavailable+"; "+notPermitted)
			check("invalid request", strings.Repeat("x", 5000), nil,
				kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonInvalidRequest), hintBadRequest)
			check("bad arguments", "files.read", map[string]any{"path": "notes/todo.md"},
				kernel.StatusFailed, kernel.CodeInvalidToolArguments, hintArguments)
			check("tool failure", "files.read", map[string]any{"path": []string{"notes", "missing.md"}},
				kernel.StatusFailed, "not_found", hintToolFailed)
			check("host ceiling", "files.read", map[string]any{"path": []string{"notes", "frozen", "a.md"}},
				kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied), hintCeiling)
			if r := e.call("files.create", map[string]any{"path": []string{"once", "a.md"}, "content": "x"}); r.IsError {
				t.Fatalf("the first use: %s", resultText(t, r))
			}
			check("spent uses", "files.create", map[string]any{"path": []string{"once", "b.md"}, "content": "x"},
				kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonGrantExhausted), notPermitted)
			if escalate {
				r := e.call(kernel.EscalationToolName, map[string]any{"reason": "need to write notes"})
				if r.IsError {
					t.Fatalf("escalate: %s", resultText(t, r))
				}
				checkAgentFacing(t, "escalate", r)
				check("pending escalation", "files.read", map[string]any{"path": []string{"notes", "todo.md"}},
					kernel.StatusDenied, CodeEscalationPending, hintPending)
			} else {
				e.writeGrants("version: 1\ngrants: [not a grant\n")
				check("authority outage", "files.read", map[string]any{"path": []string{"notes", "todo.md"}},
					kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonAuthorityUnavailable), hintOutage)
			}
			// The operator's hint is the server's log line of each refusal, never the agent's.
			if l := logs.String(); !strings.Contains(l, "call refused") || !strings.Contains(l, "sharedos explain files.create") {
				t.Errorf("the operator's hint is not logged:\n%s", l)
			}
			if len(seen) < 7 {
				t.Errorf("only %d codes reached", len(seen))
			}
		})
	}
}

// kernelCodes parses pkg/kernel/reasons.go for every ReasonCode and ErrorCode constant:
// a code added there is covered here without editing this test.
func kernelCodes(t *testing.T) []kernel.ErrorCode {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "kernel", "reasons.go"), nil, 0)
	must(t, err)
	var out []kernel.ErrorCode
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			id, ok := vs.Type.(*ast.Ident)
			if !ok || (id.Name != "ReasonCode" && id.Name != "ErrorCode") {
				continue
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					s, err := strconv.Unquote(lit.Value)
					must(t, err)
					out = append(out, kernel.ErrorCode(s))
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("parsed %d codes from reasons.go; the parser missed them", len(out))
	}
	return out
}

// TestAgentHintEveryCode: for every kernel code (and the surface's own), every status,
// gate and cause, with and without sharedos.escalate offered, the refusal as the client
// receives it holds no operator text, and it ends with a hint.
func TestAgentHintEveryCode(t *testing.T) {
	codes := append(kernelCodes(t), CodeEscalationPending, "not_found", "path_escape")
	gates := []kernel.Gate{"", kernel.GateEnvelope, kernel.GateRegistration, kernel.GateRequest, kernel.GateInfrastructure,
		kernel.GateCeiling, kernel.GateGrant}
	causes := []kernel.Cause{"", kernel.CauseNotRegistered, kernel.CauseNamespaceDisabled, kernel.CauseNotOffered,
		kernel.CauseOf(kernel.ReasonNoMatchingGrant), kernel.CauseOf(kernel.ReasonAuthorityUnavailable)}
	for _, code := range codes {
		for _, status := range []kernel.ToolStatus{kernel.StatusDenied, kernel.StatusFailed} {
			for _, gate := range gates {
				for _, cause := range causes {
					for _, esc := range []bool{false, true} {
						res := kernel.ToolResult{Status: status, Tool: "files.create", Gate: gate, Cause: cause,
							Error: &kernel.ProtocolError{Code: code, Message: "refused", Retryable: kernel.BoolPtr(false)}}
						hint := AgentHint(res, esc)
						if hint == "" {
							t.Errorf("%s %s: no hint", status, code)
						}
						checkAgentFacing(t, string(status)+" "+string(code), refusal(res, hint, nil))
					}
				}
			}
		}
	}
	// The hints the server uses outside AgentHint.
	for _, h := range []string{hintNoEscalation, hintAuditUnwritten} {
		for _, bad := range operatorText {
			if strings.Contains(strings.ToLower(h), bad) {
				t.Errorf("hint %q holds %q", h, bad)
			}
		}
	}
}
