package repoplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Namespace is the tool namespace and the resource namespace of the repo plane.
const Namespace = "repo"

// Source is the origin label of the repo tools.
const Source = "sharedos"

// The actions of the five repo tools (also their capability actions).
const (
	ActionStatus = "status"
	ActionDiff   = "diff"
	ActionLog    = "log"
	ActionStage  = "stage"
	ActionCommit = "commit"
)

// Limits of the argument contract (spec 10 §5).
const (
	MaxPathspecEntries = 64  // entries in a pathspec
	MaxMessageLength   = 500 // UTF-16 units of a commit message, after trimming
	MaxLogCount        = 100 // largest maxCount
	DefaultLogCount    = 20  // commits returned when maxCount is omitted
)

// StatusArgs are the parsed arguments of repo.status.
type StatusArgs struct {
	Path []string `json:"path"`
}

// DiffArgs are the parsed arguments of repo.diff (Staged defaults to false).
type DiffArgs struct {
	Path     []string   `json:"path"`
	Staged   bool       `json:"staged"`
	Pathspec [][]string `json:"pathspec,omitempty"`
}

// LogArgs are the parsed arguments of repo.log. MaxCount is nil when omitted; the
// provider then returns DefaultLogCount commits.
type LogArgs struct {
	Path     []string `json:"path"`
	MaxCount *int     `json:"maxCount,omitempty"`
}

// StageArgs are the parsed arguments of repo.stage.
type StageArgs struct {
	Path     []string   `json:"path"`
	Pathspec [][]string `json:"pathspec"`
}

// CommitArgs are the parsed arguments of repo.commit; Message is already trimmed.
type CommitArgs struct {
	Path    []string `json:"path"`
	Message string   `json:"message"`
}

// DiffInput is the provider input of the diff action (ResourceOperation.Input):
// {"staged": bool, "pathspec"?: [[segment…]…]}. Pathspec is omitted when the call had none.
type DiffInput struct {
	Staged   bool       `json:"staged"`
	Pathspec [][]string `json:"pathspec,omitempty"`
}

// LogInput is the provider input of the log action: {"maxCount": 1..100}. It is only
// present when the call named maxCount; otherwise the operation carries no input.
type LogInput struct {
	MaxCount int `json:"maxCount"`
}

// StageInput is the provider input of the stage action: {"pathspec": [[segment…]…]}.
type StageInput struct {
	Pathspec [][]string `json:"pathspec"`
}

// CommitInput is the provider input of the commit action: {"message": "…"} (trimmed).
type CommitInput struct {
	Message string `json:"message"`
}

// Tools returns the five repo tool handlers (status, diff, log, stage, commit) bound to p.
// It fails unless p serves the "repo" namespace. Any provider will do: the handlers only
// build ResourceOperations and map the provider's results.
func Tools(p kernel.ResourceProvider) ([]kernel.ToolHandler, error) {
	if p == nil {
		return nil, errors.New("repoplane: provider is nil")
	}
	if ns := p.Namespace(); ns != Namespace {
		return nil, fmt.Errorf("repoplane: provider serves namespace %q, want %q", ns, Namespace)
	}
	specs := []struct {
		name, action, desc string
		write              bool
		input, output      map[string]any
		parse              func(json.RawMessage) (any, error)
	}{
		{"repo.status", ActionStatus, descStatus, false, statusInputSchema(), statusOutputSchema(), parseStatus},
		{"repo.diff", ActionDiff, descDiff, false, diffInputSchema(), diffOutputSchema(), parseDiff},
		{"repo.log", ActionLog, descLog, false, logInputSchema(), logOutputSchema(), parseLog},
		{"repo.stage", ActionStage, descStage, true, stageInputSchema(), stageOutputSchema(), parseStage},
		{"repo.commit", ActionCommit, descCommit, true, commitInputSchema(), commitOutputSchema(), parseCommit},
	}
	out := make([]kernel.ToolHandler, 0, len(specs))
	for _, s := range specs {
		def := kernel.ToolDefinition{
			Name: s.name, Description: s.desc, Namespace: Namespace, Source: Source,
			ReadWrite: kernel.ClassRead, InputSchema: s.input, OutputSchema: s.output,
			RequiredCapability: kernel.CapabilityRequirement{
				Resource: kernel.ResourceRef{Namespace: Namespace, Path: []string{}}, Action: s.action},
		}
		if s.write {
			def.ReadWrite = kernel.ClassWrite
		} else {
			def.Annotations = &kernel.ToolAnnotations{ReadOnly: kernel.BoolPtr(true)}
		}
		if err := def.Validate(); err != nil {
			return nil, fmt.Errorf("repoplane: definition of %s: %w", s.name, err)
		}
		action, parse := s.action, s.parse
		// normalize accepts the parsed arguments as ParseArguments returned them or in
		// any JSON-equivalent form (a host that clones them through JSON), re-validated.
		normalize := func(call kernel.ParsedToolCall) (kernel.ParsedToolCall, error) {
			if _, err := parsedPath(call.Parsed); err == nil {
				return call, nil
			}
			raw, err := json.Marshal(call.Parsed)
			if err != nil {
				return call, fmt.Errorf("repoplane: parsed arguments are not JSON: %w", err)
			}
			if call.Parsed, err = parse(raw); err != nil {
				return call, err
			}
			return call, nil
		}
		out = append(out, kernel.ToolHandler{
			Definition:     def,
			ParseArguments: parse,
			ResolveRequirement: func(actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
				call, err := normalize(call)
				if err != nil {
					return kernel.CapabilityRequirement{}, err
				}
				path, err := parsedPath(call.Parsed)
				if err != nil {
					return kernel.CapabilityRequirement{}, err
				}
				owner := actx.Owner
				return kernel.CapabilityRequirement{
					Resource: kernel.ResourceRef{Namespace: Namespace, Path: path, Owner: &owner},
					Action:   action}, nil
			},
			Invoke: func(ctx context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
				call, err := normalize(call)
				if err != nil {
					return kernel.ToolResult{}, err
				}
				return invokeTool(ctx, p, action, actx, call)
			},
		})
	}
	return out, nil
}

// invokeTool builds the ResourceOperation of one call and maps the provider's answer.
func invokeTool(ctx context.Context, p kernel.ResourceProvider, action string, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
	path, err := parsedPath(call.Parsed)
	if err != nil {
		return kernel.ToolResult{}, err
	}
	var input any
	switch a := call.Parsed.(type) {
	case StatusArgs, *StatusArgs:
	case DiffArgs:
		input = DiffInput{Staged: a.Staged, Pathspec: a.Pathspec}
	case *DiffArgs:
		input = DiffInput{Staged: a.Staged, Pathspec: a.Pathspec}
	case LogArgs:
		if a.MaxCount != nil {
			input = LogInput{MaxCount: *a.MaxCount}
		}
	case *LogArgs:
		if a.MaxCount != nil {
			input = LogInput{MaxCount: *a.MaxCount}
		}
	case StageArgs:
		input = StageInput{Pathspec: a.Pathspec}
	case *StageArgs:
		input = StageInput{Pathspec: a.Pathspec}
	case CommitArgs:
		input = CommitInput{Message: a.Message}
	case *CommitArgs:
		input = CommitInput{Message: a.Message}
	}
	owner := actx.Owner
	op := kernel.ResourceOperation{
		OperationID: call.ID,
		Context:     actx,
		Resource:    kernel.ResourceRef{Namespace: Namespace, Path: path, Owner: &owner},
		Action:      action,
		Input:       input,
	}
	rr, err := p.Invoke(ctx, op)
	if err != nil {
		return kernel.ToolResult{}, fmt.Errorf("repo provider %s: %w", action, err)
	}
	return kernel.ResultFromResource(call, actx, rr), nil
}

// parsedPath extracts the repository path from any of the parsed argument types.
func parsedPath(parsed any) ([]string, error) {
	var p []string
	switch a := parsed.(type) {
	case StatusArgs:
		p = a.Path
	case *StatusArgs:
		p = a.Path
	case DiffArgs:
		p = a.Path
	case *DiffArgs:
		p = a.Path
	case LogArgs:
		p = a.Path
	case *LogArgs:
		p = a.Path
	case StageArgs:
		p = a.Path
	case *StageArgs:
		p = a.Path
	case CommitArgs:
		p = a.Path
	case *CommitArgs:
		p = a.Path
	default:
		return nil, fmt.Errorf("repoplane: unexpected parsed arguments %T", parsed)
	}
	if p == nil {
		p = []string{}
	}
	return p, nil
}

// --- argument parsing -------------------------------------------------------------

func argErr(field, format string, args ...any) error {
	return &kernel.ContractError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// fieldErr prefixes a contract error's field path with field.
func fieldErr(field string, err error) error {
	var ce *kernel.ContractError
	if errors.As(err, &ce) {
		f := field
		if ce.Field != "" {
			f = field + "." + ce.Field
		}
		return &kernel.ContractError{Field: f, Message: ce.Message}
	}
	return &kernel.ContractError{Field: field, Message: err.Error()}
}

func isNullRaw(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// parsePathField decodes a required repository path (0..64 canonical segments).
func parsePathField(o map[string]json.RawMessage) ([]string, error) {
	raw, ok := o["path"]
	if !ok {
		return nil, argErr("path", "is required")
	}
	return parseSegments("path", raw, 0)
}

// parseSegments decodes an array of canonical path segments with at least min entries.
func parseSegments(field string, raw json.RawMessage, min int) ([]string, error) {
	var p []string
	if isNullRaw(raw) || json.Unmarshal(raw, &p) != nil {
		return nil, argErr(field, "must be an array of path segments")
	}
	if p == nil {
		p = []string{}
	}
	if len(p) < min {
		return nil, argErr(field, "must have at least %d segment", min)
	}
	if err := kernel.ValidatePath(p); err != nil {
		return nil, fieldErr(field, err)
	}
	return p, nil
}

// ParsePathspec decodes and validates a pathspec: 1..64 entries, each a path of 1..64
// canonical segments (spec 10 §5 RepoPathspecSchema). Confinement beneath the
// repository, .git refusal and symlink checks are the provider's, not the parser's.
func ParsePathspec(raw json.RawMessage) ([][]string, error) {
	var entries []json.RawMessage
	if isNullRaw(raw) || json.Unmarshal(raw, &entries) != nil {
		return nil, argErr("", "must be an array of paths")
	}
	if len(entries) < 1 || len(entries) > MaxPathspecEntries {
		return nil, argErr("", "must list 1 to %d paths", MaxPathspecEntries)
	}
	out := make([][]string, len(entries))
	for i, e := range entries {
		p, err := parseSegments(strconv.Itoa(i), e, 1)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// ParseMessage applies the commit message rules of spec 10 §5: trimmed (JavaScript
// white space), 1..500 UTF-16 units, and no control character except TAB.
func ParseMessage(s string) (string, error) {
	t := jscompat.JSTrim(s)
	if n := jscompat.UTF16Len(t); n < 1 || n > MaxMessageLength {
		return "", argErr("", "must be 1 to %d characters after trimming", MaxMessageLength)
	}
	for _, r := range t {
		if (r < 0x20 && r != '\t') || r == 0x7f {
			return "", argErr("", "must not contain control characters other than TAB (it is a single line)")
		}
	}
	return t, nil
}

func parseStatus(raw json.RawMessage) (any, error) {
	o, err := kernel.StrictFields(raw, "path")
	if err != nil {
		return nil, err
	}
	p, err := parsePathField(o)
	if err != nil {
		return nil, err
	}
	return StatusArgs{Path: p}, nil
}

func parseDiff(raw json.RawMessage) (any, error) {
	o, err := kernel.StrictFields(raw, "path", "staged", "pathspec")
	if err != nil {
		return nil, err
	}
	p, err := parsePathField(o)
	if err != nil {
		return nil, err
	}
	a := DiffArgs{Path: p}
	if r, ok := o["staged"]; ok {
		if isNullRaw(r) || json.Unmarshal(r, &a.Staged) != nil {
			return nil, argErr("staged", "must be a boolean")
		}
	}
	if r, ok := o["pathspec"]; ok {
		if a.Pathspec, err = ParsePathspec(r); err != nil {
			return nil, fieldErr("pathspec", err)
		}
	}
	return a, nil
}

func parseLog(raw json.RawMessage) (any, error) {
	o, err := kernel.StrictFields(raw, "path", "maxCount")
	if err != nil {
		return nil, err
	}
	p, err := parsePathField(o)
	if err != nil {
		return nil, err
	}
	a := LogArgs{Path: p}
	if r, ok := o["maxCount"]; ok {
		n, err := parseInteger(r)
		if err != nil || n < 1 || n > MaxLogCount {
			return nil, argErr("maxCount", "must be an integer from 1 to %d", MaxLogCount)
		}
		c := int(n)
		a.MaxCount = &c
	}
	return a, nil
}

func parseStage(raw json.RawMessage) (any, error) {
	o, err := kernel.StrictFields(raw, "path", "pathspec")
	if err != nil {
		return nil, err
	}
	p, err := parsePathField(o)
	if err != nil {
		return nil, err
	}
	r, ok := o["pathspec"]
	if !ok {
		return nil, argErr("pathspec", "is required")
	}
	ps, err := ParsePathspec(r)
	if err != nil {
		return nil, fieldErr("pathspec", err)
	}
	return StageArgs{Path: p, Pathspec: ps}, nil
}

func parseCommit(raw json.RawMessage) (any, error) {
	o, err := kernel.StrictFields(raw, "path", "message")
	if err != nil {
		return nil, err
	}
	p, err := parsePathField(o)
	if err != nil {
		return nil, err
	}
	r, ok := o["message"]
	if !ok {
		return nil, argErr("message", "is required")
	}
	var s string
	if isNullRaw(r) || json.Unmarshal(r, &s) != nil {
		return nil, argErr("message", "must be a string")
	}
	m, err := ParseMessage(s)
	if err != nil {
		return nil, fieldErr("message", err)
	}
	return CommitArgs{Path: p, Message: m}, nil
}

// parseInteger decodes an integral JSON number (1.0 is accepted, 1.5 is not).
func parseInteger(raw json.RawMessage) (int64, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if isNullRaw(raw) || d.Decode(&v) != nil {
		return 0, errors.New("must be an integer")
	}
	n, ok := v.(json.Number)
	if !ok {
		return 0, errors.New("must be an integer")
	}
	if i, err := n.Int64(); err == nil {
		return i, nil
	}
	f, err := n.Float64()
	if err != nil || f != float64(int64(f)) || f > 9007199254740991 || f < -9007199254740991 {
		return 0, errors.New("must be an integer")
	}
	return int64(f), nil
}
