package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// adminRoutes are the operator's routes (a token whose role is operator; any other is
// 403 permission_denied): the escalations (list, show, resolve), the audit trail (query,
// export as JSON lines, the recorded calls of `audit export`) and the namespace settings
// of any (world, owner).
var adminRoutes = []Route{
	{Method: http.MethodGet, Path: "/v1/admin/escalations", Query: true, Operator: true, handle: (*handler).adminEscalations},
	{Method: http.MethodGet, Path: "/v1/admin/escalations/{id}", Operator: true, handle: (*handler).adminEscalation},
	{Method: http.MethodPost, Path: "/v1/admin/escalations/{id}/resolve", Operator: true, Body: true, handle: (*handler).adminResolve},
	{Method: http.MethodGet, Path: "/v1/admin/audit", Query: true, Operator: true, handle: (*handler).adminAudit},
	{Method: http.MethodGet, Path: "/v1/admin/audit/export", Query: true, Operator: true, handle: (*handler).adminAuditExport},
	{Method: http.MethodGet, Path: "/v1/admin/audit/calls", Query: true, Operator: true, handle: (*handler).adminAuditCalls},
	{Method: http.MethodGet, Path: "/v1/admin/namespaces", Operator: true, Query: true, handle: (*handler).adminNamespaces},
	{Method: http.MethodPut, Path: "/v1/admin/namespaces", Operator: true, Query: true, Body: true, handle: (*handler).adminUpdateNamespaces},
}

// badQuery is a query parameter that is not what its route takes.
func badQuery(name, want string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: "Query parameter " + name + " must be " + want + "."}
}

// intQuery is a non-negative integer parameter (0 when absent).
func intQuery(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badQuery(name, "a non-negative integer")
	}
	return n, nil
}

func (h *handler) escalationQuery(rq *request) (api.EscalationQuery, error) {
	q := rq.r.URL.Query()
	limit, err := intQuery(q, "limit")
	if err != nil {
		return api.EscalationQuery{}, err
	}
	status := q.Get("status")
	switch status {
	case "", api.EscalationPending, api.EscalationApproved, api.EscalationDenied:
	default:
		return api.EscalationQuery{}, badQuery("status", "pending, approved or denied")
	}
	// an operator sees every world and owner unless all=false narrows to its context's
	all := true
	if q.Get("all") != "" {
		if all, err = boolQuery(rq.r, "all"); err != nil {
			return api.EscalationQuery{}, err
		}
	}
	return api.EscalationQuery{All: all, Status: status, Limit: limit, CallID: q.Get("callId")}, nil
}

func (h *handler) adminEscalations(rq *request) (int, any, error) {
	q, err := h.escalationQuery(rq)
	if err != nil {
		return 0, nil, err
	}
	recs, err := rq.service("").ListEscalations(rq.r.Context(), q)
	if err != nil {
		return 0, nil, err
	}
	if recs == nil {
		recs = []api.EscalationRecord{}
	}
	return http.StatusOK, recs, nil
}

func escalationID(rq *request) (int64, error) {
	id, err := strconv.ParseInt(rq.params["id"], 10, 64)
	if err != nil || id < 1 {
		return 0, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "No such escalation."}
	}
	return id, nil
}

func (h *handler) adminEscalation(rq *request) (int, any, error) {
	id, err := escalationID(rq)
	if err != nil {
		return 0, nil, err
	}
	recs, err := rq.service("").ListEscalations(rq.r.Context(), api.EscalationQuery{All: true})
	if err != nil {
		return 0, nil, err
	}
	for _, r := range recs {
		if r.ID == id {
			return http.StatusOK, r, nil
		}
	}
	return 0, nil, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "No such escalation."}
}

func (h *handler) adminResolve(rq *request) (int, any, error) {
	id, err := escalationID(rq)
	if err != nil {
		return 0, nil, err
	}
	var body struct {
		Status string `json:"status"`
		Note   string `json:"note,omitempty"`
	}
	if _, err := kernel.StrictFields(rq.body, "status", "note"); err != nil {
		return 0, nil, errInvalidRequest
	}
	if json.Unmarshal(rq.body, &body) != nil || (body.Status != api.EscalationApproved && body.Status != api.EscalationDenied) {
		return 0, nil, errInvalidRequest
	}
	res, err := rq.service("").ResolveEscalation(rq.r.Context(), api.ResolveRequest{ID: id, Status: body.Status, Note: body.Note})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, res, nil
}

// auditQuery reads the filters of `audit list` from the query: type, outcome (repeated
// or comma-separated), tool, operation, traceId, world, owner, actor, since (RFC 3339 or
// Unix milliseconds), limit, oldest, and the cursor afterSeq (api.AuditQuery.AfterSeq).
func auditQuery(rq *request) (api.AuditQuery, error) {
	q := rq.r.URL.Query()
	list := func(name string) []string {
		var out []string
		for _, v := range q[name] {
			for _, x := range strings.Split(v, ",") {
				if x = strings.TrimSpace(x); x != "" {
					out = append(out, x)
				}
			}
		}
		return out
	}
	aq := api.AuditQuery{Types: list("type"), Outcomes: list("outcome"), Tool: q.Get("tool"), Operation: q.Get("operation"),
		TraceID: q.Get("traceId"), World: q.Get("world")}
	for _, a := range []struct {
		name string
		into *kernel.Address
	}{{"owner", &aq.Owner}, {"actor", &aq.Actor}} {
		if v := q.Get(a.name); v != "" {
			addr, err := kernel.ParseAddress(v)
			if err != nil {
				return aq, badQuery(a.name, "an address such as human:alice")
			}
			*a.into = addr
		}
	}
	if v := q.Get("since"); v != "" {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil && ms >= 0 {
			aq.SinceMillis = ms
		} else if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			aq.SinceMillis = t.UnixMilli()
		} else {
			return aq, badQuery("since", "an RFC 3339 instant or Unix milliseconds")
		}
	}
	var err error
	if aq.Limit, err = intQuery(q, "limit"); err != nil {
		return aq, err
	}
	if aq.Oldest, err = boolQuery(rq.r, "oldest"); err != nil {
		return aq, err
	}
	if v := q.Get("afterSeq"); v != "" {
		seq, err := strconv.ParseInt(v, 10, 64)
		if err != nil || seq < 0 {
			return aq, badQuery("afterSeq", "a non-negative integer")
		}
		aq.AfterSeq = &seq
	}
	return aq, nil
}

func (h *handler) adminAudit(rq *request) (int, any, error) {
	aq, err := auditQuery(rq)
	if err != nil {
		return 0, nil, err
	}
	evs, err := rq.service("").QueryAudit(rq.r.Context(), aq)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, evs, nil
}

// auditStreamer is a backend that reads the trail a page at a time (host.Service).
type auditStreamer interface {
	EachAudit(ctx context.Context, q api.AuditQuery, page int, fn func(kernel.AuditEvent) error) error
}

// adminAuditExport streams the events the query selects as JSON lines, oldest first
// (application/x-ndjson: the one route whose body is not one JSON document). A client
// resumes with since = the last line's recordedAt. A backend that reads by pages
// (auditStreamer) is read Config.AuditPage events at a time, so the route holds one page
// whatever the size of the trail; the status is sent with the first page, so a failure
// after it ends the stream early (logged) instead of changing the status.
func (h *handler) adminAuditExport(rq *request) (int, any, error) {
	aq, err := auditQuery(rq)
	if err != nil {
		return 0, nil, err
	}
	aq.Oldest = true
	w := rq.w
	enc := json.NewEncoder(w)
	fl, _ := w.(http.Flusher)
	started := false
	start := func() {
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/x-ndjson")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
		}
	}
	n := 0
	write := func(ev kernel.AuditEvent) error {
		start()
		if err := enc.Encode(&ev); err != nil {
			return errClientGone
		}
		if n++; fl != nil && n%256 == 0 {
			fl.Flush()
		}
		return nil
	}
	svc := rq.service("")
	if s, ok := svc.(auditStreamer); ok {
		err = s.EachAudit(rq.r.Context(), aq, h.cfg.AuditPage, write)
	} else {
		var evs []kernel.AuditEvent
		if evs, err = svc.QueryAudit(rq.r.Context(), aq); err == nil {
			for _, ev := range evs {
				if err = write(ev); err != nil {
					break
				}
			}
		}
	}
	switch {
	case err == nil || errors.Is(err, errClientGone):
	case !started:
		return 0, nil, err
	default:
		h.log.Error("audit export: the stream ended early", "requestId", rq.id, "err", err)
	}
	start()
	return 0, streamed{}, nil
}

// errClientGone ends an export whose client went away.
var errClientGone = errors.New("the client went away")

// streamed is the body of a handler that wrote its response itself.
type streamed struct{}

func (h *handler) adminAuditCalls(rq *request) (int, any, error) {
	aq, err := auditQuery(rq)
	if err != nil {
		return 0, nil, err
	}
	calls, err := rq.service("").ExportAudit(rq.r.Context(), aq)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, calls, nil
}

// pair is the (world, owner) of the namespace routes: both required.
func pair(rq *request) (string, kernel.Address, error) {
	q := rq.r.URL.Query()
	world := q.Get("world")
	owner, err := kernel.ParseAddress(q.Get("owner"))
	if world == "" || err != nil {
		return "", kernel.Address{}, badQuery("world and owner", "given (world=default&owner=human:alice)")
	}
	return world, owner, nil
}

func (h *handler) adminNamespaces(rq *request) (int, any, error) {
	world, owner, err := pair(rq)
	if err != nil {
		return 0, nil, err
	}
	n, err := rq.service("").NamespacesOf(rq.r.Context(), world, owner)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, n, nil
}

func (h *handler) adminUpdateNamespaces(rq *request) (int, any, error) {
	world, owner, err := pair(rq)
	if err != nil {
		return 0, nil, err
	}
	u, err := kernel.ParseToolNamespaceUpdate(rq.body)
	if err != nil {
		return 0, nil, errInvalidRequest
	}
	n, err := rq.service("").UpdateNamespacesOf(rq.r.Context(), world, owner, u)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, n, nil
}
