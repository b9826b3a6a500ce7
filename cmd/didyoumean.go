package cmd

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// unknownFlagRE matches pflag's "unknown flag: --name" (and "--name=value").
var unknownFlagRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^unknown flag: --([^=\s]+)`) }) // compiled on first use, not at every start

// flagError is the root's flag error: a usage error, with "did you mean --X?" when the
// unknown flag is near one of the command's flags (its own and the inherited ones), as
// cobra does for commands.
func flagError(c *cobra.Command, err error) error {
	msg := err.Error()
	if m := unknownFlagRE().FindStringSubmatch(msg); m != nil {
		var names []string
		add := func(f *pflag.Flag) {
			if !f.Hidden && !slices.Contains(names, f.Name) {
				names = append(names, f.Name)
			}
		}
		c.Flags().VisitAll(add)
		c.InheritedFlags().VisitAll(add)
		if s := nearestFlag(m[1], names); s != "" {
			msg += "; did you mean --" + s + "?"
		}
	}
	return usageError("run '"+c.CommandPath()+" --help' for usage", "%s", msg)
}

// nearestFlag is closest (as for commands and values), else the one flag that name
// begins (--al → --all), or "".
func nearestFlag(name string, names []string) string {
	if s := closest(name, names); s != "" {
		return s
	}
	var prefixed []string
	for _, n := range names {
		if len(name) >= 2 && strings.HasPrefix(n, name) {
			prefixed = append(prefixed, n)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	return ""
}

// unknownArgKey refuses an -a key the tool's input schema does not declare when the
// schema admits no other key (additionalProperties: false): the call could only fail
// invalid_tool_arguments, so the person who typed it hears "did you mean" at once. nil
// when the key is declared, or the schema is open or unknown.
func unknownArgKey(def *kernel.ToolDefinition, key string) error {
	if def == nil || def.InputSchema == nil || def.InputSchema["additionalProperties"] != false {
		return nil
	}
	props, _ := def.InputSchema["properties"].(map[string]any)
	if _, ok := props[key]; ok {
		return nil
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	msg := fmt.Sprintf("%s takes no argument %q", def.Name, key)
	if s := closest(key, names); s != "" {
		msg += "; did you mean " + s + "?"
	} else if len(names) == 1 {
		msg += "; did you mean " + names[0] + "?" // its only argument
	}
	return usageError("its arguments: "+strings.Join(names, ", ")+" ('sharedos tools describe "+def.Name+"')", "%s", msg)
}

// looksLikeGrantFile reports whether the file at path reads as a grant file (a mapping
// with version and grants, or a context and grants) rather than a config file.
func looksLikeGrantFile(path string) bool {
	data, err := os.ReadFile(path)
	if err != nil || len(data) > 1<<20 {
		return false
	}
	var top map[string]yaml.Node
	if yaml.NewDecoder(bytes.NewReader(data)).Decode(&top) != nil {
		return false
	}
	_, grants := top["grants"]
	_, version := top["version"]
	_, context := top["context"]
	return grants && (version || context) && top["grants"].Kind == yaml.SequenceNode
}
