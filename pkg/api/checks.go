package api

import (
	"context"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Checks are the operations of HTTP /v1 that no command of the command line needs: the
// dry-run authorization of one requirement (POST /v1/authorize) and the context's reach
// (GET /v1/reach). The embedded backend (host.Service) and the remote client implement
// them beside Service. Like Service, a refusal is a decision, never an error.
type Checks interface {
	// Authorize decides req for the context without spending anything (spec 30 §2.2);
	// the decision is audited. operationID names the check in its audit record.
	Authorize(ctx context.Context, req kernel.CapabilityRequirement, operationID string) (kernel.AuthorizationDecision, error)
	// Reach reports where the context's grants reach, with no authority details.
	Reach(ctx context.Context) (kernel.ReachResult, error)
	// ExplainAuthorize is Authorize as an explanation (the JSON of `explain`: the
	// refusing gate, the candidate grants and why each was rejected, the grant that
	// would fix it). It spends nothing and writes no audit record.
	ExplainAuthorize(ctx context.Context, req kernel.CapabilityRequirement) (Explanation, error)
}

// Admin are the operator's operations of HTTP /v1/admin that reach beyond the context's
// own (world, owner): the namespace settings of any (world, owner). The reviewer of an
// escalation, the audit trail and the escalations list are Service's.
type Admin interface {
	// NamespacesOf is Namespaces for (world, owner) instead of the context's: the
	// catalogue under that pair's stored (or default) selection.
	NamespacesOf(ctx context.Context, world string, owner kernel.Address) (Namespaces, error)
	// UpdateNamespacesOf is UpdateNamespaces of (world, owner)'s stored selection; the
	// audit record names the context's actor as who changed it.
	UpdateNamespacesOf(ctx context.Context, world string, owner kernel.Address, u kernel.ToolNamespaceUpdate) (NamespacesUpdated, error)
}
