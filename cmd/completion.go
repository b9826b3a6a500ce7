package cmd

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/fsplane"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/repoplane"
)

// CompletionShells are the shells `completion` supports, in the order of completions/.
var CompletionShells = []string{"bash", "zsh", "fish", "powershell"}

func newCompletionCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
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
	}
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

// completeToolNames completes the names of the tools every sharedos host registers.
func completeToolNames(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defs := staticDefinitions()
	names := make([]string, len(defs))
	for i := range defs {
		names[i] = defs[i].Name
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// completeNamespaces completes the tool namespaces every sharedos host registers.
func completeNamespaces(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return []string{fsplane.Namespace, repoplane.Namespace, kernel.EscalationToolNamespace}, cobra.ShellCompDirectiveNoFileComp
}

// completeToolFlag completes a --tool flag value with the registered tool names.
func completeToolFlag(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	return completeToolNames(c, nil, toComplete)
}
