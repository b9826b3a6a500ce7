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
