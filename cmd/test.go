package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/scenario"
)

// TestOptions are the options of `test`. The command runs scenario files in-process,
// each over a fresh host of its own (pkg/scenario): it uses no service of the run's.
//
// `test` does not run against --server (it refuses, exit 2, before reading a file): a
// scenario is a host of its own — its root copied fresh, its grant files, its host
// ceiling, its agents, a fresh state database, and per step an actor, owner, world and
// instant — and a remote serve has one root, one state, the grants of each token and
// its own clock, and decides the context from the token. Running the steps there would
// test the server's policy against expectations written for another, and write their
// calls into its audit trail and use counters: a careful user expects neither. (A
// scenario declaring none of that would still be pinned to instants the server does not
// keep, so no subset runs faithfully either.)
type TestOptions struct {
	IO    *IOStreams
	Env   func(string) string
	Clock func() time.Time

	Args     []string
	Run      string
	Verbose  bool
	JUnit    string
	Coverage bool
	Strict   bool
	Update   bool

	// Format (table or json), RunRE (--run compiled) and Ignored (the global flags
	// given that a scenario file's context replaces) are what RunE checked.
	Format  string
	RunRE   *regexp.Regexp
	Ignored []string
}

// testIgnoredFlags are the global flags `test` does not apply: each scenario file names
// its own root, grants and context.
var testIgnoredFlags = []string{"config", "root", "state", "grants", "as", "owner", "authority", "world", "purpose",
	"now", "namespaces", "trace", "call-id"}

// newTestCmd builds `test`; runF, when set, replaces the run.
func newTestCmd(f *Factory, runF func(*TestOptions) error) *cobra.Command {
	opts := &TestOptions{IO: f.IOStreams, Env: f.Env, Clock: f.Clock}
	c := &cobra.Command{
		Use:   "test [FILE|DIR|GLOB...]",
		Short: "Run declarative authorization tests (scenario files) for CI",
		Long: `Run scenario files: tests that call tools, list the catalogue, explain calls, toggle
namespaces, escalate and read the audit trail, and assert the outcome, the reason code,
the gate and cause, the deciding grant, why each other candidate was rejected, and the
audit records. Every test runs in-process on a fresh copy of its root and a fresh state
database; nothing touches your state database or your files. The global flags (--root,
--grants, --as, …) do not apply: each scenario file names its own.

With no argument, runs ./sharedos-tests/**/*.yaml. A DIR runs every .yaml, .yml and .json
file below it; a GLOB may use ** for any number of folders.

Output: failures only (expected and observed side by side, and the explanation of the
failed call), then "N passed, N failed" alone on the last line. -v shows passing steps
and skipped tests too; -o json prints one object per step (the closing line then goes
to stderr). --junit FILE writes a JUnit report; when GITHUB_ACTIONS=true, every failure
is also an ::error annotation and a summary table is appended to $GITHUB_STEP_SUMMARY.

Exit codes: 0 all passed, 1 a test failed (or --strict found an unused grant), 2 usage
error or an invalid scenario file.`,
		Example: `  sharedos test
  sharedos test examples/tests
  sharedos test 'policies/**/*.yaml' --run 'triage/.*finance' -v
  sharedos test --junit report.xml --coverage --strict`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Args = args
			opts.Format = FormatTable
			for _, v := range []string{f.Global.Output, f.Env("SHAREDOS_OUTPUT")} {
				if v == "" {
					continue
				}
				fm, err := parseFormat(v)
				if err != nil {
					return err
				}
				if fm == FormatYAML {
					return usageError("pass -o table (the default) or -o json", "sharedos test prints table or json, not yaml")
				}
				opts.Format = fm
				break
			}
			// A test run prints for a person (a CI log) unless -o json asks otherwise,
			// errors included: the terminal default (json when piped) would make every CI
			// log JSON.
			f.Global.Output = opts.Format
			if f.Global.RemoteOptions.Server != "" {
				return usageError("run 'sharedos test' without --server: scenario files test a policy on this machine",
					"test does not run against --server: each scenario runs over a fresh host of its own (its root, grant files, ceiling, state and instants)")
			}
			opts.Ignored = nil
			for _, name := range testIgnoredFlags {
				if f.flags == nil {
					break // no global flags (a command built alone)
				}
				if fl := f.flags.Lookup(name); fl != nil && fl.Changed {
					opts.Ignored = append(opts.Ignored, name)
				}
			}
			// The run's context comes from each scenario file: a global flag that names
			// one is not applied, and saying so beats a silent surprise.
			for _, name := range opts.Ignored {
				warn(opts.IO, "sharedos test ignores --%s: each scenario file names its own root, grants and context", name)
			}
			if opts.Run != "" {
				var err error
				if opts.RunRE, err = regexp.Compile(opts.Run); err != nil {
					return usageError("--run takes a Go regular expression matched against file/test", "invalid --run %q: %v", opts.Run, err)
				}
			}
			if opts.Strict {
				opts.Coverage = true
			}
			if runF != nil {
				return runF(opts)
			}
			return runTest(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.StringVar(&opts.Run, "run", "", "run only the tests whose `REGEX` matches file/test")
	fl.BoolVarP(&opts.Verbose, "verbose", "v", false, "show passing steps and skipped tests too")
	fl.StringVar(&opts.JUnit, "junit", "", "write a JUnit XML report to `FILE`")
	fl.BoolVar(&opts.Coverage, "coverage", false, "report grants no step matched and tools no step listed or called")
	fl.BoolVar(&opts.Strict, "strict", false, "with --coverage: a grant no step matched fails the run")
	fl.BoolVar(&opts.Update, "update", false, "write the observed values into the expect blocks of failing steps (golden mode)")
	return c
}

func runTest(ctx context.Context, opts *TestOptions) error {
	ios, format, re := opts.IO, opts.Format, opts.RunRE

	paths, err := scenario.Expand(opts.Args)
	if err != nil {
		hint := "name scenario files, directories or globs (default: ./sharedos-tests/**/*.yaml)"
		return usageError(hint, "%v", err)
	}
	rep := scenario.RunFiles(ctx, paths, scenario.Options{Run: re, Clock: opts.Clock, Getenv: opts.Env, Explain: opts.Verbose || format == FormatJSON})

	if opts.Update {
		changed, err := scenario.Update(rep)
		if err != nil {
			return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeInternalError, Message: "--update: " + err.Error(), Err: err}
		}
		for _, c := range changed {
			fmt.Fprintf(ios.ErrOut, "updated %s\n", c)
		}
	}
	if format == FormatJSON {
		if err := rep.WriteJSON(ios.Out); err != nil {
			return internalError(err)
		}
	} else {
		rep.WriteText(ios.Out, opts.Verbose)
	}
	unused := false
	if opts.Coverage {
		w := ios.Out
		if format == FormatJSON {
			w = ios.ErrOut
		}
		unused = rep.WriteCoverage(w)
	}
	if opts.JUnit != "" {
		if err := writeFileAtomic(opts.JUnit, rep.WriteJUnit); err != nil {
			return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeInternalError, Message: fmt.Sprintf("--junit %s: %v", opts.JUnit, err), Err: err}
		}
	}
	if opts.Env("GITHUB_ACTIONS") == "true" {
		rep.WriteGitHubAnnotations(ios.Out)
		if p := opts.Env("GITHUB_STEP_SUMMARY"); p != "" {
			if err := appendFile(p, rep.WriteGitHubSummary); err != nil {
				warn(ios, "GITHUB_STEP_SUMMARY %s: %v", p, err)
			}
		}
	}
	closing := ios.Out
	if format == FormatJSON {
		closing = ios.ErrOut
	}
	fmt.Fprintln(closing, rep.Summary())
	switch {
	case rep.Invalid > 0:
		return &resultExit{code: ExitUsage}
	case rep.Failed > 0:
		return &resultExit{code: ExitCommandFailed}
	case opts.Strict && unused:
		warn(ios, "--strict: a grant no step matched fails the run")
		return &resultExit{code: ExitCommandFailed}
	}
	return nil
}

// writeFileAtomic writes path through a temporary file in its folder (created when
// missing, as CI report folders often are) and a rename.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func appendFile(path string, write func(io.Writer)) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	write(fh)
	return fh.Close()
}
