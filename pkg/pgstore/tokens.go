package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/sharedos/sharedos/pkg/store"
)

// Token is one token of `--tokens store:` (table tokens, migration 00003): what an entry
// of a tokens file holds (pkg/tokens), kept in the database that every replica shares, so
// that a token created or revoked through any of them is seen by all (the revision:
// every change of the table bumps it). Like the file, the table holds the SHA-256 of a
// token only, never the token. Addresses are kept as text ("" : unset); the host checks
// them as it checks a tokens file.
type Token struct {
	ID     string
	SHA256 string
	Actor  string
	// Owner and Authority are "" when the token leaves them to the grant files' context.
	Owner, Authority string
	World, Purpose   string
	// Grants are the token's grant files, absolute paths (the same on every replica).
	Grants []string
	// ExpiresMs is the expiry in Unix milliseconds (0: never); CreatedMs when it was
	// created.
	ExpiresMs, CreatedMs int64
	// Role is "agent" or "operator".
	Role string
}

const tokenColumns = `id, sha256, actor, coalesce(owner, ''), coalesce(authority, ''), world, purpose, grants,
	coalesce(expires_ms, 0), role, created_ms`

// Tokens returns every token, by id, and the revision they are as of (read in one
// snapshot), raising this process's view of the revision to it.
func (s *Store) Tokens(ctx context.Context) ([]Token, int64, error) {
	var out []Token
	var rev int64
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var err error
		if rev, err = readRevision(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "SELECT "+tokenColumns+" FROM tokens ORDER BY id")
		if err != nil {
			return err
		}
		out, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Token, error) {
			var t Token
			err := r.Scan(&t.ID, &t.SHA256, &t.Actor, &t.Owner, &t.Authority, &t.World, &t.Purpose, &t.Grants, &t.ExpiresMs, &t.Role, &t.CreatedMs)
			return t, err
		})
		return err
	})
	if err != nil {
		return nil, 0, fail("read tokens", err)
	}
	s.rev.advance(rev)
	return out, rev, nil
}

// CreateToken adds t. An id or a hash already there wraps store.ErrDuplicate and adds
// nothing.
func (s *Store) CreateToken(ctx context.Context, t Token) error {
	if t.Grants == nil {
		t.Grants = []string{}
	}
	if t.Role == "" {
		t.Role = "agent"
	}
	var rev int64
	err := s.inTx(ctx, false, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO tokens (id, sha256, actor, owner, authority, world, purpose, grants, expires_ms, role, created_ms)
			VALUES ($1, $2, $3, nullif($4, ''), nullif($5, ''), $6, $7, $8, nullif($9::bigint, 0), $10, $11)`,
			t.ID, t.SHA256, t.Actor, t.Owner, t.Authority, t.World, t.Purpose, t.Grants, t.ExpiresMs, t.Role, t.CreatedMs)
		if err != nil {
			return err
		}
		rev, err = wroteRevision(ctx, tx)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		what := "id " + t.ID
		if pe.ConstraintName == "tokens_sha256_key" {
			what = "hash"
		}
		return fmt.Errorf("create token %s: a token with this %s is there: %w", t.ID, what, store.ErrDuplicate)
	}
	if err != nil {
		return fail("create token "+t.ID, err)
	}
	s.rev.advance(rev)
	return nil
}

// RevokeToken removes the token id; an id that is not there wraps store.ErrNotFound.
func (s *Store) RevokeToken(ctx context.Context, id string) error {
	var rev int64
	var gone bool
	err := s.inTx(ctx, false, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, "DELETE FROM tokens WHERE id = $1", id)
		if err != nil {
			return err
		}
		gone = tag.RowsAffected() == 1
		rev, err = wroteRevision(ctx, tx)
		return err
	})
	if err != nil {
		return fail("revoke token "+id, err)
	}
	if !gone {
		return fmt.Errorf("revoke token %s: %w", id, store.ErrNotFound)
	}
	s.rev.advance(rev)
	return nil
}
