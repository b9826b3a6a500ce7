package cmd

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func testFactory() *Factory {
	ios, _, _, _ := Test()
	return &Factory{IOStreams: ios, Env: func(string) string { return "" }}
}

// TestTopCommandsNameTheirCommands: the names and aliases the lazy tree looks commands up
// by are the built commands' own (a wrong name would build the wrong subtree).
func TestTopCommandsNameTheirCommands(t *testing.T) {
	t.Parallel()
	f := testFactory()
	for _, tc := range topCommands {
		c := tc.build(f)
		if c.Name() != tc.name || !slices.Equal(c.Aliases, tc.aliases) {
			t.Errorf("topCommands says %q %q; the command is %q %q", tc.name, tc.aliases, c.Name(), c.Aliases)
		}
	}
}

// TestCommandNameSkipsGlobalFlags: the scan finds the command after global flags and
// their values, and gives up on what it cannot read.
func TestCommandNameSkipsGlobalFlags(t *testing.T) {
	t.Parallel()
	flags := NewRootCmd(testFactory()).PersistentFlags()
	flags.BoolP("insecure", "k", false, "a boolean global flag (there is none today)")
	for _, tc := range []struct {
		args []string
		name string
		ok   bool
	}{
		{[]string{"version"}, "version", true},
		{[]string{"--root", "tools", "ns", "list"}, "ns", true},
		{[]string{"--root=x", "-o", "json", "--grants", "a.yaml", "--grants=b.yaml", "tools", "list"}, "tools", true},
		{[]string{"-ojson", "audit"}, "audit", true},
		{[]string{"-k", "audit"}, "audit", true},
		{[]string{"-ko", "json", "audit"}, "", false},    // combined shorthands: cobra reads them
		{[]string{"--insecure", "tools"}, "tools", true}, // a boolean flag takes no value
		{[]string{"--insecure", "--root", "version", "tools"}, "tools", true},
		{[]string{"--root"}, "", false},
		{[]string{}, "", false},
		{[]string{"--help", "tools"}, "", false}, // not a global flag yet: cobra reads it
		{[]string{"--nosuch", "tools"}, "", false},
		{[]string{"--", "tools"}, "", false},
		{[]string{"-x", "tools"}, "", false},
	} {
		name, ok := commandName(flags, tc.args)
		if name != tc.name || ok != tc.ok {
			t.Errorf("commandName(%q) = %q, %v; want %q, %v", tc.args, name, ok, tc.name, tc.ok)
		}
	}
}

// TestLazyTreeMatchesTheWholeTree: for every command of the whole tree, the tree a run
// of that command builds finds the same command, with the same help (usage, flags,
// subcommands) and the same run behaviour on arguments (an unknown subcommand is refused
// alike); and the runs that list other commands (no command, help, completion, an
// unknown name) build the whole tree.
func TestLazyTreeMatchesTheWholeTree(t *testing.T) {
	t.Parallel()
	whole := NewRootCmd(testFactory())
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if len(path) > 0 {
			paths = append(paths, path)
		}
		for _, sub := range c.Commands() {
			walk(sub, append(slices.Clip(path), sub.Name()))
		}
	}
	walk(whole, nil)
	if len(paths) < 30 {
		t.Fatalf("the whole tree has %d commands", len(paths))
	}
	lazyCount := 0
	for _, path := range paths {
		for _, args := range [][]string{path, append([]string{"--root", "r", "-o", "json"}, path...)} {
			want, _, err := whole.Find(args)
			if err != nil {
				t.Fatalf("whole tree: find %q: %v", args, err)
			}
			lazy := newRootCmdFor(testFactory(), args)
			got, _, err := lazy.Find(args)
			if err != nil {
				t.Errorf("lazy tree for %q: %v", args, err)
				continue
			}
			if len(lazy.Commands()) < len(whole.Commands()) {
				lazyCount++
			}
			if got.CommandPath() != want.CommandPath() {
				t.Errorf("lazy tree for %q finds %s, the whole tree %s", args, got.CommandPath(), want.CommandPath())
				continue
			}
			if g, w := got.UsageString(), want.UsageString(); g != w {
				t.Errorf("%s: the lazy tree's usage differs:\n%s\n--- the whole tree's:\n%s", want.CommandPath(), g, w)
			}
			if got.Long != want.Long || got.Example != want.Example || (got.RunE == nil) != (want.RunE == nil) {
				t.Errorf("%s: the lazy tree's command differs from the whole tree's", want.CommandPath())
			}
			if want.HasSubCommands() {
				unknown := append(slices.Clip(args), "nosuch")
				e1, e2 := runArgs(whole, unknown), runArgs(newRootCmdFor(testFactory(), unknown), unknown)
				if e1 != e2 {
					t.Errorf("%q: the lazy tree says %q, the whole tree %q", unknown, e2, e1)
				}
			}
		}
	}
	if lazyCount == 0 {
		t.Fatal("no run built a partial tree")
	}
	for _, args := range [][]string{{}, {"--root", "r"}, {"help"}, {"help", "tools"}, {"completion", "bash"},
		{"__complete", "to"}, {"--help"}, {"--version"}, {"tool"}, {"--", "tools"}, {"flags"}} {
		if n, w := len(newRootCmdFor(testFactory(), args).Commands()), len(whole.Commands()); n != w {
			t.Errorf("%q builds %d top-level commands; want the whole tree's %d", args, n, w)
		}
	}
}

// runArgs runs the subtree of root that args name with the rest as its arguments and
// returns the error text (group commands refuse an unknown subcommand themselves).
func runArgs(root *cobra.Command, args []string) string {
	c, rest, err := root.Find(args)
	if err != nil {
		return "find: " + err.Error()
	}
	if c.Args != nil {
		if err := c.Args(c, rest); err != nil {
			return "args: " + err.Error()
		}
	}
	if c.RunE == nil || !strings.Contains(strings.Join(args, " "), "nosuch") {
		return ""
	}
	if err := c.RunE(c, rest); err != nil {
		return err.Error()
	}
	return ""
}

// TestPrintOnlyCommandsInstallNoInterruptHandler: the commands that only print (version,
// help, the flags topic, completion scripts, a group's help or its usage error) run
// without a Ctrl-C handler (issue 28: the signal package's goroutine and thread in every
// start); every other run, and a run cobra cannot resolve, installs it. The marked
// commands are exactly the expected ones, so a command that opens something cannot be
// marked by mistake.
func TestPrintOnlyCommandsInstallNoInterruptHandler(t *testing.T) {
	installed := 0
	defer func(old func(context.Context) (context.Context, context.CancelFunc)) { notifyInterrupt = old }(notifyInterrupt)
	notifyInterrupt = func(ctx context.Context) (context.Context, context.CancelFunc) {
		installed++
		return context.WithCancel(ctx)
	}
	empty := func(string) string { return "" }
	for _, tc := range []struct {
		args    []string
		handler bool
	}{
		{[]string{"version"}, false},
		{[]string{"-o", "json", "version"}, false},
		{[]string{"--version"}, false},
		{[]string{}, false},
		{[]string{"help", "tools", "list"}, false},
		{[]string{"help", "flags"}, false},
		{[]string{"completion", "bash"}, false},
		{[]string{"tools"}, false},
		{[]string{"tools", "nosuch"}, false},
		{[]string{"tools", "list", "--help"}, true}, // the command's own: cobra prints its help
		{[]string{"--state", filepath.Join(t.TempDir(), "s.db"), "--grants", filepath.Join(t.TempDir(), "none.yaml"), "tools", "list"}, true},
		{[]string{"nosuch"}, true}, // the root with an argument: an unknown command (or a hidden one)
		{[]string{"__complete", "to"}, true},
	} {
		installed = 0
		ios, _, _, _ := Test()
		MainWith(tc.args, ios, empty)
		if got := installed > 0; got != tc.handler {
			t.Errorf("%q: Ctrl-C handler installed = %v, want %v", tc.args, got, tc.handler)
		}
	}
	var marked []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if printsOnly(c) {
			marked = append(marked, c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	root := NewRootCmd(testFactory())
	root.InitDefaultHelpCmd()
	walk(root)
	slices.Sort(marked)
	want := []string{"sharedos", "sharedos completion", "sharedos flags", "sharedos help", "sharedos version"}
	for _, m := range marked {
		if sub, ok := strings.CutPrefix(m, "sharedos "); ok && !slices.Contains(want, m) {
			// a group: no run of its own besides the help or the usage error requireSubcommands gives it
			c, _, _ := NewRootCmd(testFactory()).Find(strings.Fields(sub))
			if !c.HasSubCommands() {
				t.Errorf("%s is marked print-only", m)
			}
		}
	}
	for _, w := range want {
		if !slices.Contains(marked, w) {
			t.Errorf("%s is not marked print-only", w)
		}
	}
}
