// Package cmd is the sharedos command line: a cobra command tree over an IOStreams value
// and a Factory of lazily built dependencies. Each command is an Options struct and a
// run function; exit codes live in exitcodes.go.
package cmd

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
)

// Main runs the command line with the process's arguments and streams and returns the
// exit code. The process is short-lived, so the garbage collector runs less often
// (unless GOGC says otherwise): with 1,000 grants a listing then needs no collection.
func Main() int {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	return MainWith(os.Args[1:], System(os.Getenv), os.Getenv)
}

// MainWith runs the command line with args over ios. env is consulted for the
// environment the CLI reads itself (terminal and colour conventions, XDG and HOME
// directories, SHAREDOS_CONFIG, SHAREDOS_GRANTS, SHAREDOS_OUTPUT); the other SHAREDOS_*
// variables are read from the process environment through viper. Everything the run
// opened is closed before it returns.
func MainWith(args []string, ios *IOStreams, env func(string) string) int {
	f := &Factory{IOStreams: ios, Env: env, Getwd: os.Getwd, Clock: time.Now}
	root := NewRootCmd(f)
	root.SetArgs(args)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := root.ExecuteContext(ctx)
	f.close()
	if err == nil {
		return ExitOK
	}
	var re *resultExit
	if errors.As(err, &re) {
		return re.code
	}
	var ee *ExitError
	if !errors.As(err, &ee) {
		// Cobra's own errors: unknown command or flag, wrong argument count.
		err = usageError("run 'sharedos --help' (or 'sharedos COMMAND --help') for usage", "%v", err)
	}
	printError(ios, f.Format(), err)
	return exitCodeOf(err)
}

// NewRootCmd builds the command tree over f.
func NewRootCmd(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "sharedos",
		Short: "A permission kernel for AI-agent tools",
		Long: `sharedos hosts the SharedOS permission kernel for local tools: it lists the tools an
agent may use under its grants, toggles tool namespaces, calls tools with every call
re-authorized, explains refusals, and records everything in an audit trail.

Exit codes: 0 success, 1 the command failed, 2 usage error, 3 denied, 4 failed,
5 escalated.`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(f.IOStreams.In)
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)
	f.Global.bind(root.PersistentFlags())
	f.flags = root.PersistentFlags()
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("run '"+c.CommandPath()+" --help' for usage", "%v", err)
	})
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{FormatTable, FormatJSON, FormatYAML}, cobra.ShellCompDirectiveNoFileComp))

	root.AddGroup(&cobra.Group{ID: "kernel", Title: "Tools and authority:"}, &cobra.Group{ID: "other", Title: "Other commands:"})
	for _, c := range []*cobra.Command{newToolsCmd(f), newExplainCmd(f), newNamespacesCmd(f), newGrantsCmd(f),
		newEscalationsCmd(f), newAuditCmd(f)} {
		c.GroupID = "kernel"
		root.AddCommand(c)
	}
	root.AddCommand(newMCPCmd(f)) // mcp: the MCP surface (cmd/mcp.go)
	for _, c := range []*cobra.Command{newCompletionCmd(f), newVersionCmd(f)} {
		c.GroupID = "other"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("other")
	return root
}

// noArgs is cobra.NoArgs with a usage-error message.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError("run '"+c.CommandPath()+" --help' for usage", "%s takes no arguments, got %q", c.CommandPath(), args[0])
	}
	return nil
}

// exactArgs is cobra.ExactArgs with a usage-error message naming what is expected.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageError("run '"+c.CommandPath()+" --help' for usage", "%s takes %s", c.CommandPath(), what)
		}
		return nil
	}
}

// minArgs requires at least n arguments.
func minArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < n {
			return usageError("run '"+c.CommandPath()+" --help' for usage", "%s takes %s", c.CommandPath(), what)
		}
		return nil
	}
}
