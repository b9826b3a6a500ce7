package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Host is the run's opened host (pkg/host: the kernel, its planes and stores, the turn)
// and the context of its one turn.
type Host struct {
	*host.Host
	Ctx kernel.AccessContext
}

// prepared checks every input of the run that needs asks for and builds the tool table
// (once; the first caller's needs decide), without touching the state database. The
// grant-file warning is printed here, once per run.
func (f *Factory) prepared(needs host.Needs) (*host.Prepared, error) {
	if f.prep != nil || f.prepErr != nil {
		return f.prep, f.prepErr
	}
	s, err := f.Settings()
	if err != nil {
		f.prepErr = err
		return nil, err
	}
	// A command is a short-lived process (nothing written to the database by a command
	// that changes nothing), unless it serves (mcp).
	if needs.Workload == host.WorkloadEach {
		needs.Workload = host.WorkloadCommand
	}
	f.prep, err = host.Prepare(&s.Settings, f.Clock, needs)
	if err != nil {
		f.prepErr = hostError(err)
		return nil, f.prepErr
	}
	if len(s.FrozenPaths)+len(s.FrozenActions)+len(s.ForbiddenNamespaces) > 0 {
		// a gateway server's tools are not registered until its list is read: its
		// namespaces and actions come from the configuration
		for _, w := range ceilingWarnings(s, append(f.prep.Definitions(), gatewayDefinitions(s.MCPServers)...)) {
			warn(f.IOStreams, "%s", w)
		}
	}
	if f.prep.Pinned {
		// --now only ever removes authority: a call the wall clock would refuse is refused.
		warn(f.IOStreams, "--now %s is in effect: decisions are taken at that instant and at the wall clock's (a pinned instant only removes authority); audit records keep both", s.Now)
	}
	if f.prep.GrantErr != nil {
		// Once per run, whatever the command: the grants it runs under were refused.
		warnGrants(f.IOStreams, f.prep.GrantErr)
	}
	if s.NamespacesSet {
		known := append(registeredNamespaces(), f.prep.GatewayNamespaces()...)
		for _, n := range s.Namespaces {
			if !slices.Contains(known, n) {
				msg := fmt.Sprintf("--namespaces names %q, which no registered tool uses", n)
				if c := closest(n, known); c != "" {
					msg += fmt.Sprintf("; did you mean %s?", c)
				}
				warn(f.IOStreams, "%s", msg)
			}
		}
	}
	if f.prep.Fallback {
		warn(f.IOStreams, "no actor or owner is named: acting as %s (pass --as, --owner or a grant file with a context)", host.LocalOperator)
	}
	return f.prep, nil
}

// Host opens the run's host (once): every input needs asks for checked first, then the
// state database.
func (f *Factory) Host(ctx context.Context, needs host.Needs) (*Host, error) {
	if f.host != nil {
		return f.host, nil
	}
	p, err := f.prepared(needs)
	if err != nil {
		return nil, err
	}
	h, err := p.Open(ctx)
	if err != nil {
		return nil, hostError(err)
	}
	f.host = &Host{Host: h, Ctx: h.Turn.Context()}
	return f.host, nil
}

// hostError translates a host failure into the CLI's error envelope.
func hostError(err error) error {
	var he *host.Error
	if !errors.As(err, &he) {
		return internalError(err)
	}
	e := &ExitError{ExitCode: ExitCommandFailed, Message: he.Message, Hint: he.Hint, Err: he.Err}
	switch he.Kind {
	case host.KindUsage:
		e.ExitCode, e.ErrorCode = ExitUsage, CodeInvalidRequest
	case host.KindConfig:
		e.ErrorCode = CodeConfigInvalid
	case host.KindState:
		e.ErrorCode = CodeStateUnavailable
	default:
		e.ErrorCode = CodeInternalError
	}
	return e
}

// warnGrants prints the one-line warning for refused grant files.
func warnGrants(ios *IOStreams, err error) {
	warn(ios, "grant files refused, authority is unavailable (every tool hidden, every call denied): %v", err)
}
