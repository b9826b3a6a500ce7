package fsplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Namespace is the resource and tool namespace of the files plane.
const Namespace = "files"

// ToolSource is the source label of the files tools.
const ToolSource = "sharedos"

// The actions of the files plane (ResourceOperation.Action and the capability action).
const (
	ActionList            = "list"
	ActionStat            = "stat"
	ActionRead            = "read"
	ActionSearch          = "search"
	ActionGrep            = "grep"
	ActionCreate          = "create"
	ActionReplace         = "replace"
	ActionAppend          = "append"
	ActionDelete          = "delete"
	ActionSnapshotCreate  = "snapshot:create"
	ActionSnapshotList    = "snapshot:list"
	ActionSnapshotRestore = "snapshot:restore"
)

// Grep modes.
const (
	ModeLiteral = "literal"
	ModeRegex   = "regex"
)

// Argument limits of spec 10 §4.
const (
	maxQueryLen      = 8192
	maxPatternLen    = 8192
	maxSearchLimit   = 100
	defaultLimit     = 20
	maxContextLines  = 100
	maxVersionLen    = 256
	maxLabelLen      = 256
	maxSnapshotIDLen = 256
)

// ---- Provider inputs -------------------------------------------------------------
//
// The tool handlers put exactly these values (not pointers) in ResourceOperation.Input.
// Every field is plain JSON; a provider may also receive the same shapes as decoded JSON
// (map[string]any) from a direct invokeResource call.

// SearchInput is the input of a "search" operation: {query, limit?}.
type SearchInput struct {
	Query string `json:"query"`
	Limit *int   `json:"limit,omitempty"`
}

// GrepInput is the input of a "grep" operation; every field is present (defaults
// applied): {pattern, mode, caseSensitive, contextBefore, contextAfter}.
type GrepInput struct {
	Pattern       string `json:"pattern"`
	Mode          string `json:"mode"`
	CaseSensitive bool   `json:"caseSensitive"`
	ContextBefore int    `json:"contextBefore"`
	ContextAfter  int    `json:"contextAfter"`
}

// WriteInput is the input of "create" {content, metadata?}, "replace" {content,
// expectedVersion?} and "append" {content, expectedVersion?, metadata?}. Content is the
// JSON value as sent (compacted): a JSON string is stored as its text, any other value
// as its compact JSON text (see ContentBytes). Metadata is passed through; Provider
// accepts and ignores it.
type WriteInput struct {
	Content         json.RawMessage `json:"content"`
	ExpectedVersion *string         `json:"expectedVersion,omitempty"`
	Metadata        map[string]any  `json:"metadata,omitzero"`
}

// DeleteInput is the input of a "delete" operation: {expectedVersion?, recursive}.
type DeleteInput struct {
	ExpectedVersion *string `json:"expectedVersion,omitempty"`
	Recursive       bool    `json:"recursive"`
}

// SnapshotCreateInput is the input of "snapshot:create" when a label was given; without
// a label the operation has no input (nil).
type SnapshotCreateInput struct {
	Label string `json:"label"`
}

// SnapshotListInput is the input of "snapshot:list" when a limit was given; without a
// limit the operation has no input (nil).
type SnapshotListInput struct {
	Limit int `json:"limit"`
}

// SnapshotRestoreInput is the input of "snapshot:restore": {snapshotId, expectedVersion?}.
type SnapshotRestoreInput struct {
	SnapshotID      string  `json:"snapshotId"`
	ExpectedVersion *string `json:"expectedVersion,omitempty"`
}

// ---- Parsed arguments ------------------------------------------------------------
//
// ParseArguments returns a pointer to one of these; each marshals to the JSON object the
// kernel freezes as the call's arguments (defaults present).

// PathArgs are the arguments of files.list, files.stat and files.read.
type PathArgs struct {
	Path []string `json:"path"`
}

// SearchArgs are the arguments of files.search.
type SearchArgs struct {
	Path  []string `json:"path"`
	Query string   `json:"query"`
	Limit *int     `json:"limit,omitempty"`
}

// GrepArgs are the arguments of files.grep (defaults applied).
type GrepArgs struct {
	Path          []string `json:"path"`
	Pattern       string   `json:"pattern"`
	Mode          string   `json:"mode"`
	CaseSensitive bool     `json:"caseSensitive"`
	ContextBefore int      `json:"contextBefore"`
	ContextAfter  int      `json:"contextAfter"`
}

// CreateArgs are the arguments of files.create.
type CreateArgs struct {
	Path     []string        `json:"path"`
	Content  json.RawMessage `json:"content"`
	Metadata map[string]any  `json:"metadata,omitzero"`
}

// ReplaceArgs are the arguments of files.replace.
type ReplaceArgs struct {
	Path            []string        `json:"path"`
	Content         json.RawMessage `json:"content"`
	ExpectedVersion *string         `json:"expectedVersion,omitempty"`
}

// AppendArgs are the arguments of files.append.
type AppendArgs struct {
	Path            []string        `json:"path"`
	Content         json.RawMessage `json:"content"`
	ExpectedVersion *string         `json:"expectedVersion,omitempty"`
	Metadata        map[string]any  `json:"metadata,omitzero"`
}

// DeleteArgs are the arguments of files.delete (recursive defaults to false).
type DeleteArgs struct {
	Path            []string `json:"path"`
	ExpectedVersion *string  `json:"expectedVersion,omitempty"`
	Recursive       bool     `json:"recursive"`
}

// SnapshotCreateArgs are the arguments of files.snapshot.create.
type SnapshotCreateArgs struct {
	Path  []string `json:"path"`
	Label *string  `json:"label,omitempty"`
}

// SnapshotListArgs are the arguments of files.snapshot.list.
type SnapshotListArgs struct {
	Path  []string `json:"path"`
	Limit *int     `json:"limit,omitempty"`
}

// SnapshotRestoreArgs are the arguments of files.snapshot.restore.
type SnapshotRestoreArgs struct {
	Path            []string `json:"path"`
	SnapshotID      string   `json:"snapshotId"`
	ExpectedVersion *string  `json:"expectedVersion,omitempty"`
}

// toolArgs is implemented by every parsed-arguments type.
type toolArgs interface {
	argPath() []string
	providerInput() any
}

func (a *PathArgs) argPath() []string   { return a.Path }
func (a *PathArgs) providerInput() any  { return nil }
func (a *SearchArgs) argPath() []string { return a.Path }
func (a *SearchArgs) providerInput() any {
	return SearchInput{Query: a.Query, Limit: a.Limit}
}
func (a *GrepArgs) argPath() []string { return a.Path }
func (a *GrepArgs) providerInput() any {
	return GrepInput{Pattern: a.Pattern, Mode: a.Mode, CaseSensitive: a.CaseSensitive,
		ContextBefore: a.ContextBefore, ContextAfter: a.ContextAfter}
}
func (a *CreateArgs) argPath() []string { return a.Path }
func (a *CreateArgs) providerInput() any {
	return WriteInput{Content: a.Content, Metadata: a.Metadata}
}
func (a *ReplaceArgs) argPath() []string { return a.Path }
func (a *ReplaceArgs) providerInput() any {
	return WriteInput{Content: a.Content, ExpectedVersion: a.ExpectedVersion}
}
func (a *AppendArgs) argPath() []string { return a.Path }
func (a *AppendArgs) providerInput() any {
	return WriteInput{Content: a.Content, ExpectedVersion: a.ExpectedVersion, Metadata: a.Metadata}
}
func (a *DeleteArgs) argPath() []string { return a.Path }
func (a *DeleteArgs) providerInput() any {
	return DeleteInput{ExpectedVersion: a.ExpectedVersion, Recursive: a.Recursive}
}
func (a *SnapshotCreateArgs) argPath() []string { return a.Path }
func (a *SnapshotCreateArgs) providerInput() any {
	if a.Label == nil {
		return nil
	}
	return SnapshotCreateInput{Label: *a.Label}
}
func (a *SnapshotListArgs) argPath() []string { return a.Path }
func (a *SnapshotListArgs) providerInput() any {
	if a.Limit == nil {
		return nil
	}
	return SnapshotListInput{Limit: *a.Limit}
}
func (a *SnapshotRestoreArgs) argPath() []string { return a.Path }
func (a *SnapshotRestoreArgs) providerInput() any {
	return SnapshotRestoreInput{SnapshotID: a.SnapshotID, ExpectedVersion: a.ExpectedVersion}
}

// ---- Tool table --------------------------------------------------------------------

type toolSpec struct {
	name        string
	action      string
	description string
	read        bool
	destructive bool
	minPath     int
	props       map[string]any // input properties besides path
	required    []string       // required besides path
	output      map[string]any
	parse       func(raw json.RawMessage) (toolArgs, error)
}

func toolSpecs() []toolSpec {
	return []toolSpec{
		{name: "files.list", action: ActionList, read: true, minPath: 0,
			description: "List the entries of a directory under the files root (path [] is the root). " +
				"Returns {path, entries:[{name, kind}], truncated}; kind is \"file\", \"directory\", \"symlink\" or \"other\". " +
				"Entries are sorted by name and capped at 10,000 and 1 MiB of output (truncated:true when cut). Symbolic links are shown but cannot be opened; " +
				".git directories and temporary files are hidden. A name that is not a valid path segment (a tab or other control character, a backslash, " +
				"leading or trailing white space, bytes that are not UTF-8, shown as U+FFFD) is listed with addressable:false: no tool can name it in a path.",
			output: listOutputSchema(), parse: parsePathArgs(0)},
		{name: "files.stat", action: ActionStat, read: true, minPath: 0,
			description: "Describe a file or directory; returns {path, kind, sizeBytes, modifiedAt, version?}. " +
				"version (files only) is the first 32 hex characters of the SHA-256 of the content; pass it as expectedVersion to a later write to make it conditional.",
			output: statOutputSchema(), parse: parsePathArgs(0)},
		{name: "files.read", action: ActionRead, read: true, minPath: 0,
			description: "Read a file; returns {path, version, truncated, encoding, content}. Content is cut at the provider's read limit (256 KiB by default), and text further where its JSON encoding would pass 1 MiB (truncated:true when cut). " +
				"Valid UTF-8 is returned as text (encoding \"utf-8\"); anything else is base64 (encoding \"base64\"). " +
				"A cut text ends at a character boundary: a UTF-8 character the limit would split is left out whole (so content may be up to 3 bytes shorter than the limit). " +
				"A directory fails not_a_file.",
			output: readOutputSchema(), parse: parsePathArgs(0)},
		{name: "files.search", action: ActionSearch, read: true, minPath: 0,
			props: map[string]any{
				"query": map[string]any{"type": "string", "minLength": 1, "maxLength": maxQueryLen,
					"description": "Whitespace-separated terms, matched case-insensitively as whole words or parts of compound identifiers, e.g. \"parse config\"."},
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": maxSearchLimit,
					"description": "Maximum number of hits, 1 to 100 (default 20), e.g. 5."},
			},
			required: []string{"query"},
			description: "Ranked full-text search of the files under path. A term matches whole words, case-insensitively, and the parts of compound " +
				"identifiers (\"eof\" matches ErrUnexpectedEOF, \"man\" does not match command). Files rank by BM25 (rarer terms weigh more, repeats count " +
				"with diminishing returns, long files are normalised), plus the query's terms next to each other or close together, and terms in the file's " +
				"or its directories' names; ties are broken by path. Returns {path, hits:[{path, score, excerpt, version}]}: score is relative to the best " +
				"hit (1), the excerpt shows the passage holding the most terms; truncated:true when hits were left out to keep the output within 1 MiB. Binary and very large files are skipped.",
			output: searchOutputSchema(), parse: parseSearchArgs},
		{name: "files.grep", action: ActionGrep, read: true, minPath: 0,
			props: map[string]any{
				"pattern": map[string]any{"type": "string", "minLength": 1, "maxLength": maxPatternLen,
					"description": "A literal string, or a regular expression in Go RE2 syntax when mode is \"regex\", e.g. \"http.Client\" or \"func [A-Z]\\\\w*\"."},
				"mode": map[string]any{"type": "string", "enum": []any{ModeLiteral, ModeRegex}, "default": ModeLiteral,
					"description": "How pattern is read: \"literal\" (default) matches it as a substring, \"regex\" as a Go RE2 regular expression, e.g. \"regex\"."},
				"caseSensitive": map[string]any{"type": "boolean", "default": false,
					"description": "Match case exactly (default false: case-insensitive), e.g. true."},
				"contextBefore": map[string]any{"type": "integer", "minimum": 0, "maximum": maxContextLines, "default": 0,
					"description": "Lines of context to return before each matching line, 0 to 100 (default 0), e.g. 2."},
				"contextAfter": map[string]any{"type": "integer", "minimum": 0, "maximum": maxContextLines, "default": 0,
					"description": "Lines of context to return after each matching line, 0 to 100 (default 0), e.g. 2."},
			},
			required: []string{"pattern"},
			description: "Line-oriented search of the files under path (a file or a directory). mode \"literal\" (default) matches a substring; " +
				"mode \"regex\" uses Go RE2 syntax (no backreferences or lookaround), matched against each line. Case-insensitive unless caseSensitive is true. " +
				"Returns {path, matches:[{path, line, text, context}], truncated} in path order, lines numbered from 1; context holds the lines " +
				"from line-contextBefore to line+contextAfter. At most 1,000 matches and 1 MiB of output (truncated:true when cut; a match whose context does not fit keeps the lines nearest to it); " +
				"lines longer than 1,000 characters are cut (the match carries truncated:true). Binary files are skipped. A leading UTF-8 byte order mark is not part of the text; a line (or context line) " +
				"holding bytes that are not UTF-8 is shown with U+FFFD for them and the match carries invalidUtf8:true. Files under names that are not valid " +
				"path segments are searched too and their matches carry addressable:false.",
			output: grepOutputSchema(), parse: parseGrepArgs},
		{name: "files.create", action: ActionCreate, minPath: 1,
			props: map[string]any{
				"content":  contentSchema(),
				"metadata": metadataSchema(),
			},
			required: []string{"content"},
			description: "Create a new file (missing parent directories are created). Fails already_exists if the path exists. " +
				"A string content is written as text; any other JSON value as its compact JSON text. Returns {path, version, bytes}.",
			output: writeOutputSchema(), parse: parseCreateArgs},
		{name: "files.replace", action: ActionReplace, destructive: true, minPath: 1,
			props: map[string]any{
				"content":         contentSchema(),
				"expectedVersion": versionSchema(),
			},
			required: []string{"content"},
			description: "Replace the whole content of an existing file, atomically. With expectedVersion the write happens only if the file's " +
				"current version equals it (else version_conflict, nothing changed). Returns {path, version, bytes}.",
			output: writeOutputSchema(), parse: parseReplaceArgs},
		{name: "files.append", action: ActionAppend, minPath: 1,
			props: map[string]any{
				"content":         contentSchema(),
				"expectedVersion": versionSchema(),
				"metadata":        metadataSchema(),
			},
			required: []string{"content"},
			description: "Append to the end of a file (a missing file is treated as empty and created). With expectedVersion the write happens only " +
				"if the current version equals it. Returns {path, version, bytes} (bytes = total size after the write).",
			output: writeOutputSchema(), parse: parseAppendArgs},
		{name: "files.delete", action: ActionDelete, destructive: true, minPath: 1,
			props: map[string]any{
				"expectedVersion": versionSchema(),
				"recursive": map[string]any{"type": "boolean", "default": false,
					"description": "Delete a non-empty directory with everything below it (default false: a non-empty directory fails not_empty), e.g. true."},
			},
			description: "Delete a file, or a directory: a non-empty directory needs recursive:true (else not_empty). " +
				"expectedVersion applies to files only. A directory holding a .git repository is never deleted. Returns {path, deleted:true}.",
			output: deleteOutputSchema(), parse: parseDeleteArgs},
		{name: "files.snapshot.create", action: ActionSnapshotCreate, minPath: 0,
			props: map[string]any{
				"label": map[string]any{"type": "string", "minLength": 1, "maxLength": maxLabelLen,
					"description": "An optional name for the snapshot, shown by files.snapshot.list, e.g. \"before refactor\"."},
			},
			description: "Snapshot a file, a directory (its whole subtree) or the root (path []), for a later files.snapshot.restore. " +
				"A directory snapshot captures every file below it or fails naming the one it cannot capture. " +
				"Returns {path, snapshotId, label, kind}.",
			output: snapshotCreateOutputSchema(), parse: parseSnapshotCreateArgs},
		{name: "files.snapshot.list", action: ActionSnapshotList, read: true, minPath: 0,
			props: map[string]any{
				"limit": map[string]any{"type": "integer", "minimum": 1, "maximum": maxSearchLimit,
					"description": "Maximum number of snapshots, 1 to 100 (default 100), e.g. 10."},
			},
			description: "List the snapshots taken of exactly this path, newest first (default and maximum 100). " +
				"Returns {path, snapshots:[{snapshotId, label, kind, createdAt}]}.",
			output: snapshotListOutputSchema(), parse: parseSnapshotListArgs},
		{name: "files.snapshot.restore", action: ActionSnapshotRestore, destructive: true, minPath: 1,
			props: map[string]any{
				"snapshotId": map[string]any{"type": "string", "minLength": 1, "maxLength": maxSnapshotIDLen,
					"description": "The snapshotId that files.snapshot.create or files.snapshot.list returned for this path, e.g. \"mff3k2q1-9f86d081-a3c4\"."},
				"expectedVersion": versionSchema(),
			},
			required: []string{"snapshotId"},
			description: "Restore a snapshot of this path. A file snapshot overwrites the file (guarded by expectedVersion). " +
				"A directory snapshot makes the subtree equal to the snapshot again, all or nothing: changed files are put back, files created since are removed " +
				"(expectedVersion is refused for a directory); frozen paths and Git repositories are left as they are (counted in preserved). " +
				"Safe to re-run. Returns {path, snapshotId, kind, version?, restored, removed, preserved?}.",
			output: snapshotRestoreOutputSchema(), parse: parseSnapshotRestoreArgs},
	}
}

// Tools returns the 12 files.* tool handlers, in the order of spec 10 §4, over p. It
// fails unless p.Namespace() is "files". The handlers put the input types of this
// package (SearchInput, GrepInput, WriteInput, DeleteInput, SnapshotCreateInput,
// SnapshotListInput, SnapshotRestoreInput; nil for list, stat and read) in each
// operation, so any provider for the files namespace can serve them.
func Tools(p kernel.ResourceProvider) ([]kernel.ToolHandler, error) {
	if p == nil {
		return nil, errors.New("fsplane: resource provider is nil")
	}
	if ns := p.Namespace(); ns != Namespace {
		return nil, fmt.Errorf("fsplane: resource provider namespace is %q, want %q", ns, Namespace)
	}
	specs := toolSpecs()
	out := make([]kernel.ToolHandler, 0, len(specs))
	for _, s := range specs {
		out = append(out, makeHandler(p, s))
	}
	return out, nil
}

func makeHandler(p kernel.ResourceProvider, s toolSpec) kernel.ToolHandler {
	def := kernel.ToolDefinition{
		Name:         s.name,
		Description:  s.description,
		Namespace:    Namespace,
		Source:       ToolSource,
		ReadWrite:    kernel.ClassWrite,
		InputSchema:  inputSchema(s),
		OutputSchema: s.output,
		RequiredCapability: kernel.CapabilityRequirement{
			Resource: kernel.ResourceRef{Namespace: Namespace, Path: []string{}},
			Action:   s.action,
		},
	}
	if s.read {
		def.ReadWrite = kernel.ClassRead
		def.Annotations = &kernel.ToolAnnotations{ReadOnly: kernel.BoolPtr(true)}
	} else if s.destructive {
		def.Annotations = &kernel.ToolAnnotations{Destructive: kernel.BoolPtr(true)}
	}
	parse := s.parse
	argsOf := func(call kernel.ParsedToolCall) (toolArgs, error) {
		if a, ok := call.Parsed.(toolArgs); ok && a != nil {
			return a, nil
		}
		raw := []byte(call.Arguments)
		if call.Parsed != nil {
			b, err := json.Marshal(call.Parsed)
			if err != nil {
				return nil, fmt.Errorf("%s: re-encode parsed arguments: %w", s.name, err)
			}
			raw = b
		}
		return parse(raw)
	}
	return kernel.ToolHandler{
		Definition: def,
		ParseArguments: func(raw json.RawMessage) (any, error) {
			a, err := parse(raw)
			if err != nil {
				return nil, err
			}
			return a, nil
		},
		ResolveRequirement: func(actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
			a, err := argsOf(call)
			if err != nil {
				return kernel.CapabilityRequirement{}, err
			}
			owner := actx.Owner
			return kernel.CapabilityRequirement{
				Resource: kernel.ResourceRef{Namespace: Namespace, Path: clonePath(a.argPath()), Owner: &owner},
				Action:   s.action,
			}, nil
		},
		Invoke: func(ctx context.Context, actx kernel.AccessContext, call kernel.ParsedToolCall) (kernel.ToolResult, error) {
			a, err := argsOf(call)
			if err != nil {
				return kernel.ToolResult{}, err
			}
			owner := actx.Owner
			op := kernel.ResourceOperation{
				OperationID: call.ID,
				Context:     actx,
				Resource:    kernel.ResourceRef{Namespace: Namespace, Path: clonePath(a.argPath()), Owner: &owner},
				Action:      s.action,
				Input:       a.providerInput(),
			}
			rr, err := p.Invoke(ctx, op)
			if err != nil {
				return kernel.ToolResult{}, err
			}
			return kernel.ResultFromResource(call, actx, rr), nil
		},
	}
}

func clonePath(p []string) []string {
	out := make([]string, len(p))
	copy(out, p)
	return out
}

// ---- Input schemas -----------------------------------------------------------------

// pathDescription is the description of every files tool's path property: what a model
// must know to fill it (segments, relative to the root, [] for the root when allowed).
func pathDescription(minItems int) string {
	if minItems == 0 {
		return "The file or directory as a list of path segments relative to the files root, one name per segment, " +
			"e.g. [\"src\", \"main.go\"]; [] is the root itself. Never an absolute path, \"..\" or a segment holding \"/\"."
	}
	return "The file or directory as a list of path segments relative to the files root, one name per segment, " +
		"e.g. [\"src\", \"main.go\"]; at least one segment ([], the root, is not accepted). Never an absolute path, \"..\" or a segment holding \"/\"."
}

func pathSchema(minItems int) map[string]any {
	return map[string]any{"type": "array", "items": map[string]any{"type": "string"},
		"minItems": minItems, "maxItems": kernel.MaxPathSegments, "description": pathDescription(minItems)}
}

func versionSchema() map[string]any {
	return map[string]any{"type": "string", "minLength": 1, "maxLength": maxVersionLen,
		"pattern": `^(?!\s)[\s\S]*\S$`,
		"description": "Write only if the file's current version (from files.stat, files.read or an earlier write) equals this, " +
			"else version_conflict and nothing changes, e.g. \"9f86d081884c7d659a2feaa0c55ad015\"."}
}

func contentSchema() map[string]any {
	return map[string]any{"description": "The content: a string is written as text; any other JSON value as its compact JSON text, " +
		"e.g. \"# Notes\\n\" or {\"done\": true}."}
}

func metadataSchema() map[string]any {
	return map[string]any{"type": "object", "description": "Host-defined metadata, passed through and not stored in the file, e.g. {\"ticket\": \"T-42\"}."}
}

func inputSchema(s toolSpec) map[string]any {
	props := map[string]any{"path": pathSchema(s.minPath)}
	for k, v := range s.props {
		props[k] = v
	}
	required := []any{"path"}
	for _, r := range s.required {
		required = append(required, r)
	}
	return map[string]any{"type": "object", "properties": props, "required": required,
		"additionalProperties": false}
}

// ---- Argument parsing --------------------------------------------------------------

func argErr(field, format string, args ...any) error {
	return &kernel.ContractError{Field: field, Message: fmt.Sprintf(format, args...)}
}

type argObject map[string]json.RawMessage

func strictArgs(raw json.RawMessage, allowed ...string) (argObject, error) {
	m, err := kernel.StrictFields(raw, allowed...)
	if err != nil {
		return nil, err
	}
	return argObject(m), nil
}

func isJSONNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func (o argObject) path(minItems int) ([]string, error) {
	raw, ok := o["path"]
	if !ok {
		return nil, argErr("path", "is required")
	}
	var items []json.RawMessage
	if isJSONNull(raw) || json.Unmarshal(raw, &items) != nil {
		return nil, argErr("path", "must be an array of strings")
	}
	if len(items) < minItems {
		return nil, argErr("path", "must have at least %d segment", minItems)
	}
	if len(items) > kernel.MaxPathSegments {
		return nil, argErr("path", "has %d segments; at most %d are allowed", len(items), kernel.MaxPathSegments)
	}
	out := make([]string, len(items))
	for i, it := range items {
		t := bytes.TrimSpace(it)
		if len(t) == 0 || t[0] != '"' || json.Unmarshal(t, &out[i]) != nil {
			return nil, argErr("path."+strconv.Itoa(i), "must be a string")
		}
	}
	if err := kernel.ValidatePath(out); err != nil {
		var ce *kernel.ContractError
		if errors.As(err, &ce) {
			f := "path"
			if ce.Field != "" {
				f += "." + ce.Field
			}
			return nil, argErr(f, "%s", ce.Message)
		}
		return nil, argErr("path", "%v", err)
	}
	return out, nil
}

func (o argObject) rawString(key string) (string, bool, error) {
	raw, ok := o[key]
	if !ok {
		return "", false, nil
	}
	t := bytes.TrimSpace(raw)
	var s string
	if len(t) == 0 || t[0] != '"' || json.Unmarshal(t, &s) != nil {
		return "", false, argErr(key, "must be a string")
	}
	return s, true, nil
}

// trimmed reads a string member, trims it as JavaScript does and checks 1..max UTF-16
// units.
func (o argObject) trimmed(key string, max int, required bool) (string, bool, error) {
	s, ok, err := o.rawString(key)
	if err != nil {
		return "", false, err
	}
	if !ok {
		if required {
			return "", false, argErr(key, "is required")
		}
		return "", false, nil
	}
	t := jscompat.JSTrim(s)
	if n := jscompat.UTF16Len(t); n < 1 || n > max {
		return "", false, argErr(key, "must be 1 to %d characters after trimming", max)
	}
	return t, true, nil
}

func (o argObject) integer(key string, min, max int) (int, bool, error) {
	raw, ok := o[key]
	if !ok {
		return 0, false, nil
	}
	n, err := parseJSONInt(raw)
	if err != nil || n < int64(min) || n > int64(max) {
		return 0, false, argErr(key, "must be an integer from %d to %d", min, max)
	}
	return int(n), true, nil
}

func parseJSONInt(raw json.RawMessage) (int64, error) {
	t := bytes.TrimSpace(raw)
	d := json.NewDecoder(bytes.NewReader(t))
	d.UseNumber()
	var num json.Number
	if len(t) == 0 || t[0] == '"' || isJSONNull(t) || d.Decode(&num) != nil {
		return 0, errors.New("not a number")
	}
	if i, err := num.Int64(); err == nil {
		return i, nil
	}
	f, err := num.Float64()
	if err != nil || f != float64(int64(f)) || f > 9007199254740991 || f < -9007199254740991 {
		return 0, errors.New("not an integer")
	}
	return int64(f), nil
}

func (o argObject) boolean(key string) (bool, error) {
	raw, ok := o[key]
	if !ok {
		return false, nil
	}
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, argErr(key, "must be a boolean")
}

// version reads an optional expectedVersion: 1..256 code points, no leading or trailing
// white space (rejected, never trimmed).
func (o argObject) version(key string) (*string, error) {
	s, ok, err := o.rawString(key)
	if err != nil || !ok {
		return nil, err
	}
	if err := checkVersionToken(s); err != nil {
		return nil, argErr(key, "%s", err.Error())
	}
	return &s, nil
}

func checkVersionToken(s string) error {
	n := utf8.RuneCountInString(s)
	if n < 1 || n > maxVersionLen {
		return fmt.Errorf("must be 1 to %d characters", maxVersionLen)
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if jscompat.IsJSSpace(first) || jscompat.IsJSSpace(last) {
		return errors.New("must not have leading or trailing white space")
	}
	return nil
}

// content reads the required content member: any JSON value with finite numbers,
// returned compacted.
func (o argObject) content() (json.RawMessage, error) {
	raw, ok := o["content"]
	if !ok {
		return nil, argErr("content", "is required")
	}
	c, err := compactJSONValue(raw)
	if err != nil {
		return nil, argErr("content", "%s", err.Error())
	}
	return c, nil
}

func compactJSONValue(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if !json.Valid(raw) {
		return nil, errors.New("must be a JSON value")
	}
	if len(raw) > 0 && raw[0] == '"' {
		return raw, nil // a string is already compact and holds no numbers
	}
	if err := checkFiniteNumbers(raw); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, errors.New("must be a JSON value")
	}
	return json.RawMessage(b.Bytes()), nil
}

func checkFiniteNumbers(raw json.RawMessage) error {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errors.New("must be a JSON value")
		}
		if n, ok := tok.(json.Number); ok {
			if _, err := strconv.ParseFloat(string(n), 64); err != nil {
				return errors.New("numbers must be finite")
			}
		}
	}
}

func (o argObject) metadata() (map[string]any, error) {
	raw, ok := o["metadata"]
	if !ok {
		return nil, nil
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, argErr("metadata", "must be a JSON object")
	}
	if err := checkFiniteNumbers(t); err != nil {
		return nil, argErr("metadata", "%s", err.Error())
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(t))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, argErr("metadata", "must be a JSON object")
	}
	return m, nil
}

func parsePathArgs(minPath int) func(json.RawMessage) (toolArgs, error) {
	return func(raw json.RawMessage) (toolArgs, error) {
		o, err := strictArgs(raw, "path")
		if err != nil {
			return nil, err
		}
		p, err := o.path(minPath)
		if err != nil {
			return nil, err
		}
		return &PathArgs{Path: p}, nil
	}
}

func parseSearchArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "query", "limit")
	if err != nil {
		return nil, err
	}
	a := &SearchArgs{}
	if a.Path, err = o.path(0); err != nil {
		return nil, err
	}
	if a.Query, _, err = o.trimmed("query", maxQueryLen, true); err != nil {
		return nil, err
	}
	if n, ok, err := o.integer("limit", 1, maxSearchLimit); err != nil {
		return nil, err
	} else if ok {
		a.Limit = &n
	}
	return a, nil
}

func parseGrepArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "pattern", "mode", "caseSensitive", "contextBefore", "contextAfter")
	if err != nil {
		return nil, err
	}
	a := &GrepArgs{Mode: ModeLiteral}
	if a.Path, err = o.path(0); err != nil {
		return nil, err
	}
	p, ok, err := o.rawString("pattern")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, argErr("pattern", "is required")
	}
	if n := jscompat.UTF16Len(p); n < 1 || n > maxPatternLen {
		return nil, argErr("pattern", "must be 1 to %d characters", maxPatternLen)
	}
	a.Pattern = p
	if m, ok, err := o.rawString("mode"); err != nil {
		return nil, err
	} else if ok {
		if m != ModeLiteral && m != ModeRegex {
			return nil, argErr("mode", "must be \"literal\" or \"regex\"")
		}
		a.Mode = m
	}
	if a.CaseSensitive, err = o.boolean("caseSensitive"); err != nil {
		return nil, err
	}
	if a.ContextBefore, _, err = o.integer("contextBefore", 0, maxContextLines); err != nil {
		return nil, err
	}
	if a.ContextAfter, _, err = o.integer("contextAfter", 0, maxContextLines); err != nil {
		return nil, err
	}
	return a, nil
}

func parseCreateArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "content", "metadata")
	if err != nil {
		return nil, err
	}
	a := &CreateArgs{}
	if a.Path, err = o.path(1); err != nil {
		return nil, err
	}
	if a.Content, err = o.content(); err != nil {
		return nil, err
	}
	if a.Metadata, err = o.metadata(); err != nil {
		return nil, err
	}
	return a, nil
}

func parseReplaceArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "content", "expectedVersion")
	if err != nil {
		return nil, err
	}
	a := &ReplaceArgs{}
	if a.Path, err = o.path(1); err != nil {
		return nil, err
	}
	if a.Content, err = o.content(); err != nil {
		return nil, err
	}
	if a.ExpectedVersion, err = o.version("expectedVersion"); err != nil {
		return nil, err
	}
	return a, nil
}

func parseAppendArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "content", "expectedVersion", "metadata")
	if err != nil {
		return nil, err
	}
	a := &AppendArgs{}
	if a.Path, err = o.path(1); err != nil {
		return nil, err
	}
	if a.Content, err = o.content(); err != nil {
		return nil, err
	}
	if a.ExpectedVersion, err = o.version("expectedVersion"); err != nil {
		return nil, err
	}
	if a.Metadata, err = o.metadata(); err != nil {
		return nil, err
	}
	return a, nil
}

func parseDeleteArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "expectedVersion", "recursive")
	if err != nil {
		return nil, err
	}
	a := &DeleteArgs{}
	if a.Path, err = o.path(1); err != nil {
		return nil, err
	}
	if a.ExpectedVersion, err = o.version("expectedVersion"); err != nil {
		return nil, err
	}
	if a.Recursive, err = o.boolean("recursive"); err != nil {
		return nil, err
	}
	return a, nil
}

func parseSnapshotCreateArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "label")
	if err != nil {
		return nil, err
	}
	a := &SnapshotCreateArgs{}
	if a.Path, err = o.path(0); err != nil {
		return nil, err
	}
	if l, ok, err := o.trimmed("label", maxLabelLen, false); err != nil {
		return nil, err
	} else if ok {
		a.Label = &l
	}
	return a, nil
}

func parseSnapshotListArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "limit")
	if err != nil {
		return nil, err
	}
	a := &SnapshotListArgs{}
	if a.Path, err = o.path(0); err != nil {
		return nil, err
	}
	if n, ok, err := o.integer("limit", 1, maxSearchLimit); err != nil {
		return nil, err
	} else if ok {
		a.Limit = &n
	}
	return a, nil
}

func parseSnapshotRestoreArgs(raw json.RawMessage) (toolArgs, error) {
	o, err := strictArgs(raw, "path", "snapshotId", "expectedVersion")
	if err != nil {
		return nil, err
	}
	a := &SnapshotRestoreArgs{}
	if a.Path, err = o.path(1); err != nil {
		return nil, err
	}
	if a.SnapshotID, _, err = o.trimmed("snapshotId", maxSnapshotIDLen, true); err != nil {
		return nil, err
	}
	if a.ExpectedVersion, err = o.version("expectedVersion"); err != nil {
		return nil, err
	}
	return a, nil
}
