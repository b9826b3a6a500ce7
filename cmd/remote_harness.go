package cmd

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"github.com/sharedos/sharedos/internal/servetest"
	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// MainRemoteHarness is Main for the testscripts' remote mode (testscripts.TestScriptsRemote):
// every command that obtains its backend from the factory (service) runs against an
// in-process `sharedos serve` over loopback HTTP, as `--server URL` would, instead of the
// embedded host. The run's settings are resolved and prepared as embedded (so a broken
// configuration or grant file fails the same way, with the same warnings), then a server
// is started over the same root, state and configuration, with a tokens file of one token
// whose context and grant files are the run's; the command then talks to it through
// pkg/client and prints what it gets. The server stops when the run ends. Only the test
// binary calls it.
func MainRemoteHarness() int {
	env := os.Getenv
	f := &Factory{IOStreams: System(env), Env: env, ProcessEnv: os.Getenv, Environ: os.Environ, Getwd: os.Getwd, Clock: time.Now, harness: true}
	return runFactory(f, os.Args[1:], false)
}

// harnessService is service's backend in the remote harness (MainRemoteHarness).
func (f *Factory) harnessService(needs host.Needs) (api.Service, error) {
	s, err := f.Settings()
	if err != nil {
		return nil, err
	}
	prep, err := f.prepared(needs)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sharedos-harness-")
	if err != nil {
		return nil, internalError(err)
	}
	f.harnessStop = append(f.harnessStop, func() { _ = os.RemoveAll(dir) })
	tok, err := tokens.New()
	if err != nil {
		return nil, internalError(err)
	}
	c := prep.Context
	owner, authority := c.Owner, c.Authority
	e := tokens.NewEntry{ID: "harness", SHA256: tokens.Hash(tok), Role: tokens.RoleOperator,
		Context: tokens.Context{Actor: c.Actor, Owner: &owner, Authority: &authority, World: c.World, Purpose: c.Purpose}}
	for _, g := range s.Grants {
		abs, err := absPath(g, f.Getwd)
		if err != nil {
			return nil, internalError(err)
		}
		e.Grants = append(e.Grants, abs)
	}
	path := filepath.Join(dir, "tokens.yaml")
	if err := tokens.Append(path, e); err != nil {
		return nil, internalError(err)
	}
	base := s.Settings
	base.Trace, base.CallID = "", ""
	srv, err := servetest.Start(context.Background(), base, path, f.Clock, nil)
	if err != nil {
		return nil, internalError(err)
	}
	f.harnessStop = append(f.harnessStop, srv.Close)
	f.Global.RemoteOptions.Server = srv.URL
	f.Global.RemoteOptions.TokenEnv = "SHAREDOS_HARNESS_TOKEN"
	env := f.Env
	f.Env = func(k string) string {
		if k == "SHAREDOS_HARNESS_TOKEN" {
			return tok
		}
		return env(k)
	}
	svc, _, err := f.remote()
	return svc, err
}
