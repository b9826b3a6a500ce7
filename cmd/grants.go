package cmd

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/hostceiling"
	"github.com/sharedos/sharedos/pkg/kernel"
)

func newGrantsCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "grants",
		Short: "Work with grant files",
		Long: `Work with grant files: the YAML or JSON files that list what each agent may do.

Every field, scope, owner defaulting, time windows, maxUses, delegation and the actions
each tool requires are described in docs/grant-files.md. 'sharedos explain TOOL …
--apply FILE' adds the grant a refused call needs.`,
		Example: `  sharedos grants lint grants/reader.yaml
  sharedos explain files.create -a path=a.md -a content=x --apply grants/reader.yaml`,
		Args: noArgs,
	}
	c.AddCommand(newGrantsLintCmd(f))
	return c
}

// GrantsLintOptions are the options of `grants lint`.
type GrantsLintOptions struct {
	f      *Factory
	Files  []string
	Strict bool
}

func newGrantsLintCmd(f *Factory) *cobra.Command {
	opts := &GrantsLintOptions{f: f}
	c := &cobra.Command{
		Use:   "lint FILE...",
		Short: "Validate grant files: contract, delegation, suspicious breadth",
		Long: `Check grant files as one set: every grant against the contract (naming the grant, the
field and the line), duplicate ids, delegation chains (errors), and suspicious breadth
such as "*" actions, whole-namespace capabilities and grants without expiry (warnings).
Also warnings: a grant already expired at the wall clock, and a subject, issuer or owner
id that mixes scripts or holds look-alike characters (a Cyrillic "а" in "аlice"), or
that reads like another id of the same kind ("he1per" and "helper").

Exit codes: 0 clean (warnings allowed), 1 errors (or warnings with --strict).`,
		Example: `  sharedos grants lint grants/reader.yaml grants/writer.yaml --strict`,
		Args:    minArgs(1, "one or more grant files"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Files = args
			return runGrantsLint(opts)
		},
	}
	c.Flags().BoolVar(&opts.Strict, "strict", false, "treat warnings as errors")
	return c
}

func runGrantsLint(opts *GrantsLintOptions) error {
	f := opts.f
	p, err := f.standalonePrinter()
	if err != nil {
		return err
	}
	paths := make([]string, len(opts.Files))
	for i, name := range opts.Files {
		paths[i] = filepath.Clean(name)
	}
	tools := staticDefinitions()
	var folded []string
	if s, err := f.Settings(); err == nil {
		// the configured MCP servers' namespaces and actions are known too (a broken
		// config file does not stop the lint: the grant files are checked without them)
		tools = append(tools, gatewayDefinitions(s.MCPServers)...)
		if s.Messaging != nil { // messages.request, registered with agents:
			tools = append(tools, kernel.MessageToolDefinition())
		}
		if s.MCPServers != nil {
			folded = s.MCPServers.CaseInsensitiveNamespaces()
		}
	}
	findings := grantfile.LintWithOptions(paths, grantfile.LintOptions{Tools: tools, Now: f.Clock})
	findings = append(findings, caseFindings(paths, folded)...)
	if findings == nil {
		findings = []grantfile.Finding{}
	}
	fail := grantfile.HasErrors(findings, opts.Strict)
	switch {
	case p.format != FormatTable:
		if err := p.data(findings); err != nil {
			return err
		}
	case len(findings) == 0:
		// Piped, stdout stays an empty TSV and the verdict goes to stderr.
		msg := fmt.Sprintf("%d grant file(s): no findings", len(paths))
		if f.IOStreams.StdoutTTY {
			p.line("%s", msg)
		} else {
			fmt.Fprintln(f.IOStreams.ErrOut, "sharedos: "+msg)
		}
	default:
		st := p.st()
		t := p.table("LOCATION", "SEVERITY", "GRANT", "FIELD", "MESSAGE").wrapping(4)
		for _, fd := range findings {
			loc := fd.File
			if fd.Line > 0 {
				loc += ":" + strconv.Itoa(fd.Line)
			}
			sev := cell{text: fd.Severity, style: &st.warn}
			if fd.Severity == grantfile.SeverityError {
				sev.style = &st.bad
			}
			t.rowCells(cell{text: loc}, sev, cell{text: dash(fd.Grant)}, cell{text: dash(fd.Field)}, cell{text: fd.Message})
		}
		if err := t.render(); err != nil {
			return err
		}
	}
	if fail {
		return &resultExit{code: ExitCommandFailed}
	}
	return nil
}

// caseFindings warns about grants whose resource paths differ only by letter case in a
// resource namespace whose MCP server declares caseInsensitive: true. The server reads
// them as one resource, but grants match exactly, so two such grants are two budgets
// (maxUses, time windows) for one resource, and an operator reading one of them may
// believe the other spelling is refused.
func caseFindings(paths, namespaces []string) []grantfile.Finding {
	if len(namespaces) == 0 {
		return nil
	}
	type first struct {
		file, grant string
		path        []string
	}
	seen := map[string]first{}
	var out []grantfile.Finding
	for _, p := range paths {
		gf, err := grantfile.Load(p)
		if err != nil {
			continue // the lint itself reports it
		}
		for _, g := range gf.Grants {
			for i, c := range g.Capabilities {
				ns := c.Resource.Namespace
				if !slices.Contains(namespaces, ns) {
					continue
				}
				owner := ""
				if c.Resource.Owner != nil {
					owner = c.Resource.Owner.String()
				}
				key := ns + "\x00" + owner + "\x00" + strings.Join(hostceiling.FoldPath(c.Resource.Path), "\x00")
				prev, ok := seen[key]
				if !ok {
					seen[key] = first{p, g.ID, c.Resource.Path}
					continue
				}
				if slices.Equal(prev.path, c.Resource.Path) {
					continue
				}
				out = append(out, grantfile.Finding{File: p, Grant: g.ID, Field: fmt.Sprintf("capabilities.%d.resource.path", i),
					Severity: grantfile.SeverityWarning,
					Message: fmt.Sprintf("%s:%s differs only by letter case from %s:%s of grant %q: the MCP server of namespace %s treats them as one resource (caseInsensitive), but grants match exactly; write one spelling",
						ns, strings.Join(c.Resource.Path, "/"), ns, strings.Join(prev.path, "/"), prev.grant, ns)})
			}
		}
	}
	return out
}
