package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/store"
)

// Defaults of the idempotency of POST /v1/tools/invoke.
const (
	// DefaultIdempotencyWindow is how long a key's response is kept and replayed.
	DefaultIdempotencyWindow = 24 * time.Hour
	// DefaultIdempotencyLease is the lease of a key's claim (store.LeasedIdempotency):
	// how long after its claimant was last heard of — its claim or its last renewal,
	// every third of the lease while the request runs — a retry of the request may take
	// the key over. The claimant renews it, so a call may run longer than the lease;
	// the lease only bounds how long a key stays pending after its replica died (a
	// retry then waits at most this, plus the renewal period). 30 s: far beyond a
	// renewal's round trip under load, within the ReplayWait of a retry that arrives
	// right after the claimant died.
	DefaultIdempotencyLease = 30 * time.Second
	// DefaultReplayWait is how long a request whose key is held by a running request
	// waits for its response before it is refused 409 replay_pending.
	DefaultReplayWait = 30 * time.Second
	// HeaderIdempotencyKey is the client's key; HeaderReplayed marks a replayed response.
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotency-Replayed"
)

// ContextScope is the scope of the idempotency keys of a context: its world, actor,
// owner, authority and purpose. Keys are the context's, not the token's: two tokens of
// one context share them (a re-created token replays what the old one ran).
func ContextScope(actx kernel.AccessContext) string {
	return strings.Join([]string{actx.World, actx.Actor.String(), actx.Owner.String(), actx.Authority.String(), actx.Purpose}, "\x00")
}

// Fingerprint is what makes two requests with one key the same request: the SHA-256 of
// the canonical JSON of the call's id, tool, arguments and trace (the context's trace:
// the x-sharedos-trace-id header, else the body's) — not its requestedAt, which a retry
// may send anew.
func Fingerprint(c kernel.ToolCall, trace string) string {
	args, err := kernel.CanonicalJSON(c.Arguments)
	if err != nil {
		args = c.Arguments
	}
	doc, _ := json.Marshal(map[string]any{"id": c.ID, "tool": c.Tool, "arguments": json.RawMessage(args), "traceId": c.TraceID, "contextTrace": trace})
	if canon, err := kernel.CanonicalJSON(doc); err == nil {
		doc = canon
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

// validKey reports whether an Idempotency-Key is 1 to 255 visible ASCII characters.
func validKey(k string) bool {
	if k == "" || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] > '~' {
			return false
		}
	}
	return true
}

// waiters lets a request whose key is pending in this process wake when the claimer
// finished, instead of polling the store (a claimer in another process is polled).
type waiters struct {
	mu sync.Mutex
	m  map[store.IdempotencyKey]chan struct{}
}

func (w *waiters) claim(k store.IdempotencyKey) (done func()) {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.m == nil {
		w.m = map[store.IdempotencyKey]chan struct{}{}
	}
	w.m[k] = ch
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		if w.m[k] == ch {
			delete(w.m, k)
		}
		w.mu.Unlock()
		close(ch)
	}
}

func (w *waiters) wait(ctx context.Context, k store.IdempotencyKey, poll, max time.Duration) {
	w.mu.Lock()
	ch := w.m[k]
	w.mu.Unlock()
	if ch != nil {
		poll = max // the claimer is here: it wakes us
	}
	t := time.NewTimer(poll)
	defer t.Stop()
	select {
	case <-ch: // nil (another process): only the timer or ctx
	case <-t.C:
	case <-ctx.Done():
	}
}

var (
	errReplayConflict = &Error{Status: http.StatusConflict, Code: "replay_conflict",
		Message: "This Idempotency-Key was used for a different request."}
	errReplayPending = &Error{Status: http.StatusConflict, Code: "replay_pending",
		Message: "A request with this Idempotency-Key is still running; retry later."}
	errReplayInterrupted = &Error{Status: http.StatusConflict, Code: "replay_interrupted",
		Message: "The request with this Idempotency-Key spent its use, then its server stopped before its result was kept; it is not run again."}
	errInvalidKey = &Error{Status: http.StatusBadRequest, Code: "invalid_request",
		Message: "Idempotency-Key must be 1 to 255 visible ASCII characters."}
)

// idempotent runs run at most once for the request's Idempotency-Key: the first request
// claims the key in the store and keeps its response (200 results only: a request that
// failed as a request releases the key); the same request again gets that response
// verbatim (with Idempotency-Replayed: true), on any process sharing the store; a
// different request with the key is 409 replay_conflict; while the first runs, the same
// request waits up to ReplayWait for its response, then is 409 replay_pending.
func (h *handler) idempotent(w http.ResponseWriter, rq *request, key, fp string, run func() (any, error)) (int, any, error) {
	if !validKey(key) {
		return 0, nil, errInvalidKey
	}
	st := rq.p.Idempotency()
	if st == nil {
		return 0, nil, &Error{Status: http.StatusNotImplemented, Code: "idempotency_unavailable",
			Message: "This server keeps no idempotency keys."}
	}
	k := store.IdempotencyKey{Scope: rq.p.Scope(), Key: key}
	ctx := context.WithoutCancel(rq.r.Context()) // a claim is settled even if the client left
	deadline := h.cfg.Clock().Add(h.cfg.ReplayWait)
	poll := 5 * time.Millisecond
	// Only a request whose spends are fenced by its claim (rq.fences: a tool call) may
	// have its claim taken over; any other keeps a claim until the window ends.
	var leased store.LeasedIdempotency
	if rq.fences {
		leased, _ = st.(store.LeasedIdempotency)
	}
	for {
		var state store.IdempotencyState
		var rec store.IdempotencyRecord
		var err error
		if leased != nil {
			state, rec, err = leased.ClaimIdempotent(ctx, k, fp, h.cfg.Clock(), h.cfg.IdempotencyWindow, h.cfg.IdempotencyLease)
		} else {
			state, rec, err = st.BeginIdempotent(ctx, k, fp, h.cfg.Clock(), h.cfg.IdempotencyWindow)
		}
		if err != nil {
			h.log.Error("idempotency store", "requestId", rq.id, "err", err)
			return 0, nil, &Error{Status: http.StatusServiceUnavailable, Code: "state_unavailable", Message: "The server's state is unavailable."}
		}
		switch state {
		case store.IdempotencyDone:
			w.Header().Set(HeaderReplayed, "true")
			rq.decision = decision{outcome: "replayed", code: "ok"}
			return rec.Status, rawJSON(rec.Body), nil
		case store.IdempotencyConflict:
			return 0, nil, errReplayConflict
		case store.IdempotencyInterrupted:
			return 0, nil, errReplayInterrupted
		case store.IdempotencyPending:
			if !h.cfg.Clock().Before(deadline) {
				return 0, nil, errReplayPending
			}
			h.waiting.wait(rq.r.Context(), k, poll, deadline.Sub(h.cfg.Clock()))
			if rq.r.Context().Err() != nil {
				return 0, nil, errReplayPending
			}
			poll = min(poll*2, 100*time.Millisecond)
			continue
		}
		done := h.waiting.claim(k)
		defer done()
		abandon := func() error { return st.AbandonIdempotent(ctx, k, fp) }
		complete := func(status int, b []byte) error { return st.CompleteIdempotent(ctx, k, fp, status, b) }
		if leased != nil {
			c := store.IdempotencyClaim{Key: k, Fingerprint: fp, Epoch: rec.Epoch}
			rq.claim = &kernel.SpendClaim{Scope: k.Scope, Key: k.Key, Fingerprint: fp, Epoch: rec.Epoch}
			abandon = func() error { return leased.AbandonClaim(ctx, c) }
			complete = func(status int, b []byte) error { return leased.CompleteClaim(ctx, c, status, b) }
			stop := h.renew(ctx, leased, c, rq.id)
			defer stop()
		}
		res, err := run()
		if err != nil {
			if aerr := abandon(); aerr != nil {
				h.log.Error("idempotency store: abandon", "requestId", rq.id, "err", aerr)
			}
			return 0, nil, err
		}
		status := http.StatusOK
		if ws, ok := res.(withStatus); ok { // a message's 202
			status, res = ws.status, ws.body
		}
		b, err := json.Marshal(res)
		if err != nil {
			_ = abandon()
			return 0, nil, err
		}
		b = append(b, '\n')
		if err := complete(status, b); err != nil {
			// the call ran: its result is answered; a retry of the key may run it again
			h.log.Error("idempotency store: the response could not be kept", "requestId", rq.id, "err", err)
		}
		return status, rawJSON(b), nil
	}
}

// renew renews claim c's lease every third of the lease until the returned stop is
// called (the request ended). A renewal that finds the claim gone (taken over) stops: the
// request's spend is fenced by the claim, so it can no longer spend.
func (h *handler) renew(ctx context.Context, st store.LeasedIdempotency, c store.IdempotencyClaim, requestID string) (stop func()) {
	quit := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(h.cfg.IdempotencyLease / 3)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if err := st.RenewIdempotent(ctx, c, h.cfg.Clock()); err != nil {
				h.log.Error("idempotency store: the claim could not be renewed", "requestId", requestID, "err", err)
				if errors.Is(err, store.ErrNotFound) {
					return
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-ended
	}
}

// rawJSON is a response body already encoded.
type rawJSON []byte
