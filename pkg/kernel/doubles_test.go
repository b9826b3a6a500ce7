package kernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Test doubles that follow the conformance corpus's harness obligations.

// grantStore is the trusted grant store of a world.
type grantStore struct {
	grants []kernel.CapabilityGrant
	mode   string // filtering | passthrough | throws
}

func (s *grantStore) LoadGrants(_ context.Context, actx kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	switch s.mode {
	case "throws":
		return nil, errors.New("grant source down")
	case "passthrough":
		return slices.Clone(s.grants), nil
	}
	var out []kernel.CapabilityGrant
	for _, g := range s.grants {
		if g.NamespaceID == actx.World && g.Subject == actx.Actor && g.Issuer == actx.Authority {
			out = append(out, g)
		}
	}
	return out, nil
}

func (s *grantStore) ResolveGrant(_ context.Context, ns, id string) (*kernel.CapabilityGrant, error) {
	for i := range s.grants {
		if s.grants[i].NamespaceID == ns && s.grants[i].ID == id {
			g := s.grants[i]
			return &g, nil
		}
	}
	return nil, nil
}

// memUsage is an atomic per-(world, grant) counter; broken makes every call fail.
type memUsage struct {
	mu     sync.Mutex
	used   map[string]int64
	broken bool
}

func newMemUsage() *memUsage { return &memUsage{used: map[string]int64{}} }

func (u *memUsage) TryConsume(_ context.Context, key kernel.UsageKey, max int64) (bool, error) {
	if u.broken {
		return false, errors.New("usage store down")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	k := usageKey(key)
	if u.used[k] >= max {
		return false, nil
	}
	u.used[k]++
	return true, nil
}

func usageKey(k kernel.UsageKey) string {
	return k.World + "\x00" + k.Issuer.String() + "\x00" + k.Subject.String() + "\x00" + k.GrantID
}

func (u *memUsage) GetUsage(_ context.Context, key kernel.UsageKey) (int64, error) {
	if u.broken {
		return 0, errors.New("usage store down")
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.used[usageKey(key)], nil
}

// memSettings is the host's namespace settings store, with an optional ceiling.
type memSettings struct {
	mu        sync.Mutex
	selection []string
	ceiling   []string // nil = none
}

func (s *memSettings) ApplyUpdate(_ context.Context, _ kernel.AccessContext, u kernel.ToolNamespaceUpdate) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	next, err := kernel.ApplyToolNamespaceUpdate(s.selection, u)
	if err != nil {
		return nil, err
	}
	if s.ceiling != nil {
		next = slices.DeleteFunc(next, func(n string) bool { return !slices.Contains(s.ceiling, n) })
	}
	s.selection = next
	return slices.Clone(next), nil
}

func (s *memSettings) current() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.selection)
}

// memAudit collects audit events.
type memAudit struct {
	mu     sync.Mutex
	events []kernel.AuditEvent
	fail   bool
}

func (a *memAudit) Append(_ context.Context, ev kernel.AuditEvent) error {
	if a.fail {
		return errors.New("audit down")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, ev)
	return nil
}

func (a *memAudit) all() []kernel.AuditEvent {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.events)
}

// memFiles is the corpus's in-memory files provider: it acts on the resource it is
// handed and never re-checks authority.
type memFile struct {
	content string
	version string
}

type memFiles struct {
	mu        sync.Mutex
	files     map[string]*memFile
	snapshots map[string]map[string]string // path -> id -> content
	counter   int
}

func newMemFiles() *memFiles {
	return &memFiles{files: map[string]*memFile{}, snapshots: map[string]map[string]string{}}
}

func (m *memFiles) Namespace() string { return "files" }

func inputMap(in any) map[string]any {
	if in == nil {
		return map[string]any{}
	}
	b, _ := json.Marshal(in)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	if out == nil {
		out = map[string]any{}
	}
	return out
}

func (m *memFiles) isDir(p string) bool {
	prefix := p + "/"
	if p == "" {
		prefix = ""
	}
	for k := range m.files {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

func (m *memFiles) Invoke(_ context.Context, op kernel.ResourceOperation) (kernel.ResourceResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := strings.Join(op.Resource.Path, "/")
	in := inputMap(op.Input)
	ok := func(out any) (kernel.ResourceResult, error) {
		return kernel.ResourceResult{OperationID: op.OperationID, Status: kernel.StatusSucceeded, Output: out, CompletedAt: op.Context.Now}, nil
	}
	fail := func(code, msg string) (kernel.ResourceResult, error) {
		return kernel.ResourceResult{OperationID: op.OperationID, Status: kernel.StatusFailed,
			Error: &kernel.ProtocolError{Code: kernel.ErrorCode(code), Message: msg}, CompletedAt: op.Context.Now}, nil
	}
	next := func() string { m.counter++; return fmt.Sprintf("mem-%d", m.counter) }
	expected, hasExpected := in["expectedVersion"].(string)
	content := func() string {
		if s, ok := in["content"].(string); ok {
			return s
		}
		b, _ := json.Marshal(in["content"])
		return string(b)
	}
	f := m.files[p]
	switch op.Action {
	case "read", "stat":
		if f == nil {
			return fail("not_found", "no such file")
		}
		return ok(map[string]any{"path": op.Resource.Path, "content": f.content, "version": f.version})
	case "list":
		names := map[string]bool{}
		prefix := p + "/"
		if p == "" {
			prefix = ""
		}
		for k := range m.files {
			if strings.HasPrefix(k, prefix) {
				names[strings.SplitN(k[len(prefix):], "/", 2)[0]] = true
			}
		}
		var list []string
		for n := range names {
			list = append(list, n)
		}
		sort.Strings(list)
		return ok(map[string]any{"path": op.Resource.Path, "entries": list})
	case "search", "grep":
		var hits []string
		for k, v := range m.files {
			if strings.HasPrefix(k, p) && strings.Contains(strings.ToLower(v.content), strings.ToLower(fmt.Sprint(in["query"], in["pattern"]))) {
				hits = append(hits, k)
			}
		}
		sort.Strings(hits)
		return ok(map[string]any{"path": op.Resource.Path, "hits": hits})
	case "create":
		if f != nil || m.isDir(p) {
			return fail("already_exists", "exists")
		}
		m.files[p] = &memFile{content: content(), version: next()}
		return ok(map[string]any{"path": op.Resource.Path, "version": m.files[p].version})
	case "replace", "append":
		if f == nil {
			return fail("not_found", "no such file")
		}
		if hasExpected && expected != f.version {
			return fail("version_conflict", "stale version")
		}
		if op.Action == "replace" {
			f.content = content()
		} else {
			f.content += content()
		}
		f.version = next()
		return ok(map[string]any{"path": op.Resource.Path, "version": f.version})
	case "delete":
		if f == nil {
			if !m.isDir(p) {
				return fail("not_found", "no such file")
			}
			if rec, _ := in["recursive"].(bool); !rec {
				return fail("not_empty", "directory")
			}
			for k := range m.files {
				if strings.HasPrefix(k, p+"/") {
					delete(m.files, k)
				}
			}
			return ok(map[string]any{"path": op.Resource.Path, "deleted": true})
		}
		if hasExpected && expected != f.version {
			return fail("version_conflict", "stale version")
		}
		delete(m.files, p)
		return ok(map[string]any{"path": op.Resource.Path, "deleted": true})
	case "snapshot:create":
		id := next()
		if m.snapshots[p] == nil {
			m.snapshots[p] = map[string]string{}
		}
		c := ""
		if f != nil {
			c = f.content
		}
		m.snapshots[p][id] = c
		return ok(map[string]any{"path": op.Resource.Path, "snapshotId": id})
	case "snapshot:list":
		var ids []string
		for id := range m.snapshots[p] {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		return ok(map[string]any{"path": op.Resource.Path, "snapshots": ids})
	case "snapshot:restore":
		id, _ := in["snapshotId"].(string)
		c, found := m.snapshots[p][id]
		if !found {
			return fail("not_found", "no such snapshot")
		}
		if hasExpected && (f == nil || expected != f.version) {
			return fail("version_conflict", "stale version")
		}
		m.files[p] = &memFile{content: c, version: next()}
		return ok(map[string]any{"path": op.Resource.Path, "snapshotId": id, "version": m.files[p].version})
	}
	return fail("unsupported_action", op.Action)
}

// stubRepo succeeds for any well-formed request on a registered repository root.
type stubRepo struct{ roots []string }

func (r *stubRepo) Namespace() string { return "repo" }

func (r *stubRepo) Invoke(_ context.Context, op kernel.ResourceOperation) (kernel.ResourceResult, error) {
	p := strings.Join(op.Resource.Path, "/")
	if !slices.Contains(r.roots, p) {
		return kernel.ResourceResult{OperationID: op.OperationID, Status: kernel.StatusFailed,
			Error: &kernel.ProtocolError{Code: "not_a_repository", Message: "not a repository"}, CompletedAt: op.Context.Now}, nil
	}
	return kernel.ResourceResult{OperationID: op.OperationID, Status: kernel.StatusSucceeded,
		Output: map[string]any{"path": op.Resource.Path, "action": op.Action}, CompletedAt: op.Context.Now}, nil
}

// specProvider is a per-context provider built from a corpus ProviderSpec.
type specProvider struct {
	id       string
	behavior string
	tools    []specTool
}

type specTool struct {
	Name               string                       `json:"name"`
	Namespace          string                       `json:"namespace"`
	Source             string                       `json:"source"`
	ReadWrite          string                       `json:"readWrite"`
	RequiredCapability kernel.CapabilityRequirement `json:"requiredCapability"`
	Requirement        json.RawMessage              `json:"requirement"`
	Invoke             string                       `json:"invoke"`
}

func (p *specProvider) ID() string { return p.id }

func (p *specProvider) ListTools(_ context.Context, _ kernel.AccessContext) ([]kernel.ToolHandler, error) {
	if p.behavior == "throws" {
		return nil, errors.New("provider down")
	}
	var out []kernel.ToolHandler
	for _, t := range p.tools {
		out = append(out, t.handler())
	}
	return out, nil
}

func (t specTool) handler() kernel.ToolHandler {
	def := kernel.ToolDefinition{Name: t.Name, Description: "corpus tool " + t.Name, Namespace: t.Namespace,
		Source: t.Source, ReadWrite: kernel.ReadWrite(t.ReadWrite),
		InputSchema:        map[string]any{"type": "object"},
		RequiredCapability: t.RequiredCapability}
	var mode string
	var fixed *kernel.CapabilityRequirement
	if json.Unmarshal(t.Requirement, &mode) != nil {
		var f struct {
			Fixed kernel.CapabilityRequirement `json:"fixed"`
		}
		if err := json.Unmarshal(t.Requirement, &f); err != nil {
			panic(err)
		}
		fixed = &f.Fixed
	}
	h := kernel.ToolHandler{Definition: def}
	h.ParseArguments = func(raw json.RawMessage) (any, error) {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		if mode == "fromPathArgument" {
			var a struct {
				Path []string `json:"path"`
			}
			if err := json.Unmarshal(raw, &a); err != nil || a.Path == nil {
				return nil, errors.New("path is required")
			}
			if err := kernel.ValidatePath(a.Path); err != nil {
				return nil, err
			}
			return a.Path, nil
		}
		return m, nil
	}
	h.ResolveRequirement = func(actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
		switch {
		case fixed != nil:
			return *fixed, nil
		case mode == "throws":
			return kernel.CapabilityRequirement{}, errors.New("cannot resolve")
		}
		owner := actx.Owner
		return kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: t.RequiredCapability.Resource.Namespace,
			Path: call.Parsed.([]string), Owner: &owner}, Action: t.RequiredCapability.Action}, nil
	}
	h.Invoke = func(_ context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
		switch t.Invoke {
		case "throws":
			return kernel.ToolResult{}, errors.New("secret provider credential rejected")
		case "mismatchedCallId":
			return kernel.ToolResult{CallID: call.ID + "-other", Tool: call.Tool, Status: kernel.StatusSucceeded, Output: map[string]any{}, CompletedAt: actx.Now}, nil
		}
		return kernel.ToolResult{CallID: call.ID, Tool: call.Tool, Status: kernel.StatusSucceeded, Output: map[string]any{"ok": true}, CompletedAt: actx.Now}, nil
	}
	return h
}

// mustTurn begins a turn or fails the test.
func mustTurn(tb testing.TB, k *kernel.Kernel, actx kernel.AccessContext) *kernel.Turn {
	tb.Helper()
	turn, err := k.BeginTurn(actx)
	if err != nil {
		tb.Fatal(err)
	}
	return turn
}
