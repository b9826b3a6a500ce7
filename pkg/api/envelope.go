package api

import (
	"context"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Envelope is the refusal of a call by a surface's own envelope, before any gate runs
// (spec 30 §3.7: the MCP server's escalation latch, which only removes authority). The
// kernel records it (tool.invoked, outcome denied, source envelope); nothing is planned,
// settled or executed and no grant is consulted. The embedded backend implements it
// beside Service.
type Envelope interface {
	// RefuseInEnvelope refuses req.Call with req.Code and req.Message; req.Metadata goes
	// to the record's metadata. The result is the denied call (it carries
	// kernel.AuditUnavailableKey when the record could not be written); an error is an
	// operation that could not be carried out, as Service's.
	RefuseInEnvelope(ctx context.Context, req EnvelopeRefusal) (kernel.ToolResult, error)
}

// EnvelopeRefusal is one call an envelope refuses: the call (its id and trace the
// service's when empty, as Invoke's), the code and message of the refusal, and what the
// record's metadata adds.
type EnvelopeRefusal struct {
	Call     InvokeRequest    `json:"call"`
	Code     kernel.ErrorCode `json:"code"`
	Message  string           `json:"message"`
	Metadata map[string]any   `json:"metadata,omitempty"`
}
