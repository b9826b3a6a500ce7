package cmd

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/fsplane"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/repoplane"
)

// CompletionShells are the shells `completion` supports, in the order of completions/.
var CompletionShells = []string{"bash", "zsh", "fish", "powershell"}

func newCompletionCmd(f *Factory) *cobra.Command {
	return markPrintsOnly(&cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print the shell completion script",
		Long: `Print the completion script for a shell. The scripts are also checked in under
completions/. For example:

  source <(sharedos completion bash)
  sharedos completion zsh > "${fpath[1]}/_sharedos"
  sharedos completion fish > ~/.config/fish/completions/sharedos.fish

Bash completion needs the bash-completion package (v2): install it (apt install
bash-completion, brew install bash-completion@2) and source it from ~/.bashrc first.`,
		Example: `  source <(sharedos completion bash)
  sharedos completion zsh > "${fpath[1]}/_sharedos"`,
		ValidArgs: CompletionShells,
		Args:      exactArgs(1, "one shell: bash, zsh, fish or powershell"),
		RunE: func(c *cobra.Command, args []string) error {
			return GenerateCompletion(c.Root(), args[0], f.IOStreams.Out)
		},
	})
}

// GenerateCompletion writes the completion script for shell.
func GenerateCompletion(root *cobra.Command, shell string, w io.Writer) error {
	switch shell {
	case "bash":
		return root.GenBashCompletionV2(w, true)
	case "zsh":
		return root.GenZshCompletion(w)
	case "fish":
		return root.GenFishCompletion(w, true)
	case "powershell":
		return root.GenPowerShellCompletionWithDesc(w)
	}
	return usageError("pick one of bash, zsh, fish, powershell", "unsupported shell %q", shell)
}

// completeToolNames completes a tool name: the tools the context can use first (asked of
// the kernel without recording anything, see host.Needs.Unaudited), then every other
// registered tool; the shell keeps that order. When the context cannot be built (no
// actor, a broken grant file), every registered tool, in registration order.
func (f *Factory) completeToolNames(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return f.toolNames(c), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

func (f *Factory) toolNames(c *cobra.Command) []string {
	defs := staticDefinitions()
	var first []string
	if h, err := f.quietHost(c); err == nil {
		if usable, err := h.Service().ListTools(c.Context()); err == nil {
			for _, d := range usable.Tools {
				first = append(first, d.Name)
			}
		}
	}
	names := slices.Clone(first)
	for _, d := range defs {
		if !slices.Contains(first, d.Name) {
			names = append(names, d.Name)
		}
	}
	return names
}

// quietHost opens the host for completion: no planes, an actor, no audit. Warnings
// (refused grant files, …) are not printed into the shell's completion.
func (f *Factory) quietHost(c *cobra.Command) (*Host, error) {
	errOut := f.IOStreams.ErrOut
	f.IOStreams.ErrOut = io.Discard
	defer func() { f.IOStreams.ErrOut = errOut }()
	return f.Host(c.Context(), host.Needs{Actor: true, Unaudited: true})
}

// completeToolFlag completes a --tool flag value with the tool names.
func (f *Factory) completeToolFlag(c *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return f.toolNames(c), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

// registeredNamespaces are the tool namespaces every sharedos host registers.
func registeredNamespaces() []string {
	return []string{fsplane.Namespace, repoplane.Namespace, kernel.EscalationToolNamespace}
}

// completeNamespaces completes the tool namespaces every sharedos host registers.
func completeNamespaces(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return registeredNamespaces(), cobra.ShellCompDirectiveNoFileComp
}

// completeCommaList completes one item of a comma-separated flag value (--type a,b):
// the items already typed are kept as the prefix, and not offered again.
func completeCommaList(vals func() []string) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		done, prefix := "", ""
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			prefix = toComplete[:i+1]
			done = toComplete[:i]
		}
		typed := strings.Split(done, ",")
		var out []string
		for _, v := range vals() {
			if !slices.Contains(typed, v) {
				out = append(out, prefix+v)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
}

// completeArg completes -a: first the argument keys of the tool named by the first
// argument, from its input schema ("path=", "content=", …); after "path=" (a path-typed
// key), the entries of that directory under --root, directories ending in "/".
func (f *Factory) completeArg(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	def := findDefinition(args[0])
	if def == nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	key, val, hasValue := strings.Cut(toComplete, "=")
	if !hasValue {
		props, _ := def.InputSchema["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k+"=")
		}
		slices.Sort(keys)
		return keys, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	prop := schemaProperty(def, key)
	items, _ := prop["items"].(map[string]any)
	if schemaType(prop) != "array" || schemaType(items) != "string" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	s, err := f.Settings()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	dir := ""
	if i := strings.LastIndexByte(val, '/'); i >= 0 {
		dir = val[:i+1]
	}
	rel := filepath.FromSlash(strings.TrimSuffix(dir, "/"))
	if !filepath.IsLocal(rel) && rel != "" {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	root, err := os.OpenRoot(s.Root)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer root.Close()
	if rel == "" {
		rel = "."
	}
	fh, err := root.Open(rel)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer fh.Close()
	entries, err := fh.ReadDir(-1)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, e := range entries {
		name := key + "=" + dir + e.Name()
		if e.IsDir() {
			name += "/"
		}
		out = append(out, name)
	}
	slices.Sort(out)
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}
