package mcpserver

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// everyToolGrants enables every shipped tool for agent:helper: the files, repo and
// escalation tools.
const everyToolGrants = baseGrants + escalateGrant + `  - id: g-files
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: files, path: []}
        actions: [list, stat, read, search, grep, create, replace, append, delete, "snapshot:create", "snapshot:list", "snapshot:restore"]
        scope: descendants
  - id: g-repo
    subject: agent:helper
    issuer: human:alice
    capabilities:
      - resource: {namespace: repo, path: []}
        actions: [status, diff, log, stage, commit]
        scope: descendants
`

// TestPublishedSchemasDescribed reads tools/list as an MCP client receives it and walks
// every published input schema: every property (nested ones too) carries a description
// that gives an example ("e.g."), and every tool's description says what it returns. A
// model has nothing else to go on (issue 25 item 1).
func TestPublishedSchemasDescribed(t *testing.T) {
	e := newEnv(t, envOptions{grants: everyToolGrants, namespaces: []string{"files", "repo", "sharedos"}})
	tools := e.list().Tools
	seen := map[string]bool{}
	for _, tool := range tools {
		seen[tool.Name] = true
		if !strings.Contains(strings.ToLower(tool.Description), "return") {
			t.Errorf("%s: the description does not say what it returns: %q", tool.Name, tool.Description)
		}
		raw, err := json.Marshal(tool.InputSchema)
		must(t, err)
		var schema map[string]any
		must(t, json.Unmarshal(raw, &schema))
		for _, problem := range undescribed(tool.Name, schema) {
			t.Error(problem)
		}
	}
	var missing []string
	for _, want := range []string{"files.list", "files.read", "files.grep", "files.snapshot.restore", "repo.status", "repo.stage",
		"repo.commit", kernel.EscalationToolName} {
		if !seen[want] {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 || len(tools) != 18 {
		t.Fatalf("the listing has %d tools, missing %v: not every shipped tool was walked", len(tools), missing)
	}
}

// undescribed names every property under schema (at path at) without a description that
// holds an example.
func undescribed(at string, schema map[string]any) []string {
	var out []string
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		p, _ := props[name].(map[string]any)
		where := at + "." + name
		d, _ := p["description"].(string)
		switch {
		case strings.TrimSpace(d) == "":
			out = append(out, fmt.Sprintf("%s: no description", where))
		case !strings.Contains(d, "e.g."):
			out = append(out, fmt.Sprintf("%s: the description gives no example (\"e.g. …\"): %q", where, d))
		}
		out = append(out, undescribed(where, p)...)
		if items, ok := p["items"].(map[string]any); ok {
			out = append(out, undescribed(where+"[]", items)...)
		}
	}
	return out
}
