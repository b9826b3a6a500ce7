package pgstore

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
)

// WithoutListener keeps s's revision listener from starting (a test of what a store's
// own writes and reads do to its view, with no notification racing them).
func WithoutListener(s *Store) { s.rev.start.Do(func() {}) }

// SynchronousCommitIn reports the synchronous_commit setting inside a transaction of s
// begun as a write-ahead one (writeAhead) or a durable one.
func SynchronousCommitIn(ctx context.Context, s *Store, writeAhead bool) (string, error) {
	var v string
	err := s.tx1(ctx, writeAhead, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v)
	}, nil)
	return v, err
}

// HoldAuditGroups makes the next write-ahead append that writes a group wait until
// release is called (the appends that come meanwhile join the next group).
func HoldAuditGroups(s *Store) (release func()) {
	held := make(chan struct{})
	var once sync.Once
	s.group.mu.Lock()
	s.group.hook = func() { once.Do(func() { <-held }) }
	s.group.mu.Unlock()
	return sync.OnceFunc(func() { close(held) })
}

// AuditGroupWaiting is the number of appends in the group waiting to be written.
func AuditGroupWaiting(s *Store) int {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	if s.group.next == nil {
		return 0
	}
	return s.group.next.members
}

// SelectionCacheLive reports whether s's selections may be served from its cache now
// (its listener connected and current).
func SelectionCacheLive(s *Store) bool { return s.rev.running.Load() && s.rev.current() }

// AuditGroupWriting reports whether a group is being written.
func AuditGroupWriting(s *Store) bool {
	s.group.mu.Lock()
	defer s.group.mu.Unlock()
	return s.group.writing != nil
}

// HoldFlushes makes the next durability flush round of s wait until release is called;
// entered is closed when that round is about to flush (its waiters committed already).
func HoldFlushes(s *Store) (entered <-chan struct{}, release func()) {
	held, in := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.flush.mu.Lock()
	s.flush.hook = func() { once.Do(func() { close(in); <-held }) }
	s.flush.mu.Unlock()
	return in, sync.OnceFunc(func() { close(held) })
}

// FlushRounds is the number of durability flush rounds s ran.
func FlushRounds(s *Store) int64 {
	s.flush.mu.Lock()
	defer s.flush.mu.Unlock()
	return s.flush.rounds
}

// SynchronousCommitInDurableAudit reports the synchronous_commit setting inside a
// durable transaction of s that appends audit events.
func SynchronousCommitInDurableAudit(ctx context.Context, s *Store) (string, error) {
	var v string
	err := s.inTxDurable(ctx, func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v)
	})
	return v, err
}

// HoldUsageReads makes the next usage read round of s wait, before it is sent, until
// release is called (the reads that come meanwhile join the next round); each later round
// calls each (when non-nil) before it is sent.
func HoldUsageReads(s *Store, each func()) (release func()) {
	held := make(chan struct{})
	var once sync.Once
	s.usage.mu.Lock()
	s.usage.hook = func() {
		first := false
		once.Do(func() { first = true; <-held })
		if !first && each != nil {
			each()
		}
	}
	s.usage.mu.Unlock()
	return sync.OnceFunc(func() { close(held) })
}

// UsageReadsWaiting is the number of reads in the round waiting to be sent, and whether
// a round is in flight.
func UsageReadsWaiting(s *Store) (int, bool) {
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	n := 0
	if s.usage.next != nil {
		n = len(s.usage.next.keys)
	}
	return n, s.usage.reading != nil
}

// UsageReadRounds is the number of usage read rounds s sent.
func UsageReadRounds(s *Store) int64 {
	s.usage.mu.Lock()
	defer s.usage.mu.Unlock()
	return s.usage.rounds
}
