package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// The message routes (spec 80 §2 and §4, api.Messaging) over the request's backend:
//
//   - POST /v1/messages (any token): the direct send from the token's actor, {to,
//     payload}. 202 with {envelope, receipt} when the receipt is accepted; a send the
//     kernel or the mailbox refused (denied, failed: no grant, an unreachable recipient,
//     too many in flight) is a result, not a request error — 200 with the same body,
//     whose receipt carries the code (as a denied tool call is a 200 ToolResult). It
//     honours Idempotency-Key as POST /v1/tools/invoke does: the same key and request
//     (recipient, payload, context trace) replays the stored response and status without
//     minting, spending or delivering again.
//   - POST /v1/messages/{id}/wait (any token): the requester re-attaches to its request
//     (api.Messaging.WaitReply): the message once answered, or resolved failed when its
//     reply timeout passes first. Only the request's sender may (400 otherwise).
//   - the operator's inbox, GET /v1/admin/messages (?status=pending|answered|failed,
//     ?limit=N), GET /v1/admin/messages/{id} and POST /v1/admin/messages/{id}/reply
//     ({payload}): the inbox of the operator token's own actor — the person a `wait`
//     recipient names —, one message of its world, and its answer (the inbound checks
//     and the authorized send back happen below, in kernel.Turn.SendReply; a refused
//     answer is a 200 result as above).
var messageRoutes = []Route{
	{Method: http.MethodPost, Path: "/v1/messages", Body: true, handle: (*handler).sendMessage},
	{Method: http.MethodPost, Path: "/v1/messages/{id}/wait", handle: (*handler).waitMessage},
	{Method: http.MethodGet, Path: "/v1/admin/messages", Query: true, Operator: true, handle: (*handler).adminInbox},
	{Method: http.MethodGet, Path: "/v1/admin/messages/{id}", Operator: true, handle: (*handler).adminMessage},
	{Method: http.MethodPost, Path: "/v1/admin/messages/{id}/reply", Body: true, Operator: true, handle: (*handler).adminReply},
}

// messageStatuses are the statuses of the message routes beyond Route.Statuses' rule.
func messageStatuses(path string, out []int) []int {
	switch path {
	case "/v1/messages":
		// 202 accepted; 409 and 501 of the Idempotency-Key
		out = append(out, 202, 409, 501)
	}
	return out
}

// sendBody is the body of POST /v1/messages (strict).
type sendBody struct {
	To      kernel.Address  `json:"to"`
	Payload json.RawMessage `json:"payload"`
}

// decodeSend decodes a strict send body; to is the Address object or its kind:id
// shorthand ("human:alice"), so that a hand-written request needs no tagged union.
func decodeSend(body []byte) (sendBody, error) {
	var b sendBody
	if _, err := kernel.StrictFields(body, "to", "payload"); err != nil {
		return b, errInvalidRequest
	}
	var wire struct {
		To      json.RawMessage `json:"to"`
		Payload json.RawMessage `json:"payload"`
	}
	if kernel.CheckDuplicateKeys(body) != nil || json.Unmarshal(body, &wire) != nil || len(wire.Payload) == 0 || len(wire.To) == 0 {
		return b, errInvalidRequest
	}
	var short string
	var err error
	if json.Unmarshal(wire.To, &short) == nil {
		b.To, err = kernel.ParseAddress(short)
	} else {
		err = json.Unmarshal(wire.To, &b.To)
	}
	if err != nil || b.To.Validate() != nil {
		return b, errInvalidRequest
	}
	b.Payload = wire.Payload
	return b, nil
}

// messageFingerprint makes two sends with one Idempotency-Key the same request: the
// SHA-256 of the recipient, the canonical payload and the context trace.
func messageFingerprint(b sendBody, trace string) string {
	payload, err := kernel.CanonicalJSON(b.Payload)
	if err != nil {
		payload = b.Payload
	}
	doc, _ := json.Marshal(map[string]any{"to": b.To.String(), "payload": json.RawMessage(payload), "contextTrace": trace})
	sum := sha256.Sum256(doc)
	return "message:" + hex.EncodeToString(sum[:])
}

// sentStatus is 202 for an accepted or delivered receipt, else 200 (a refusal is a result).
func sentStatus(s api.MessageSent) int {
	if s.Receipt.Ok() {
		return http.StatusAccepted
	}
	return http.StatusOK
}

func sentDecision(s api.MessageSent) decision {
	d := decision{outcome: string(s.Receipt.Status), code: "ok"}
	if s.Receipt.Error != nil {
		d.code = string(s.Receipt.Error.Code)
	}
	return d
}

func (h *handler) sendMessage(rq *request) (int, any, error) {
	b, err := decodeSend(rq.body)
	if err != nil {
		return 0, nil, err
	}
	svc := rq.service("")
	run := func() (any, error) {
		sent, err := svc.SendMessage(rq.r.Context(), api.SendMessageRequest{To: b.To, Payload: b.Payload})
		if err != nil {
			return nil, err
		}
		rq.decision = sentDecision(sent)
		return withStatus{status: sentStatus(sent), body: sent}, nil
	}
	if key, ok := rq.r.Header[HeaderIdempotencyKey]; ok {
		return h.idempotent(rq.w, rq, strings.Join(key, ","), messageFingerprint(b, rq.r.Header.Get(HeaderTraceID)), run)
	}
	res, err := run()
	if err != nil {
		return 0, nil, err
	}
	ws := res.(withStatus)
	return ws.status, ws.body, nil
}

// withStatus is a result whose success status is not 200 (idempotent keeps it).
type withStatus struct {
	status int
	body   any
}

func messageID(rq *request) (string, error) {
	id, err := url.PathUnescape(rq.params["id"])
	if err != nil || id == "" {
		return "", &Error{Status: http.StatusNotFound, Code: "not_found", Message: "No such message."}
	}
	return id, nil
}

func (h *handler) waitMessage(rq *request) (int, any, error) {
	id, err := messageID(rq)
	if err != nil {
		return 0, nil, err
	}
	msg, err := rq.service("").WaitReply(rq.r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, msg, nil
}

func (h *handler) adminInbox(rq *request) (int, any, error) {
	q := rq.r.URL.Query()
	limit, err := intQuery(q, "limit")
	if err != nil {
		return 0, nil, err
	}
	status := q.Get("status")
	switch status {
	case "", "pending", "answered", "failed":
	default:
		return 0, nil, badQuery("status", "pending, answered or failed")
	}
	msgs, err := rq.service("").Inbox(rq.r.Context(), api.InboxQuery{Status: status, Limit: limit})
	if err != nil {
		return 0, nil, err
	}
	if msgs == nil {
		msgs = []api.Message{}
	}
	return http.StatusOK, msgs, nil
}

func (h *handler) adminMessage(rq *request) (int, any, error) {
	id, err := messageID(rq)
	if err != nil {
		return 0, nil, err
	}
	msg, err := rq.service("").ShowMessage(rq.r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, msg, nil
}

func (h *handler) adminReply(rq *request) (int, any, error) {
	id, err := messageID(rq)
	if err != nil {
		return 0, nil, err
	}
	var body struct {
		Payload json.RawMessage `json:"payload"`
	}
	if _, err := kernel.StrictFields(rq.body, "payload"); err != nil {
		return 0, nil, errInvalidRequest
	}
	if kernel.CheckDuplicateKeys(rq.body) != nil || json.Unmarshal(rq.body, &body) != nil || len(body.Payload) == 0 {
		return 0, nil, errInvalidRequest
	}
	sent, err := rq.service("").ReplyMessage(rq.r.Context(), api.ReplyMessageRequest{ID: id, Payload: body.Payload})
	if err != nil {
		return 0, nil, err
	}
	rq.decision = sentDecision(sent)
	return http.StatusOK, sent, nil
}
