package mcpserver

import (
	"context"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/pkg/api"
)

// escalationName is the latched escalation as the agent and the operator both name it:
// its number (the ID column of `sharedos escalations list`, what `escalations resolve`
// takes) when the resolver reported it, else the escalate call's id. id is the same value
// for the audit metadata: the number, or the call id when the number is unknown.
func (st *session) escalationName() (name string, id any) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.latchNum != 0 {
		return strconv.FormatInt(st.latchNum, 10), st.latchNum
	}
	return st.latch, st.latch
}

// ResolutionLine is the one line of content a model reads on the first call after an
// operator resolved its escalation, e.g. "the operator denied your request (escalation
// 3): no, use src/". The same resolution is in _meta (MetaEscalation) for programs; a
// model reads content, so the decision and the note are there too.
func ResolutionLine(e map[string]any) string {
	verb := "answered"
	switch e["status"] {
	case "approved":
		verb = "approved"
	case "denied":
		verb = "denied"
	}
	line := "the operator " + verb + " your request"
	switch id := e["id"].(type) {
	case int64:
		line += " (escalation " + strconv.FormatInt(id, 10) + ")"
	case string:
		line += " (escalation " + id + ")"
	}
	if note, _ := e["note"].(string); note != "" {
		return line + ": " + note
	}
	if verb == "approved" {
		return line + "; retry what you asked for"
	}
	return line + "; do not retry it"
}

// addResolutionLine appends ResolutionLine as a text content to a call's result when the
// call reports a resolution (extra holds MetaEscalation). It is appended, not prepended:
// the result's own text stays content[0], as every client that parses it expects.
func addResolutionLine(result mcp.Result, extra map[string]any) {
	e, ok := extra[MetaEscalation].(map[string]any)
	r, isCall := result.(*mcp.CallToolResult)
	if !ok || !isCall || r == nil {
		return
	}
	r.Content = append(r.Content, &mcp.TextContent{Text: ResolutionLine(e)})
}

// ServiceResolver resolves latched escalations through b's service: the escalation
// recorded for the escalate call's id in the context's world and owner
// (api.EscalationQuery.CallID; one query, nothing written), once its status is no longer
// pending (`escalations resolve` sets it).
func ServiceResolver(b Backend) EscalationResolver { return serviceResolver{b} }

type serviceResolver struct{ b Backend }

func (r serviceResolver) Resolution(ctx context.Context, id string) (Resolution, bool, error) {
	recs, err := r.b(nil).ListEscalations(ctx, api.EscalationQuery{CallID: id, Limit: 1})
	if err != nil || len(recs) == 0 {
		return Resolution{}, false, err
	}
	rec := recs[0]
	if rec.Escalation.Status == "" || rec.Escalation.Status == api.EscalationPending {
		return Resolution{ID: rec.ID}, false, nil
	}
	res := Resolution{ID: rec.ID, Status: rec.Escalation.Status}
	if rec.Resolution != nil {
		res.Note = rec.Resolution.Note
	}
	return res, true, nil
}
