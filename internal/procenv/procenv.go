// Package procenv is the one place outside the command line's Main that reads the
// process's environment: the default of a library caller that names no environment of
// its own (a host built by a test or another program: host.Settings.Env and
// ProcessEnv, gateway.Options.Getenv, scenario.Options.Getenv left nil). The command
// line passes its factory's Env (and, for the processes it starts, the process's
// environment read in cmd's Main) everywhere, so nothing it runs reads the environment
// behind its back. architecture_test.go fails on a read of the environment anywhere else.
package procenv

import "os"

// Getenv is os.Getenv: the process's variable k ("" when unset).
func Getenv(k string) string { return os.Getenv(k) }

// Environ is os.Environ: the process's environment as KEY=VALUE strings.
func Environ() []string { return os.Environ() }
