package cmd

import (
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Exit codes of spec 40 §5. This is the only place they are defined.
const (
	// ExitOK: success; a tool result "succeeded"; explain: the call would be allowed.
	ExitOK = 0
	// ExitCommandFailed: the command itself failed (unreadable config, corrupt state database, I/O).
	ExitCommandFailed = 1
	// ExitUsage: a usage error (bad flag, bad argument JSON, bad address).
	ExitUsage = 2
	// ExitDenied: a tool result "denied" (any reason); explain: the call would be refused.
	ExitDenied = 3
	// ExitToolFailed: a tool result "failed".
	ExitToolFailed = 4
	// ExitEscalated: the call ended the turn escalated.
	ExitEscalated = 5
	// ExitInterrupted: the command was interrupted (SIGINT, Ctrl-C), 128+2 as shells
	// report it; whatever result the interrupted call had is printed and audited first.
	ExitInterrupted = 130
)

// Error codes of the JSON error envelope (spec 40 §4).
const (
	CodeInvalidRequest         = "invalid_request"
	CodeInvalidArguments       = "invalid_arguments"
	CodeStateUnavailable       = "state_unavailable"
	CodeToolCatalogUnavailable = "tool_catalog_unavailable"
	CodeInternalError          = "internal_error"
	CodeConfigInvalid          = "config_invalid"
)

// ExitError is a command failure: it carries the process exit code, the error code of
// the JSON envelope, a lowercase message and an optional hint. Err is the cause, if any.
type ExitError struct {
	ExitCode  int
	ErrorCode string
	Message   string
	Hint      string
	Err       error
}

func (e *ExitError) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *ExitError) Unwrap() error { return e.Err }

// usageError is exit 2, invalid_request.
func usageError(hint, format string, args ...any) *ExitError {
	return &ExitError{ExitCode: ExitUsage, ErrorCode: CodeInvalidRequest, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// argumentsError is exit 2, invalid_arguments (tool arguments that are not a JSON object).
func argumentsError(hint, format string, args ...any) *ExitError {
	return &ExitError{ExitCode: ExitUsage, ErrorCode: CodeInvalidArguments, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// stateError is exit 1, state_unavailable.
func stateError(err error, hint string) *ExitError {
	return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeStateUnavailable, Message: err.Error(), Hint: hint, Err: err}
}

// configError is exit 1: the configuration file is unreadable or invalid.
func configError(hint, format string, args ...any) *ExitError {
	return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeConfigInvalid, Message: fmt.Sprintf(format, args...), Hint: hint}
}

// internalError is exit 1, internal_error.
func internalError(err error) *ExitError {
	return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeInternalError, Message: err.Error(), Err: err}
}

// resultExit ends a command whose result was already printed, with a non-zero code
// and nothing more on stderr.
type resultExit struct{ code int }

func (e *resultExit) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exitForStatus is the exit code of a tool result status.
func exitForStatus(s kernel.ToolStatus) int {
	switch s {
	case kernel.StatusSucceeded:
		return ExitOK
	case kernel.StatusDenied:
		return ExitDenied
	default:
		return ExitToolFailed
	}
}

// exitCodeOf returns the exit code for err (nil ⇒ 0).
func exitCodeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	var re *resultExit
	if errors.As(err, &re) {
		return re.code
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode
	}
	return ExitCommandFailed
}
