package client

import (
	"testing"

	"github.com/sharedos/sharedos/pkg/api"
)

// TestAPICodeOfEnvelopeCodes: each code a server's error envelope may carry maps to the
// api.Error code the commands turn into their exit codes; the replay answers (409) are
// the request's own fault, as a conflicting key is.
func TestAPICodeOfEnvelopeCodes(t *testing.T) {
	for code, want := range map[string]string{
		"invalid_request":          api.CodeInvalidRequest,
		"invalid_json":             api.CodeInvalidRequest,
		"replay_conflict":          api.CodeInvalidRequest,
		"replay_pending":           api.CodeInvalidRequest,
		"replay_interrupted":       api.CodeInvalidRequest,
		"not_found":                api.CodeNotFound,
		"state_unavailable":        "state_unavailable",
		"tool_catalog_unavailable": "tool_catalog_unavailable",
		"unauthorized":             api.CodeStateUnavailable,
		"permission_denied":        api.CodeStateUnavailable,
		"shutting_down":            api.CodeStateUnavailable,
		"something_new":            api.CodeInternalError,
	} {
		if got := apiCode(&Error{Code: code}); got != want {
			t.Errorf("apiCode(%q) = %q, want %q", code, got, want)
		}
	}
}
