// Package corpus converts the kernel's decision corpus (testdata/conformance/cases.json)
// into `sharedos test` scenario files, one per case, so that the corpus also runs through
// the CLI's test runner. A case the scenario format cannot express is not converted: it
// is listed with the reason (an infrastructure double, a per-context tool provider, a
// seeded snapshot or version token, a malformed grant the strict parser refuses before
// any run, …). It never weakens an expectation to make a case expressible.
package corpus

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Skipped is a case that was not converted, and why.
type Skipped struct {
	ID     string
	Reason string
}

type kase struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	World struct {
		Grants     []json.RawMessage `json:"grants"`
		Enabled    []string          `json:"enabledToolNamespaces"`
		Files      map[string]any    `json:"files"`
		Repos      []string          `json:"repos"`
		Registered struct {
			StandardOS []string          `json:"standardOs"`
			Escalation bool              `json:"escalationTool"`
			Providers  []json.RawMessage `json:"contextProviders"`
		} `json:"registrations"`
		Infra struct {
			GrantSource, UsageStore, DelegationResolver string
		} `json:"infrastructure"`
		NSSettings struct {
			Ceiling []string `json:"ceiling"`
		} `json:"namespaceSettings"`
		Context struct {
			World     string         `json:"namespaceId"`
			Actor     map[string]any `json:"actor"`
			Authority map[string]any `json:"authority"`
			Owner     map[string]any `json:"owner"`
			Purpose   string         `json:"purpose"`
			Now       string         `json:"now"`
		} `json:"context"`
	} `json:"world"`
	Steps []step `json:"steps"`
}

type step struct {
	Op      string          `json:"op"`
	Tool    string          `json:"tool"`
	Args    json.RawMessage `json:"arguments"`
	Patch   json.RawMessage `json:"patch"`
	Now     string          `json:"now"`
	TraceID string          `json:"traceId"`
	Expect  struct {
		Outcome          string          `json:"outcome"`
		Reason           string          `json:"reason"`
		Visible          []string        `json:"visibleTools"`
		Absent           []string        `json:"absentTools"`
		OutputContains   []string        `json:"outputContains"`
		OutputNot        []string        `json:"outputNotContains"`
		Namespaces       json.RawMessage `json:"namespaces"`
		NamespacesAbsent json.RawMessage `json:"namespacesAbsent"`
		Summary          json.RawMessage `json:"summary"`
		Effective        []string        `json:"effectiveSelection"`
	} `json:"expect"`
}

// Convert returns the scenario files (name → JSON) of the cases it can express, and the
// others with the reason.
func Convert(cases []byte) (map[string][]byte, []Skipped, error) {
	var cs []kase
	if err := json.Unmarshal(cases, &cs); err != nil {
		return nil, nil, fmt.Errorf("decode the corpus: %w", err)
	}
	defs, err := host.DefinitionTools()
	if err != nil {
		return nil, nil, err
	}
	var registered []string
	for _, d := range defs {
		registered = append(registered, d.Definition.Name)
	}
	files := map[string][]byte{}
	var skipped []Skipped
	for _, c := range cs {
		doc, why := convert(c, registered)
		if why != "" {
			skipped = append(skipped, Skipped{c.ID, why})
			continue
		}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return nil, nil, err
		}
		files[c.ID+".json"] = append(escapeControls(b), '\n')
	}
	return files, skipped, nil
}

// address is a reference address object as kind:id.
func address(a map[string]any) string {
	kind, _ := a["kind"].(string)
	for _, k := range []string{"userId", "agentId", "conversationId", "serviceId"} {
		if id, ok := a[k].(string); ok {
			return kind + ":" + id
		}
	}
	return ""
}

func convert(c kase, registered []string) (map[string]any, string) {
	w := c.World
	switch {
	case w.Infra.GrantSource != "filtering":
		return nil, "grant source double " + w.Infra.GrantSource + ": a scenario's grants are always the grant files'"
	case w.Infra.UsageStore != "memory":
		return nil, "usage store double " + w.Infra.UsageStore + ": a scenario's usage counters are always the state database's"
	case w.Infra.DelegationResolver != "store":
		return nil, "no delegation resolver: a scenario's grant files always resolve delegation"
	case len(w.Registered.Providers) > 0:
		return nil, "per-context tool providers: a scenario registers the host's tools only"
	case !slices.Equal(w.Registered.StandardOS, []string{"files", "repo"}):
		return nil, "a partial set of planes: a scenario registers both planes"
	case w.NSSettings.Ceiling != nil:
		return nil, "an allow-list ceiling of namespaces: a scenario's ceiling names forbidden namespaces"
	}
	// Grants: the strict parser must accept them (a malformed store grant cannot be
	// written in a scenario file).
	grants := make([]any, len(w.Grants))
	for i, g := range w.Grants {
		var v any
		_ = json.Unmarshal(g, &v)
		grants[i] = v
	}
	gdoc, _ := json.Marshal(map[string]any{"version": 1, "grants": grants})
	if len(grants) > 0 {
		if _, err := grantfile.Parse("corpus.json", gdoc); err != nil {
			return nil, "a grant the strict grant-file parser refuses (" + firstLine(err.Error()) + "): a scenario file with it is invalid before it runs"
		}
	}
	files := map[string]any{}
	for p, v := range w.Files {
		switch x := v.(type) {
		case string:
			files[p] = x
		case map[string]any:
			files[p], _ = x["content"].(string)
		}
	}
	for _, r := range w.Repos {
		files[r+"/"] = map[string]any{"git": true}
	}
	ctx := map[string]any{"as": address(w.Context.Actor), "owner": address(w.Context.Owner),
		"authority": address(w.Context.Authority), "world": w.Context.World, "purpose": w.Context.Purpose, "now": w.Context.Now}
	var steps []any
	for i, s := range c.Steps {
		st, why := convertStep(s, registered, w.Registered.Escalation)
		if why != "" {
			return nil, fmt.Sprintf("step %d (%s): %s", i+1, s.Op, why)
		}
		steps = append(steps, st)
	}
	enabled := w.Enabled
	if enabled == nil {
		enabled = []string{}
	}
	if !w.Registered.Escalation && slices.Contains(enabled, "sharedos") {
		return nil, "sharedos enabled without sharedos.escalate registered: a scenario's host always registers it"
	}
	doc := map[string]any{"version": 1, "name": c.Title, "context": ctx, "namespaces": enabled,
		"tests": []any{map[string]any{"name": c.ID, "steps": steps}}}
	if len(files) > 0 {
		doc["files"] = files
	}
	if len(grants) > 0 {
		doc["grants"] = grants
	}
	return doc, ""
}

func convertStep(s step, registered []string, escalation bool) (map[string]any, string) {
	e := s.Expect
	out := map[string]any{}
	if s.Now != "" {
		out["now"] = s.Now
	}
	if s.TraceID != "" {
		return nil, "a call with another traceId: a scenario derives the trace id"
	}
	expect := map[string]any{}
	switch s.Op {
	case "list":
		if e.Outcome != "allowed" {
			return nil, "a listing that fails: its code is the HTTP surface's"
		}
		out["list"] = map[string]any{}
		if e.Visible != nil {
			var absent []string
			for _, n := range registered {
				if !slices.Contains(e.Visible, n) {
					absent = append(absent, n)
				}
			}
			if !escalation && slices.Contains(e.Visible, "sharedos.escalate") {
				return nil, "sharedos.escalate listed though not registered"
			}
			expect["includes"], expect["excludes"] = orEmpty(e.Visible), orEmpty(absent)
		}
		if e.Absent != nil {
			expect["excludes"] = append(toStrings(expect["excludes"]), e.Absent...)
		}
	case "call":
		if strings.HasPrefix(s.Tool, "files.snapshot") {
			return nil, "snapshot tools: a scenario cannot seed the corpus's snapshots"
		}
		if s.Tool == "sharedos.escalate" {
			return nil, "the corpus's escalate handler fails escalation_not_terminated; the CLI records the escalation instead"
		}
		if strings.Contains(string(s.Args), "expectedVersion") {
			return nil, "an expectedVersion token: the corpus's version tokens are opaque seeds, the files plane's are content digests"
		}
		if (s.Tool == "repo.commit" || s.Tool == "repo.stage") && e.Outcome == "allowed" {
			return nil, "a successful repo write: the corpus's repo plane is a stub that accepts any well-formed write, the real plane refuses a commit with nothing staged"
		}
		if len(e.OutputContains) > 0 && e.Outcome != "allowed" {
			return nil, "outputContains on a refusal: a scenario asserts the code, not the message"
		}
		out["call"] = s.Tool
		var args any = map[string]any{}
		if len(s.Args) > 0 {
			if err := json.Unmarshal(s.Args, &args); err != nil {
				return nil, "arguments: " + err.Error()
			}
		}
		if _, ok := args.(map[string]any); !ok {
			return nil, "arguments that are not an object: a scenario's args are a mapping"
		}
		out["args"] = args
		status := map[string]string{"allowed": "succeeded", "denied": "denied", "error": "failed"}[e.Outcome]
		if status == "" {
			return nil, "outcome " + e.Outcome
		}
		expect["status"] = status
		if e.Reason != "" {
			expect["code"] = e.Reason
		}
		if e.Reason == string(kernel.CodeToolUnavailable) && !slices.Contains(registered, s.Tool) {
			// An unknown name on purpose (an agent's): the scenario says so, as a step
			// naming an unregistered tool must (a stronger expectation, never weaker).
			expect["cause"] = string(kernel.CauseNotRegistered)
		}
		output := map[string]any{}
		if len(e.OutputContains) > 0 {
			output["contains"] = e.OutputContains
		}
		if len(e.OutputNot) > 0 {
			output["excludes"] = e.OutputNot
		}
		if len(output) > 0 {
			expect["output"] = output
		}
	case "namespaces.update":
		if e.Outcome != "allowed" {
			return nil, "a malformed patch: a scenario refuses it when the file is read"
		}
		if e.Namespaces != nil {
			return nil, "namespace descriptors: a scenario asserts the selection, not the catalogue"
		}
		var patch map[string]any
		if err := json.Unmarshal(s.Patch, &patch); err != nil {
			return nil, "patch: " + err.Error()
		}
		for k := range patch {
			if k != "enable" && k != "disable" {
				return nil, "patch key " + k
			}
		}
		if len(patch) == 0 {
			return nil, "an empty patch: a scenario refuses it when the file is read"
		}
		out["namespaces"] = patch
		if e.Effective != nil {
			expect["enabled"] = orEmpty(e.Effective)
		}
	default:
		return nil, "op " + s.Op + ": a scenario has no step that returns the namespace catalogue"
	}
	if len(expect) > 0 {
		out["expect"] = expect
	}
	return out, ""
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	sort.Strings(s)
	return s
}

func toStrings(v any) []string {
	s, _ := v.([]string)
	return s
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// escapeControls writes DEL and the C1 controls as \u escapes (encoding/json leaves them
// raw; a YAML reader, which scenario files go through, refuses them raw).
func escapeControls(b []byte) []byte {
	var out strings.Builder
	for _, r := range string(b) {
		if r == 0x7f || r >= 0x80 && r <= 0x9f {
			fmt.Fprintf(&out, "\\u%04x", r)
			continue
		}
		out.WriteRune(r)
	}
	return []byte(out.String())
}
