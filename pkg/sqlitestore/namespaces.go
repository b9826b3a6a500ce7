package sqlitestore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// ApplyUpdate applies a namespace patch to the selection of (actx.World, actx.Owner)
// in one immediate transaction: it reads the stored selection (the default one when none
// is stored), applies kernel.ApplyToolNamespaceUpdate, stores the result and returns it.
// Which namespaces a host never enables is the kernel's policy (Config.ForbiddenNamespaces),
// not the store's. An invalid update or context is an error (matching
// kernel.ErrInvalidUpdate for a malformed patch) and stores nothing.
func (s *Store) ApplyUpdate(ctx context.Context, actx kernel.AccessContext, update kernel.ToolNamespaceUpdate) ([]string, error) {
	return s.ApplyUpdateAudited(ctx, actx, update, nil)
}

// ApplyUpdateAudited is ApplyUpdate that also appends the audit event event(selection)
// returns, in the same transaction: the selection is stored with its record or not at
// all (kernel.AuditedSettingsStore). A nil event appends nothing.
func (s *Store) ApplyUpdateAudited(ctx context.Context, actx kernel.AccessContext, update kernel.ToolNamespaceUpdate, event func([]string) kernel.AuditEvent) ([]string, error) {
	if err := checkKey(actx.World, actx.Owner); err != nil {
		return nil, fmt.Errorf("apply namespace update: %w", err)
	}
	// Validate a copy first (Validate trims in place) so that a bad patch never takes the
	// write lock.
	probe := kernel.ToolNamespaceUpdate{
		Enable:  append([]string(nil), update.Enable...),
		Disable: append([]string(nil), update.Disable...),
	}
	if err := probe.Validate(); err != nil {
		return nil, fmt.Errorf("apply namespace update: %w", err)
	}
	owner := actx.Owner.String()
	// The stamp is rewritten before and after (see selCache): a reader that read the old
	// selection after the first rewrite sees the second.
	stampSelection(s.path)
	defer stampSelection(s.path)
	defer s.sel.forget()
	tx, err := s.beginDurable(ctx)
	if err != nil {
		return nil, fmt.Errorf("apply namespace update: begin: %w", err)
	}
	defer tx.Rollback()
	current, stored, err := readSelection(ctx, tx, actx.World, owner)
	if err != nil {
		return nil, fmt.Errorf("apply namespace update: %w", err)
	}
	if !stored {
		current = s.defaults
	}
	next, err := kernel.ApplyToolNamespaceUpdate(current, update)
	if err != nil {
		return nil, fmt.Errorf("apply namespace update: %w", err)
	}
	text, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("apply namespace update: encode selection: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO namespace_settings (world, owner, selection) VALUES (?, ?, ?)
		ON CONFLICT (world, owner) DO UPDATE SET selection = excluded.selection`,
		actx.World, owner, string(text)); err != nil {
		return nil, fmt.Errorf("apply namespace update: write: %w", err)
	}
	if event != nil {
		if err := appendEvent(ctx, tx, nil, event(next)); err != nil {
			return nil, fmt.Errorf("apply namespace update: audit: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("apply namespace update: commit: %w", err)
	}
	return next, nil
}

// Selection returns the enabled namespaces of (world, owner), sorted. When nothing is
// stored it returns the default selection and stored=false.
func (s *Store) Selection(ctx context.Context, world string, owner kernel.Address) (selection []string, stored bool, err error) {
	if err := checkKey(world, owner); err != nil {
		return nil, false, fmt.Errorf("read namespace selection: %w", err)
	}
	// Read on every operation of a session (spec 50 §2): cached while the stamp file says
	// no update happened (selCache), else read with a statement prepared once.
	now := s.now()
	key := selKey{world, owner.String()}
	stamp, cacheable := statStamp(SelectionStampPath(s.path))
	if cacheable {
		if sel, stored, ok := s.sel.lookup(key, stamp, now); ok {
			return append([]string{}, sel...), stored, nil
		}
	}
	var q queryRower = s.db
	if st, err := s.prepared(ctx, selectSelectionSQL); err == nil {
		q = stmtRower{st}
	}
	sel, stored, err := readSelection(ctx, q, world, owner.String())
	if err != nil {
		return nil, false, fmt.Errorf("read namespace selection: %w", err)
	}
	if !stored {
		sel = s.defaults
	}
	if cacheable {
		s.sel.store(key, selEntry{sel: append([]string{}, sel...), stored: stored, stamp: stamp, readAt: now})
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

func readSelection(ctx context.Context, q queryRower, world, owner string) ([]string, bool, error) {
	var text string
	err := q.QueryRowContext(ctx, selectSelectionSQL, world, owner).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read stored selection: %w", err)
	}
	var sel []string
	if err := json.Unmarshal([]byte(text), &sel); err != nil {
		return nil, false, fmt.Errorf("decode stored selection: %w", err)
	}
	if sel == nil {
		sel = []string{}
	}
	return sel, true, nil
}

const selectSelectionSQL = `SELECT selection FROM namespace_settings WHERE world = ? AND owner = ?`

// stmtRower runs a prepared statement as a queryRower (its query text is the statement's).
type stmtRower struct{ st *sql.Stmt }

func (r stmtRower) QueryRowContext(ctx context.Context, _ string, args ...any) *sql.Row {
	return r.st.QueryRowContext(ctx, args...)
}
