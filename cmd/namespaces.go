package cmd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

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
	c.AddCommand(newNamespacesListCmd(f),
		newNamespacesToggleCmd(f, "enable", "Enable tool namespaces (stored)"),
		newNamespacesToggleCmd(f, "disable", "Disable tool namespaces (stored)"),
		newNamespacesUpdateCmd(f))
	return c
}

// namespacesOutput is the JSON output of the namespaces commands: the catalogue, the
// effective selection (which may name namespaces without tools) and the (world, owner)
// it belongs to.
type namespacesOutput struct {
	Namespaces         []kernel.ToolNamespaceDescriptor `json:"namespaces"`
	Summary            kernel.ToolNamespaceSummary      `json:"summary"`
	EffectiveSelection []string                         `json:"effectiveSelection"`
	World              string                           `json:"world"`
	Owner              kernel.Address                   `json:"owner"`
	SelectionSource    string                           `json:"selectionSource"`
}

// NamespacesListOptions are the options of `namespaces list`.
type NamespacesListOptions struct{ f *Factory }

func newNamespacesListCmd(f *Factory) *cobra.Command {
	opts := &NamespacesListOptions{f: f}
	return &cobra.Command{
		Use:   "list",
		Short: "List the tool namespaces, whether each is enabled, and the stored selection",
		Example: `  sharedos namespaces list
  sharedos --grants grants/reader.yaml namespaces list -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runNamespacesList(c.Context(), opts) },
	}
}

func runNamespacesList(ctx context.Context, opts *NamespacesListOptions) error {
	f := opts.f
	p, err := f.Printer()
	if err != nil {
		return err
	}
	h, err := f.Host(ctx, host.Needs{})
	if err != nil {
		return err
	}
	cat, err := h.Turn.ListToolNamespaces(ctx)
	if err != nil {
		return kernelError(err, h)
	}
	return printNamespaces(p, namespacesOutput{Namespaces: cat.Namespaces, Summary: cat.Summary,
		EffectiveSelection: h.Ctx.EnabledToolNamespaces, World: h.Ctx.World, Owner: h.Ctx.Owner,
		SelectionSource: h.SelectionSource})
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
	f       *Factory
	Enable  []string
	Disable []string
	Patch   string
	Strict  bool
}

// checkNamespaceNames warns about each namespace of the patch that no registered tool
// uses (a selection may name namespaces whose tools come later, so it is stored anyway),
// with the nearest registered one; with strict it refuses the patch instead (exit 2,
// nothing stored).
func checkNamespaceNames(f *Factory, defs []kernel.ToolDefinition, u kernel.ToolNamespaceUpdate, strict bool) error {
	var known []string
	for _, d := range defs {
		if !slices.Contains(known, d.Namespace) {
			known = append(known, d.Namespace)
		}
	}
	if f.prep != nil {
		// an MCP server's namespace has tools once its list is read
		known = append(known, f.prep.GatewayNamespaces()...)
	}
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
		warn(f.IOStreams, "%s (stored anyway; --strict refuses it)", msg)
	}
	return nil
}

func newNamespacesToggleCmd(f *Factory, verb, short string) *cobra.Command {
	opts := &NamespacesUpdateOptions{f: f}
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
			return runNamespacesUpdate(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.Strict, "strict", false, "refuse namespaces that no registered tool uses (default: warn and store)")
	return c
}

func newNamespacesUpdateCmd(f *Factory) *cobra.Command {
	opts := &NamespacesUpdateOptions{f: f}
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

func runNamespacesUpdate(ctx context.Context, opts *NamespacesUpdateOptions) error {
	f := opts.f
	p, err := f.Printer()
	if err != nil {
		return err
	}
	// Validate the patch before anything is opened or stored.
	var update kernel.ToolNamespaceUpdate
	if opts.Patch != "" {
		if update, err = kernel.ParseToolNamespaceUpdate([]byte(opts.Patch)); err != nil {
			return usageError(`a patch is {"enable":[…],"disable":[…]} with at least one non-empty list and no namespace in both`,
				"invalid namespace patch: %v", err)
		}
	} else {
		update = kernel.ToolNamespaceUpdate{Enable: slices.Clone(opts.Enable), Disable: slices.Clone(opts.Disable)}
		if err := update.Validate(); err != nil {
			return usageError("name at least one namespace, never the same one to enable and to disable",
				"invalid namespace patch: %v", err)
		}
	}
	prep, err := f.prepared(host.Needs{})
	if err != nil {
		return err
	}
	if err := checkNamespaceNames(f, prep.Definitions(), update, opts.Strict); err != nil {
		return err
	}
	h, err := f.Host(ctx, host.Needs{})
	if err != nil {
		return err
	}
	cat, sel, err := h.Turn.UpdateToolNamespaces(ctx, update)
	if err != nil {
		switch {
		case errors.Is(err, kernel.ErrInvalidUpdate):
			return usageError("", "invalid namespace patch: %v", err)
		case errors.Is(err, kernel.ErrToolCatalogUnavailable):
			return catalogError(err)
		}
		return stateError(err, stateHint(h.Settings.State))
	}
	for _, n := range update.Enable {
		if !slices.Contains(sel, n) {
			warn(f.IOStreams, "namespace %s was not enabled: this host never enables it (ceiling.namespaces)", n)
		}
	}
	if h.SelectionSource == "flag" {
		warn(f.IOStreams, "--namespaces applies to this run only; the stored selection was updated")
	}
	return printNamespaces(p, namespacesOutput{Namespaces: cat.Namespaces, Summary: cat.Summary,
		EffectiveSelection: sel, World: h.Ctx.World, Owner: h.Ctx.Owner, SelectionSource: "stored"})
}
