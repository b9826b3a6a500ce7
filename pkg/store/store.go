// Package store holds the interfaces and shared types of what a host keeps between runs:
// the namespace selection of each (world, owner), the use counters of bounded grants
// (with the reservation protocol), the audit trail and its query, the recorded
// escalations, the snapshot index of the files plane, the content digests of large
// files and the gateway's catalogue cache. [State] is all of them together: what a host
// needs of a store. The embedded default is pkg/sqlitestore; pkg/store/storetest is the
// conformance suite every implementation passes.
//
// The interfaces compose the kernel's ports (kernel.UsageStore, kernel.AuditSink,
// kernel.ToolNamespaceSettingsStore, kernel.SnapshotIndex, kernel.FileDigestCache)
// rather than restating them. The kernel also looks for optional extensions of its ports
// by type assertion — kernel.ReservingUsageStore, kernel.AuditedSettingsStore,
// kernel.WriteAheadAuditSink, kernel.WriteAheadBatchAuditSink — and a State need not
// implement them: without them the kernel falls back to the durable base method (a
// consuming decision spends with TryConsume and then appends its record, a namespace
// change is stored and then recorded, every record is appended durably). storetest
// checks each one a store implements.
//
// State is a composition of one interface per kind of record, so that a kind added later
// (a mailbox of messages between principals, say) is one more interface beside these, one
// more member of State and one more row of the table below; nothing here assumes the
// list is closed.
//
// # Durability
//
// Every write is atomic and, once its method returns, visible to every reader of the
// store in every process. What differs is whether it has been forced to stable storage
// (what a power failure or an operating-system crash could otherwise take back); a crash
// of the process alone takes back nothing that was committed. The guarantee of each
// record, and the interface that carries it:
//
//	record                                         guarantee                 interface (method)
//	---------------------------------------------  ------------------------  ------------------------------------------------
//	a spent use with its authorization record      durable; both or neither  kernel.ReservingUsageStore (ReserveUse, Commit)
//	a spent use alone (no reserving store)         durable                   kernel.UsageStore (TryConsume)
//	a namespace selection with its record          durable; both or neither  kernel.AuditedSettingsStore (ApplyUpdateAudited)
//	a namespace selection alone                    durable                   kernel.ToolNamespaceSettingsStore (ApplyUpdate)
//	the record of an effect: a tool.invoked of a   durable                   kernel.AuditSink (Append)
//	  tool of any class but read, once it ran; a
//	  record the caller did not classify
//	the record of work that changed nothing:       write-ahead               kernel.WriteAheadAuditSink (AppendWriteAhead)
//	  authority.resolved, a listing, a decision
//	  that spent nothing, a refusal
//	a read-class call's decision and tool.invoked  write-ahead; all or none  kernel.WriteAheadBatchAuditSink
//	                                                                           (AppendWriteAheadBatch)
//	an escalation                                  durable                   Escalations (RecordEscalation)
//	an escalation's resolution with its record     durable; both or neither  Escalations (ResolveEscalation)
//	a message, with its id checked                 durable                   Mailbox (DeliverMessage)
//	a message's answer or failure                  durable                   Mailbox (ReplyMessage, FailMessage)
//	a snapshot's metadata                          durable                   kernel.SnapshotIndex (PutSnapshot)
//	a file's content digest                        cache                     kernel.FileDigestCache (StoreDigest)
//	an upstream server's tool list                 cache                     GatewayCatalogCache (PutGatewayCatalog)
//
// Durable: forced to stable storage before the method returns, so before the caller
// reports the effect. Write-ahead: committed and visible, not yet forced; it becomes
// durable with the store's next durable write (of any process) — only a power failure
// before that can lose it, and it never records a change. Cache: committed like a
// write-ahead record (not forced); losing it costs recomputing it (a re-hash, an
// upstream listing), never a decision. "Both or neither" holds across a crash at any
// point: a use is never spent without its record, nor recorded unspent; a resolution or
// a selection is never stored without its record.
//
// storetest checks what a test can observe of this: atomicity (an error writes nothing),
// the "both or neither" pairs, visibility, and — for a store that keeps its records
// across opens — that every committed record of every class is there when the store is
// opened again after its first instance was abandoned without Close (as a killed process
// abandons it), while a reservation neither committed nor released spent nothing. The
// forcing to stable storage itself (fsync) is each store's own test (sqlitestore's
// TestDurabilityClasses).
//
// # Errors
//
// Every method's error is an outage unless this package names it otherwise: the kernel
// refuses the operation (usage_store_unavailable, audit_unavailable, …) and nothing was
// written. Errors callers branch on wrap ErrNotFound, ErrAlreadyResolved and
// ErrDuplicate; a store that cannot be opened wraps ErrUnavailable. A closed store
// fails every method.
package store

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// ErrUnavailable is wrapped by every error of opening a store: it could not be created,
// read, reached or migrated.
var ErrUnavailable = errors.New("state database unavailable")

// ErrMigrationPending is wrapped by a store's Ready when its schema lacks migrations
// this build has (they are named in the message, which holds no secret: /readyz shows it).
var ErrMigrationPending = errors.New("migration pending")

// ErrDuplicate is wrapped when a record that must be unique already exists: a snapshot
// with the same (world, owner, root, path, id), or an audit event id already recorded with
// other content.
var ErrDuplicate = errors.New("already recorded")

// ErrNotFound is wrapped when the record asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrAlreadyResolved is wrapped when an escalation that was already resolved is resolved
// again (a resolution is never changed).
var ErrAlreadyResolved = errors.New("already resolved")

// State is everything a host keeps between runs: the composite a host opens once and
// hands to the kernel (as its Settings, Usage and Audit ports), to the files plane (as
// its snapshot index and digest cache) and to the gateway (as its catalogue cache). It
// is safe for concurrent use. Close releases it; every method fails after Close.
type State interface {
	Settings
	kernel.UsageStore
	Audit
	Escalations
	kernel.SnapshotIndex
	kernel.FileDigestCache
	GatewayCatalogCache
	io.Closer
}

// Settings keeps the enabled tool namespaces of each (world, owner). ApplyUpdate is the
// kernel's port; Selection reads what a host shows and starts a session with.
type Settings interface {
	kernel.ToolNamespaceSettingsStore
	// Selection returns the enabled namespaces of (world, owner), sorted. When nothing
	// is stored it returns the store's default selection and stored=false. An empty
	// world or an invalid owner is an error.
	Selection(ctx context.Context, world string, owner kernel.Address) (selection []string, stored bool, err error)
}

// Audit is the append-only audit trail: the kernel's sink (kernel.AuditSink) and the
// query over it. Events are never updated or deleted. Appending an event whose id is
// recorded with the same content is a no-op; with other content it is an error wrapping
// ErrDuplicate — except that a store may check the id of a write-ahead record only when
// it copies the record into the trail, and drop the clashing event there (sqlitestore's
// audit spools; the kernel mints every id, so only a caller choosing its own can clash):
// a recorded event is never replaced. An event that would not read back (no id, a field
// outside the contract) is refused and nothing is written.
type Audit interface {
	kernel.AuditSink
	// ListAudit returns the events f selects, the newest recorded first unless f says
	// otherwise. Every field of f is applied by the query, before its limit.
	ListAudit(ctx context.Context, f AuditFilter) ([]kernel.AuditEvent, error)
	// LastAuditSeq returns the sequence number of the newest event (0 when there is
	// none): a reader that keeps it reads only what was recorded since
	// (AuditFilter.AfterSeq).
	LastAuditSeq(ctx context.Context) (int64, error)
}

// AuditFilter selects audit events for ListAudit. Zero fields select everything.
type AuditFilter struct {
	// Types keeps events whose type is one of these (empty: any type).
	Types []string
	// Outcomes keeps events whose outcome is one of these (empty: any outcome).
	Outcomes []string
	// Tool keeps events of this tool ("" : any).
	Tool string
	// OperationID keeps events of this operation (call id) ("" : any).
	OperationID string
	// TraceID keeps events of this trace ("" : any).
	TraceID string
	// World keeps events of this namespaceId ("" : any).
	World string
	// Owner keeps events whose owner is this address (zero Address: any).
	Owner kernel.Address
	// Actor keeps events whose actor is this address (zero Address: any).
	Actor kernel.Address
	// SinceMillis keeps events whose at is at or after this Unix millisecond (0: no bound).
	SinceMillis int64
	// AfterSeq keeps events recorded after the one of this sequence number (0: from the
	// first); see LastAuditSeq.
	AfterSeq int64
	// WithSeq sets each returned event's Seq (kernel.AuditEvent.Seq): its sequence
	// number, the AfterSeq of a reader that resumes after it.
	WithSeq bool
	// Limit caps the number of events returned (0: no limit).
	Limit int
	// Oldest returns the oldest events first; by default the newest come first. Order is
	// the order of recording.
	Oldest bool
	// ByInstant orders by the events' instant (at) instead, the latest first, ties the
	// newest recorded first (Oldest is then ignored): what `audit list` shows, read
	// through the at index so that a limit stops the walk. An event whose at cannot be
	// parsed comes last.
	ByInstant bool
}

// Escalations keeps the escalations agents asked for and the reviewers' decisions on
// them. A decision grants nothing: authority still comes only from grant files.
type Escalations interface {
	// RecordEscalation appends one escalation; World and Owner are required. Its ID is
	// assigned by the store (rec.ID is ignored).
	RecordEscalation(ctx context.Context, rec EscalationRecord) error
	// GetEscalation returns escalation id, with its resolution if any. An unknown id is
	// an error wrapping ErrNotFound.
	GetEscalation(ctx context.Context, id int64) (EscalationRecord, error)
	// ListEscalations returns the escalations f selects, the most recently recorded
	// first. An unknown status is an error.
	ListEscalations(ctx context.Context, f EscalationFilter) ([]EscalationRecord, error)
	// ResolveEscalation records the decision on escalation id and appends ev (its audit
	// event) in one transaction: both or neither. An unknown id wraps ErrNotFound; an
	// escalation already resolved wraps ErrAlreadyResolved (a resolution is never
	// changed) and returns the record as it is. It returns the resolved record.
	ResolveEscalation(ctx context.Context, id int64, res EscalationResolution, ev kernel.AuditEvent) (EscalationRecord, error)
}

// EscalationRecord is one recorded escalation and the context it was asked in: the
// kernel's contract type (one definition, which pkg/api shows as it is). Its ID is set by
// the store's reads and ResolveEscalation, ignored by RecordEscalation.
type EscalationRecord = kernel.EscalationRecord

// EscalationResolution is a reviewer's decision on an escalation (the kernel's type). It
// grants nothing: authority still comes only from grant files.
type EscalationResolution = kernel.EscalationResolution

// Escalation statuses (the kernel's).
const (
	EscalationPending  = kernel.EscalationPending
	EscalationApproved = kernel.EscalationApproved
	EscalationDenied   = kernel.EscalationDenied
)

// EscalationFilter selects escalations for ListEscalations. Zero fields select everything.
type EscalationFilter struct {
	// World keeps escalations of this namespaceId ("" : any).
	World string
	// Owner keeps escalations of this owner (zero Address: any).
	Owner kernel.Address
	// Status keeps escalations of this status: pending, approved or denied ("": any).
	Status string
	// CallID keeps the escalation recorded for this escalate call's id ("": any).
	CallID string
	// Limit caps the number of records returned (0: no limit).
	Limit int
}

// GatewayCatalogCache keeps the upstream tool lists of configured MCP servers (spec 60
// §3) under a key the gateway derives (a server's config digest and the owner). It is a
// cache, never authority: a miss or an error only means listing the upstream server
// again.
type GatewayCatalogCache interface {
	// GetGatewayCatalog reads the list stored under key and when it was stored
	// (millisecond precision); ok=false when there is none.
	GetGatewayCatalog(ctx context.Context, key string) (data []byte, storedAt time.Time, ok bool, err error)
	// PutGatewayCatalog stores (or replaces) the list under key.
	PutGatewayCatalog(ctx context.Context, key string, data []byte, at time.Time) error
}
