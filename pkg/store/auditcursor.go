package store

import (
	"context"
	"errors"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// AuditCursor is implemented by a store that reads its audit trail a page at a time by
// keyset pagination on the sequence number (no offset: each page is one index range, so
// reading the whole trail costs one query per page and memory for one page).
type AuditCursor interface {
	// ListAuditAfter returns, oldest first, at most f.Limit (> 0) events that f selects
	// recorded after the one of sequence number f.AfterSeq, and the sequence number of
	// the last one returned (f.AfterSeq when none is). f.Oldest and f.ByInstant are
	// ignored.
	ListAuditAfter(ctx context.Context, f AuditFilter) ([]kernel.AuditEvent, int64, error)
}

// ListAfter is an AuditCursor's ListAuditAfter over a store's own listing: list reads
// what f selects in the order of recording (f.Oldest, not by instant) and returns the
// sequence number of the last event it read (0 when none). A page needs a limit.
func ListAfter(ctx context.Context, f AuditFilter, list func(context.Context, AuditFilter) ([]kernel.AuditEvent, int64, error)) ([]kernel.AuditEvent, int64, error) {
	if f.Limit <= 0 {
		return nil, 0, errors.New("list audit events: a page needs a limit")
	}
	f.ByInstant, f.Oldest = false, true
	evs, last, err := list(ctx, f)
	if last == 0 {
		last = f.AfterSeq
	}
	return evs, last, err
}

// DefaultAuditPage is the page size of EachAudit when it is given none.
const DefaultAuditPage = 1000

// EachAudit calls fn with each event f selects, oldest first (in the order of
// recording), at most f.Limit of them (0: all), and stops at fn's first error, which it
// returns. A store that implements AuditCursor is read page pages at a time (page ≤ 0:
// DefaultAuditPage), so memory stays bounded by a page whatever the size of the trail;
// an event recorded while it runs is passed when its page is read. Another store is read
// by one ListAudit.
func EachAudit(ctx context.Context, a Audit, f AuditFilter, page int, fn func(kernel.AuditEvent) error) error {
	f.ByInstant, f.Oldest = false, true
	c, ok := a.(AuditCursor)
	if !ok {
		evs, err := a.ListAudit(ctx, f)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
		}
		return nil
	}
	if page <= 0 {
		page = DefaultAuditPage
	}
	left := f.Limit
	for {
		p := f
		p.Limit = page
		if left > 0 && left < page {
			p.Limit = left
		}
		evs, last, err := c.ListAuditAfter(ctx, p)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if err := fn(ev); err != nil {
				return err
			}
		}
		if left > 0 {
			if left -= len(evs); left == 0 {
				return nil
			}
		}
		if len(evs) < p.Limit {
			return nil
		}
		f.AfterSeq = last
	}
}
