package cmd

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/pflag"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/store"
)

// Factory builds a run's dependencies lazily, each at most once: the settings, the
// output printer, the state database and the embedded kernel (the Host). A command asks
// only for what it needs, so `grants lint`, `version` and `completion` never open the
// state database and nothing reads the files tree at start-up.
type Factory struct {
	IOStreams *IOStreams
	Env       func(string) string
	// ProcessEnv and Environ are the process's environment, which the processes a run
	// starts (MCP servers, exec recipients) inherit (host.Settings.ProcessEnv and
	// Environ); nil: the library's default, the process's. Main's is the one read.
	ProcessEnv func(string) string
	Environ    func() []string
	Getwd      func() (string, error)
	Clock      func() time.Time
	Global     GlobalOptions

	flags       *pflag.FlagSet
	settings    *Settings
	settingsErr error
	settingsOK  bool
	store       store.State
	prep        *host.Prepared
	prepErr     error
	host        *Host
	svc         *host.Service

	// harness: the testscripts' remote mode (MainRemoteHarness); harnessStop undoes
	// what it started.
	harness     bool
	harnessStop []func()
	harnessSvc  api.Service
}

// service returns the run's backend (once; the first caller's needs decide, as for
// prepared): the embedded host as an api.Service, prepared when an operation first needs
// the tool table and opened when one first needs the state database; the audit and
// escalation listings open the state database alone (state).
func (f *Factory) service(needs host.Needs) (api.Service, error) {
	if f.svc != nil {
		return f.svc, nil
	}
	if svc, ok, err := f.remote(); ok { // --server: the remote backend (cmd/remote.go)
		return svc, err
	}
	if f.harness {
		if f.harnessSvc == nil {
			svc, err := f.harnessService(needs)
			if err != nil {
				return nil, err
			}
			f.harnessSvc = svc
		}
		return f.harnessSvc, nil
	}
	s, err := f.Settings()
	if err != nil {
		return nil, err
	}
	f.svc = host.NewService(host.Backend{
		Prepare: func() (*host.Prepared, error) { return f.prepared(needs) },
		Open: func(ctx context.Context) (*host.Host, error) {
			h, err := f.Host(ctx, needs)
			if err != nil {
				return nil, err
			}
			return h.Host, nil
		},
		State:     func(ctx context.Context) (host.ServiceState, error) { return f.state(ctx) },
		StatePath: s.State,
	})
	return f.svc, nil
}

// serviceError translates an api.Service failure into the CLI's error envelope (an
// error the factory built, such as a host that could not open, is already one).
func serviceError(err error) error {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return err
	}
	e := &ExitError{ExitCode: ExitCommandFailed, ErrorCode: ae.Code, Message: ae.Message, Hint: ae.Hint, Err: ae.Err}
	switch ae.Code {
	case api.CodeInvalidRequest, api.CodeNotFound:
		e.ExitCode, e.ErrorCode = ExitUsage, CodeInvalidRequest
	case api.CodeStateUnavailable, api.CodeToolCatalogUnavailable, api.CodeConfigInvalid:
	default:
		e.ErrorCode = CodeInternalError
	}
	return e
}

// Settings resolves the configuration once.
func (f *Factory) Settings() (*Settings, error) {
	if !f.settingsOK {
		f.settingsOK = true
		f.settings, f.settingsErr = resolveSettings(&f.Global, f.flags, f.Env, f.Getwd)
		if f.settings != nil {
			f.settings.ProcessEnv, f.settings.Environ = f.ProcessEnv, f.Environ
		}
	}
	return f.settings, f.settingsErr
}

// Format is the output format to use, even when the settings failed: an explicit
// valid --output, else SHAREDOS_OUTPUT or the config file's output, else the
// terminal default.
func (f *Factory) Format() string {
	if f.settingsOK && f.settingsErr == nil && f.settings.Output != "" {
		return f.settings.Output
	}
	for _, v := range []string{f.Global.Output, f.Env("SHAREDOS_OUTPUT")} {
		if fm, err := parseFormat(v); err == nil {
			return fm
		}
	}
	return defaultFormat(f.IOStreams)
}

// Printer returns a printer for the resolved format; it fails on a bad --output.
func (f *Factory) Printer() (*printer, error) {
	s, err := f.Settings()
	if err != nil {
		return nil, err
	}
	format := s.Output
	if format == "" {
		format = defaultFormat(f.IOStreams)
	}
	return newPrinter(f.IOStreams, format, f.IOStreams.ColorEnabled(f.Env)), nil
}

// standalonePrinter is Printer for commands that need no configuration (version,
// grants lint): a broken config file does not stop them, only a bad --output does.
func (f *Factory) standalonePrinter() (*printer, error) {
	if p, err := f.Printer(); err == nil {
		return p, nil
	}
	if f.Global.Output != "" {
		if _, err := parseFormat(f.Global.Output); err != nil {
			return nil, err
		}
	}
	return newPrinter(f.IOStreams, f.Format(), f.IOStreams.ColorEnabled(f.Env)), nil
}

// state opens the state database alone (once), after the trust-boundary check every
// command that opens it runs (host.CheckStateBoundary); a run whose host is open uses the
// host's.
func (f *Factory) state(ctx context.Context) (store.State, error) {
	if f.host != nil {
		return f.host.Store, nil
	}
	if f.store != nil {
		return f.store, nil
	}
	s, err := f.Settings()
	if err != nil {
		return nil, err
	}
	// The one trust-boundary check of every command that opens the state database (the
	// host's own, as Prepare runs it), before anything is created.
	if err := host.CheckStateBoundary(&s.Settings); err != nil {
		return nil, hostError(err)
	}
	st, err := host.OpenState(ctx, &s.Settings, host.WorkloadEach)
	if err != nil {
		return nil, hostError(err)
	}
	f.store = st
	return st, nil
}

// close releases everything the run opened: the host (planes and state database) and a
// state database opened without a host.
func (f *Factory) close() {
	for i := len(f.harnessStop) - 1; i >= 0; i-- {
		f.harnessStop[i]()
	}
	if f.prep != nil {
		_ = f.prep.Close()
	}
	if f.store != nil {
		_ = f.store.Close()
	}
}
