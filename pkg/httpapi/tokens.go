package httpapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcphttp"
	"github.com/sharedos/sharedos/pkg/store"
)

// Tokens returns srv's authentication and drain as a Config's Authenticate and Enter:
// the tokens file of `mcp --listen` with its rules (the same principals — one host and
// session per token over one state database —, revocation and expiry on the next
// request, 401 with www-authenticate, 503 when the tokens file is unusable, drain).
func Tokens(srv *mcphttp.Server) (authenticate func(*http.Request) (Principal, error), enter func() (func(), bool)) {
	authenticate = func(r *http.Request) (Principal, error) {
		p, err := srv.Authenticate(r)
		var ae *mcphttp.AuthError
		if errors.As(err, &ae) {
			e := &Error{Status: ae.Status, Code: ae.Code, Message: ae.Message}
			if ae.Status == http.StatusUnauthorized {
				e.Message = "A valid bearer token is required."
				e.Header = http.Header{"Www-Authenticate": {`Bearer realm="sharedos"`}}
			}
			return nil, e
		}
		if err != nil {
			return nil, err
		}
		return tokenPrincipal{p}, nil
	}
	return authenticate, srv.Enter
}

// StoreRevisions is a Config's Revisions over srv's state database: its revisions when
// it keeps them (PostgreSQL), nil otherwise or before it is open.
func StoreRevisions(srv *mcphttp.Server) func() Revisions {
	return func() Revisions {
		r, _ := srv.State().(Revisions)
		return r
	}
}

type tokenPrincipal struct{ p *mcphttp.Principal }

func (t tokenPrincipal) ID() string { return t.p.ID }

func (t tokenPrincipal) Operator() bool { return t.p.Role == "operator" }

func (t tokenPrincipal) AccessContext(ctx context.Context) (kernel.AccessContext, error) {
	return t.p.Session.AccessContext(ctx)
}

func (t tokenPrincipal) Scope() string { return ContextScope(t.p.Host.Prepared.Context) }

// Idempotency is the principal's store when it keeps idempotency keys (nil otherwise:
// a request with a key is then refused 501).
func (t tokenPrincipal) Idempotency() store.Idempotency {
	st, _ := any(t.p.Host.Store).(store.Idempotency)
	return st
}

// Service is the request's backend over the token's session. A token's context is a
// long-lived session, not a turn (spec 50 §1): its requests record authority.resolved
// once per (token, context, authority hash) — again when the authority changes —, not
// once per request; each request's records still carry its own request id and trace
// (host.Session.RequestService).
func (t tokenPrincipal) Service(meta map[string]any, trace string) Backend {
	return t.p.Session.RequestService(meta, trace, "http", "http\x00"+t.p.ID)
}
