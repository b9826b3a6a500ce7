package kernel

import (
	"strings"
	"testing"
)

// TestDenialMessagesNameNoOperatorText: a denial's message reaches the agent (MCP text),
// so it names no operator command and no grant files (security issue 20, item 7).
func TestDenialMessagesNameNoOperatorText(t *testing.T) {
	req := CapabilityRequirement{Action: "read", Resource: ResourceRef{Namespace: "files", Path: []string{"a.md"}}}
	for _, code := range []ReasonCode{ReasonNoMatchingGrant, ReasonGrantExhausted, ReasonHostPolicyDenied, ReasonInvalidContext,
		ReasonInvalidRequest, ReasonDelegationChainInvalid, ReasonAuthorityUnavailable, ReasonDelegationChainUnverified,
		ReasonUsageStoreUnavailable, ReasonHostPolicyUnavailable} {
		msg := strings.ToLower(denialMessage(code, req))
		for _, bad := range []string{"sharedos ", "explain", "--apply", "grants"} {
			if strings.Contains(msg, bad) {
				t.Errorf("%s: message %q holds %q", code, msg, bad)
			}
		}
	}
}
