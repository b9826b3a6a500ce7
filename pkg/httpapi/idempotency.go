package httpapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	for {
		state, rec, err := st.BeginIdempotent(ctx, k, fp, h.cfg.Clock(), h.cfg.IdempotencyWindow)
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
		res, err := run()
		if err != nil {
			if aerr := st.AbandonIdempotent(ctx, k, fp); aerr != nil {
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
			_ = st.AbandonIdempotent(ctx, k, fp)
			return 0, nil, err
		}
		b = append(b, '\n')
		if err := st.CompleteIdempotent(ctx, k, fp, status, b); err != nil {
			// the call ran: its result is answered; a retry of the key may run it again
			h.log.Error("idempotency store: the response could not be kept", "requestId", rq.id, "err", err)
		}
		return status, rawJSON(b), nil
	}
}

// rawJSON is a response body already encoded.
type rawJSON []byte
