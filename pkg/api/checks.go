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
