package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sharedos/sharedos/pkg/store"
)

// Read-your-writes across replicas (a PostgreSQL state database shared by several serve
// processes; pgstore's revision).
//
// Every /v1 response carries x-sharedos-revision: this replica's view of the revision of
// the shared state when it answered — at least the revision of any change the request
// itself made (a namespace selection, an escalation or its resolution, a token). A
// request may name a revision it has seen, in the header x-sharedos-revision or the
// query parameter atLeastRevision (both: the larger): the replica answers it only once
// its own view is at least that revision, so the request never sees state older than
// what the earlier response reflected, whichever replica gave it. The replica reads the
// database's revision at once and waits for it (its listener, re-reading the database)
// up to Config.RevisionWait (default DefaultRevisionWait); past that the request is
// refused 503 revision_unavailable (with retry-after: 1), having done nothing. A value
// that is not a non-negative integer is 400 invalid_request.
//
// On a store without a revision (the SQLite file of one machine, read at every call)
// there is no header, and a requested revision is ignored: every read is current.

// HeaderRevision is the header of the revision (request and response).
const HeaderRevision = "X-Sharedos-Revision"

// QueryRevision is the query parameter of a requested revision.
const QueryRevision = "atLeastRevision"

// DefaultRevisionWait bounds how long a request that names a revision waits for this
// replica to reach it.
const DefaultRevisionWait = 2 * time.Second

// Revisions is a store's view of the revision of the shared state (pgstore.Store).
type Revisions interface {
	// Revision is this process's view; it never blocks.
	Revision() int64
	// AwaitRevision waits until the view is at least n (refreshing it from the
	// database), or fails when ctx ends first.
	AwaitRevision(ctx context.Context, n int64) (int64, error)
}

// requestedRevision is the revision a request names (0: none), or a 400.
func requestedRevision(r *http.Request) (int64, error) {
	var want int64
	for _, v := range []struct{ name, value string }{
		{"header " + strings.ToLower(HeaderRevision), r.Header.Get(HeaderRevision)},
		{"query parameter " + QueryRevision, r.URL.Query().Get(QueryRevision)},
	} {
		if v.value == "" {
			continue
		}
		n, err := strconv.ParseInt(v.value, 10, 64)
		if err != nil || n < 0 {
			return 0, &Error{Status: http.StatusBadRequest, Code: "invalid_request",
				Message: "The " + v.name + " must be a revision: a non-negative integer, as a previous response's x-sharedos-revision."}
		}
		want = max(want, n)
	}
	return want, nil
}

// revisions is the store's revisions, when it has them.
func (h *handler) revisions() Revisions {
	if h.cfg.Revisions == nil {
		return nil
	}
	return h.cfg.Revisions()
}

// awaitRevision holds the request until this replica's view reaches the revision it
// names (a 400 for a bad value, a 503 when it cannot within the bound).
func (h *handler) awaitRevision(rq *request) error {
	want, err := requestedRevision(rq.r)
	if err != nil || want == 0 {
		return err
	}
	revs := h.revisions()
	if revs == nil || revs.Revision() >= want {
		return nil
	}
	ctx, cancel := context.WithTimeout(rq.r.Context(), h.cfg.RevisionWait)
	defer cancel()
	got, err := revs.AwaitRevision(ctx, want)
	if err == nil {
		return nil
	}
	if rq.r.Context().Err() != nil {
		return rq.r.Context().Err()
	}
	h.log.Warn("requested revision not reached", "requestId", rq.id, "want", want, "have", got, "err", err)
	if errors.Is(err, store.ErrUnavailable) {
		rq.storeFailed = true
		return &Error{Status: http.StatusServiceUnavailable, Code: "state_unavailable", Message: "The server's state is unavailable."}
	}
	return &Error{Status: http.StatusServiceUnavailable, Code: "revision_unavailable",
		Message: fmt.Sprintf("This replica has not reached revision %d (it is at %d).", want, got),
		Hint:    "retry the request (on this or another replica); the revision must come from a response of a server on the same state database",
		Header:  http.Header{"Retry-After": {"1"}}}
}
