package kernel

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// ReadWrite is a tool's conservative catalogue class.
type ReadWrite string

// The two classes; "destructive" is write plus annotations.destructive.
const (
	ClassRead  ReadWrite = "read"
	ClassWrite ReadWrite = "write"
)

// ToolAnnotations are hints; they are never authority.
type ToolAnnotations struct {
	ReadOnly    *bool `json:"readOnly,omitempty"`
	Destructive *bool `json:"destructive,omitempty"`
	Idempotent  *bool `json:"idempotent,omitempty"`
}

// ToolDefinition describes a tool. RequiredCapability is its declared bound: the broadest
// requirement it can ever resolve to, used for discovery and to bound each call.
type ToolDefinition struct {
	Name               string                `json:"name"`
	Description        string                `json:"description"`
	Namespace          string                `json:"namespace"`
	Source             string                `json:"source"`
	ReadWrite          ReadWrite             `json:"readWrite"`
	InputSchema        map[string]any        `json:"inputSchema"`
	OutputSchema       map[string]any        `json:"outputSchema,omitempty"`
	RequiredCapability CapabilityRequirement `json:"requiredCapability"`
	Annotations        *ToolAnnotations      `json:"annotations,omitempty"`
	Metadata           map[string]any        `json:"metadata,omitempty"`
}

// ValidToolName reports whether s is a contract ToolName (^[A-Za-z0-9_.-]{1,128}$), for
// providers that publish names made from someone else's (the gateway's upstream tools).
func ValidToolName(s string) bool { return validToolName(s) }

// validToolName reports whether s matches ^[A-Za-z0-9_.-]{1,128}$.
func validToolName(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// Validate applies the definition contract and its cross-field rules.
func (d *ToolDefinition) Validate() error {
	if !validToolName(d.Name) {
		return contractErr("name", "must be 1 to 128 characters of A-Z a-z 0-9 _ . -")
	}
	if n := jscompat.UTF16Len(d.Description); n < 1 || n > 8192 {
		return contractErr("description", "must be 1 to 8192 characters")
	}
	if err := validIdent("namespace", d.Namespace); err != nil {
		return err
	}
	if err := validIdent("source", d.Source); err != nil {
		return err
	}
	if d.ReadWrite != ClassRead && d.ReadWrite != ClassWrite {
		return contractErr("readWrite", "must be \"read\" or \"write\"")
	}
	if d.InputSchema == nil {
		return contractErr("inputSchema", "is required")
	}
	if d.OutputSchema != nil && d.OutputSchema["type"] != "object" {
		return contractErr("outputSchema", "must be an object-typed JSON Schema")
	}
	if err := d.RequiredCapability.Validate(); err != nil {
		return prefixErr("requiredCapability", err)
	}
	if a := d.Annotations; a != nil {
		if d.ReadWrite == ClassRead && a.Destructive != nil && *a.Destructive {
			return contractErr("annotations.destructive", "a read tool cannot be destructive")
		}
		if d.ReadWrite == ClassWrite && a.ReadOnly != nil && *a.ReadOnly {
			return contractErr("annotations.readOnly", "a write tool cannot be read-only")
		}
	}
	return nil
}

// Validate checks a requirement built in Go.
func (r *CapabilityRequirement) Validate() error {
	if err := r.Resource.Validate(); err != nil {
		return prefixErr("resource", err)
	}
	return validTrimmed("action", r.Action, 128)
}

// Class is the presentation class of docs/tools.md: read, write or destructive.
func (d *ToolDefinition) Class() string {
	if d.ReadWrite == ClassWrite && d.Annotations != nil && d.Annotations.Destructive != nil && *d.Annotations.Destructive {
		return "destructive"
	}
	return string(d.ReadWrite)
}

// ToolCall is one request to run a tool. Arguments is the raw JSON object the caller sent.
type ToolCall struct {
	ID          string          `json:"id"`
	Tool        string          `json:"tool"`
	Arguments   json.RawMessage `json:"arguments"`
	TraceID     string          `json:"traceId"`
	RequestedAt string          `json:"requestedAt"`
}

// ParsedToolCall is a ToolCall after its handler parsed the arguments. Parsed is whatever
// the handler's ParseArguments returned; the kernel never looks inside it. Prepared is,
// in the call handed to Invoke, what the Prepare of the call's Resolution returned (nil
// without one, and always nil in the call handed to ResolveCall or ResolveRequirement).
type ParsedToolCall struct {
	ToolCall
	Parsed   any
	Prepared any
}

// ToolStatus is the outcome of a tool call.
type ToolStatus string

// The three ToolResult statuses.
const (
	StatusSucceeded ToolStatus = "succeeded"
	StatusDenied    ToolStatus = "denied"
	StatusFailed    ToolStatus = "failed"
)

// ProtocolError is the error of a denied or failed result.
type ProtocolError struct {
	Code      ErrorCode      `json:"code"`
	Message   string         `json:"message"`
	Retryable *bool          `json:"retryable,omitempty"`
	Details   map[string]any `json:"details,omitempty"`
}

// ToolResult is what a call returns. Output is set when succeeded, Error otherwise.
type ToolResult struct {
	CallID      string         `json:"callId"`
	Tool        string         `json:"tool"`
	Status      ToolStatus     `json:"status"`
	Output      any            `json:"output,omitempty"`
	Error       *ProtocolError `json:"error,omitempty"`
	CompletedAt string         `json:"completedAt"`
	Metadata    map[string]any `json:"metadata,omitempty"`
	// Gate and Cause say, for the host, which gate refused the call and (for a
	// tool_unavailable refusal) the hidden cause; they are empty on success and on a
	// failure inside the tool. They are not part of the wire contract: a surface that
	// publishes them (the CLI's JSON, MCP's _meta) does so explicitly.
	Gate  Gate  `json:"-"`
	Cause Cause `json:"-"`
}

// MarshalJSON writes output (even a null one) exactly when the call succeeded.
func (r ToolResult) MarshalJSON() ([]byte, error) {
	type base struct {
		CallID      string         `json:"callId"`
		Tool        string         `json:"tool"`
		Status      ToolStatus     `json:"status"`
		Output      any            `json:"output"`
		CompletedAt string         `json:"completedAt"`
		Metadata    map[string]any `json:"metadata,omitempty"`
	}
	type failed struct {
		CallID      string         `json:"callId"`
		Tool        string         `json:"tool"`
		Status      ToolStatus     `json:"status"`
		Error       *ProtocolError `json:"error"`
		CompletedAt string         `json:"completedAt"`
		Metadata    map[string]any `json:"metadata,omitempty"`
	}
	if r.Status == StatusSucceeded {
		return marshalNoEscape(base{r.CallID, r.Tool, r.Status, r.Output, r.CompletedAt, r.Metadata})
	}
	return marshalNoEscape(failed{r.CallID, r.Tool, r.Status, r.Error, r.CompletedAt, r.Metadata})
}

// Check validates a result a handler returned against the contract.
func (r *ToolResult) Check() error {
	if err := validIdent("callId", r.CallID); err != nil {
		return err
	}
	if err := validIdent("tool", r.Tool); err != nil {
		return err
	}
	if _, err := ParseTimestamp(r.CompletedAt); err != nil {
		return contractErr("completedAt", "must be an RFC 3339 date-time with an offset")
	}
	switch r.Status {
	case StatusSucceeded:
		if r.Error != nil {
			return contractErr("error", "is not allowed on a succeeded result")
		}
	case StatusDenied, StatusFailed:
		if r.Error == nil {
			return contractErr("error", "is required on a %s result", r.Status)
		}
		if r.Output != nil {
			return contractErr("output", "is not allowed on a %s result", r.Status)
		}
		if err := validIdent("error.code", string(r.Error.Code)); err != nil {
			return err
		}
		if n := jscompat.UTF16Len(r.Error.Message); n < 1 || n > 4096 {
			return contractErr("error.message", "must be 1 to 4096 characters")
		}
	default:
		return contractErr("status", "must be succeeded, denied or failed")
	}
	return nil
}

// ToolHandler is a registered tool: its definition and the functions the kernel calls.
//
// ParseArguments runs before authorization and must reject anything it would not execute;
// nil means the raw arguments pass through unparsed. ResolveRequirement derives the exact
// requirement from the parsed call just before execution; nil means the declared bound
// (a scope hole for any tool that takes a resource argument). ResolveCall is
// ResolveRequirement with a typed hand-off to Invoke (see Resolution); a handler sets one
// of the two, never both. Both run on every plan of a call, the dry runs (ExplainCall)
// included, and must be pure: whatever has an effect or mints an identity belongs in
// Resolution.Prepare. Invoke runs the tool; an error it returns becomes
// tool_execution_failed and its text is never shown to callers.
type ToolHandler struct {
	Definition         ToolDefinition
	ParseArguments     func(args json.RawMessage) (any, error)
	ResolveRequirement func(actx AccessContext, call ParsedToolCall) (CapabilityRequirement, error)
	ResolveCall        func(actx AccessContext, call ParsedToolCall) (Resolution, error)
	Invoke             func(ctx context.Context, actx AccessContext, call ParsedToolCall) (ToolResult, error)
}

// Resolution is what a tool's ResolveCall returns: the call's exact requirement and,
// optionally, how to prepare what its Invoke delivers (a message envelope minted with a
// fresh id, spec 80 §3).
//
// Prepare is called by InvokeTool alone, at most once per call: after every gate passed
// and the call's authorization was settled, allowed and audited (its use consumed), just
// before Invoke, which receives its value as ParsedToolCall.Prepared. The value goes from
// the one to the other inside the call itself, never through a table keyed by call id
// (two calls may share an id), and the kernel does not resolve the call again in between:
// the value Invoke gets was prepared by the very resolution that was authorized. A
// refused call is never prepared, and the dry runs (ExplainCall) never prepare: they
// drop Prepare unread. An error or a panic of Prepare fails the call
// tool_execution_failed, without Invoke, its text never shown to callers.
//
// Admit, when set, is called by InvokeTool alone, at most once per call: after every
// gate passed and the execution authorization would be allowed, just before it is
// settled consuming — so that a call over a bound only the store can count (a
// requester's messages in flight) is refused before its use is spent. A
// *ResolutionRefusedError denies the call with its code at the requirement gate; any
// other error (or a panic) fails it tool_execution_failed; either way nothing is spent,
// nothing is prepared, and the call's tool.invoked record says so. The dry runs never
// admit. Admit is a check, not a reservation: what it counted may change before the use
// is spent, so a tool whose bound must hold exactly checks it again where it takes
// effect.
type Resolution struct {
	Requirement CapabilityRequirement
	Prepare     func(ctx context.Context) (any, error)
	Admit       func(ctx context.Context) error
}

// PublishedToolDefinition is the model-facing projection of a definition: it never
// carries requiredCapability.
type PublishedToolDefinition struct {
	Name         string              `json:"name"`
	Description  string              `json:"description"`
	InputSchema  map[string]any      `json:"inputSchema"`
	OutputSchema map[string]any      `json:"outputSchema,omitempty"`
	Annotations  *PublishedHints     `json:"annotations,omitempty"`
	Metadata     *PublishedToolLabel `json:"metadata,omitempty"`
}

// PublishedHints are the MCP-style hint names of ToolAnnotations.
type PublishedHints struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
}

// PublishedToolLabel carries the grouping metadata of a published definition.
type PublishedToolLabel struct {
	Namespace string `json:"namespace,omitempty"`
	Source    string `json:"source,omitempty"`
}

// Publish returns the model-facing projection of d.
func (d *ToolDefinition) Publish() PublishedToolDefinition {
	p := PublishedToolDefinition{Name: d.Name, Description: d.Description, InputSchema: d.InputSchema,
		OutputSchema: d.OutputSchema, Metadata: &PublishedToolLabel{Namespace: d.Namespace, Source: d.Source}}
	if a := d.Annotations; a != nil {
		p.Annotations = &PublishedHints{ReadOnlyHint: a.ReadOnly, DestructiveHint: a.Destructive, IdempotentHint: a.Idempotent}
	}
	return p
}

// ResourceOperation is what a tool wrapper hands a ResourceProvider.
type ResourceOperation struct {
	OperationID string         `json:"operationId"`
	Context     AccessContext  `json:"context"`
	Resource    ResourceRef    `json:"resource"`
	Action      string         `json:"action"`
	Input       any            `json:"input,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// ResourceResult is a provider's answer; it maps 1:1 onto a ToolResult.
type ResourceResult struct {
	OperationID string         `json:"operationId"`
	Status      ToolStatus     `json:"status"`
	Output      any            `json:"output,omitempty"`
	Error       *ProtocolError `json:"error,omitempty"`
	CompletedAt string         `json:"completedAt"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// ResourceProvider executes operations on one resource namespace (files, repo, …). It
// acts only on the resource the kernel hands it: authority has been decided already.
// Invoke returns a result for every expected failure (not_found, path_escape, …); a
// returned Go error is an unexpected provider fault and becomes tool_execution_failed.
type ResourceProvider interface {
	Namespace() string
	Invoke(ctx context.Context, op ResourceOperation) (ResourceResult, error)
}

// ResultFromResource maps a provider result onto a ToolResult for call.
func ResultFromResource(call ParsedToolCall, actx AccessContext, rr ResourceResult) ToolResult {
	if rr.OperationID != call.ID || (rr.Status != StatusSucceeded && rr.Error == nil) ||
		(rr.Status != StatusSucceeded && rr.Status != StatusDenied && rr.Status != StatusFailed) {
		return FailedResult(call.ToolCall, actx.Now, "invalid_resource_result",
			"the resource provider returned a result that does not match the contract")
	}
	completed := rr.CompletedAt
	if _, err := ParseTimestamp(completed); err != nil {
		completed = actx.Now
	}
	res := ToolResult{CallID: call.ID, Tool: call.Tool, Status: rr.Status, Output: rr.Output,
		Error: rr.Error, CompletedAt: completed, Metadata: rr.Metadata}
	if res.Error != nil && res.Error.Retryable == nil {
		res.Error.Retryable = BoolPtr(false)
	}
	return res
}

// BoolPtr returns a pointer to b (for annotations and retryable flags).
func BoolPtr(b bool) *bool { return &b }

// FailedResult builds a failed ToolResult with a non-retryable error.
func FailedResult(call ToolCall, now string, code ErrorCode, message string) ToolResult {
	return ToolResult{CallID: call.ID, Tool: call.Tool, Status: StatusFailed,
		Error: &ProtocolError{Code: code, Message: message, Retryable: BoolPtr(false)}, CompletedAt: now}
}

// DeniedResult builds a denied ToolResult with a non-retryable error.
func DeniedResult(call ToolCall, now string, code ErrorCode, message string) ToolResult {
	return ToolResult{CallID: call.ID, Tool: call.Tool, Status: StatusDenied,
		Error: &ProtocolError{Code: code, Message: message, Retryable: BoolPtr(false)}, CompletedAt: now}
}

// PathWithin reports whether prefix is a segment-prefix of (or equal to) path.
func PathWithin(prefix, path []string) bool {
	if len(prefix) > len(path) {
		return false
	}
	for i := range prefix {
		if prefix[i] != path[i] {
			return false
		}
	}
	return true
}

// JoinPath renders a segment path for messages ("/" when empty).
func JoinPath(path []string) string {
	if len(path) == 0 {
		return "/"
	}
	return strings.Join(path, "/")
}
