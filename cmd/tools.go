package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/gateway"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

func newToolsCmd(f *Factory) *cobra.Command {
	c := &cobra.Command{
		Use:   "tools",
		Short: "List, describe and call the tools of the context",
		Example: `  sharedos tools list --all
  sharedos tools describe files.read
  sharedos tools call files.read -a path=notes/todo.md`,
		Args: noArgs,
	}
	c.AddCommand(newToolsListCmd(f, nil), newToolsDescribeCmd(f, nil), newToolsCallCmd(f, nil))
	return c
}

// ---- tools list ------------------------------------------------------------------

// ToolsListOptions are the options of `tools list`.
type ToolsListOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)

	All bool
}

// newToolsListCmd builds `tools list`; runF, when set, replaces the run (tests check
// argv → options with it, without a backend).
func newToolsListCmd(f *Factory, runF func(*ToolsListOptions) error) *cobra.Command {
	opts := &ToolsListOptions{IO: f.IOStreams, Printer: f.Printer}
	// only the usable catalogue is the actor's; --all lists the registry
	opts.Service = func() (api.Service, error) { return f.service(host.Needs{Actor: !opts.All}) }
	c := &cobra.Command{
		Use:   "list",
		Short: "List the usable tools of the context (registered, namespace enabled, granted)",
		Long: `List the tools the context can use: registered, in an enabled tool namespace, and
discoverable under some grant. With --all, list every registered tool and the first gate
that hides it (namespace off, no grant, ceiling).`,
		Example: `  sharedos tools list
  sharedos tools list --all -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return runToolsList(c.Context(), opts)
		},
	}
	c.Flags().BoolVar(&opts.All, "all", false, "list every registered tool with the gate that hides it")
	return c
}

func runToolsList(ctx context.Context, opts *ToolsListOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	if opts.All {
		statuses, err := svc.ListAllTools(ctx)
		if err != nil {
			return serviceError(err)
		}
		// a namespace whose MCP server could not be listed is one row "ns.*"; the
		// operator at the terminal sees why (the embedded backend's description holds
		// the provider and its cause; the audit trail has it too)
		for _, s := range statuses {
			if s.Cause == kernel.Cause(kernel.CodeToolCatalogUnavailable) && s.Definition.Description != "" {
				warn(opts.IO, "%s", s.Definition.Description)
			}
		}
		if p.format != FormatTable {
			return p.data(statuses)
		}
		st := p.st()
		t := p.table("TOOL", "NAMESPACE", "CLASS", "USABLE", "GATE", "CAUSE")
		for _, s := range statuses {
			usable := cell{text: "no", style: &st.bad}
			if s.Usable {
				usable = cell{text: "yes", style: &st.ok}
			}
			t.rowCells(cell{text: s.Tool}, cell{text: s.Namespace}, cell{text: s.ReadWrite}, usable,
				cell{text: dash(string(s.Gate))}, cell{text: dash(string(s.Cause))})
		}
		return t.render()
	}
	list, err := svc.ListTools(ctx)
	if err != nil {
		return serviceError(err)
	}
	defs := list.Tools
	if p.format != FormatTable {
		return p.data(defs)
	}
	if len(defs) == 0 {
		return p.empty(fmt.Sprintf("no usable tools for %s (enabled namespaces: %s); see 'sharedos tools list --all'",
			list.Context.Actor, orNone(list.Context.EnabledToolNamespaces)))
	}
	t := p.table("TOOL", "NAMESPACE", "CLASS", "DESCRIPTION").flexible(3)
	for i := range defs {
		d := &defs[i]
		t.row(d.Name, d.Namespace, d.Class(), firstSentence(d.Description))
	}
	return t.render()
}

// unknownToolMessage says that no tool of this name is registered, with the nearest
// registered name when one is close: no tool named "files.raed" is registered; did you
// mean files.read?
func unknownToolMessage(defs []kernel.ToolDefinition, name string) string {
	names := make([]string, len(defs))
	for i := range defs {
		names[i] = defs[i].Name
	}
	msg := fmt.Sprintf("no tool named %q is registered", name)
	if s := closest(name, names); s != "" {
		msg += fmt.Sprintf("; did you mean %s?", s)
	}
	return msg
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ",")
}

// firstSentence is the first sentence of s (the table cuts it to the terminal's width;
// piped output keeps it whole).
func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}

// ---- tools describe --------------------------------------------------------------

// ToolsDescribeOptions are the options of `tools describe`.
type ToolsDescribeOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)

	Name string
}

// newToolsDescribeCmd builds `tools describe`; runF, when set, replaces the run.
func newToolsDescribeCmd(f *Factory, runF func(*ToolsDescribeOptions) error) *cobra.Command {
	opts := &ToolsDescribeOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
	return &cobra.Command{
		Use:               "describe NAME",
		Short:             "Show one tool's definition, its argument schema and its gate status",
		Example:           `  sharedos tools describe files.read`,
		Args:              exactArgs(1, "one tool name"),
		ValidArgsFunction: f.completeToolNames,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return runToolsDescribe(c.Context(), opts)
		},
	}
}

// toolDescription is the JSON output of `tools describe`.
type toolDescription struct {
	Tool   kernel.ToolDefinition `json:"tool"`
	Usable bool                  `json:"usable"`
	Gate   kernel.Gate           `json:"gate,omitempty"`
	Cause  kernel.Cause          `json:"cause,omitempty"`
}

func runToolsDescribe(ctx context.Context, opts *ToolsDescribeOptions) error {
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	gs, err := svc.ListAllTools(ctx)
	if err != nil {
		return serviceError(err)
	}
	var d *toolDescription
	for _, g := range gs {
		if g.Tool == opts.Name {
			d = &toolDescription{Tool: g.Definition, Usable: g.Usable, Gate: g.Gate, Cause: g.Cause}
		}
	}
	if d == nil {
		reg, err := svc.Registry(ctx)
		if err != nil {
			return serviceError(err)
		}
		return usageError("run 'sharedos tools list --all' to see every registered tool", "%s", unknownToolMessage(reg.Tools, opts.Name))
	}
	if p.format != FormatTable {
		return p.data(d)
	}
	st := p.st()
	def := &d.Tool
	status := p.styled(cell{text: "usable", style: &st.ok})
	if !d.Usable {
		status = p.styled(cell{text: "not usable", style: &st.bad}) + styledText(fmt.Sprintf(" (gate %s, cause %s)", d.Gate, d.Cause))
	}
	p.line("%s  %s", styledText(st.bold.Render(def.Name)), status)
	p.line("namespace:   %s (source %s)", def.Namespace, def.Source)
	p.line("class:       %s", def.Class())
	p.line("requires:    %s on %s:%s", def.RequiredCapability.Action, def.RequiredCapability.Resource.Namespace,
		kernel.JoinPath(def.RequiredCapability.Resource.Path))
	if req, ok := def.Metadata["requirement"].(string); ok && def.Source == gateway.Source {
		// an MCP server's tool: the requirement each call's arguments resolve to
		p.line("per call:    %s", req)
	}
	p.line("description: %s", def.Description)
	props, _ := def.InputSchema["properties"].(map[string]any)
	if len(props) == 0 {
		return nil
	}
	required := map[string]bool{}
	if req, ok := def.InputSchema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				required[s] = true
			}
		}
	}
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	sort.Strings(names)
	p.line("")
	t := p.table("ARGUMENT", "TYPE", "REQUIRED", "-a FORM")
	for _, n := range names {
		prop, _ := props[n].(map[string]any)
		typ := schemaType(prop)
		form := "text"
		switch typ {
		case "":
			typ, form = "any", "text (stays a string)"
		case "array":
			items, _ := prop["items"].(map[string]any)
			switch schemaType(items) {
			case "string":
				typ, form = "path", "a/b/c"
			case "array":
				typ, form = "pathspec", "a/b,c/d"
			default:
				form = "JSON"
			}
		case "integer", "number":
			form = "number"
		case "boolean":
			form = "true|false"
		case "object":
			form = "JSON"
		}
		t.row(n, typ, map[bool]string{true: "yes", false: "no"}[required[n]], form)
	}
	return t.render()
}

// ---- tools call ------------------------------------------------------------------

// ToolsCallOptions are the options of `tools call`.
type ToolsCallOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)

	Name string
	Args ArgsOptions
}

// newToolsCallCmd builds `tools call`; runF, when set, replaces the run.
func newToolsCallCmd(f *Factory, runF func(*ToolsCallOptions) error) *cobra.Command {
	opts := &ToolsCallOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(callNeeds) }}
	c := &cobra.Command{
		Use:   "call NAME",
		Short: "Call a tool once, fully authorized",
		Long: `Call a tool once. The call goes through every gate of the kernel (registered,
namespace enabled, discoverable, arguments, requirement, authorization) and is audited.

Arguments: --args JSON or --args-file FILE ('-' = stdin) give the arguments object;
each -a key=value then sets one key of it, coerced by the tool's input schema — the
-a FORM column of 'sharedos tools describe NAME' shows each argument's form (a path is
a/b/c, relative to --root, the root itself is -a path=; a string stays a string). An -a
key that --args also sets replaces it, with a warning.

To assert a refusal (in CI, say), prefer 'sharedos explain': the same pipeline as a dry
run, which executes nothing.

Exit codes: 0 succeeded, 3 denied, 4 failed, 5 escalated (sharedos.escalate).`,
		Example: `  sharedos tools call files.read -a path=notes/todo.md
  sharedos tools call files.create --args '{"path":["drafts","a.md"],"content":"hello"}'
  echo '{"path":[]}' | sharedos tools call files.list --args-file -`,
		Args:              exactArgs(1, "one tool name"),
		ValidArgsFunction: f.completeToolNames,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			opts.Args.jsonSet = c.Flags().Changed("args")
			if runF != nil {
				return runF(opts)
			}
			return runToolsCall(c.Context(), opts)
		},
	}
	opts.Args.bind(c.Flags())
	_ = c.RegisterFlagCompletionFunc("arg", f.completeArg)
	return c
}

// callNeeds are the host needs of `tools call` and `explain`: the planes and an actor.
var callNeeds = host.Needs{Planes: true, Actor: true}

// prepareCall is what `tools call` and `explain` share before the call: the printer,
// the backend, and the arguments, checked and coerced by the tool's schema before the
// state database is touched (only the schema of an MCP server's tool, read once its list
// is, needs the opened host).
func prepareCall(ctx context.Context, ios *IOStreams, printerF func() (*printer, error), serviceF func() (api.Service, error),
	name string, a *ArgsOptions) (*printer, api.Service, json.RawMessage, error) {
	p, err := printerF()
	if err != nil {
		return nil, nil, nil, err
	}
	svc, err := serviceF()
	if err != nil {
		return nil, nil, nil, err
	}
	reg, err := svc.Registry(ctx)
	if err != nil {
		return nil, nil, nil, serviceError(err)
	}
	registered := registryDefinition(reg.Tools, name)
	mayProvide := false
	if ns, _, ok := strings.Cut(name, "."); ok {
		mayProvide = slices.Contains(reg.ProvidedNamespaces, ns)
	}
	if registered == nil && !mayProvide {
		// A person wrote the name: a typo is a usage error, never a denial (an agent's
		// unknown name stays the kernel's tool_unavailable). Nothing is opened or audited.
		return nil, nil, nil, usageError("run 'sharedos tools list --all' to see every registered tool", "%s", unknownToolMessage(reg.Tools, name))
	}
	def := registered
	if def == nil && len(a.Pairs) > 0 && mayProvide {
		// An MCP server's tool: its schema (which -a coerces by) is known once the
		// server's list is read, which needs the state database's cache (or the server).
		if def, err = svc.Definition(ctx, name, true); err != nil {
			return nil, nil, nil, serviceError(err)
		}
	}
	args, err := a.build(ios.In, def)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, n := range a.Notes {
		warn(ios, "%s", n)
	}
	return p, svc, args, nil
}

// registryDefinition is the definition named name among defs, or nil.
func registryDefinition(defs []kernel.ToolDefinition, name string) *kernel.ToolDefinition {
	for i := range defs {
		if defs[i].Name == name {
			return &defs[i]
		}
	}
	return nil
}

func runToolsCall(ctx context.Context, opts *ToolsCallOptions) error {
	p, svc, args, err := prepareCall(ctx, opts.IO, opts.Printer, opts.Service, opts.Name, &opts.Args)
	if err != nil {
		return err
	}
	// The CLI is the turn's driver: an offered sharedos.escalate ends the turn (the
	// service records it, not runs it); one that is not offered is invoked as any other.
	if opts.Name == kernel.EscalationToolName {
		out, err := svc.Escalate(ctx, api.EscalateRequest{Call: kernel.ToolCall{Tool: opts.Name, Arguments: args}, IfOffered: true})
		if err != nil {
			return serviceError(err)
		}
		if !out.NotOffered {
			return escalate(ctx, p, svc, out)
		}
	}

	out, err := svc.Invoke(ctx, api.InvokeRequest{Tool: opts.Name, Arguments: args})
	if err != nil {
		return serviceError(err)
	}
	res := out.Result
	if err := printResult(p, out.Definition, res); err != nil {
		return err
	}
	if why, ok := res.Metadata[kernel.AuditUnavailableKey]; ok {
		// the effect happened and its record is missing: never a quiet success
		warn(opts.IO, "the call took effect but its audit record could not be written: %v", why)
		return &resultExit{code: ExitCommandFailed}
	}
	return exitResult(res)
}

// callOutput is the JSON/YAML output of `tools call`: the result as the kernel's
// contract writes it, with the gate and cause of a refusal alongside its error, so that
// a script tells namespace_disabled from no_matching_grant without a second call.
type callOutput struct{ res kernel.ToolResult }

// MarshalJSON writes the result's own fields, then "gate" and "cause" when set.
func (c callOutput) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(c.res)
	if err != nil || (c.res.Gate == "" && c.res.Cause == "") {
		return b, err
	}
	extra, err := json.Marshal(struct {
		Gate  kernel.Gate  `json:"gate,omitempty"`
		Cause kernel.Cause `json:"cause,omitempty"`
	}{c.res.Gate, c.res.Cause})
	if err != nil {
		return nil, err
	}
	return append(append(b[:len(b)-1], ','), extra[1:]...), nil
}

func exitResult(res kernel.ToolResult) error {
	if code := exitForStatus(res.Status); code != ExitOK {
		return &resultExit{code: code}
	}
	return nil
}

// staticDefinitions are the definitions of the tools every sharedos host registers (the
// CLI has no per-context tool providers), built without a root, a database or a kernel.
func staticDefinitions() []kernel.ToolDefinition {
	hs, err := host.DefinitionTools()
	if err != nil {
		return nil // the built-in definitions are checked by the planes' tests
	}
	defs := make([]kernel.ToolDefinition, len(hs))
	for i := range hs {
		defs[i] = hs[i].Definition
	}
	return defs
}

// findDefinition returns the definition of a registered tool, or nil (unknown names
// still reach the kernel, which refuses and audits them). Arguments are coerced with it
// before anything is opened, so bad arguments change no state.
func findDefinition(name string) *kernel.ToolDefinition {
	for _, d := range staticDefinitions() {
		if d.Name == name {
			return &d
		}
	}
	return nil
}

// escalationOutput is what an escalated call prints.
type escalationOutput struct {
	Status     string            `json:"status"`
	Escalation kernel.Escalation `json:"escalation"`
}

// escalate prints the outcome of an offered escalation (api.Service.Escalate with
// IfOffered): recorded, or refused by its own authorization (a denied result).
func escalate(ctx context.Context, p *printer, svc api.Service, r api.EscalateResult) error {
	if r.Denied != nil {
		// the escalation's own authorization refused it: its grant's uses are spent
		def, err := svc.Definition(ctx, kernel.EscalationToolName, false)
		if err != nil {
			return serviceError(err)
		}
		if err := printResult(p, def, *r.Denied); err != nil {
			return err
		}
		return exitResult(*r.Denied)
	}
	if r.Escalation == nil {
		return internalError(errors.New("the service recorded no escalation and refused none"))
	}
	esc := *r.Escalation
	out := escalationOutput{Status: "escalated", Escalation: esc}
	if p.format != FormatTable {
		if err := p.data(out); err != nil {
			return err
		}
	} else {
		st := p.st()
		p.line("%s: the turn asks %s to decide", p.styled(cell{text: "escalated", style: &st.warn}), esc.Reviewer)
		p.line("reason:    %s", esc.Reason)
		p.line("requested: %s (status %s)", esc.RequestedAt, esc.Status)
		p.line("hint: nothing was granted; a reviewer resolves it by adding a grant to the grant file (see 'sharedos escalations list')")
	}
	return &resultExit{code: ExitEscalated}
}

// printResult prints a call's result: as data (with its gate and cause beside the
// error), or as a table for a person.
func printResult(p *printer, def *kernel.ToolDefinition, res kernel.ToolResult) error {
	if p.format != FormatTable {
		return p.data(callOutput{res})
	}
	return printResultTable(p, def, res)
}

// printResultTable renders a result for a person: the output of a success as YAML, or
// the refusal with its gate, cause, code and how to change the outcome.
func printResultTable(p *printer, def *kernel.ToolDefinition, res kernel.ToolResult) error {
	st := p.st()
	switch res.Status {
	case kernel.StatusSucceeded:
		p.line("%s %s (call %s)", p.styled(cell{text: "succeeded:", style: &st.ok}), res.Tool, res.CallID)
		if res.Output == nil {
			return nil
		}
		return writeYAML(p.ios.Out, res.Output)
	case kernel.StatusDenied:
		gate, cause := string(res.Gate), string(res.Cause)
		p.line("%s %s — %s", p.styled(cell{text: "denied:", style: &st.bad}), res.Error.Code, res.Error.Message)
		p.line("gate:  %s", dash(gate))
		if cause != "" {
			p.line("cause: %s", cause)
		}
		p.line("hint: %s", refusalHint(def, res.Tool, gate, string(res.Error.Code), cause))
	default:
		p.line("%s %s — %s", p.styled(cell{text: "failed:", style: &st.bad}), res.Error.Code, res.Error.Message)
		p.line("hint: %s", failureHint(res))
	}
	return nil
}

// refusalHint is one sentence on how to change a refusal's outcome.
func refusalHint(def *kernel.ToolDefinition, tool, gate, code, cause string) string {
	explain := fmt.Sprintf("run 'sharedos explain %s' with the same arguments for the grant to add", tool)
	switch {
	case cause == string(kernel.CauseNotRegistered):
		return "no tool of this name is registered; 'sharedos tools list --all' lists the registered tools"
	case cause == string(kernel.CauseNamespaceDisabled) && def != nil:
		return fmt.Sprintf("enable its tool namespace: 'sharedos namespaces enable %s' (or pass --namespaces %s for this run)", def.Namespace, def.Namespace)
	case code == string(kernel.ReasonAuthorityUnavailable) || cause == string(kernel.ReasonAuthorityUnavailable):
		return "the grant files were refused or could not be loaded; 'sharedos grants lint FILE' shows what is wrong"
	case gate == string(kernel.GateCeiling):
		return "the host ceiling of the config file (ceiling.frozenPaths / ceiling.frozenActions) refuses this; no grant can override it"
	case code == string(kernel.ReasonGrantExhausted) || cause == string(kernel.ReasonGrantExhausted):
		return "the matching grant has used all its maxUses; issue a new grant (" + explain + ")"
	case code == string(kernel.ReasonDelegationChainInvalid) || code == string(kernel.ReasonDelegationChainUnverified):
		return "the matching grant's delegation chain does not hold; 'sharedos grants lint FILE' shows the broken link"
	case code == string(kernel.ReasonUsageStoreUnavailable) || code == string(kernel.ReasonHostPolicyUnavailable):
		return "an infrastructure port failed (fail-closed); check the state database and retry"
	case code == string(kernel.ReasonInvalidRequest):
		return "the call names a resource of another owner; call it with --owner set to that owner"
	case code == string(kernel.CodeTraceMismatch) || code == string(kernel.ReasonInvalidContext):
		return "the context is invalid; check --now, --trace and --purpose"
	case gate == string(kernel.GateGrant) || code == string(kernel.ReasonNoMatchingGrant):
		return "no grant covers this call; " + explain
	}
	return explain
}

func failureHint(res kernel.ToolResult) string {
	switch res.Error.Code {
	case kernel.CodeInvalidToolArguments:
		return fmt.Sprintf("correct the arguments; 'sharedos tools describe %s' shows what the tool takes", res.Tool)
	case kernel.CodeToolCatalogUnavailable:
		return "a tool provider could not list its tools; 'sharedos tools list --all' says which and why"
	case kernel.CodeEscalationNotTerminated:
		return "sharedos.escalate ends a turn and is never executed"
	}
	if res.Error.Retryable != nil && *res.Error.Retryable {
		return "the failure is transient; retry the call"
	}
	return "the call was allowed but the tool could not complete it; the message says why"
}
