package cmd

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

func newNamespacesCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:     "namespaces",
		Aliases: []string{"ns"},
		Short:   "List and toggle the tool namespaces of the context's (world, owner)",
		Long: `Tool namespaces group tools (files, repo, sharedos, …). A tool is usable only when its
namespace is enabled for the context's (world, owner) and a grant covers it. Enabling a
namespace grants nothing.

Settings are stored per (world, owner): give 'namespaces enable' the same world and owner
(usually: the same grant file) as the 'tools' commands it is meant for.`,
		Example: `  sharedos namespaces list
  sharedos namespaces enable files repo
  sharedos --owner human:alice namespaces update --enable files --disable repo`,
		Args: noArgs,
	}
	c.AddCommand(newNamespacesListCmd(f, nil),
		newNamespacesToggleCmd(f, "enable", "Enable tool namespaces (stored)", nil),
		newNamespacesToggleCmd(f, "disable", "Disable tool namespaces (stored)", nil),
		newNamespacesUpdateCmd(f, nil))
	return c
}

// namespacesOutput is the JSON output of the namespaces commands: the catalogue, the
// effective selection (which may name namespaces without tools) and the (world, owner)
// it belongs to (pkg/api's Namespaces).
type namespacesOutput = api.Namespaces

// NamespacesListOptions are the options of `namespaces list`.
type NamespacesListOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)
}

// newNamespacesListCmd builds `namespaces list`; runF, when set, replaces the run.
func newNamespacesListCmd(f *Factory, runF func(*NamespacesListOptions) error) *cobra.Command {
	opts := &NamespacesListOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
	return &cobra.Command{
		Use:   "list",
		Short: "List the tool namespaces, whether each is enabled, and the stored selection",
		Example: `  sharedos namespaces list
  sharedos --grants grants/reader.yaml namespaces list -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runNamespacesList(c.Context(), opts)
		},
	}
}

func runNamespacesList(ctx context.Context, opts *NamespacesListOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	out, err := svc.Namespaces(ctx)
	if err != nil {
		return serviceError(err)
	}
	return printNamespaces(p, out)
}

func printNamespaces(p *printer, out namespacesOutput) error {
	if out.Namespaces == nil {
		out.Namespaces = []kernel.ToolNamespaceDescriptor{}
	}
	if out.EffectiveSelection == nil {
		out.EffectiveSelection = []string{}
	}
	if p.format != FormatTable {
		return p.data(out)
	}
	source := map[string]string{"flag": "--namespaces, not stored", "stored": "stored selection",
		"default": "default selection, nothing stored yet", "updated": "stored selection, just updated"}[out.SelectionSource]
	head := fmt.Sprintf("world %s, owner %s (%s): enabled %s", out.World, out.Owner, source, orNone(out.EffectiveSelection))
	if out.Owner.String() == host.LocalOperator {
		// No actor or owner was named: this is the local operator's own selection, and
		// an agent (whose grant file names its owner) does not see it.
		head += "; this is the local operator's selection, not an agent's: pass the agent's grant file (--grants FILE) to change what the agent sees"
	}
	if p.ios.StdoutTTY {
		p.line("%s", head)
		p.line("")
	} else {
		fmt.Fprintln(p.ios.ErrOut, "sharedos: "+head)
	}
	st := p.st()
	t := p.table("NAMESPACE", "SOURCES", "TOOLS", "ENABLED")
	listed := map[string]bool{}
	for _, n := range out.Namespaces {
		listed[n.Namespace] = true
		en := cell{text: "no", style: &st.dim}
		if n.Enabled {
			en = cell{text: "yes", style: &st.ok}
		}
		t.rowCells(cell{text: n.Namespace}, cell{text: strings.Join(n.Sources, ",")}, cell{text: strconv.Itoa(n.ToolCount)}, en)
	}
	if err := t.render(); err != nil {
		return err
	}
	var extra []string
	for _, n := range out.EffectiveSelection {
		if !listed[n] {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 && p.ios.StdoutTTY {
		p.line("")
		p.line("also enabled, no tools registered: %s", strings.Join(extra, ", "))
	}
	return nil
}

// NamespacesUpdateOptions are the options of `namespaces enable|disable|update`.
type NamespacesUpdateOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)

	Enable  []string
	Disable []string
	Patch   string
	Strict  bool
	// Update is the patch the flags or --patch name, checked by RunE.
	Update kernel.ToolNamespaceUpdate
}

// checkNamespaceNames warns about each namespace of the patch that no registered tool
// uses (a selection may name namespaces whose tools come later, so it is stored anyway),
// with the nearest registered one; with strict it refuses the patch instead (exit 2,
// nothing stored).
func checkNamespaceNames(ios *IOStreams, reg api.Registry, u kernel.ToolNamespaceUpdate, strict bool) error {
	var known []string
	for _, d := range reg.Tools {
		if !slices.Contains(known, d.Namespace) {
			known = append(known, d.Namespace)
		}
	}
	// an MCP server's namespace has tools once its list is read
	known = append(known, reg.ProvidedNamespaces...)
	for _, n := range slices.Concat(u.Enable, u.Disable) {
		if slices.Contains(known, n) {
			continue
		}
		msg := fmt.Sprintf("namespace %q has no registered tools", n)
		if s := closest(n, known); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		}
		if strict {
			return usageError("registered namespaces: "+strings.Join(known, ", ")+"; without --strict a namespace without tools is stored anyway", "%s", msg)
		}
		warn(ios, "%s (stored anyway; --strict refuses it)", msg)
	}
	return nil
}

func newNamespacesUpdateOptions(f *Factory) *NamespacesUpdateOptions {
	return &NamespacesUpdateOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
}

// newNamespacesToggleCmd builds `namespaces enable|disable`; runF, when set, replaces
// the run.
func newNamespacesToggleCmd(f *Factory, verb, short string, runF func(*NamespacesUpdateOptions) error) *cobra.Command {
	opts := newNamespacesUpdateOptions(f)
	c := &cobra.Command{
		Use:               verb + " NAMESPACE...",
		Short:             short,
		Example:           fmt.Sprintf("  sharedos namespaces %s files repo", verb),
		Args:              minArgs(1, "one or more namespace names"),
		ValidArgsFunction: completeNamespaces,
		RunE: func(c *cobra.Command, args []string) error {
			if verb == "enable" {
				opts.Enable = args
			} else {
				opts.Disable = args
			}
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runNamespacesUpdate(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.Strict, "strict", false, "refuse namespaces that no registered tool uses (default: warn and store)")
	return c
}

// newNamespacesUpdateCmd builds `namespaces update`; runF, when set, replaces the run.
func newNamespacesUpdateCmd(f *Factory, runF func(*NamespacesUpdateOptions) error) *cobra.Command {
	opts := newNamespacesUpdateOptions(f)
	c := &cobra.Command{
		Use:   "update",
		Short: "Apply one namespace patch: --enable and --disable, or --patch JSON",
		Example: `  sharedos namespaces update --enable files,repo --disable sharedos
  sharedos namespaces update --patch '{"enable":["files"],"disable":["repo"]}'`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if c.Flags().Changed("patch") && (len(opts.Enable) > 0 || len(opts.Disable) > 0) {
				return usageError("use --patch alone, or --enable/--disable", "--patch cannot be combined with --enable or --disable")
			}
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runNamespacesUpdate(c.Context(), opts)
		},
	}
	c.Flags().StringSliceVar(&opts.Enable, "enable", nil, "namespaces to enable (comma-separated)")
	c.Flags().StringSliceVar(&opts.Disable, "disable", nil, "namespaces to disable (comma-separated)")
	c.Flags().StringVar(&opts.Patch, "patch", "", "the raw ToolNamespaceUpdate object, e.g. '{\"enable\":[\"files\"]}'")
	c.Flags().BoolVar(&opts.Strict, "strict", false, "refuse namespaces that no registered tool uses (default: warn and store)")
	_ = c.RegisterFlagCompletionFunc("enable", completeCommaList(registeredNamespaces))
	_ = c.RegisterFlagCompletionFunc("disable", completeCommaList(registeredNamespaces))
	return c
}

// validate checks the patch the flags name, before anything is opened or stored, and
// sets Update.
func (opts *NamespacesUpdateOptions) validate() error {
	if opts.Patch != "" {
		u, err := kernel.ParseToolNamespaceUpdate([]byte(opts.Patch))
		if err != nil {
			return usageError(`a patch is {"enable":[…],"disable":[…]} with at least one non-empty list and no namespace in both`,
				"invalid namespace patch: %v", err)
		}
		opts.Update = u
		return nil
	}
	opts.Update = kernel.ToolNamespaceUpdate{Enable: slices.Clone(opts.Enable), Disable: slices.Clone(opts.Disable)}
	if err := opts.Update.Validate(); err != nil {
		return usageError("name at least one namespace, never the same one to enable and to disable",
			"invalid namespace patch: %v", err)
	}
	return nil
}

func runNamespacesUpdate(ctx context.Context, opts *NamespacesUpdateOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	update := opts.Update
	reg, err := svc.Registry(ctx)
	if err != nil {
		return serviceError(err)
	}
	if err := checkNamespaceNames(opts.IO, reg, update, opts.Strict); err != nil {
		return err
	}
	out, err := svc.UpdateNamespaces(ctx, update)
	if err != nil {
		return serviceError(err)
	}
	for _, n := range update.Enable {
		if !slices.Contains(out.EffectiveSelection, n) {
			warn(opts.IO, "namespace %s was not enabled: this host never enables it (ceiling.namespaces)", n)
		}
	}
	if out.RunSelectionKept {
		warn(opts.IO, "--namespaces applies to this run only; the stored selection was updated")
	}
	return printNamespaces(p, out.Namespaces)
}
