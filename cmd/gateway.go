package cmd

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/gateway"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

func newGatewayCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "gateway",
		Short: "Check and inspect the external MCP servers of the config file",
		Long: `The gateway publishes the tools of external MCP servers (the config file's mcpServers)
as sharedos tools, each call authorized on the exact resource its arguments name
(docs/gateway.md). 'gateway lint' checks the configuration against what the servers
offer; 'gateway tools ID' shows what one server offers and what sharedos makes of it.`,
		Example: `  sharedos gateway lint
  sharedos gateway tools github`,
		Args: noArgs,
	}
	c.AddCommand(newGatewayLintCmd(f), newGatewayToolsCmd(f))
	return c
}

// gatewayConfig is the run's mcpServers (an error when there are none).
func gatewayConfig(f *Factory) (*gateway.Config, error) {
	s, err := f.Settings()
	if err != nil {
		return nil, err
	}
	if s.MCPServers == nil || len(s.MCPServers.Servers) == 0 {
		where := "no config file was read"
		if s.ConfigFile != "" {
			where = "the config file " + s.ConfigFile + " has none"
		}
		return nil, usageError("add an mcpServers section to the config file (docs/gateway.md), or pass --config FILE",
			"no MCP servers are configured (%s)", where)
	}
	return s.MCPServers, nil
}

// gatewayHost opens the host of a gateway command: its context decides the owner whose
// connection and cached list are used.
func gatewayHost(ctx context.Context, f *Factory) (*Host, error) {
	return f.Host(ctx, host.Needs{})
}

// ---- gateway lint ------------------------------------------------------------------

// GatewayLintOptions are the options of `gateway lint`.
type GatewayLintOptions struct {
	f       *Factory
	Strict  bool
	Refresh bool
}

// gatewayFinding is one finding of `gateway lint`.
type gatewayFinding struct {
	File     string `json:"file"`
	Line     int    `json:"line,omitempty"`
	Severity string `json:"severity"`
	Server   string `json:"server"`
	Tool     string `json:"tool,omitempty"`
	Message  string `json:"message"`
}

func newGatewayLintCmd(f *Factory) *cobra.Command {
	opts := &GatewayLintOptions{f: f}
	c := &cobra.Command{
		Use:   "lint",
		Short: "Check the mcpServers configuration against what each server offers",
		Long: `Check the config file's mcpServers: the file itself is parsed strictly (an error names
the file and line), then each server's tool list is read (from the state database's
cache while it is fresh, else by connecting; --refresh always connects) and each
mapped tool is checked against it:

  error    the server cannot be started, reached or listed
  error    a template points at a property the tool's input schema does not declare
  warning  a tool named in tools: is not offered by the server
  warning  an offered tool cannot be published (its name or definition)

Exit codes: 0 clean (warnings allowed), 1 errors (or warnings with --strict).`,
		Example: `  sharedos gateway lint
  sharedos gateway lint --refresh --strict`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runGatewayLint(c.Context(), opts) },
	}
	c.Flags().BoolVar(&opts.Strict, "strict", false, "treat warnings as errors")
	c.Flags().BoolVar(&opts.Refresh, "refresh", false, "connect to every server instead of reading the cached tool lists")
	return c
}

func runGatewayLint(ctx context.Context, opts *GatewayLintOptions) error {
	f := opts.f
	p, err := f.Printer()
	if err != nil {
		return err
	}
	cfg, err := gatewayConfig(f)
	if err != nil {
		return err
	}
	h, err := gatewayHost(ctx, f)
	if err != nil {
		return err
	}
	findings := []gatewayFinding{}
	for _, s := range cfg.Servers {
		findings = append(findings, lintServer(ctx, h, s, opts.Refresh)...)
	}
	fail := false
	for _, fd := range findings {
		if fd.Severity == "error" || opts.Strict {
			fail = true
		}
	}
	switch {
	case p.format != FormatTable:
		if err := p.data(findings); err != nil {
			return err
		}
	case len(findings) == 0:
		msg := fmt.Sprintf("%d MCP server(s): no findings", len(cfg.Servers))
		if f.IOStreams.StdoutTTY {
			p.line("%s", msg)
		} else {
			warnPlain(f.IOStreams, msg)
		}
	default:
		st := p.st()
		t := p.table("LOCATION", "SEVERITY", "SERVER", "TOOL", "MESSAGE").flexible(4)
		for _, fd := range findings {
			loc := fd.File
			if fd.Line > 0 {
				loc += ":" + strconv.Itoa(fd.Line)
			}
			sev := cell{text: fd.Severity, style: &st.warn}
			if fd.Severity == "error" {
				sev.style = &st.bad
			}
			t.rowCells(cell{text: loc}, sev, cell{text: fd.Server}, cell{text: dash(fd.Tool)}, cell{text: fd.Message})
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

// warnPlain prints a verdict on stderr (piped stdout stays empty).
func warnPlain(ios *IOStreams, msg string) { fmt.Fprintln(ios.ErrOut, "sharedos: "+msg) }

// lintServer checks one server's mapped tools against its tool list.
func lintServer(ctx context.Context, h *Host, s *gateway.Server, refresh bool) []gatewayFinding {
	at := func(line int, sev, tool, format string, args ...any) gatewayFinding {
		return gatewayFinding{File: s.File, Line: line, Severity: sev, Server: s.ID, Tool: tool, Message: fmt.Sprintf(format, args...)}
	}
	if !s.ServesOwner(h.Ctx.Owner) {
		return []gatewayFinding{at(s.Line, "warning", "", "not checked: the server is not configured for %s (owners); pass --owner", h.Ctx.Owner)}
	}
	l, err := h.Gateway().List(ctx, s.ID, h.Ctx.Owner, refresh)
	if err != nil {
		return []gatewayFinding{at(s.Line, "error", "", "%v", err)}
	}
	var out []gatewayFinding
	for _, e := range l.Entries {
		m := s.Tools[e.Upstream]
		line := s.Line
		if m != nil {
			line = m.Line
		}
		switch e.Status {
		case gateway.StatusMissing:
			out = append(out, at(line, "warning", e.Upstream, "named in tools: but not offered by the server"))
		case gateway.StatusSkipped:
			out = append(out, at(line, "warning", e.Upstream, "offered but not published: %s", e.Note))
		case gateway.StatusMapped:
			def := h.Gateway().Definition(h.Ctx.Owner, e.Published)
			if def == nil || m == nil {
				continue
			}
			props, _ := def.InputSchema["properties"].(map[string]any)
			for _, prop := range m.TopProperties() {
				if _, ok := props[prop]; !ok {
					out = append(out, at(line, "error", e.Upstream, "the template reads /%s, a property the tool's input schema does not declare", prop))
				}
			}
		}
	}
	return out
}

// ---- gateway tools -----------------------------------------------------------------

// GatewayToolsOptions are the options of `gateway tools`.
type GatewayToolsOptions struct {
	f       *Factory
	ID      string
	Refresh bool
}

func newGatewayToolsCmd(f *Factory) *cobra.Command {
	opts := &GatewayToolsOptions{f: f}
	c := &cobra.Command{
		Use:   "tools ID",
		Short: "List what one MCP server offers and what sharedos publishes of it",
		Long: `List the tools an MCP server offers and, for each, what sharedos makes of it:

  mapped   named in tools:, published with its requirement template
  gated    not named, published at {namespace, [tool]} with action "call" (unmapped: gate)
  hidden   not named, not published (unmapped: hide, the default)
  skipped  cannot be published (its name or definition; see the note)
  missing  named in tools: but not offered by the server

The list comes from the state database's cache while it is fresh, else from the
server (--refresh always connects). Credentials are never shown.`,
		Example: `  sharedos gateway tools github
  sharedos gateway tools github --refresh -o json`,
		Args: exactArgs(1, "one server id"),
		RunE: func(c *cobra.Command, args []string) error {
			opts.ID = args[0]
			return runGatewayTools(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.Refresh, "refresh", false, "connect to the server instead of reading the cached tool list")
	return c
}

func runGatewayTools(ctx context.Context, opts *GatewayToolsOptions) error {
	f := opts.f
	p, err := f.Printer()
	if err != nil {
		return err
	}
	cfg, err := gatewayConfig(f)
	if err != nil {
		return err
	}
	var srv *gateway.Server
	var ids []string
	for _, s := range cfg.Servers {
		ids = append(ids, s.ID)
		if s.ID == opts.ID {
			srv = s
		}
	}
	if srv == nil {
		msg := fmt.Sprintf("no MCP server %q is configured", opts.ID)
		if c := closest(opts.ID, ids); c != "" {
			msg += "; did you mean " + c + "?"
		}
		return usageError("configured servers: "+orNone(ids), "%s", msg)
	}
	h, err := gatewayHost(ctx, f)
	if err != nil {
		return err
	}
	if !srv.ServesOwner(h.Ctx.Owner) {
		return usageError("pass --owner naming one of the server's owners", "MCP server %s is not configured for %s (owners)", srv.ID, h.Ctx.Owner)
	}
	l, err := h.Gateway().List(ctx, srv.ID, h.Ctx.Owner, opts.Refresh)
	if err != nil {
		return catalogFailure(err)
	}
	if p.format != FormatTable {
		return p.data(l)
	}
	for _, w := range l.Warnings {
		warn(f.IOStreams, "%s", w)
	}
	t := p.table("UPSTREAM", "STATUS", "PUBLISHED", "ACTION", "RESOURCE", "NOTE").flexible(5)
	for _, e := range l.Entries {
		t.row(e.Upstream, e.Status, dash(e.Published), dash(e.Action), dash(e.Resource), dash(e.Note))
	}
	return t.render()
}

// catalogFailure is a server that could not be listed: tool_catalog_unavailable, exit 1.
func catalogFailure(err error) error {
	return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeToolCatalogUnavailable, Message: err.Error(),
		Hint: "check the server's command or url and its credentials; 'sharedos gateway lint' checks the configuration", Err: err}
}

// gatewayDefinitions are stand-in definitions of the configured servers' mapped tools
// (and, for unmapped: gate, the action "call" on the namespace): what `grants lint`
// needs to know the gateway's resource namespaces and actions, without connecting.
func gatewayDefinitions(cfg *gateway.Config) []kernel.ToolDefinition {
	if cfg == nil {
		return nil
	}
	var out []kernel.ToolDefinition
	for _, s := range cfg.Servers {
		add := func(name, ns, action string) {
			out = append(out, kernel.ToolDefinition{Name: s.Namespace + "." + name, Namespace: s.Namespace, Source: gateway.Source,
				RequiredCapability: kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: ns, Path: []string{}}, Action: action}})
		}
		for name, m := range s.Tools {
			add(name, m.Namespace, m.Action)
		}
		if s.Unmapped == gateway.UnmappedGate {
			add("*", s.Namespace, gateway.UnmappedAction)
		}
	}
	return out
}
