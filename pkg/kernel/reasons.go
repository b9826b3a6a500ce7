package kernel

// ReasonCode is the code of an authorization decision (AuthorizationDecision.ReasonCode):
// allowed, or why not. Codes are stable strings; hosts branch on them.
type ReasonCode string

// ErrorCode is the code of a denied or failed result (ToolResult.error.code) and the
// reason an audit event records: one of the operation codes below, a resource
// provider's own code (the files and repo planes' not_found, path_escape, …), or the
// authorization reason a refusal reports (ErrorCodeOf). Codes are stable strings.
type ErrorCode string

// ErrorCodeOf is the error code a refusal with reason r reports.
func ErrorCodeOf(r ReasonCode) ErrorCode { return ErrorCode(r) }

// Authorization reason codes (AuthorizationDecision.ReasonCode).
const (
	ReasonAllowed                   ReasonCode = "allowed"
	ReasonNoMatchingGrant           ReasonCode = "no_matching_grant"
	ReasonGrantExhausted            ReasonCode = "grant_exhausted"
	ReasonHostPolicyDenied          ReasonCode = "host_policy_denied"
	ReasonInvalidContext            ReasonCode = "invalid_context"
	ReasonInvalidRequest            ReasonCode = "invalid_request"
	ReasonDelegationChainInvalid    ReasonCode = "delegation_chain_invalid"
	ReasonAuthorityUnavailable      ReasonCode = "authority_unavailable"
	ReasonDelegationChainUnverified ReasonCode = "delegation_chain_unverified"
	ReasonUsageStoreUnavailable     ReasonCode = "usage_store_unavailable"
	ReasonHostPolicyUnavailable     ReasonCode = "host_policy_unavailable"
)

// Operation codes (ToolResult.error.code and audit reasons).
const (
	CodeToolUnavailable                 ErrorCode = "tool_unavailable"
	CodeTraceMismatch                   ErrorCode = "trace_mismatch"
	CodeInvalidToolArguments            ErrorCode = "invalid_tool_arguments"
	CodeInvalidToolRequirement          ErrorCode = "invalid_tool_requirement"
	CodeToolRequirementResolutionFailed ErrorCode = "tool_requirement_resolution_failed"
	CodeToolCatalogUnavailable          ErrorCode = "tool_catalog_unavailable"
	CodeToolExecutionFailed             ErrorCode = "tool_execution_failed"
	CodeInvalidToolResult               ErrorCode = "invalid_tool_result"
	CodeEscalationNotTerminated         ErrorCode = "escalation_not_terminated"
	CodeEscalationRequested             ErrorCode = "escalation_requested"
	CodeAuditUnavailable                ErrorCode = "audit_unavailable"
	// CodeCancelled: the caller's context was cancelled (an interrupt, Ctrl-C) while the
	// tool ran; the call failed, retryable, and is audited like any other.
	CodeCancelled              ErrorCode = "cancelled"
	CodeActorMismatch          ErrorCode = "actor_mismatch"
	CodeReceiverMismatch       ErrorCode = "receiver_mismatch"
	CodeMessageContextMismatch ErrorCode = "message_context_mismatch"
)

// Messaging codes (spec 80; the reference's, then the bounds of issue 24).
const (
	CodeMessageRequirementResolutionFailed ErrorCode = "message_requirement_resolution_failed"
	CodeMessageTransportNotConfigured      ErrorCode = "message_transport_not_configured"
	CodeMessageDeliveryFailed              ErrorCode = "message_delivery_failed"
	CodeInvalidMessageReceipt              ErrorCode = "invalid_message_receipt"
	CodeMessageRequestNotPrepared          ErrorCode = "message_request_not_prepared"
	CodeMessageRequestNotAccepted          ErrorCode = "message_request_not_accepted"
	CodeMessageReplyResolutionFailed       ErrorCode = "message_reply_resolution_failed"
	CodeInvalidMessageReply                ErrorCode = "invalid_message_reply"
	CodeRecipientUnreachable               ErrorCode = "recipient_unreachable"
	CodeMessagePayloadTooLarge             ErrorCode = "message_payload_too_large"
	CodeMessageRecipientIsSender           ErrorCode = "message_recipient_is_sender"
	CodeMessagesInFlightExceeded           ErrorCode = "messages_in_flight_exceeded"
	CodeMessageIDConflict                  ErrorCode = "message_id_conflict"
	// CodeMessageSendInProgress: another process is sending the same message (its id
	// claimed, MessageIDClaimer) right now; retryable — a retry gets its receipt.
	CodeMessageSendInProgress ErrorCode = "message_send_in_progress"
)

// Cause is the hidden cause of a tool_unavailable refusal, recorded in audit and carried
// by the result for the host (the agent sees only tool_unavailable): one of the causes
// below, or the code of the discovery decision that hid the tool (no_matching_grant,
// host_policy_denied, …). It is the one cause vocabulary of every surface.
type Cause string

// The causes that are not authorization codes.
const (
	CauseNotRegistered     Cause = "not_registered"
	CauseNamespaceDisabled Cause = "namespace_disabled"
	CauseNotOffered        Cause = "not_offered"
)

// CauseOf is the cause a discovery refusal with code gives a tool_unavailable result.
func CauseOf(code ReasonCode) Cause { return Cause(code) }

// Internal codes of an authority outage (metadata.authority.code); callers see only
// authority_unavailable.
const (
	AuthorityGrantSourceFailed     = "grant_source_failed"
	AuthorityInvalidGrantMaterial  = "invalid_grant_material"
	AuthorityGrantScopeMismatch    = "grant_scope_mismatch"
	AuthorityGrantLimitExceeded    = "grant_limit_exceeded"
	AuthorityRevocationUnavailable = "revocation_unavailable"
)

// Delegation link codes (metadata.delegation.code).
const (
	LinkResolverUnavailable       = "resolver_unavailable"
	LinkResolverFailed            = "resolver_failed"
	LinkParentNotFound            = "parent_not_found"
	LinkChainTooLong              = "chain_too_long"
	LinkChainCycle                = "chain_cycle"
	LinkNamespaceMismatch         = "namespace_mismatch"
	LinkIssuerNotParentSubject    = "issuer_not_parent_subject"
	LinkParentInactive            = "parent_inactive"
	LinkDelegationNotPermitted    = "delegation_not_permitted"
	LinkDelegationDepthExceeded   = "delegation_depth_exceeded"
	LinkBoundedParentNotDelegable = "bounded_parent_not_delegable"
	LinkCapabilityWidened         = "capability_widened"
	LinkConstraintsWidened        = "constraints_widened"
)

// RejectReason says why one candidate grant did not authorize a request.
type RejectReason string

// The rejection reasons of rejectedGrants, first failed condition per grant.
const (
	RejectIssuer     RejectReason = "issuer"
	RejectSubject    RejectReason = "subject"
	RejectNamespace  RejectReason = "namespace"
	RejectWindow     RejectReason = "window"
	RejectPurpose    RejectReason = "purpose"
	RejectVerifier   RejectReason = "verifier"
	RejectCapability RejectReason = "capability"
	RejectDelegation RejectReason = "delegation"
	RejectExhausted  RejectReason = "exhausted"
	RejectRevoked    RejectReason = "revoked"
	RejectCeiling    RejectReason = "ceiling"
)

// infrastructureDenialReasons are the fail-closed authorization codes: an outage, not a
// policy answer. Their audit records carry failClosed:true.
var infrastructureDenialReasons = [...]ReasonCode{
	ReasonAuthorityUnavailable, ReasonDelegationChainUnverified,
	ReasonHostPolicyUnavailable, ReasonUsageStoreUnavailable,
}

// IsInfrastructureDenial reports whether code (a decision's reason, or a result's or
// audit event's code) is one of the fail-closed outage codes.
func IsInfrastructureDenial[C ReasonCode | ErrorCode](code C) bool {
	for _, c := range infrastructureDenialReasons {
		if c == ReasonCode(code) {
			return true
		}
	}
	return false
}

// InfrastructureDenialReasons returns the fail-closed authorization codes.
func InfrastructureDenialReasons() []ReasonCode {
	return append([]ReasonCode(nil), infrastructureDenialReasons[:]...)
}
