package store

import (
	"context"
	"time"
)

// IdempotencyKey names one request sent with an idempotency key: Scope is the caller's
// (a token's context), Key the client's Idempotency-Key. Keys of different scopes never
// meet.
type IdempotencyKey struct {
	Scope, Key string
}

// IdempotencyState is what BeginIdempotent found under a key.
type IdempotencyState int

// The states of BeginIdempotent.
const (
	// IdempotencyClaimed: the key was free (or its record expired) and is now claimed by
	// this caller, which runs the request and then calls CompleteIdempotent (a result to
	// keep) or AbandonIdempotent (none).
	IdempotencyClaimed IdempotencyState = iota
	// IdempotencyDone: a result of the same request is stored; the record holds it.
	IdempotencyDone
	// IdempotencyPending: the same request holds the key and has not completed.
	IdempotencyPending
	// IdempotencyConflict: the key was used for a different request (another
	// fingerprint), completed or not.
	IdempotencyConflict
)

// IdempotencyRecord is what a key holds: the fingerprint of its request, when it was
// claimed, and once completed the response to replay (Status 0 while pending).
type IdempotencyRecord struct {
	Fingerprint string
	ClaimedAt   time.Time
	Status      int
	Body        []byte
	// Epoch and Spent (LeasedIdempotency only): the claim's fencing token, and whether a
	// use was spent under it.
	Epoch int64
	Spent bool
}

// Idempotency keeps the responses of requests sent with an idempotency key, so that one
// key gives one execution whichever process (sharing the store) receives its copies.
//
// Durability: a claim is write-ahead (committed and visible to every process at once;
// losing it in a crash loses nothing, since a claim records no effect); a completion is
// durable (the response of an effect: forced to stable storage before the method
// returns, so a retry after a crash replays it instead of running again).
type Idempotency interface {
	// BeginIdempotent atomically reads key and, when it holds no record claimed after
	// now-window (an older record is expired and replaced), claims it for a request with
	// fingerprint fp at now. It reports what it found: Claimed (the caller runs the
	// request), or Done, Pending or Conflict with the record found. Of concurrent calls
	// for one free key, in any processes, exactly one gets Claimed.
	BeginIdempotent(ctx context.Context, key IdempotencyKey, fp string, now time.Time, window time.Duration) (IdempotencyState, IdempotencyRecord, error)
	// CompleteIdempotent stores the response of the request that claimed key with fp;
	// ErrNotFound when key holds no pending claim of fp (it expired and was claimed
	// again).
	CompleteIdempotent(ctx context.Context, key IdempotencyKey, fp string, status int, body []byte) error
	// AbandonIdempotent releases the pending claim of key with fp (the request produced
	// no response to keep): the key is free again. A key that holds anything else is
	// left as it is.
	AbandonIdempotent(ctx context.Context, key IdempotencyKey, fp string) error
}

// IdempotencyInterrupted (ClaimIdempotent only): the key's claimant spent a use for the
// request (its spend committed with its decision record) and then stopped renewing its
// claim before it stored a response — it died after the effect. The request is not run
// again (that would spend a second use); the caller answers that the result is lost.
const IdempotencyInterrupted IdempotencyState = IdempotencyConflict + 1

// IdempotencyClaim is one claim of a key: the key, the fingerprint of its request and the
// claim's epoch, its fencing token. The epoch is 1 for a key's first claim and grows by
// one at every takeover of an expired lease, so an attempt that was paused (not dead)
// while its claim was taken over holds a stale epoch: its spend, completion, renewal and
// abandonment are all refused.
type IdempotencyClaim struct {
	Key         IdempotencyKey
	Fingerprint string
	Epoch       int64
}

// LeasedIdempotency is an Idempotency whose claims carry a lease and a fencing token, so
// that a key claimed by a process that died is taken over once its lease runs out instead
// of answering "pending" until the window ends.
//
// A claim holds its key while its lease runs: from the claim (or its last renewal) for
// lease. The claimant renews it while the request runs (RenewIdempotent), so a call of any
// length keeps its key; a claimant that died stops renewing, and once the lease has run
// out the next ClaimIdempotent of the same request takes the key over with epoch+1. A
// spend made for the request must be fenced by the claim (kernel.ClaimedUsageStore): it
// checks, in the spend's own transaction, that the claim's epoch still holds the key and
// marks the claim spent; a spent claim whose lease ran out is Interrupted, never taken
// over.
type LeasedIdempotency interface {
	Idempotency
	// ClaimIdempotent is BeginIdempotent with a lease: a pending claim of the same
	// fingerprint whose lease ran out (renewed last before now-lease) is taken over —
	// Claimed, with the record's Epoch one more than the old claim's — unless it spent a
	// use (Interrupted). A pending claim within its lease is Pending; the record's Epoch
	// is the claim's (the caller's fencing token when Claimed).
	ClaimIdempotent(ctx context.Context, key IdempotencyKey, fp string, now time.Time, window, lease time.Duration) (IdempotencyState, IdempotencyRecord, error)
	// RenewIdempotent renews c's lease from now; ErrNotFound when c no longer holds its
	// key (taken over, completed or abandoned).
	RenewIdempotent(ctx context.Context, c IdempotencyClaim, now time.Time) error
	// CompleteClaim is CompleteIdempotent for the claim c: ErrNotFound (nothing stored)
	// when c's epoch no longer holds the key pending.
	CompleteClaim(ctx context.Context, c IdempotencyClaim, status int, body []byte) error
	// AbandonClaim is AbandonIdempotent for the claim c: a key that c no longer holds is
	// left as it is.
	AbandonClaim(ctx context.Context, c IdempotencyClaim) error
}
