package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/fsplane"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/repoplane"
)

// The decision corpus (testdata/conformance, copied from the shared corpus) replayed
// against the kernel with the in-memory doubles of doubles_test.go.

type corpusCase struct {
	ID        string `json:"id"`
	Area      string `json:"area"`
	Title     string `json:"title"`
	Invariant string `json:"invariant"`
	World     struct {
		Grants                []json.RawMessage          `json:"grants"`
		EnabledToolNamespaces []string                   `json:"enabledToolNamespaces"`
		Files                 map[string]json.RawMessage `json:"files"`
		Snapshots             map[string][]struct {
			ID      string `json:"id"`
			Content string `json:"content"`
		} `json:"snapshots"`
		Repos         []string `json:"repos"`
		Registrations struct {
			StandardOs       []string `json:"standardOs"`
			EscalationTool   bool     `json:"escalationTool"`
			ContextProviders []struct {
				ID       string     `json:"id"`
				Behavior string     `json:"behavior"`
				Tools    []specTool `json:"tools"`
			} `json:"contextProviders"`
		} `json:"registrations"`
		Infrastructure struct {
			GrantSource        string `json:"grantSource"`
			UsageStore         string `json:"usageStore"`
			DelegationResolver string `json:"delegationResolver"`
		} `json:"infrastructure"`
		NamespaceSettings struct {
			Ceiling []string `json:"ceiling"`
		} `json:"namespaceSettings"`
		Context map[string]json.RawMessage `json:"context"`
	} `json:"world"`
	Steps []corpusStep `json:"steps"`
}

type corpusStep struct {
	Op        string          `json:"op"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
	Patch     json.RawMessage `json:"patch"`
	Now       string          `json:"now"`
	TraceID   string          `json:"traceId"`
	Expect    struct {
		Outcome            string                       `json:"outcome"`
		Reason             string                       `json:"reason"`
		VisibleTools       []string                     `json:"visibleTools"`
		AbsentTools        []string                     `json:"absentTools"`
		OutputContains     []string                     `json:"outputContains"`
		OutputNotContains  []string                     `json:"outputNotContains"`
		Namespaces         []map[string]json.RawMessage `json:"namespaces"`
		NamespacesAbsent   []string                     `json:"namespacesAbsent"`
		Summary            *kernel.ToolNamespaceSummary `json:"summary"`
		EffectiveSelection []string                     `json:"effectiveSelection"`
	} `json:"expect"`
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	b, err := os.ReadFile("../../testdata/conformance/cases.json")
	if err != nil {
		t.Fatalf("read corpus: %v", err)
	}
	var cases []corpusCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatalf("decode corpus: %v", err)
	}
	return cases
}

// world is one case's kernel and doubles.
type world struct {
	k        *kernel.Kernel
	settings *memSettings
	audit    *memAudit
	base     kernel.AccessContext
	calls    int
}

func buildWorld(t *testing.T, c *corpusCase) *world {
	t.Helper()
	w := &world{settings: &memSettings{selection: slices.Clone(c.World.EnabledToolNamespaces), ceiling: c.World.NamespaceSettings.Ceiling},
		audit: &memAudit{}}
	if w.settings.selection == nil {
		w.settings.selection = []string{}
	}
	store := &grantStore{mode: c.World.Infrastructure.GrantSource}
	for i, raw := range c.World.Grants {
		var g kernel.CapabilityGrant
		if err := json.Unmarshal(raw, &g); err != nil {
			t.Fatalf("grant %d of the corpus does not decode: %v", i, err)
		}
		store.grants = append(store.grants, g)
	}
	usage := newMemUsage()
	cfg := kernel.Config{Grants: store, Usage: usage, Settings: w.settings, Audit: w.audit}
	if c.World.Infrastructure.UsageStore == "unavailable" {
		usage.broken = true
	}
	if c.World.Infrastructure.DelegationResolver == "store" {
		cfg.Resolver = store
	}
	w.k = kernel.New(cfg)
	files := newMemFiles()
	for p, raw := range c.World.Files {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			files.files[p] = &memFile{content: s, version: "seed-" + p}
			continue
		}
		var f struct{ Content, Version string }
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("file %s: %v", p, err)
		}
		files.files[p] = &memFile{content: f.Content, version: f.Version}
	}
	for p, snaps := range c.World.Snapshots {
		files.snapshots[p] = map[string]string{}
		for _, s := range snaps {
			files.snapshots[p][s.ID] = s.Content
		}
	}
	for _, plane := range c.World.Registrations.StandardOs {
		var hs []kernel.ToolHandler
		var err error
		switch plane {
		case "files":
			hs, err = fsplane.Tools(files)
		case "repo":
			hs, err = repoplane.Tools(&stubRepo{roots: c.World.Repos})
		default:
			t.Fatalf("unknown plane %q", plane)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if err := w.k.RegisterTool(h); err != nil {
				t.Fatal(err)
			}
		}
	}
	if c.World.Registrations.EscalationTool {
		if err := w.k.RegisterTool(kernel.EscalationTool()); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range c.World.Registrations.ContextProviders {
		if err := w.k.RegisterToolProvider(&specProvider{id: p.ID, behavior: p.Behavior, tools: p.Tools}); err != nil {
			t.Fatal(err)
		}
	}
	ctxMap := map[string]json.RawMessage{}
	for k, v := range c.World.Context {
		ctxMap[k] = v
	}
	ctxMap["enabledToolNamespaces"] = json.RawMessage("[]")
	b, _ := json.Marshal(ctxMap)
	if err := json.Unmarshal(b, &w.base); err != nil {
		t.Fatalf("context: %v", err)
	}
	return w
}

func (w *world) context(step *corpusStep) kernel.AccessContext {
	actx := w.base
	actx.EnabledToolNamespaces = w.settings.current()
	if step.Now != "" {
		actx.Now = step.Now
	}
	return actx
}

func TestConformanceCorpus(t *testing.T) {
	cases := loadCorpus(t)
	if len(cases) < 70 {
		t.Fatalf("corpus has %d cases; expected the full corpus", len(cases))
	}
	for i := range cases {
		c := &cases[i]
		t.Run(c.ID, func(t *testing.T) {
			t.Parallel()
			w := buildWorld(t, c)
			for si := range c.Steps {
				step := &c.Steps[si]
				if err := w.run(step); err != nil {
					t.Errorf("step %d (%s %s): %v\n  invariant: %s", si, step.Op, step.Tool, err, c.Invariant)
				}
			}
		})
	}
}

// explainAgrees checks that explain predicted res: the same status, code, gate and cause
// for a refusal before execution; for an allowed call, a result the tool itself (or the
// audit of the decision) produced.
func explainAgrees(ex *kernel.CallExplanation, res kernel.ToolResult) error {
	if ex == nil {
		if res.Error == nil || res.Error.Code != kernel.ErrorCodeOf(kernel.ReasonInvalidContext) {
			return fmt.Errorf("explain could not begin a turn, but the call got %+v", res)
		}
		return nil
	}
	if ex.Allowed {
		if res.Gate != "" && !(res.Error != nil && res.Error.Code == kernel.CodeAuditUnavailable) {
			return fmt.Errorf("explain allowed the call, InvokeTool refused it: %s %s (gate %s)", res.Status, res.Error.Code, res.Gate)
		}
		return nil
	}
	got := fmt.Sprintf("%s/%s/%s/%s", res.Status, codeOf(res), res.Gate, res.Cause)
	want := fmt.Sprintf("%s/%s/%s/%s", ex.Status, ex.Code, ex.Gate, ex.Cause)
	if got != want {
		return fmt.Errorf("explain predicted %s, InvokeTool returned %s", want, got)
	}
	return nil
}

func codeOf(res kernel.ToolResult) kernel.ErrorCode {
	if res.Error == nil {
		return ""
	}
	return res.Error.Code
}

func (w *world) run(step *corpusStep) error {
	ctx := context.Background()
	actx := w.context(step)
	exp := step.Expect
	switch step.Op {
	case "list":
		tools, err := w.k.ListTools(ctx, actx)
		if err != nil {
			code := "internal_error"
			if errors.Is(err, kernel.ErrToolCatalogUnavailable) {
				code = string(kernel.CodeToolCatalogUnavailable)
			}
			if exp.Outcome != "error" {
				return fmt.Errorf("list failed: %v", err)
			}
			if exp.Reason != "" && exp.Reason != code {
				return fmt.Errorf("list failed with %s, want %s", code, exp.Reason)
			}
			return nil
		}
		if exp.Outcome == "error" {
			return fmt.Errorf("list succeeded, want error %s", exp.Reason)
		}
		var names []string
		for _, d := range tools {
			names = append(names, d.Name)
		}
		if exp.VisibleTools != nil {
			want := slices.Clone(exp.VisibleTools)
			slices.Sort(want)
			got := slices.Clone(names)
			slices.Sort(got)
			if !slices.Equal(want, got) {
				return fmt.Errorf("visible tools %v, want %v", got, want)
			}
		}
		for _, a := range exp.AbsentTools {
			if slices.Contains(names, a) {
				return fmt.Errorf("tool %s is visible, want absent", a)
			}
		}
		return nil
	case "call":
		w.calls++
		call := kernel.ToolCall{ID: fmt.Sprintf("call-%d", w.calls), Tool: step.Tool, Arguments: step.Arguments,
			TraceID: actx.TraceID, RequestedAt: actx.Now}
		if step.TraceID != "" {
			call.TraceID = step.TraceID
		}
		if call.Arguments == nil {
			call.Arguments = json.RawMessage("{}")
		}
		// explain is the same plan settled without consuming: run first on the same
		// state, it must agree with the call on outcome, code, gate and cause.
		var ex *kernel.CallExplanation
		if turn, err := w.k.BeginTurn(actx); err == nil {
			ex = turn.ExplainCall(ctx, call)
		}
		res := w.k.InvokeTool(ctx, actx, call)
		if err := explainAgrees(ex, res); err != nil {
			return err
		}
		want := map[string]kernel.ToolStatus{"allowed": kernel.StatusSucceeded, "denied": kernel.StatusDenied, "error": kernel.StatusFailed}[exp.Outcome]
		body, _ := json.Marshal(res)
		if res.Status != want {
			return fmt.Errorf("status %s, want %s (%s)", res.Status, want, body)
		}
		if exp.Reason != "" && (res.Error == nil || string(res.Error.Code) != exp.Reason) {
			return fmt.Errorf("result %s, want reason %s", body, exp.Reason)
		}
		for _, s := range exp.OutputContains {
			if !strings.Contains(string(body), s) {
				return fmt.Errorf("result %s does not contain %q", body, s)
			}
		}
		for _, s := range exp.OutputNotContains {
			if strings.Contains(string(body), s) {
				return fmt.Errorf("result %s contains %q", body, s)
			}
		}
		return nil
	case "namespaces.get", "namespaces.update":
		var cat kernel.ToolNamespaceCatalog
		var err error
		turn, terr := w.k.BeginTurn(actx)
		switch {
		case terr != nil:
			err = terr
		case step.Op == "namespaces.get":
			cat, err = turn.ListToolNamespaces(ctx)
		default:
			var u kernel.ToolNamespaceUpdate
			u, err = kernel.ParseToolNamespaceUpdate(step.Patch)
			if err == nil {
				cat, _, err = turn.UpdateToolNamespaces(ctx, u)
			}
		}
		if err != nil {
			code := "internal_error"
			switch {
			case errors.Is(err, kernel.ErrInvalidUpdate):
				code = "invalid_request"
			case errors.Is(err, kernel.ErrToolCatalogUnavailable):
				code = string(kernel.CodeToolCatalogUnavailable)
			}
			if exp.Outcome != "error" {
				return fmt.Errorf("%s failed: %v", step.Op, err)
			}
			if exp.Reason != "" && exp.Reason != code {
				return fmt.Errorf("failed with %s (%v), want %s", code, err, exp.Reason)
			}
			return nil
		}
		if exp.Outcome == "error" {
			return fmt.Errorf("%s succeeded, want error %s", step.Op, exp.Reason)
		}
		return checkCatalog(cat, w.settings.current(), step)
	}
	return fmt.Errorf("unknown op %q", step.Op)
}

func checkCatalog(cat kernel.ToolNamespaceCatalog, selection []string, step *corpusStep) error {
	exp := step.Expect
	byName := map[string]kernel.ToolNamespaceDescriptor{}
	for _, d := range cat.Namespaces {
		byName[d.Namespace] = d
	}
	for _, want := range exp.Namespaces {
		var name string
		_ = json.Unmarshal(want["namespace"], &name)
		got, ok := byName[name]
		if !ok {
			return fmt.Errorf("namespace %s missing from %+v", name, cat)
		}
		gotJSON := map[string]json.RawMessage{}
		b, _ := json.Marshal(got)
		_ = json.Unmarshal(b, &gotJSON)
		for k, v := range want {
			if string(canon(v)) != string(canon(gotJSON[k])) {
				return fmt.Errorf("namespace %s: %s = %s, want %s", name, k, gotJSON[k], v)
			}
		}
	}
	for _, n := range exp.NamespacesAbsent {
		if _, ok := byName[n]; ok {
			return fmt.Errorf("namespace %s present, want absent", n)
		}
	}
	if exp.Summary != nil && *exp.Summary != cat.Summary {
		return fmt.Errorf("summary %+v, want %+v", cat.Summary, *exp.Summary)
	}
	if exp.EffectiveSelection != nil && !slices.Equal(exp.EffectiveSelection, selection) {
		return fmt.Errorf("effective selection %v, want %v", selection, exp.EffectiveSelection)
	}
	return nil
}

func canon(raw json.RawMessage) []byte { out, _ := kernel.CanonicalJSON(raw); return out }
