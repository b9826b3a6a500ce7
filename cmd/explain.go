package cmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// ExplainOptions are the options of `explain`.
type ExplainOptions struct {
	IO      *IOStreams
	Printer func() (*printer, error)
	Service func() (api.Service, error)
	// GrantFiles are the run's grant files (absolute): --apply writes one of them, on
	// this machine, so it stays local whatever the backend.
	GrantFiles func() ([]string, error)

	Name       string
	Args       ArgsOptions
	PrintGrant bool
	Apply      string
}

func newExplainCmd(f *Factory) *cobra.Command { return newExplainCmdWith(f, nil) }

// newExplainCmdWith builds `explain`; runF, when set, replaces the run.
func newExplainCmdWith(f *Factory, runF func(*ExplainOptions) error) *cobra.Command {
	opts := &ExplainOptions{IO: f.IOStreams, Printer: f.Printer,
		Service: func() (api.Service, error) { return f.service(callNeeds) },
		GrantFiles: func() ([]string, error) {
			s, err := f.Settings()
			if err != nil {
				return nil, err
			}
			return s.Grants, nil
		}}
	c := &cobra.Command{
		Use:   "explain NAME",
		Short: "Dry-run a tool call: every gate that would refuse it, and the fix",
		Long: `Run the 'tools call' pipeline without consuming a use, executing anything or writing
audit records, and report every gate that would refuse the call, the requirement the
arguments resolve to, the candidate grants and why each was rejected, and the fixes: the
namespace to enable, the grant (in grant-file format) that covers exactly the requirement,
or the argument to correct.

--apply FILE inserts the grant fix into FILE, one of the run's grant files: under its
grants: list wherever it sits (YAML or JSON, comments kept), checked by the strict
parser and written atomically; the file is unchanged when anything is wrong. Prefer it
to appending --print-grant with >>, which is safe only when grants: is the file's last
block list.

Exit codes: 0 the call would be allowed (or --apply added the grant), 3 it would be
refused (for any reason, including invalid arguments, or --apply had no grant to add).`,
		Example: `  sharedos explain files.replace -a path=notes/todo.md -a content=done
  sharedos explain files.read -a path=secret.md --apply grants/reader.yaml`,
		Args:              exactArgs(1, "one tool name"),
		ValidArgsFunction: f.completeToolNames,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Name = args[0]
			opts.Args.jsonSet = c.Flags().Changed("args")
			if runF != nil {
				return runF(opts)
			}
			return runExplain(c.Context(), opts)
		},
	}
	opts.Args.bind(c.Flags())
	_ = c.RegisterFlagCompletionFunc("arg", f.completeArg)
	c.Flags().BoolVar(&opts.PrintGrant, "print-grant", false, "print only the grant to add, as a YAML list item to append under a grant file's grants:")
	c.Flags().StringVar(&opts.Apply, "apply", "", "insert the grant fix into `FILE` (one of the run's grant files), structurally and atomically")
	return c
}

// The explanation types are pkg/api's (pkg/host builds them for every surface).
type (
	explanation = api.Explanation
	fix         = api.Fix
)

// Fix kinds.
const (
	FixEnableNamespace = api.FixEnableNamespace
	FixAddGrant        = api.FixAddGrant
	FixArguments       = api.FixArguments
)

// fixGrant is host.FixGrant (the tests of the explain command call it by this name).
func fixGrant(actx kernel.AccessContext, req kernel.CapabilityRequirement, replaced *host.RejectedCandidate) kernel.CapabilityGrant {
	return host.FixGrant(actx, req, replaced)
}

func runExplain(ctx context.Context, opts *ExplainOptions) error {
	p, svc, args, err := prepareCall(ctx, opts.IO, opts.Printer, opts.Service, opts.Name, &opts.Args)
	if err != nil {
		return err
	}
	out, err := svc.Explain(ctx, api.InvokeRequest{Tool: opts.Name, Arguments: args})
	if err != nil {
		return serviceError(err)
	}
	grants, err := opts.GrantFiles()
	if err != nil {
		return err
	}
	if opts.Apply != "" {
		return applyFix(p, grants, opts.Apply, out)
	}
	if opts.PrintGrant {
		for _, fx := range out.Fixes {
			if fx.Kind == FixAddGrant {
				fmt.Fprint(opts.IO.Out, fx.YAML)
			}
		}
	} else if p.format != FormatTable {
		if err := p.data(out); err != nil {
			return err
		}
	} else {
		def, err := svc.Definition(ctx, out.Tool, false)
		if err != nil {
			return serviceError(err)
		}
		printExplanation(p, def, grants, out)
	}
	if !out.Allowed {
		return &resultExit{code: ExitDenied}
	}
	return nil
}

// printExplanation renders an explanation for a person; def is the tool's definition
// (nil when unknown) and grants the run's grant files, which the grant fix names.
func printExplanation(p *printer, def *kernel.ToolDefinition, grants []string, out explanation) {
	st := p.st()
	if out.Allowed {
		p.line("%s %s would be allowed", p.styled(cell{text: "allowed:", style: &st.ok}), out.Tool)
	} else {
		r := out.Refusal
		p.line("%s %s would be refused: %s (gate %s%s)", p.styled(cell{text: "refused:", style: &st.bad}), out.Tool,
			r.Code, r.Gate, map[bool]string{true: ", cause " + string(r.Cause), false: ""}[r.Cause != ""])
	}
	p.line("context: %s acting for %s under %s's grants, world %s, purpose %q, at %s",
		out.Context.Actor, out.Context.Owner, out.Context.Authority, out.Context.World, out.Context.Purpose, out.Context.Now)
	if out.Requirement != nil {
		p.line("requires: %s on %s:%s", out.Requirement.Action, out.Requirement.Resource.Namespace,
			kernel.JoinPath(out.Requirement.Resource.Path))
	}
	if out.MatchedGrant != nil {
		p.line("matched grant: %s", out.MatchedGrant.ID)
	}
	if len(out.Findings) > 0 {
		p.line("")
		t := p.table("GATE", "CODE", "CAUSE", "WHY").flexible(3)
		for _, fd := range out.Findings {
			t.row(string(fd.Gate), string(fd.Code), dash(string(fd.Cause)), fd.Message)
		}
		_ = t.render()
	}
	if len(out.Candidates) > 0 {
		p.line("")
		t := p.table("CANDIDATE GRANT", "REJECTED")
		for _, c := range out.Candidates {
			t.row(c.GrantID, c.Rejected)
		}
		_ = t.render()
	}
	if !out.Allowed && len(out.Fixes) == 0 {
		r := out.Refusal
		p.line("")
		p.line("hint: %s", refusalHint(def, out.Tool, string(r.Gate), string(r.Code), string(r.Cause)))
	}
	for _, fx := range out.Fixes {
		p.line("")
		switch fx.Kind {
		case FixEnableNamespace:
			p.line("fix: %s %s:\n  %s", fx.Message, fx.Namespace, fx.Command)
		case FixArguments:
			p.line("fix: correct the arguments: %s", fx.Message)
		case FixAddGrant:
			target := "the grant file"
			if len(grants) > 0 {
				target = grants[0]
			}
			p.line("fix: append this grant under grants: of %s (or run with --print-grant >> FILE):", target)
			fmt.Fprint(p.ios.Out, fx.YAML)
		}
	}
}
