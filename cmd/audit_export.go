package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcpserver"
	"github.com/sharedos/sharedos/pkg/scenario"
)

// AuditExportOptions are the options of `audit export`.
type AuditExportOptions struct {
	IO       *IOStreams
	Service  func() (api.Service, error)
	Settings func() (*Settings, error)
	Getwd    func() (string, error)

	AsTest    bool
	File      string
	Outcomes  []string
	Tool      string
	Operation string
	Actor     string
	Limit     int

	// ActorAddr is Actor as RunE checked it.
	ActorAddr kernel.Address
}

// newAuditExportCmd builds `audit export`; runF, when set, replaces the run.
func newAuditExportCmd(f *Factory, runF func(*AuditExportOptions) error) *cobra.Command {
	opts := &AuditExportOptions{IO: f.IOStreams, Settings: f.Settings, Getwd: f.Getwd,
		Service: func() (api.Service, error) { return f.service(host.Needs{}) }}
	c := &cobra.Command{
		Use:   "export --as-test",
		Short: "Turn recorded tool calls into a scenario file that reproduces their decisions",
		Long: `Turn recorded tool calls (tool.invoked events of the state database, oldest first) into a
'sharedos test' scenario file that reproduces each decision: one test per call, in the
call's recorded context (actor, owner, authority, world, purpose, instant), with the
namespace selection the recorded cause implies, under the run's grant files and ceiling,
expecting the recorded status, code, gate, cause, deciding grant and exit code.

The audit trail keeps no arguments: a call's path is the resource its authorization
recorded, and any other required argument is a placeholder (authorization never depends
on it). A call refused because its grant's uses were spent is preceded by as many
unchecked calls on the grant's own path as the grant has uses. A refused call is called
again (a refusal comes before any file is touched); a succeeded one is explained instead,
expecting it allowed under the same grant: the dry run needs none of the files the call
found or changed. A call that failed invalid_tool_arguments is called again with
arguments the tool's input schema refuses. An outcome the trail cannot reproduce is a
skipped test saying why: an outage, an MCP escalation latch, a failure inside the tool
(its decision is still explained, in a test of its own), a failure that depended on the
arguments or on the host of the time.

--file FILE writes the scenario there (paths in it relative to FILE's folder; refused
when FILE exists); without it, it goes to stdout with paths relative to the working
directory. The result is checked with the scenario parser before it is written.`,
		Example: `  sharedos audit export --as-test --outcome denied --limit 5 --file sharedos-tests/denials.yaml
  sharedos audit export --as-test --operation 3f2a9c1e`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return runAuditExport(c.Context(), opts)
		},
	}
	fl := c.Flags()
	fl.BoolVar(&opts.AsTest, "as-test", false, "export as a 'sharedos test' scenario file (the one format)")
	fl.StringVar(&opts.File, "file", "", "write the scenario to `FILE` (default: stdout)")
	fl.StringSliceVar(&opts.Outcomes, "outcome", nil, "outcomes (comma-separated): succeeded, denied, failed")
	fl.StringVar(&opts.Tool, "tool", "", "tool name")
	fl.StringVar(&opts.Operation, "operation", "", "only this call id (or unique prefix of one)")
	fl.StringVar(&opts.Actor, "actor", "", "only the calls of this actor, kind:id")
	fl.IntVar(&opts.Limit, "limit", 20, "at most this many calls, the newest (0: all)")
	_ = c.RegisterFlagCompletionFunc("tool", f.completeToolFlag)
	return c
}

// validate checks the flags of `audit export` before anything is opened.
func (opts *AuditExportOptions) validate() error {
	if !opts.AsTest {
		return usageError("pass --as-test (the scenario file of 'sharedos test' is the one export format)", "audit export needs --as-test")
	}
	if err := checkVocabulary("outcome", opts.Outcomes, []string{"succeeded", "denied", "failed"}); err != nil {
		return err
	}
	if opts.Limit < 0 {
		return usageError("pass --limit 0 (all) or a positive number", "invalid --limit %d", opts.Limit)
	}
	if opts.Actor != "" {
		a, err := parseAddressFlag("actor", opts.Actor)
		if err != nil {
			return err
		}
		opts.ActorAddr = a
	}
	return nil
}

func runAuditExport(ctx context.Context, opts *AuditExportOptions) error {
	s, err := opts.Settings()
	if err != nil {
		return err
	}
	base, err := opts.Getwd()
	if err != nil {
		return internalError(err)
	}
	if opts.File != "" {
		abs, err := filepath.Abs(opts.File)
		if err != nil {
			return usageError("", "--file %s: %v", opts.File, err)
		}
		if _, err := os.Lstat(abs); err == nil {
			return usageError("name a new file, or move the old one aside", "--file %s exists; not overwriting it", opts.File)
		}
		base = filepath.Dir(abs)
	}
	var owner kernel.Address
	if s.Owner != "" {
		if owner, err = parseAddressFlag("owner", s.Owner); err != nil {
			return err
		}
	}
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	calls, err := svc.ExportAudit(ctx, api.AuditQuery{Outcomes: opts.Outcomes, Tool: opts.Tool, Operation: opts.Operation,
		TraceID: s.Trace, World: s.World, Owner: owner, Actor: opts.ActorAddr, Limit: opts.Limit})
	if err != nil {
		return serviceError(err)
	}
	if len(calls) == 0 {
		return usageError("widen the filters; 'sharedos audit list --calls' shows what is recorded", "no recorded tool call matches")
	}
	text := exportScenario(s, calls, base)
	name := opts.File
	if name == "" {
		name = filepath.Join(base, "export.yaml")
	}
	if _, err := scenario.Parse(name, []byte(text)); err != nil {
		return internalError(fmt.Errorf("the exported scenario does not parse: %v", err))
	}
	if opts.File == "" {
		_, err := fmt.Fprint(opts.IO.Out, text)
		return err
	}
	if err := writeFileAtomic(opts.File, func(w io.Writer) error { _, err := io.WriteString(w, text); return err }); err != nil {
		return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeInternalError, Message: fmt.Sprintf("--file %s: %v", opts.File, err), Err: err}
	}
	fmt.Fprintf(opts.IO.ErrOut, "wrote %d recorded calls to %s; run 'sharedos test %s'\n", len(calls), opts.File, opts.File)
	return nil
}

// exportScenario writes the scenario file of calls. Its grant files and ceiling are the
// run's own (this machine's), like the paths it names.
func exportScenario(s *Settings, calls []api.AuditCall, base string) string {
	rel := func(p string) string {
		if r, err := filepath.Rel(base, p); err == nil {
			return filepath.ToSlash(r)
		}
		return p
	}
	defs := staticDefinitions()
	var b strings.Builder
	fmt.Fprintf(&b, "# Exported by 'sharedos audit export --as-test' from %s: %d recorded calls.\n", s.State, len(calls))
	b.WriteString("# The audit trail keeps no arguments: a path is the resource the call's authorization\n")
	b.WriteString("# recorded; other required arguments are placeholders (authorization never reads them).\n")
	b.WriteString("# A refused call is called again; a succeeded one is explained (the dry run: the files it\n")
	b.WriteString("# changed are not needed, nothing runs); a call with invalid arguments is called with\n")
	b.WriteString("# arguments its schema refuses. An outcome the trail cannot reproduce is a skipped test\n")
	b.WriteString("# whose reason says why.\n")
	b.WriteString("version: 1\nname: recorded decisions\n")
	if len(s.Grants) > 0 {
		gs := make([]any, len(s.Grants))
		for i, g := range s.Grants {
			gs[i] = rel(g)
		}
		fmt.Fprintf(&b, "grants: %s\n", scenario.FlowYAML(gs))
	}
	ceiling := map[string]any{}
	for k, v := range map[string][]string{"namespaces": s.ForbiddenNamespaces, "frozenPaths": s.FrozenPaths, "frozenActions": s.FrozenActions} {
		if len(v) > 0 {
			ceiling[k] = v
		}
	}
	if len(ceiling) > 0 {
		fmt.Fprintf(&b, "ceiling: %s\n", scenario.FlowYAML(ceiling))
	}
	b.WriteString("tests:\n")
	names := map[string]int{}
	for _, c := range calls {
		ev, checks := c.Call, c.Checks
		var def *kernel.ToolDefinition
		for i := range defs {
			if defs[i].Name == ev.Tool {
				def = &defs[i]
			}
		}
		name := fmt.Sprintf("%s %s", ev.Tool, ev.Outcome)
		if ev.Reason != "" {
			name += " " + string(ev.Reason)
		}
		name += " (call " + shortID(ev.OperationID) + ")"
		if names[name]++; names[name] > 1 {
			name += fmt.Sprintf(" #%d", names[name])
		}
		fmt.Fprintf(&b, "  - name: %s\n", scenario.FlowYAML(name))
		for _, kv := range [][2]string{{"as", ev.Actor.String()}, {"owner", ev.Owner.String()}, {"authority", ev.Authority.String()},
			{"world", ev.NamespaceID}, {"purpose", ev.Purpose}, {"now", ev.At}} {
			fmt.Fprintf(&b, "    %s: %s\n", kv[0], scenario.FlowYAML(kv[1]))
		}
		ns := []string{}
		if def != nil && ev.Cause != kernel.CauseNamespaceDisabled {
			ns = append(ns, def.Namespace)
		}
		plan := replayOf(ev, def, checks)
		if plan.skip != "" && plan.explain == nil {
			fmt.Fprintf(&b, "    skip: %s\n", scenario.FlowYAML(plan.skip))
			continue
		}
		fmt.Fprintf(&b, "    namespaces: %s\n", scenario.FlowYAML(ns))
		b.WriteString("    steps:\n")
		if plan.explain != nil {
			// The call was allowed and then failed in the tool: the decision is replayed
			// here, and the failure is a skipped test of its own (below).
			fmt.Fprintf(&b, "      - %s\n", scenario.FlowYAML(plan.explain))
			skipped := name + ": its failure"
			fmt.Fprintf(&b, "  - name: %s\n", scenario.FlowYAML(skipped))
			fmt.Fprintf(&b, "    skip: %s\n", scenario.FlowYAML(plan.skip))
			continue
		}
		args := exportArgs(def, checks)
		if plan.badArgs != nil {
			args = plan.badArgs
		} else if n, path := spentUses(s, checks); n > 0 {
			spend := map[string]any{"call": ev.Tool, "args": withPath(args, path)}
			for range n {
				fmt.Fprintf(&b, "      - %s\n", scenario.FlowYAML(spend))
			}
		}
		if plan.step == kernel.StatusSucceeded {
			expect := map[string]any{"allowed": true, "exit": ExitOK}
			if g := allowedGrant(checks); g != "" {
				expect["grant"] = g
			}
			fmt.Fprintf(&b, "      - %s\n", scenario.FlowYAML(map[string]any{"explain": ev.Tool, "args": args, "expect": expect}))
			continue
		}
		step := map[string]any{"call": ev.Tool, "args": args}
		expect := map[string]any{"status": string(ev.Outcome), "exit": exitForStatus(kernel.ToolStatus(ev.Outcome))}
		if ev.Reason != "" {
			expect["code"] = string(ev.Reason)
		}
		if ev.Cause != "" {
			expect["cause"] = string(ev.Cause)
		}
		if g := kernel.ClassifyRefusal(ev); g != "" {
			expect["gate"] = string(g)
		}
		step["expect"] = expect
		fmt.Fprintf(&b, "      - %s\n", scenario.FlowYAML(step))
	}
	return b.String()
}

// exportArgs rebuilds a call's arguments: its path from the resource its authorization
// recorded, a placeholder for every other required argument.
func exportArgs(def *kernel.ToolDefinition, checks []kernel.AuditEvent) map[string]any {
	args := map[string]any{}
	if def == nil {
		return args
	}
	var path []string
	for _, c := range checks {
		if c.Resource != nil {
			path = c.Resource.Path
		} else if ra := c.RequestedAuthority; ra != nil && len(ra.Capabilities) > 0 {
			path = ra.Capabilities[0].Resource.Path
		}
	}
	props, _ := def.InputSchema["properties"].(map[string]any)
	req, _ := def.InputSchema["required"].([]any)
	if _, ok := props["path"]; ok && path != nil {
		args["path"] = append([]string{}, path...)
	}
	for _, r := range req {
		n, _ := r.(string)
		if _, done := args[n]; done {
			continue
		}
		prop, _ := props[n].(map[string]any)
		if enum, ok := prop["enum"].([]any); ok && len(enum) > 0 {
			args[n] = enum[0]
			continue
		}
		switch schemaType(prop) {
		case "integer", "number":
			args[n] = 1
		case "boolean":
			args[n] = false
		case "array":
			args[n] = []any{}
		case "object":
			args[n] = map[string]any{}
		default:
			args[n] = "x"
		}
	}
	return args
}

// withPath is args with its path replaced (when it has one).
func withPath(args map[string]any, path []string) map[string]any {
	out := map[string]any{}
	for k, v := range args {
		out[k] = v
	}
	if _, ok := out["path"]; ok && path != nil {
		out["path"] = path
	}
	return out
}

// spentUses is how many uses the grant that a call found exhausted allows (0 when the
// call was not refused for spent uses), and the path of its first capability: that many
// calls on that path (which the grant covers) spend them again.
func spentUses(s *Settings, checks []kernel.AuditEvent) (int, []string) {
	for _, c := range checks {
		rej, _ := c.Metadata["rejectedGrants"].([]any)
		for _, r := range rej {
			m, _ := r.(map[string]any)
			if m["reason"] != string(kernel.RejectExhausted) {
				continue
			}
			id, _ := m["grantId"].(string)
			if n, path := grantMaxUses(s, id); n > 0 {
				return n, path
			}
		}
	}
	return 0, nil
}

func grantMaxUses(s *Settings, id string) (int, []string) {
	p, err := host.Prepare(&s.Settings, time.Now, host.Needs{})
	if err != nil || p.Grants == nil {
		return 0, nil
	}
	defer p.Close()
	for _, f := range p.Grants.Files() {
		for _, g := range f.Grants {
			if g.ID == id && g.Constraints.MaxUses != nil && len(g.Capabilities) > 0 {
				return int(*g.Constraints.MaxUses), g.Capabilities[0].Resource.Path
			}
		}
	}
	return 0, nil
}

// replay is how one recorded call is replayed: step is the status the replay step
// asserts (succeeded: an explain step expecting the call allowed; denied or failed: the
// call again, expecting the recorded outcome); badArgs replace the rebuilt arguments;
// skip, when set, is why the recorded outcome cannot be reproduced from the trail (the
// test is skipped with that reason, and explain, when set, still replays the decision
// the call got before it failed).
type replay struct {
	step    kernel.ToolStatus
	badArgs map[string]any
	explain map[string]any
	skip    string
}

// replayOf decides how a recorded call (a tool.invoked event) is replayed. Every
// recorded outcome becomes a step that reproduces it, or a skipped test saying why it
// cannot be (security issue 20, item 8):
//
//   - succeeded: explained, expecting it allowed (under the same grant); the dry run
//     needs none of the files the call read or changed.
//   - denied by the grant files, the ceiling or the catalogue (replayableDenials: a
//     missing grant, spent uses, the ceiling, a broken delegation chain, a hidden,
//     unknown or switched-off tool): called again, expecting the recorded code, gate and
//     cause; a refusal comes before any file is touched.
//   - denied by an outage (authority_unavailable and the other fail-closed codes), by an
//     MCP session's escalation latch (escalation_pending), of a tool no longer or never
//     registered (tool_unavailable, cause not_registered: a scenario step names registered
//     tools only), or by anything else
//     (invalid_request: another owner's resource or a malformed call, in the arguments;
//     invalid_context, trace_mismatch: the replay derives valid ones; a code this version
//     does not know): skipped, since the replay would be allowed instead.
//   - failed invalid_tool_arguments: the arguments are not recorded, so the replay calls
//     the tool with arguments its input schema refuses (an undeclared key when the schema
//     declares additionalProperties:false, else a value of the wrong type), expecting
//     failed invalid_tool_arguments; a tool whose schema refuses nothing is skipped.
//   - failed after an allowed authorization (tool_execution_failed, a plane's own code
//     such as not_found, invalid_tool_result): the decision is explained (allowed, same
//     grant) and the failure is a skipped test of its own: it depended on files and
//     arguments the trail does not keep.
//   - any other failure (invalid_tool_requirement and tool_requirement_resolution_failed
//     depend on the unrecorded arguments; tool_catalog_unavailable, audit_unavailable and
//     escalation_not_terminated on the host of the time) and any other outcome: skipped.
func replayOf(ev kernel.AuditEvent, def *kernel.ToolDefinition, checks []kernel.AuditEvent) replay {
	code := ev.Reason
	switch ev.Outcome {
	case kernel.OutcomeSucceeded:
		return replay{step: kernel.StatusSucceeded}
	case kernel.OutcomeDenied:
		switch {
		case kernel.IsInfrastructureDenial(code) || kernel.IsInfrastructureDenial(kernel.ErrorCode(ev.Cause)):
			// (a tool an outage hid is tool_unavailable with the outage as its cause)
			return replay{skip: fmt.Sprintf("denied %s: an outage at the time; the replay runs on working ports, so it cannot recreate it", code)}
		case code == kernel.CodeToolUnavailable && ev.Cause == kernel.CauseNotRegistered:
			// A scenario names registered tools only (a step naming another is an
			// invalid file): an agent's unknown name cannot be a step.
			return replay{skip: fmt.Sprintf("denied %s not_registered: %s is no registered tool (an agent's unknown name, or a tool since removed), and a scenario step names registered tools only", code, ev.Tool)}
		case code == mcpserver.CodeEscalationPending || kernel.ClassifyRefusal(ev) == kernel.GateEnvelope:
			return replay{skip: fmt.Sprintf("denied %s: an MCP session's escalation latch; a scenario keeps no latch", code)}
		case slices.Contains(replayableDenials, code):
			return replay{step: kernel.StatusDenied}
		}
		return replay{skip: fmt.Sprintf("denied %s: the refusal depended on the call's arguments, context or trace of the time, which the audit trail does not keep", code)}
	case kernel.OutcomeFailed:
		if code == kernel.CodeInvalidToolArguments {
			if bad := invalidArgs(def); bad != nil {
				return replay{step: kernel.StatusFailed, badArgs: bad}
			}
			return replay{skip: "failed invalid_tool_arguments: the arguments are not recorded, and the tool's input schema refuses none that could stand in for them"}
		}
		if g, ok := allowedCheck(checks); ok {
			expect := map[string]any{"allowed": true, "exit": ExitOK}
			if g != "" {
				expect["grant"] = g
			}
			return replay{
				explain: map[string]any{"explain": ev.Tool, "args": exportArgs(def, checks), "expect": expect},
				skip:    fmt.Sprintf("failed %s after it was allowed: the failure depended on files and arguments the audit trail does not keep (the test before this one replays the decision)", code),
			}
		}
		return replay{skip: fmt.Sprintf("failed %s: it depended on arguments or on the host of the time, which the audit trail does not keep", code)}
	}
	return replay{skip: fmt.Sprintf("outcome %s is no call result a scenario can replay", ev.Outcome)}
}

// replayableDenials are the refusal codes the run's grant files, ceiling and catalogue
// decide alone: a call again, in the recorded context, gets them again.
var replayableDenials = []kernel.ErrorCode{
	kernel.ErrorCodeOf(kernel.ReasonNoMatchingGrant), kernel.ErrorCodeOf(kernel.ReasonGrantExhausted),
	kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied), kernel.ErrorCodeOf(kernel.ReasonDelegationChainInvalid),
	kernel.CodeToolUnavailable,
}

// allowedCheck reports whether the call's authorization was allowed, and the deciding
// grant of the last allowed check ("" when none is recorded).
func allowedCheck(checks []kernel.AuditEvent) (string, bool) {
	grant, ok := "", false
	for _, c := range checks {
		if c.Outcome == kernel.OutcomeAllowed {
			ok = true
			if c.GrantID != "" {
				grant = c.GrantID
			}
		}
	}
	return grant, ok
}

// allowedGrant is the deciding grant of a call's last allowed authorization ("" when none).
func allowedGrant(checks []kernel.AuditEvent) string {
	g, _ := allowedCheck(checks)
	return g
}

// invalidArgs are arguments def's input schema refuses, or nil when it refuses none the
// export can name: an undeclared key when the schema declares additionalProperties:false,
// else the first declared property (by name) with a value of another type.
func invalidArgs(def *kernel.ToolDefinition) map[string]any {
	if def == nil {
		return nil
	}
	if def.InputSchema["additionalProperties"] == false {
		return map[string]any{"unrecorded-argument": true}
	}
	props, _ := def.InputSchema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		prop, _ := props[n].(map[string]any)
		switch schemaType(prop) {
		case "string":
			return map[string]any{n: 0}
		case "integer", "number", "boolean", "array", "object":
			return map[string]any{n: "not-a-" + schemaType(prop)}
		}
	}
	return nil
}
