// Package cmd is the sharedos command line: a cobra command tree over an IOStreams value
// and a Factory of lazily built dependencies. Each command is an Options struct and a
// run function; exit codes live in exitcodes.go.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Main runs the command line with the process's arguments and streams and returns the
// exit code. The process is short-lived, so the garbage collector runs less often
// (unless GOGC or GOMEMLIMIT says otherwise, see tuneGC).
func Main() int {
	env := os.Getenv // the one read of the process environment: every other goes through env
	tune := env("GOGC") == "" && env("GOMEMLIMIT") == ""
	return mainWith(os.Args[1:], System(env), env, tune)
}

// gcPolicy sets the collector's pacing for the command args name: a server (mcp, which
// runs until its client goes, and serve) keeps GOGC=400 from the start; a command that
// only prints keeps the default; every other command, which builds what it needs and
// exits, is tuned by tuneGC.
func gcPolicy(root *cobra.Command, args []string) {
	c, _, err := root.Find(args)
	switch {
	case err == nil && isServer(c):
		debug.SetGCPercent(400)
	case runPrintsOnly(root, args):
		// allocates far below the collector's first goal: nothing to tune (tuneGC's
		// finalizer would start the runtime's finalizer goroutine)
	default:
		tuneGC(nil)
	}
}

// annotationPrintsOnly marks a command whose run only prints what it holds (no file,
// database, process or network is opened, nothing waits): runFactory installs no Ctrl-C
// handler for it.
const annotationPrintsOnly = "sharedos:prints-only"

// printsOnly reports whether c is marked annotationPrintsOnly.
func printsOnly(c *cobra.Command) bool { return c.Annotations[annotationPrintsOnly] == "true" }

// markPrintsOnly marks c annotationPrintsOnly and returns it.
func markPrintsOnly(c *cobra.Command) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[annotationPrintsOnly] = "true"
	return c
}

// runPrintsOnly reports whether the run of root with args is a command marked
// annotationPrintsOnly. The root itself is one only with no argument but flags (its
// help, --version; a global flag's value counts as an argument): with one, it is an
// unknown command's error or one of cobra's hidden completion requests (__complete),
// which may open the state database.
func runPrintsOnly(root *cobra.Command, args []string) bool {
	root.InitDefaultHelpCmd() // as Execute does first: 'help' is then found as itself
	c, rest, err := root.Find(args)
	return err == nil && printsOnly(c) &&
		(c != root || !slices.ContainsFunc(rest, func(a string) bool { return !strings.HasPrefix(a, "-") }))
}

// isServer reports whether c is the mcp or the serve command itself (mcp's subcommands,
// mcp config and the like, only print). A server tuned as a command would let its heap
// grow to firstGCHeap before its first collection: under load (issue 22) every request
// of its first seconds touched fresh pages (~2 page faults, ~16 µs each on this
// machine's VM, per authorize) and its peak RSS was ~140 MB instead of ~70 MB.
func isServer(c *cobra.Command) bool {
	return (c.Name() == "mcp" || c.Name() == "serve") && c.Parent() != nil && c.Parent().Parent() == nil
}

// firstGCHeap is how much memory the process may use before its first collection.
const firstGCHeap = 128 << 20

// tuneGC makes the first collection wait until the process uses firstGCHeap (a run
// builds what it needs and exits: with 10,000 grants, ~90 MB, nearly all of it live,
// which a collection at 16 MB would only mark), and from that first collection on paces
// collections at GOGC=400 without a limit, so that a far larger input is collected as
// usual. after, when set, is called once the pacing is switched (for tests).
func tuneGC(after func()) {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(firstGCHeap)
	sentinel := &struct{ _ [16]byte }{} // a heap object of its own, found unreachable by the first collection
	runtime.SetFinalizer(sentinel, func(*struct{ _ [16]byte }) {
		debug.SetGCPercent(400)
		debug.SetMemoryLimit(math.MaxInt64)
		if after != nil {
			after()
		}
	})
}

// MainWith runs the command line with args over ios. env is the environment the CLI
// reads — every variable it reads (terminal and colour conventions, XDG and HOME
// directories, every SHAREDOS_* variable, the user's git configuration's location, the
// token of 'mcp config --show-token'); the MCP servers it starts get the process's own.
// Everything the run opened is closed before it returns.
func MainWith(args []string, ios *IOStreams, env func(string) string) int {
	return mainWith(args, ios, env, false)
}

// mainWith is MainWith; tuneGC sets the collector's pacing for the command (Main only:
// tests keep the test binary's).
func mainWith(args []string, ios *IOStreams, env func(string) string, tuneGC bool) int {
	// the processes a run starts inherit the process's own environment, whatever env is
	return runFactory(&Factory{IOStreams: ios, Env: env, ProcessEnv: os.Getenv, Environ: os.Environ, Getwd: os.Getwd, Clock: time.Now}, args, tuneGC)
}

// notifyInterrupt is signal.NotifyContext for Ctrl-C (a variable for tests).
var notifyInterrupt = func(ctx context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(ctx, os.Interrupt)
}

// runFactory runs the command line with args over f.
func runFactory(f *Factory, args []string, tuneGC bool) int {
	root := newRootCmdFor(f, args)
	if tuneGC {
		gcPolicy(root, args)
	}
	root.SetArgs(args)
	// Ctrl-C cancels the run's context, so that a command prints what it had and exits
	// 130. A run that only prints (version, help, completion scripts, a group's help or
	// its usage error) has nothing to cancel: it installs no handler, which would start
	// the signal package's goroutine and, with it, often a thread (issue 28: a few dozen
	// page faults of every start); Ctrl-C ends it by the default action, as it does git.
	ctx, stop := context.Background(), context.CancelFunc(func() {})
	if !runPrintsOnly(root, args) {
		ctx, stop = notifyInterrupt(ctx)
	}
	defer stop()
	err := root.ExecuteContext(ctx)
	f.close()
	// Interrupted (Ctrl-C): the command printed what it had (a call's cancelled result),
	// and the exit status says it was interrupted, as a shell expects.
	interrupted := ctx.Err() != nil
	if err == nil || interrupted && errors.As(err, new(*resultExit)) {
		if interrupted {
			return ExitInterrupted
		}
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
	printError(f.IOStreams, f.Format(), err)
	if interrupted {
		return ExitInterrupted
	}
	return exitCodeOf(err)
}

// topCommand is a top-level command of the tree: its name and aliases, known without
// building it, its help group and its constructor.
type topCommand struct {
	name    string
	aliases []string
	group   string
	build   func(*Factory) *cobra.Command
}

// topCommands are the root's commands, in the order they are added. help (cobra's own,
// replaced by newHelpCmd) and the flags topic are added apart. TestTopCommandsNameTheirCommands
// checks that each name and alias is the built command's.
var topCommands = []topCommand{
	{"tools", nil, "kernel", newToolsCmd},
	{"explain", nil, "kernel", newExplainCmd},
	{"namespaces", []string{"ns"}, "kernel", newNamespacesCmd},
	{"grants", nil, "kernel", newGrantsCmd},
	{"escalations", nil, "kernel", newEscalationsCmd},
	{"audit", nil, "kernel", newAuditCmd},
	{"test", nil, "kernel", func(f *Factory) *cobra.Command { return newTestCmd(f, nil) }},
	{"gateway", nil, "kernel", newGatewayCmd},
	{"messages", nil, "kernel", newMessagesCmd},
	{"mcp", nil, "", func(f *Factory) *cobra.Command { return newMCPCmd(f, nil) }},           // the MCP surface (cmd/mcp.go)
	{"serve", nil, "kernel", func(f *Factory) *cobra.Command { return newServeCmd(f, nil) }}, // the HTTP /v1 surface (cmd/serve.go)
	{"tokens", nil, "kernel", newTokensCmd},                                                  // the bearer tokens of mcp --listen (cmd/tokens.go)
	{"store", nil, "other", newStoreCmd},
	{"completion", nil, "other", newCompletionCmd},
	{"version", nil, "other", newVersionCmd},
}

// NewRootCmd builds the whole command tree over f.
func NewRootCmd(f *Factory) *cobra.Command { return newRootCmd(f, nil) }

// newRootCmdFor builds the command tree a run with args needs: when args name one
// top-level command (after global flags), only that command's subtree — a process start
// then does not pay for building the ~100 commands and their flags it will not run
// (issue 28). Anything else builds the whole tree: no command (the root's help,
// --version), help, completion and the shell's __complete requests (they list every
// command), a name that is no command's (its error suggests the others), and arguments
// the scan does not understand (an unknown flag, '--'). The subtree built is the one the
// whole tree holds (TestLazyTreeMatchesTheWholeTree).
func newRootCmdFor(f *Factory, args []string) *cobra.Command {
	root := newRootCmd(f, func(root *cobra.Command) []topCommand {
		name, ok := commandName(root.PersistentFlags(), args)
		if !ok {
			return nil
		}
		for _, t := range topCommands {
			if (t.name == name || slices.Contains(t.aliases, name)) && t.name != "completion" {
				return []topCommand{t}
			}
		}
		return nil
	})
	return root
}

// commandName is the first argument that is not a global flag or a global flag's value;
// ok=false when there is none or an argument is not understood.
func commandName(flags *pflag.FlagSet, args []string) (string, bool) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		var fl *pflag.Flag
		switch {
		case a == "--" || a == "-":
			return "", false
		case strings.HasPrefix(a, "--"):
			name, _, attached := strings.Cut(a[2:], "=")
			if fl = flags.Lookup(name); fl == nil {
				return "", false
			}
			if !attached && fl.NoOptDefVal == "" {
				i++ // its value
			}
		case strings.HasPrefix(a, "-"):
			if fl = flags.ShorthandLookup(a[1:2]); fl == nil {
				return "", false
			}
			if len(a) == 2 && fl.NoOptDefVal == "" {
				i++ // its value
			} else if len(a) > 2 && fl.NoOptDefVal != "" {
				return "", false // combined boolean shorthands: let cobra read them
			}
		default:
			return a, true
		}
	}
	return "", false
}

// newRootCmd builds the root command over f with the top-level commands only returns
// (given the root with its global flags bound; nil: all of them, with help and the flags
// topic).
func newRootCmd(f *Factory, only func(root *cobra.Command) []topCommand) *cobra.Command {
	root := &cobra.Command{
		Use:   "sharedos",
		Short: "A permission kernel for AI-agent tools",
		Long: `sharedos hosts the SharedOS permission kernel for local tools: it lists the tools an
agent may use under its grants, toggles tool namespaces, calls tools with every call
re-authorized, explains refusals, and records everything in an audit trail.

Exit codes: 0 success, 1 the command failed, 2 usage error, 3 denied, 4 failed,
5 escalated, 130 interrupted (Ctrl-C).`,
		Example: `  sharedos --config examples/config.yaml tools list
  sharedos explain files.read -a path=notes/todo.md
  sharedos help flags`,
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(f.IOStreams.In)
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)
	f.Global.bind(root.PersistentFlags())
	f.flags = root.PersistentFlags()
	root.SetFlagErrorFunc(flagError)
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{FormatTable, FormatJSON, FormatYAML}, cobra.ShellCompDirectiveNoFileComp))

	root.AddGroup(&cobra.Group{ID: "kernel", Title: "Tools and authority:"}, &cobra.Group{ID: "other", Title: "Other commands:"})
	var some []topCommand
	if only != nil {
		some = only(root)
	}
	cmds := topCommands
	if some != nil {
		cmds = some
	}
	for _, t := range cmds {
		c := t.build(f)
		c.GroupID = t.group
		root.AddCommand(c)
	}
	root.SetHelpCommand(newHelpCmd())
	root.SetHelpCommandGroupID("other")
	if some == nil {
		root.AddCommand(newFlagsTopic(root))
		// --version, as gh and docker have it: the line `sharedos version` prints. Only
		// a run of the root itself (the whole tree) reads it: a one-command tree does not
		// parse the build information for it.
		v := buildVersion()
		root.Version = v.Version
		root.SetVersionTemplate(fmt.Sprintf("sharedos %s (commit %s, %s, %s)\n", v.Version, v.Commit, v.GoVersion, v.Platform))
	}
	root.SetUsageTemplate(usageTemplate)
	requireSubcommands(root)
	return root
}

// usageTemplate is cobra's usage template with one change, as gh does it: the global
// (persistent) flags are not listed on every command — one line names them and points
// to 'sharedos help flags'.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Available Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if not .AllChildCommandsHaveGroup}}

Additional Commands:{{range $cmds}}{{if (and (eq .GroupID "") (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{if .LocalNonPersistentFlags.HasAvailableFlags}}

Flags:
{{.LocalNonPersistentFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}

Global flags: --config --root --state --grants --as --owner --authority --world
  --purpose --now --namespaces --trace --call-id -o/--output (see 'sharedos help flags'){{if .HasHelpSubCommands}}

Additional help topics:{{range .Commands}}{{if .IsAdditionalHelpTopicCommand}}
  {{rpad .CommandPath .CommandPathPadding}} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// newHelpCmd is cobra's help command, except that an unknown topic is a usage error
// (exit 2, with suggestions) like an unknown command, not the root's help and exit 0.
func newHelpCmd() *cobra.Command {
	return markPrintsOnly(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help prints the help of any command or topic: sharedos help tools call, sharedos help flags.",
		Example: `  sharedos help tools call
  sharedos help flags`,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			cmd, _, err := c.Root().Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []string
			for _, sub := range cmd.Commands() {
				if sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
					out = append(out, sub.Name())
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil {
				return unknownCommand(c.Root(), args[0])
			}
			if len(rest) > 0 {
				return unknownCommand(cmd, rest[0])
			}
			cmd.InitDefaultHelpFlag()
			cmd.InitDefaultVersionFlag()
			return cmd.Help()
		},
	})
}

// newFlagsTopic is the help topic 'sharedos help flags': every global flag, its
// environment variable and default, once, instead of on every command's help.
func newFlagsTopic(root *cobra.Command) *cobra.Command {
	return markPrintsOnly(&cobra.Command{
		Use:   "flags",
		Short: "The global flags every command takes, their environment variables and defaults",
		Long: `Every command takes these flags. Each resolves as flag > environment SHAREDOS_<FLAG>
(dashes become underscores: --call-id is SHAREDOS_CALL_ID) > config file > default.
SHAREDOS_GRANTS takes a ':'-separated list.

` + root.PersistentFlags().FlagUsages() + `
Every command that opens the state database refuses to start when a grant file, the
config file or the state database (or its cache, snapshots, spool or stamp) lies inside
--root, after symbolic links. Only the commands that reach the files and repo planes
under --root (tools call, explain, mcp) need it to exist.`,
		Example: `  sharedos help flags
  SHAREDOS_ROOT=~/work sharedos --grants grants/reader.yaml tools list`,
	})
}

// requireSubcommands makes every command that only groups subcommands (no run function
// of its own) refuse an unknown subcommand: cobra would print the help and exit 0, so a
// typo in a script (`tools lst`) would pass silently. With no argument the group prints
// its help (exit 0, as gh and kubectl do); with an unknown one it is a usage error (exit
// 2) with cobra's own suggestions: unknown command "lst" for "sharedos tools"; did you
// mean list?
func requireSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		requireSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Run != nil || c.RunE != nil {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = 2
	markPrintsOnly(c) // its help, or a usage error
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		return unknownCommand(c, args[0])
	}
}

// unknownCommand is the usage error for an unknown subcommand name of c.
func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError("run '"+c.CommandPath()+" --help' for its commands", "%s", msg)
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
