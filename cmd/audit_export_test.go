package cmd

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcpserver"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

// kernelVocabulary parses pkg/kernel/reasons.go for every ReasonCode and ErrorCode
// constant, so that a code added there is in the generated trail without editing this test.
func kernelVocabulary(t *testing.T) []kernel.ErrorCode {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join("..", "pkg", "kernel", "reasons.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
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
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, kernel.ErrorCode(s))
				}
			}
		}
	}
	if len(out) < 20 {
		t.Fatalf("parsed %d codes from reasons.go", len(out))
	}
	return out
}

const exportGrants = `version: 1
context: {actor: agent:helper, owner: human:alice, purpose: triage}
grants:
  - id: g-read
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [notes]}
        actions: [read]
        scope: descendants
  - id: g-once
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [drafts]}
        actions: [create]
        scope: descendants
    constraints: {maxUses: 1}
  - id: g-more
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: [other]}
        actions: [create]
        scope: descendants
`

// TestAuditExportReplaysEveryOutcome is the property of security issue 20, item 8:
// replaying an export reproduces every recorded outcome. The trail holds real calls for
// every outcome the CLI reaches (succeeded; denied no_matching_grant, grant_exhausted,
// host_policy_denied and tool_unavailable for each cause; failed invalid_tool_arguments
// and a plane's own not_found) and, for every other code of the kernel's vocabulary and
// every other outcome, a recorded call with that code (denied and failed). `audit
// export --as-test` of it must pass `sharedos test` with none failed: each outcome is
// reproduced, or is a skipped test saying why it cannot be.
func TestAuditExportReplaysEveryOutcome(t *testing.T) {
	dir, env := sandbox(t)
	root := filepath.Join(dir, "root")
	for _, d := range []string{"notes/frozen", "drafts", "other"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"notes/a.md", "notes/frozen/b.md"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("hello\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	grants := filepath.Join(dir, "grants.yaml")
	config := filepath.Join(dir, "config.yaml")
	state := filepath.Join(dir, "state", "state.db")
	for name, content := range map[string]string{grants: exportGrants, config: "ceiling:\n  frozenPaths: [\"files:notes/frozen\"]\n"} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	global := []string{"--config", config, "--root", root, "--grants", grants, "--state", state, "--now", "2026-08-03T09:00:00Z"}
	call := func(want int, args ...string) {
		t.Helper()
		code, out, errOut := run1(t, env, append(append([]string{}, global...), args...)...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
	}
	call(ExitOK, "--namespaces", "files", "tools", "call", "files.read", "-a", "path=notes/a.md")
	call(ExitDenied, "--namespaces", "files", "tools", "call", "files.read", "-a", "path=secret.md")
	call(ExitDenied, "--namespaces", "files", "tools", "call", "files.read", "-a", "path=notes/frozen/b.md")
	call(ExitDenied, "--namespaces", "repo", "tools", "call", "files.read", "-a", "path=notes/a.md")
	call(ExitUsage, "--namespaces", "files", "tools", "call", "nope.tool") // a person's typo: usage, not audited
	call(ExitDenied, "--namespaces", "files", "tools", "call", "files.delete", "-a", "path=notes/a.md")
	call(ExitOK, "--namespaces", "files", "tools", "call", "files.create", "-a", "path=drafts/a.md", "-a", "content=x")
	call(ExitDenied, "--namespaces", "files", "tools", "call", "files.create", "-a", "path=drafts/b.md", "-a", "content=y")
	call(ExitToolFailed, "--namespaces", "files", "tools", "call", "files.read", "--args", `{"path":"notes/a.md"}`)
	call(ExitToolFailed, "--namespaces", "files", "tools", "call", "files.read", "-a", "path=notes/missing.md")

	ctx := context.Background()
	st, err := sqlitestore.Open(ctx, state, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	real, err := st.ListAudit(ctx, sqlitestore.AuditFilter{Types: []string{string(kernel.EventToolInvoked)}, Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	recorded := map[string]bool{}
	for _, ev := range real {
		recorded[string(ev.Outcome)+" "+string(ev.Reason)+" "+string(ev.Cause)] = true
	}
	for _, want := range []string{"succeeded  ", "denied no_matching_grant ", "denied grant_exhausted ",
		"denied host_policy_denied ", "denied tool_unavailable namespace_disabled",
		"denied tool_unavailable no_matching_grant", "failed invalid_tool_arguments ", "failed not_found "} {
		if !recorded[want] {
			t.Fatalf("the real calls recorded no %q: %v", want, recorded)
		}
	}
	// Every other code, denied and failed, and the outcomes no call result has. A recorded
	// call the grant files decide (replayableDenials) is only real: a made-up one would
	// disagree with the grant files, which a replay rightly reports.
	base := real[0]
	n := 0
	add := func(outcome kernel.AuditOutcome, code kernel.ErrorCode, cause kernel.Cause) {
		n++
		ev := base
		ev.ID = fmt.Sprintf("00000000-0000-7000-8000-%012d", n)
		ev.OperationID = fmt.Sprintf("00000000-0000-7000-9000-%012d", n)
		ev.Outcome, ev.Reason, ev.Cause, ev.GrantID, ev.Resource, ev.Metadata = outcome, code, cause, "", nil, nil
		ev.At = "2026-08-03T10:00:00.000Z"
		if err := st.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	codes := append(kernelVocabulary(t), mcpserver.CodeEscalationPending, "not_found", "a_code_of_a_later_version")
	for _, code := range codes {
		if !replayableDenial(code) {
			add(kernel.OutcomeDenied, code, "")
		}
		add(kernel.OutcomeFailed, code, "")
	}
	for _, c := range kernel.InfrastructureDenialReasons() {
		add(kernel.OutcomeDenied, kernel.CodeToolUnavailable, kernel.CauseOf(c)) // a tool an outage hid
	}
	add(kernel.OutcomeDenied, kernel.CodeToolUnavailable, kernel.CauseNotRegistered) // an agent's unknown name (MCP)
	add(kernel.OutcomeEscalated, kernel.CodeEscalationRequested, "")
	add(kernel.OutcomeInterrupted, "", "")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	file := filepath.Join(dir, "tests", "recorded.yaml")
	code, out, errOut := run1(t, env, "--config", config, "--root", root, "--grants", grants, "--state", state,
		"audit", "export", "--as-test", "--limit", "0", "--file", file)
	if code != ExitOK {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	exported, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(exported), "call: files.read, expect: {code: invalid_tool_arguments, exit: 4, status: failed}") {
		t.Errorf("invalid_tool_arguments is not replayed as a failing call:\n%s", exported)
	}
	code, out, errOut = run1(t, env, "test", file)
	m := regexp.MustCompile(`(?m)^(\d+) passed, (\d+) failed(?:, (\d+) skipped)?$`).FindStringSubmatch(out)
	if code != ExitOK || m == nil || m[2] != "0" {
		t.Fatalf("the replay of the export does not pass: exit %d\n%s%s\n--- export:\n%s", code, out, errOut, exported)
	}
	// Passed: one test per real call, and the made-up invalid_tool_arguments (replayed
	// with arguments the schema refuses). Skipped: the other made-up records, and the
	// failure of the real not_found call (its decision is one of the passed).
	if passed, _ := strconv.Atoi(m[1]); passed != len(real)+1 {
		t.Errorf("%s passed, want %d", m[1], len(real)+1)
	}
	if skipped, _ := strconv.Atoi(m[3]); skipped != n {
		t.Errorf("%s skipped, want %d", m[3], n)
	}
}

// replayableDenial reports whether the export replays a denial with code as a call.
func replayableDenial(code kernel.ErrorCode) bool {
	for _, c := range replayableDenials {
		if c == code {
			return true
		}
	}
	return false
}
