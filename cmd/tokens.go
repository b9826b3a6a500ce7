package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// TokensOptions are the options every `tokens` command shares. The tokens file is this
// machine's (it is what `mcp --listen` here reads): the commands use no service.
type TokensOptions struct {
	IO       *IOStreams
	Printer  func() (*printer, error)
	Settings func() (*Settings, error)
	Getwd    func() (string, error)
	Clock    func() time.Time

	Tokens string
}

func tokensOptions(f *Factory) TokensOptions {
	return TokensOptions{IO: f.IOStreams, Printer: f.standalonePrinter, Settings: f.Settings, Getwd: f.Getwd, Clock: f.Clock}
}

// tokensPath resolves the tokens file: --tokens, else SHAREDOS_TOKENS, else the config
// file's tokens key (spec 50 §3), made absolute.
//
// --tokens store: (host.StoreTokens) names the tokens of the PostgreSQL state database
// (--state postgres://…) instead of a file: "store:" is returned as is.
func (o *TokensOptions) tokensPath() (string, error) {
	if host.IsStoreTokens(o.Tokens) {
		return o.Tokens, nil
	}
	if o.Tokens != "" {
		return absPath(o.Tokens, o.Getwd)
	}
	s, err := o.Settings()
	if err != nil {
		return "", err
	}
	if s.Tokens == "" {
		return "", usageError("pass --tokens FILE (or set SHAREDOS_TOKENS, or the config key tokens)", "no tokens file")
	}
	return s.Tokens, nil
}

// state is the state database of --tokens store: (--state, SHAREDOS_STATE, the config
// key state): it must be a PostgreSQL DSN (host.CreateStoreToken refuses a file).
func (o *TokensOptions) state() (string, error) {
	s, err := o.Settings()
	if err != nil {
		return "", err
	}
	return s.State, nil
}

func newTokensCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "tokens",
		Short: "Create, list and revoke the bearer tokens of 'sharedos mcp --listen'",
		Long: `A tokens file maps bearer tokens to the contexts HTTP clients of 'sharedos mcp --listen' run
under: each entry has an id (shown in logs and audit records), the SHA-256 of the token
(the token itself is never stored), a context (actor, owner, authority, world, purpose), the
grant files (relative to the tokens file) and an optional expiry. Keep it outside --root,
like grant files. A revocation takes effect on the server's next request.`,
		Example: `  sharedos tokens create --id alice-laptop --as agent:helper --owner human:alice --grants grants/alice.yaml --tokens ~/.config/sharedos/tokens.yaml
  sharedos tokens list --tokens ~/.config/sharedos/tokens.yaml
  sharedos tokens revoke alice-laptop --tokens ~/.config/sharedos/tokens.yaml`,
	}
	c.AddCommand(newTokensCreateCmd(f, nil), newTokensListCmd(f, nil), newTokensRevokeCmd(f, nil))
	return c
}

// TokensCreateOptions are the options of `tokens create`.
type TokensCreateOptions struct {
	TokensOptions
	ID      string
	Expires string
	// Role is --role as given: agent (the default) or operator (the /v1/admin routes).
	Role string
	// Grants are the token's grant files as given (--grants).
	Grants []string

	// Entry is the token's id and context as RunE checked them (--id, --as, --owner,
	// --authority, --world, --purpose); its grant files, expiry and hash are the run's.
	Entry tokens.NewEntry
}

// newTokensCreateCmd builds `tokens create`; runF, when set, replaces the run.
func newTokensCreateCmd(f *Factory, runF func(*TokensCreateOptions) error) *cobra.Command {
	opts := &TokensCreateOptions{TokensOptions: tokensOptions(f)}
	c := &cobra.Command{
		Use:   "create --id ID [--as ADDR] [--owner …] [--authority …] [--world …] [--purpose …] [--grants FILE…] [--expires …] [--role agent|operator] --tokens FILE",
		Short: "Mint a token, append its hashed entry to the tokens file, and print the token once",
		Long: `Mint a 256-bit random token and append its entry (the SHA-256 of the token, never the
token) to the tokens file, creating the file (mode 0600) if needed; every other byte of the
file is kept. The token is printed once, on stdout: store it in the client's secret store or
an environment variable now, it cannot be shown again.

The context comes from --as, --owner, --authority, --world and --purpose of this
invocation, and for each one not given, from the context of the grant files --grants names
(as every other command takes it; files that disagree are an error); never from the
environment or the config file: a token's context is explicit. An actor is required;
--grants names the token's grant files (they must exist and parse; written relative to the
tokens file when they lie under its folder). --expires takes an RFC 3339 instant or a
duration from now (90m, 12h, 30d). --role operator mints a token that may also use serve's
/v1/admin routes (escalations, the audit, any context's namespaces); the default, agent,
may not.`,
		Example: `  sharedos tokens create --id alice-laptop --as agent:helper --owner human:alice --grants grants/alice.yaml --expires 30d --tokens tokens.yaml
  sharedos tokens create --id ops --as human:alice --role operator --tokens tokens.yaml
  sharedos tokens create --id ci --as service:ci --grants ci.yaml --tokens tokens.yaml -o json | jq -r .token`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			var err error
			if opts.Entry, err = tokenEntry(opts.ID, &f.Global); err != nil {
				return err
			}
			opts.Grants = f.Global.Grants
			switch opts.Role {
			case "", tokens.RoleAgent:
			case tokens.RoleOperator:
				opts.Entry.Role = tokens.RoleOperator
			default:
				return usageError("pass --role agent (the default) or --role operator", "invalid --role %q", opts.Role)
			}
			if opts.Expires != "" {
				if _, err := parseExpiry(opts.Expires, time.Time{}); err != nil {
					return expiresError(opts.Expires, err)
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return runTokensCreate(opts)
		},
	}
	c.Flags().StringVar(&opts.ID, "id", "", "the token's id (letters, digits, '.', '_', '-'), shown in logs and audit")
	c.Flags().StringVar(&opts.Expires, "expires", "", "expiry: an RFC 3339 instant or a duration from now (90m, 12h, 30d)")
	c.Flags().StringVar(&opts.Role, "role", "", "the token's role: agent (default) or operator (may also use the /v1/admin routes)")
	c.Flags().StringVar(&opts.Tokens, "tokens", "", "tokens file, or store: for the tokens of the PostgreSQL state database (--state postgres://…) (default SHAREDOS_TOKENS, else the config key tokens)")
	return c
}

// now is --now when it is set (and valid), else the clock: the instant a token's expiry is
// judged at.
func (o *TokensOptions) now() time.Time {
	if s, err := o.Settings(); err == nil && s.Now != "" {
		if ms, err := kernel.ParseTimestamp(s.Now); err == nil {
			return time.UnixMilli(ms).UTC()
		}
	}
	return o.Clock()
}

// expiresError is the refusal of an --expires that is neither an instant nor a duration.
func expiresError(v string, err error) error {
	return usageError("pass --expires as 2027-01-01T00:00:00Z, or a duration such as 12h or 30d", "invalid --expires %q: %v", v, err)
}

// tokenEntry checks the id and the context flags of a new token: --id, --as, --owner,
// --authority, --world and --purpose of this invocation (a token's context is explicit:
// never the environment's or the config file's). What a flag leaves out is taken from
// the grant files' context when the run reads them (contextFromGrantFiles).
func tokenEntry(id string, g *GlobalOptions) (tokens.NewEntry, error) {
	if !tokens.ValidID(id) {
		return tokens.NewEntry{}, usageError("pass --id ID: 1 to 128 letters, digits, '.', '_' and '-', starting with a letter or digit",
			"invalid or missing --id %q", id)
	}
	e := tokens.NewEntry{ID: id, Context: tokens.Context{World: g.World, Purpose: g.Purpose}}
	var err error
	if g.As != "" {
		if e.Context.Actor, err = parseAddressFlag("as", g.As); err != nil {
			return tokens.NewEntry{}, err
		}
	}
	for _, fl := range []struct {
		name, value string
		dst         **kernel.Address
	}{{"owner", g.Owner, &e.Context.Owner}, {"authority", g.Authority, &e.Context.Authority}} {
		if fl.value == "" {
			continue
		}
		a, err := parseAddressFlag(fl.name, fl.value)
		if err != nil {
			return tokens.NewEntry{}, err
		}
		*fl.dst = &a
	}
	if w := g.World; w != "" && (strings.TrimSpace(w) != w || len(w) > 256) {
		return tokens.NewEntry{}, usageError("a world is an identifier of 1 to 256 characters", "invalid --world %q", w)
	}
	if pu := g.Purpose; pu != "" && strings.TrimSpace(pu) != pu {
		return tokens.NewEntry{}, usageError("a purpose is 1 to 512 characters without surrounding white space", "invalid --purpose %q", pu)
	}
	return e, nil
}

// parseExpiry reads --expires: an RFC 3339 instant, or a duration (Go's, or Nd) from now.
func parseExpiry(s string, now time.Time) (time.Time, error) {
	if ms, err := kernel.ParseTimestamp(s); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(s, "d"); ok && plainDecimal(n) {
		d, err = time.ParseDuration(n + "h")
		d *= 24
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return time.Time{}, errors.New("not an RFC 3339 instant or a positive duration")
	}
	return now.Add(d).UTC().Truncate(time.Second), nil
}

func runTokensCreate(opts *TokensCreateOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	path, err := opts.tokensPath()
	if err != nil {
		return err
	}
	e := opts.Entry
	if err := contextFromGrantFiles(&e, opts.Grants, opts.Getwd); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	inStore := host.IsStoreTokens(path)
	for _, gf := range opts.Grants {
		abs, err := absPath(gf, opts.Getwd)
		if err != nil {
			return usageError("", "--grants %s: %v", gf, err)
		}
		if rel, err := filepath.Rel(dir, abs); err == nil && !strings.HasPrefix(rel, "..") && !inStore {
			abs = rel
		}
		e.Grants = append(e.Grants, abs)
	}
	if opts.Expires != "" {
		exp, err := parseExpiry(opts.Expires, opts.now())
		if err != nil {
			return expiresError(opts.Expires, err)
		}
		if !exp.After(opts.now()) {
			return usageError("pass an instant in the future", "--expires %s is not in the future", exp.Format(time.RFC3339))
		}
		e.ExpiresAt = exp
	}
	tok, err := tokens.New()
	if err != nil {
		return internalError(err)
	}
	e.SHA256 = tokens.Hash(tok)
	if inStore {
		state, err := opts.state()
		if err != nil {
			return err
		}
		if err := host.CreateStoreToken(context.Background(), state, e, opts.Clock()); err != nil {
			return hostError(err)
		}
	} else if err := tokens.Append(path, e); err != nil {
		return tokensError(err)
	}
	if p.format != FormatTable {
		out := map[string]any{"id": e.ID, "token": tok, "tokensFile": path}
		if !e.ExpiresAt.IsZero() {
			out["expiresAt"] = e.ExpiresAt.Format(time.RFC3339)
		}
		return p.data(out)
	}
	fmt.Fprintf(opts.IO.ErrOut, "token %s added to %s; it is shown once, below — store it now\n", e.ID, path)
	_, err = fmt.Fprintln(opts.IO.Out, tok)
	return err
}

// tokensError translates a tokens-file refusal: a missing or invalid file, a duplicate or
// unknown id is a usage error (exit 2); a file that cannot be read or written, exit 1.
func tokensError(err error) error {
	var te *tokens.Error
	if !errors.As(err, &te) {
		return internalError(err)
	}
	switch {
	case errors.Is(err, tokens.ErrDuplicate):
		return usageError("choose another --id, or 'sharedos tokens revoke "+te.Token+"' first", "%v", err)
	case errors.Is(err, tokens.ErrNotFound):
		return usageError("'sharedos tokens list' shows the ids", "%v", err)
	case errors.Is(err, os.ErrNotExist):
		return usageError("pass --tokens FILE naming an existing tokens file ('sharedos tokens create' makes one)", "%v", err)
	case te.Unwrap() != nil:
		// reading or writing the file failed
		return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeInternalError, Message: err.Error(),
			Hint: "check the tokens file's and its folder's permissions", Err: err}
	}
	return usageError("fix the tokens file (see 'sharedos tokens --help' for its format)", "%v", err)
}

// newTokensListCmd builds `tokens list`; runF, when set, replaces the run.
func newTokensListCmd(f *Factory, runF func(*TokensOptions) error) *cobra.Command {
	o := tokensOptions(f)
	opts := &o
	c := &cobra.Command{
		Use:   "list --tokens FILE",
		Short: "List the tokens of a tokens file (never the tokens; hashes shortened)",
		Long: `List the entries of the tokens file: id, context, grant files, expiry and status (active
or expired). The tokens themselves are not in the file; the hash is shown shortened to its
first 12 hex digits, which is enough to tell two entries apart.`,
		Example: `  sharedos tokens list --tokens tokens.yaml
  sharedos tokens list --tokens tokens.yaml -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runTokensList(opts)
		},
	}
	c.Flags().StringVar(&opts.Tokens, "tokens", "", "tokens file, or store: for the tokens of the PostgreSQL state database (--state postgres://…) (default SHAREDOS_TOKENS, else the config key tokens)")
	return c
}

type tokenRow struct {
	ID        string   `json:"id"`
	SHA256    string   `json:"sha256Prefix"`
	Actor     string   `json:"actor"`
	Owner     string   `json:"owner,omitempty"`
	Authority string   `json:"authority,omitempty"`
	World     string   `json:"world,omitempty"`
	Purpose   string   `json:"purpose,omitempty"`
	Grants    []string `json:"grants"`
	ExpiresAt string   `json:"expiresAt,omitempty"`
	Status    string   `json:"status"`
	// Role is the entry's role: agent or operator.
	Role string `json:"role"`
}

func runTokensList(opts *TokensOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	path, err := opts.tokensPath()
	if err != nil {
		return err
	}
	var file *tokens.File
	if host.IsStoreTokens(path) {
		state, err := opts.state()
		if err != nil {
			return err
		}
		if file, err = host.ListStoreTokens(context.Background(), state); err != nil {
			return hostError(err)
		}
	} else if file, err = tokens.Load(path); err != nil {
		return tokensError(err)
	}
	rows := make([]tokenRow, len(file.Entries))
	for i, e := range file.Entries {
		r := tokenRow{ID: e.ID, SHA256: e.SHA256[:12], Actor: e.Context.Actor.String(), World: e.Context.World,
			Purpose: e.Context.Purpose, Grants: e.Grants, Status: "active", Role: e.Role}
		if r.Grants == nil {
			r.Grants = []string{}
		}
		if e.Context.Owner != nil {
			r.Owner = e.Context.Owner.String()
		}
		if e.Context.Authority != nil {
			r.Authority = e.Context.Authority.String()
		}
		if !e.ExpiresAt.IsZero() {
			r.ExpiresAt = e.ExpiresAt.Format(time.RFC3339)
		}
		if e.Expired(opts.now()) {
			r.Status = "expired"
		}
		rows[i] = r
	}
	if p.format != FormatTable {
		return p.data(rows)
	}
	if len(rows) == 0 {
		return p.empty("no tokens in " + path + " ('sharedos tokens create' adds one)")
	}
	st := p.st()
	t := p.table("ID", "ROLE", "ACTOR", "OWNER", "WORLD", "EXPIRES", "STATUS", "SHA256", "GRANTS").flexible(8)
	for _, r := range rows {
		status := cell{text: r.Status, style: &st.ok}
		if r.Status == "expired" {
			status.style = &st.bad
		}
		exp := r.ExpiresAt
		if exp == "" {
			exp = "never"
		}
		t.rowCells(cell{text: r.ID}, cell{text: r.Role}, cell{text: r.Actor}, cell{text: r.Owner}, cell{text: r.World}, cell{text: exp}, status,
			cell{text: r.SHA256}, cell{text: strings.Join(r.Grants, ",")})
	}
	return t.render()
}

// TokensRevokeOptions are the options of `tokens revoke`.
type TokensRevokeOptions struct {
	TokensOptions
	ID string
}

// newTokensRevokeCmd builds `tokens revoke`; runF, when set, replaces the run.
func newTokensRevokeCmd(f *Factory, runF func(*TokensRevokeOptions) error) *cobra.Command {
	opts := &TokensRevokeOptions{TokensOptions: tokensOptions(f)}
	c := &cobra.Command{
		Use:   "revoke ID --tokens FILE",
		Short: "Remove a token from the tokens file (a running server refuses it on its next request)",
		Long: `Remove the entry with this id from the tokens file (its lines, comments on them included;
every other byte is kept). A running 'sharedos mcp --listen' re-reads the file on every
request: the token's next request is refused 401 and its open sessions are closed.`,
		Example: `  sharedos tokens revoke alice-laptop --tokens tokens.yaml`,
		Args:    exactArgs(1, "one token id (the ID column of 'sharedos tokens list')"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runTokensRevoke(opts)
		},
	}
	c.Flags().StringVar(&opts.Tokens, "tokens", "", "tokens file, or store: for the tokens of the PostgreSQL state database (--state postgres://…) (default SHAREDOS_TOKENS, else the config key tokens)")
	return c
}

func runTokensRevoke(opts *TokensRevokeOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	path, err := opts.tokensPath()
	if err != nil {
		return err
	}
	if host.IsStoreTokens(path) {
		state, err := opts.state()
		if err != nil {
			return err
		}
		if err := host.RevokeStoreToken(context.Background(), state, opts.ID); err != nil {
			return hostError(err)
		}
	} else if err := tokens.Remove(path, opts.ID); err != nil {
		return tokensError(err)
	}
	if p.format != FormatTable {
		return p.data(map[string]any{"id": opts.ID, "revoked": true, "tokensFile": path})
	}
	p.line("revoked %s (removed from %s)", opts.ID, path)
	return nil
}
