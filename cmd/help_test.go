package cmd

import (
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasExamples: every command a user can run (and every group) shows
// examples in its help.
func TestEveryCommandHasExamples(t *testing.T) {
	t.Parallel()
	ios, _, _, _ := Test()
	root := NewRootCmd(&Factory{IOStreams: ios, Env: func(string) string { return "" }})
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() != "help" && !c.IsAdditionalHelpTopicCommand() && c.Example == "" {
			t.Errorf("%s has no examples", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}
