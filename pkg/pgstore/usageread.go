package pgstore

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// # Grouped reads of grant usage
//
// Every decision on a bounded grant reads its count (GetUsage): `serve`'s POST
// /v1/authorize, which spends nothing, read it with one statement per request — one
// client/server round trip each, the largest part of such a request's cost on
// PostgreSQL (profiled under wrk: the read was ~18 % of serve's CPU, as much as the
// decision record's grouped write, and one backend wake-up per request). GetUsage
// therefore joins the concurrent reads of this process: while one read is in flight, the
// reads that come join the next, which the first of them sends (one statement for all
// their keys) once the one in flight is answered.
//
// Freshness is unchanged: a read joins only a round that has not been sent yet, so the
// statement that answers it begins after the read was called, and sees every write
// committed before that (a spend this process committed, another replica's); a read that
// runs alone is the one statement it always was. When a round of several fails (the
// context of the read that sends it cancelled, an outage), each read of it is tried
// again alone under its own context, so that each gets its own answer.

// usageReads joins concurrent GetUsage calls.
type usageReads struct {
	mu      sync.Mutex
	reading *usageRound // the round in flight, nil when none
	next    *usageRound // the round reads join meanwhile, nil when none
	rounds  int64       // rounds sent (tests)
	// hook, when set (tests), is called by the read that sends a round, before it sends
	// it.
	hook func()
}

type usageRound struct {
	keys []kernel.UsageKey
	uses []int64
	done chan struct{}
	err  error
}

// readUsageSQL reads the counts of one grant.
const readUsageSQL = `SELECT uses FROM grant_usage WHERE world = $1 AND issuer = $2 AND subject = $3 AND grant_id = $4`

// readUsagesSQL reads the counts of several grants: one row per key that has a counter,
// with the key's 1-based position.
const readUsagesSQL = `SELECT k.i, g.uses
	FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS k(world, issuer, subject, grant_id, i)
	JOIN grant_usage g ON g.world = k.world AND g.issuer = k.issuer AND g.subject = k.subject AND g.grant_id = k.grant_id`

// readUsageGrouped returns the count of key (checked already), read in a round shared with
// the concurrent reads of this process.
func (s *Store) readUsageGrouped(ctx context.Context, key kernel.UsageKey) (int64, error) {
	g := &s.usage
	g.mu.Lock()
	if b := g.next; b != nil { // join the round waiting for the one in flight
		i := len(b.keys)
		b.keys = append(b.keys, key)
		g.mu.Unlock()
		select {
		case <-b.done:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		if b.err != nil { // the round of several failed: this read alone
			return s.readUsage(ctx, key)
		}
		return b.uses[i], nil
	}
	b := &usageRound{keys: []kernel.UsageKey{key}, done: make(chan struct{})}
	if w := g.reading; w != nil {
		// wait for that round, then send this one with whatever joined it: no other
		// round is sent meanwhile (reads join g.next)
		g.next = b
		g.mu.Unlock()
		<-w.done
		g.mu.Lock()
		g.next = nil
	}
	g.reading = b
	g.rounds++
	hook := g.hook
	g.mu.Unlock()
	if hook != nil {
		hook()
	}
	if len(b.keys) == 1 {
		var u int64
		u, b.err = s.readUsage(ctx, key)
		b.uses = []int64{u}
	} else {
		b.uses, b.err = s.readUsages(ctx, b.keys)
	}
	g.mu.Lock()
	g.reading = nil
	g.mu.Unlock()
	close(b.done)
	if b.err != nil && len(b.keys) > 1 {
		return s.readUsage(ctx, key)
	}
	return b.uses[0], b.err
}

// readUsage reads the count of one grant (0 when none was spent).
func (s *Store) readUsage(ctx context.Context, key kernel.UsageKey) (int64, error) {
	var uses int64
	err := s.pool.QueryRow(ctx, readUsageSQL, key.World, key.Issuer.String(), key.Subject.String(), key.GrantID).Scan(&uses)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return uses, err
}

// readUsages reads the counts of keys, in their order, with one statement.
func (s *Store) readUsages(ctx context.Context, keys []kernel.UsageKey) ([]int64, error) {
	worlds := make([]string, len(keys))
	issuers := make([]string, len(keys))
	subjects := make([]string, len(keys))
	grants := make([]string, len(keys))
	for i, k := range keys {
		worlds[i], issuers[i], subjects[i], grants[i] = k.World, k.Issuer.String(), k.Subject.String(), k.GrantID
	}
	rows, err := s.pool.Query(ctx, readUsagesSQL, worlds, issuers, subjects, grants)
	if err != nil {
		return nil, err
	}
	uses := make([]int64, len(keys))
	var i, u int64
	_, err = pgx.ForEachRow(rows, []any{&i, &u}, func() error {
		if i < 1 || i > int64(len(keys)) {
			return errors.New("usage read: a row for no key")
		}
		uses[i-1] = u
		return nil
	})
	if err != nil {
		return nil, err
	}
	return uses, nil
}
