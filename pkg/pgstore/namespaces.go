package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// selectionLock is the first key of the transaction-level advisory lock (two int4 keys)
// an update of a (world, owner)'s selection takes, the second being a hash of the pair:
// the read-modify-write of concurrent updates (of any process) is serialized, the first
// one included, when there is no row to lock yet. Two pairs whose hashes collide only
// wait for each other.
const selectionLock = 0x73684f53

// ApplyUpdate applies a namespace patch to the selection of (actx.World, actx.Owner)
// in one transaction: it reads the stored selection (the default one when none is
// stored), applies kernel.ApplyToolNamespaceUpdate, stores the result and returns it. An
// invalid update or context is an error (matching kernel.ErrInvalidUpdate for a
// malformed patch) and stores nothing.
func (s *Store) ApplyUpdate(ctx context.Context, actx kernel.AccessContext, update kernel.ToolNamespaceUpdate) ([]string, error) {
	return s.ApplyUpdateAudited(ctx, actx, update, nil)
}

// ApplyUpdateAudited is ApplyUpdate that also appends the audit event event(selection)
// returns, in the same transaction: the selection is stored with its record or not at
// all (kernel.AuditedSettingsStore). A nil event appends nothing.
func (s *Store) ApplyUpdateAudited(ctx context.Context, actx kernel.AccessContext, update kernel.ToolNamespaceUpdate, event func([]string) kernel.AuditEvent) ([]string, error) {
	const op = "apply namespace update"
	if err := checkKey(actx.World, actx.Owner); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	// Validate a copy first (Validate trims in place) so that a bad patch never reaches
	// the database.
	probe := kernel.ToolNamespaceUpdate{
		Enable:  append([]string(nil), update.Enable...),
		Disable: append([]string(nil), update.Disable...),
	}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	owner := actx.Owner.String()
	var next []string
	var rev int64
	var invalid error // an error of the update itself, not of the database
	err := s.inTxDurable(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2 || ' ' || $3))", int32(selectionLock), actx.World, owner); err != nil {
			return fmt.Errorf("lock the selection: %w", err)
		}
		current, stored, err := readSelection(ctx, tx, actx.World, owner)
		if err != nil {
			return err
		}
		if !stored {
			current = s.defaults
		}
		if next, err = kernel.ApplyToolNamespaceUpdate(current, update); err != nil {
			invalid = err
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO namespace_settings (world, owner, selection) VALUES ($1, $2, $3)
			ON CONFLICT (world, owner) DO UPDATE SET selection = excluded.selection`, actx.World, owner, next); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		if event != nil {
			if err := appendEvents(ctx, tx, []kernel.AuditEvent{event(next)}); err != nil {
				return fmt.Errorf("audit: %w", err)
			}
		}
		rev, err = wroteRevision(ctx, tx)
		return err
	})
	if invalid != nil {
		return nil, fmt.Errorf("%s: %w", op, invalid)
	}
	if err != nil {
		return nil, fail(op, err)
	}
	s.rev.advance(rev)
	return append([]string{}, next...), nil
}

// Selection returns the enabled namespaces of (world, owner), sorted. When nothing is
// stored it returns the default selection and stored=false. It is read from the
// database, or from the selections read before while the revision says none changed
// since (selCache; only while the revision listener runs — a long-lived server —, and
// is current).
func (s *Store) Selection(ctx context.Context, world string, owner kernel.Address) (selection []string, stored bool, err error) {
	if err := checkKey(world, owner); err != nil {
		return nil, false, fmt.Errorf("read namespace selection: %w", err)
	}
	key := selKey{world, owner.String()}
	cache := s.rev.running.Load() && s.rev.current()
	rev := s.rev.cur.Load() // before the read: the entry holds every change up to it
	if cache {
		if e, ok := s.sel.get(key, rev); ok {
			return append([]string{}, e.sel...), e.stored, nil
		}
	}
	sel, stored, err := readSelection(ctx, s.pool, world, key.owner)
	if err != nil {
		return nil, false, fail("read namespace selection", err)
	}
	if !stored {
		sel = s.defaults
	}
	if cache {
		s.sel.put(key, selEntry{sel: append([]string{}, sel...), stored: stored, rev: rev})
	}
	return append([]string{}, sel...), stored, nil
}

func checkKey(world string, owner kernel.Address) error {
	if world == "" {
		return errors.New("world (namespaceId) is empty")
	}
	if err := owner.Validate(); err != nil {
		return fmt.Errorf("owner: %w", err)
	}
	return nil
}

func readSelection(ctx context.Context, q querier, world, owner string) ([]string, bool, error) {
	var sel []string
	err := q.QueryRow(ctx, `SELECT selection FROM namespace_settings WHERE world = $1 AND owner = $2`, world, owner).Scan(&sel)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read stored selection: %w", err)
	}
	if sel == nil {
		sel = []string{}
	}
	return sel, true, nil
}
