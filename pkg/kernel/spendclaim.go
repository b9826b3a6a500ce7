package kernel

import (
	"context"
	"errors"
)

// SpendClaim is the fencing token of one attempt of a request that may be attempted by
// several processes in turn (a POST /v1/tools/invoke with an Idempotency-Key, whose claim
// a replica takes over when the claimant's lease runs out): the claim's scope, key and
// request fingerprint, and its epoch, which grows at every takeover. A use spent for the
// attempt is fenced by it: the spend's own transaction checks that the epoch still holds
// the claim (and marks the claim spent), so an attempt that was paused while its claim was
// taken over can never spend a second use for the request.
type SpendClaim struct {
	Scope, Key, Fingerprint string
	Epoch                   int64
}

// ClaimedUsageStore is an optional extension of ReservingUsageStore: ReserveClaimedUse
// reserves a use as ReserveUse does, and in the same transaction first checks that claim
// still holds its request and marks it spent; when it does not hold it (taken over,
// completed or abandoned) it reserves nothing and returns an error that matches
// ErrSpendClaimLost. Releasing the reservation undoes the mark with the use.
type ClaimedUsageStore interface {
	ReservingUsageStore
	ReserveClaimedUse(ctx context.Context, key UsageKey, max int64, claim SpendClaim) (UsageReservation, bool, error)
}

// ErrSpendClaimLost is the error of a fenced spend whose claim no longer holds its
// request: another attempt took the request over, and this one spent nothing.
var ErrSpendClaimLost = errors.New("the claim of this request was taken over by another attempt; this attempt spent nothing")

// CodeSpendClaimLost is the failure of a call whose fenced spend was refused
// (ErrSpendClaimLost): nothing was spent or recorded for it, and the attempt that took
// the request over answers it.
const CodeSpendClaimLost ErrorCode = "spend_claim_lost"

type spendClaimKey struct{}

// WithSpendClaim returns ctx carrying claim: every use a call spends under the returned
// context is fenced by it (ClaimedUsageStore). A kernel whose usage store cannot fence
// refuses such a spend (usage_store_unavailable) rather than spend it unfenced.
func WithSpendClaim(ctx context.Context, claim SpendClaim) context.Context {
	return context.WithValue(ctx, spendClaimKey{}, claim)
}

// SpendClaimOf returns the claim ctx carries (WithSpendClaim).
func SpendClaimOf(ctx context.Context) (SpendClaim, bool) {
	c, ok := ctx.Value(spendClaimKey{}).(SpendClaim)
	return c, ok
}

// errUnfencedSpend refuses a spend that must be fenced on a store that cannot fence.
var errUnfencedSpend = errors.New("the usage store cannot fence a spend by its request's claim")
