package cmd

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/tokens"
)

// parseArgv builds a command with a runF that captures its options, runs it on argv, and
// checks that nothing below the options was reached: no settings resolved, no service
// built, no host opened (argv → options needs no backend).
func parseArgv[O any](t *testing.T, build func(*Factory, func(*O) error) *cobra.Command, argv []string, setup ...func(*Factory)) (*O, error) {
	t.Helper()
	ios, _, _, _ := Test()
	f := &Factory{IOStreams: ios, Env: func(string) string { return "" },
		Clock: func() time.Time { return time.Date(2026, 8, 3, 12, 0, 0, 0, time.UTC) },
		Getwd: func() (string, error) { return "/work", nil }}
	for _, s := range setup {
		s(f)
	}
	var got *O
	c := build(f, func(o *O) error { got = o; return nil })
	c.SetArgs(argv)
	c.SetOut(io.Discard)
	c.SetErr(io.Discard)
	c.SilenceUsage, c.SilenceErrors = true, true
	err := c.Execute()
	if f.settingsOK || f.svc != nil || f.host != nil || f.prep != nil || f.store != nil {
		t.Errorf("%q reached the backend", argv)
	}
	if err == nil && got == nil {
		t.Fatalf("%q: runF was not called", argv)
	}
	if got != nil && err == nil {
		// a command that uses no service of the run's (test, tokens) has no Service field
		if sv := reflect.ValueOf(got).Elem().FieldByName("Service"); sv.IsValid() && sv.IsNil() {
			t.Errorf("%q: options without a Service", argv)
		}
	}
	return got, err
}

// checkParse runs one table case: either want (the projection of the options) or an
// error containing wantErr.
func checkParse[O any, P any](t *testing.T, build func(*Factory, func(*O) error) *cobra.Command, argv []string,
	project func(*O) P, want P, wantErr string) {
	t.Helper()
	got, err := parseArgv(t, build, argv)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: error %v, want one containing %q", argv, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q: %v", argv, err)
	}
	if p := project(got); !reflect.DeepEqual(p, want) {
		t.Errorf("%q:\n got %+v\nwant %+v", argv, p, want)
	}
}

func TestNewCmdToolsList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		argv    []string
		all     bool
		wantErr string
	}{
		{argv: nil},
		{argv: []string{"--all"}, all: true},
		{argv: []string{"files"}, wantErr: "takes no arguments"},
	} {
		checkParse(t, newToolsListCmd, tc.argv, func(o *ToolsListOptions) bool { return o.All }, tc.all, tc.wantErr)
	}
}

func TestNewCmdToolsDescribe(t *testing.T) {
	t.Parallel()
	checkParse(t, newToolsDescribeCmd, []string{"files.read"}, func(o *ToolsDescribeOptions) string { return o.Name }, "files.read", "")
	checkParse(t, newToolsDescribeCmd, nil, func(o *ToolsDescribeOptions) string { return o.Name }, "", "one tool name")
	checkParse(t, newToolsDescribeCmd, []string{"a", "b"}, func(o *ToolsDescribeOptions) string { return o.Name }, "", "one tool name")
}

// callProjection is what argv sets of `tools call` and `explain`.
type callProjection struct {
	Name    string
	JSON    string
	JSONSet bool
	File    string
	Pairs   []string
	Print   bool
	Apply   string
}

func TestNewCmdToolsCall(t *testing.T) {
	t.Parallel()
	project := func(o *ToolsCallOptions) callProjection {
		return callProjection{Name: o.Name, JSON: o.Args.JSON, JSONSet: o.Args.jsonSet, File: o.Args.File, Pairs: o.Args.Pairs}
	}
	for _, tc := range []struct {
		argv    []string
		want    callProjection
		wantErr string
	}{
		{argv: []string{"files.read", "-a", "path=a/b", "-a", "x=1"}, want: callProjection{Name: "files.read", Pairs: []string{"path=a/b", "x=1"}}},
		{argv: []string{"files.list", "--args", `{"path":[]}`}, want: callProjection{Name: "files.list", JSON: `{"path":[]}`, JSONSet: true}},
		{argv: []string{"files.list", "--args", ""}, want: callProjection{Name: "files.list", JSONSet: true}},
		{argv: []string{"files.list", "--args-file", "-"}, want: callProjection{Name: "files.list", File: "-"}},
		{argv: nil, wantErr: "one tool name"},
		{argv: []string{"files.read", "--nope"}, wantErr: "unknown flag"},
	} {
		checkParse(t, newToolsCallCmd, tc.argv, project, tc.want, tc.wantErr)
	}
	// the escalate branch needs nothing but the service either
	got, err := parseArgv(t, newToolsCallCmd, []string{"sharedos.escalate"})
	if err != nil || got.Service == nil {
		t.Fatalf("tools call: err %v, service func %v", err, got != nil && got.Service != nil)
	}
}

func TestNewCmdExplain(t *testing.T) {
	t.Parallel()
	project := func(o *ExplainOptions) callProjection {
		return callProjection{Name: o.Name, JSON: o.Args.JSON, JSONSet: o.Args.jsonSet, File: o.Args.File, Pairs: o.Args.Pairs,
			Print: o.PrintGrant, Apply: o.Apply}
	}
	for _, tc := range []struct {
		argv    []string
		want    callProjection
		wantErr string
	}{
		{argv: []string{"files.read", "-a", "path=a"}, want: callProjection{Name: "files.read", Pairs: []string{"path=a"}}},
		{argv: []string{"files.read", "--print-grant"}, want: callProjection{Name: "files.read", Print: true}},
		{argv: []string{"files.read", "--apply", "g.yaml", "--args", "{}"}, want: callProjection{Name: "files.read", Apply: "g.yaml", JSON: "{}", JSONSet: true}},
		{argv: []string{}, wantErr: "one tool name"},
	} {
		checkParse(t, newExplainCmdWith, tc.argv, project, tc.want, tc.wantErr)
	}
	got, err := parseArgv(t, newExplainCmdWith, []string{"files.read"})
	if err != nil || got.GrantFiles == nil {
		t.Fatalf("explain: err %v, grant files func missing", err)
	}
}

func TestNewCmdNamespacesList(t *testing.T) {
	t.Parallel()
	project := func(*NamespacesListOptions) bool { return true }
	checkParse(t, newNamespacesListCmd, nil, project, true, "")
	checkParse(t, newNamespacesListCmd, []string{"files"}, project, false, "takes no arguments")
}

func TestNewCmdNamespacesUpdate(t *testing.T) {
	t.Parallel()
	type proj struct {
		Update kernel.ToolNamespaceUpdate
		Strict bool
	}
	project := func(o *NamespacesUpdateOptions) proj { return proj{o.Update, o.Strict} }
	toggle := func(verb string) func(*Factory, func(*NamespacesUpdateOptions) error) *cobra.Command {
		return func(f *Factory, runF func(*NamespacesUpdateOptions) error) *cobra.Command {
			return newNamespacesToggleCmd(f, verb, verb, runF)
		}
	}
	for _, tc := range []struct {
		build   func(*Factory, func(*NamespacesUpdateOptions) error) *cobra.Command
		argv    []string
		want    proj
		wantErr string
	}{
		{build: toggle("enable"), argv: []string{"files", "repo"}, want: proj{Update: kernel.ToolNamespaceUpdate{Enable: []string{"files", "repo"}}}},
		{build: toggle("disable"), argv: []string{"repo", "--strict"}, want: proj{Update: kernel.ToolNamespaceUpdate{Disable: []string{"repo"}}, Strict: true}},
		{build: toggle("enable"), argv: nil, wantErr: "one or more namespace names"},
		{build: toggle("enable"), argv: []string{"files", "files"}, wantErr: `lists "files" twice`},
		{build: newNamespacesUpdateCmd, argv: []string{"--enable", "files,repo", "--disable", "sharedos"},
			want: proj{Update: kernel.ToolNamespaceUpdate{Enable: []string{"files", "repo"}, Disable: []string{"sharedos"}}}},
		{build: newNamespacesUpdateCmd, argv: []string{"--patch", `{"enable":["files"]}`},
			want: proj{Update: kernel.ToolNamespaceUpdate{Enable: []string{"files"}}}},
		{build: newNamespacesUpdateCmd, argv: []string{"--patch", `{"enable":["files"]}`, "--enable", "repo"}, wantErr: "--patch cannot be combined"},
		{build: newNamespacesUpdateCmd, argv: []string{"--patch", `{"enable":[]}`}, wantErr: "invalid namespace patch"},
		{build: newNamespacesUpdateCmd, argv: []string{"--patch", `[1]`}, wantErr: "invalid namespace patch"},
		{build: newNamespacesUpdateCmd, argv: nil, wantErr: "invalid namespace patch"},
		{build: newNamespacesUpdateCmd, argv: []string{"--enable", "files", "--disable", "files"}, wantErr: "invalid namespace patch"},
	} {
		checkParse(t, tc.build, tc.argv, project, tc.want, tc.wantErr)
	}
}

func TestNewCmdAuditList(t *testing.T) {
	t.Parallel()
	type proj struct {
		Types, Outcomes []string
		Tool, Operation string
		Limit           int
		SinceMillis     int64
		Actor           kernel.Address
		Calls           bool
	}
	project := func(o *AuditListOptions) proj {
		return proj{o.Types, o.Outcomes, o.Tool, o.Operation, o.Limit, o.SinceMillis, o.ActorAddr, o.Calls}
	}
	agent, _ := kernel.ParseAddress("agent:helper")
	noon := time.Date(2026, 8, 3, 12, 0, 0, 0, time.UTC).UnixMilli()
	for _, tc := range []struct {
		argv    []string
		want    proj
		wantErr string
	}{
		{argv: nil, want: proj{Limit: 100}},
		{argv: []string{"--calls", "--outcome", "denied,failed", "--limit", "5"},
			want: proj{Types: []string{"tool.invoked"}, Outcomes: []string{"denied", "failed"}, Limit: 5, Calls: true}},
		{argv: []string{"--type", "tool.invoked,authorization.checked", "--tool", "files.read", "--operation", "3f2a"},
			want: proj{Types: []string{"tool.invoked", "authorization.checked"}, Tool: "files.read", Operation: "3f2a", Limit: 100}},
		{argv: []string{"--since", "1h", "--limit", "0"}, want: proj{SinceMillis: noon - time.Hour.Milliseconds()}},
		{argv: []string{"--since", "2026-08-03T09:00:00Z"}, want: proj{SinceMillis: noon - 3*time.Hour.Milliseconds(), Limit: 100}},
		{argv: []string{"--actor", "agent:helper"}, want: proj{Actor: agent, Limit: 100}},
		{argv: []string{"--type", "tool.invokd"}, wantErr: `invalid value "tool.invokd" for --type; did you mean tool.invoked?`},
		{argv: []string{"--outcome", "nope"}, wantErr: `invalid value "nope" for --outcome`},
		{argv: []string{"--calls", "--type", "tool.invoked"}, wantErr: "--calls cannot be combined with --type"},
		{argv: []string{"--limit", "-1"}, wantErr: "invalid --limit -1"},
		{argv: []string{"--since", "yesterday"}, wantErr: `invalid --since "yesterday"`},
		{argv: []string{"--since", "-1h"}, wantErr: `invalid --since "-1h"`},
		{argv: []string{"--actor", "helper"}, wantErr: "invalid address for --actor"},
	} {
		checkParse(t, newAuditListCmd, tc.argv, project, tc.want, tc.wantErr)
	}
}

func TestNewCmdAuditExport(t *testing.T) {
	t.Parallel()
	type proj struct {
		AsTest          bool
		File            string
		Outcomes        []string
		Tool, Operation string
		Limit           int
		Actor           kernel.Address
	}
	project := func(o *AuditExportOptions) proj {
		return proj{o.AsTest, o.File, o.Outcomes, o.Tool, o.Operation, o.Limit, o.ActorAddr}
	}
	agent, _ := kernel.ParseAddress("agent:helper")
	for _, tc := range []struct {
		argv    []string
		want    proj
		wantErr string
	}{
		{argv: []string{"--as-test"}, want: proj{AsTest: true, Limit: 20}},
		{argv: []string{"--as-test", "--outcome", "denied", "--limit", "5", "--file", "t.yaml", "--tool", "files.read", "--operation", "3f2a", "--actor", "agent:helper"},
			want: proj{AsTest: true, File: "t.yaml", Outcomes: []string{"denied"}, Tool: "files.read", Operation: "3f2a", Limit: 5, Actor: agent}},
		{argv: nil, wantErr: "audit export needs --as-test"},
		{argv: []string{"--as-test", "--outcome", "escalated"}, wantErr: `invalid value "escalated" for --outcome`},
		{argv: []string{"--as-test", "--limit", "-2"}, wantErr: "invalid --limit -2"},
		{argv: []string{"--as-test", "--actor", "x"}, wantErr: "invalid address for --actor"},
	} {
		checkParse(t, newAuditExportCmd, tc.argv, project, tc.want, tc.wantErr)
	}
}

func TestNewCmdEscalationsList(t *testing.T) {
	t.Parallel()
	type proj struct {
		Limit  int
		Status string
		All    bool
	}
	project := func(o *EscalationsListOptions) proj { return proj{o.Limit, o.Status, o.All} }
	for _, tc := range []struct {
		argv    []string
		want    proj
		wantErr string
	}{
		{argv: nil},
		{argv: []string{"--status", "pending", "--limit", "3", "--all"}, want: proj{3, "pending", true}},
		{argv: []string{"--status", "pendng"}, wantErr: `invalid value "pendng" for --status; did you mean pending?`},
		{argv: []string{"--limit", "-1"}, wantErr: "invalid --limit -1"},
		{argv: []string{"3"}, wantErr: "takes no arguments"},
	} {
		checkParse(t, newEscalationsListCmd, tc.argv, project, tc.want, tc.wantErr)
	}
}

func TestNewCmdEscalationsResolve(t *testing.T) {
	t.Parallel()
	project := func(o *EscalationsResolveOptions) api.ResolveRequest { return o.Request }
	for _, tc := range []struct {
		argv    []string
		want    api.ResolveRequest
		wantErr string
	}{
		{argv: []string{"3", "--approve"}, want: api.ResolveRequest{ID: 3, Status: api.EscalationApproved}},
		{argv: []string{"12", "--deny", "--note", "not now"}, want: api.ResolveRequest{ID: 12, Status: api.EscalationDenied, Note: "not now"}},
		{argv: []string{"0", "--deny"}, wantErr: `invalid escalation ID "0": want a positive number`},
		{argv: []string{"x", "--deny"}, wantErr: `invalid escalation ID "x"`},
		{argv: []string{"3"}, wantErr: "at least one of the flags in the group [approve deny] is required"},
		{argv: []string{"3", "--approve", "--deny"}, wantErr: "none of the others can be"},
		{argv: nil, wantErr: "one escalation ID"},
	} {
		checkParse(t, newEscalationsResolveCmd, tc.argv, project, tc.want, tc.wantErr)
	}
}

func TestNewCmdTest(t *testing.T) {
	t.Parallel()
	type proj struct {
		Args                              []string
		Format, Run, JUnit                string
		Verbose, Coverage, Strict, Update bool
	}
	project := func(o *TestOptions) proj {
		p := proj{o.Args, o.Format, "", o.JUnit, o.Verbose, o.Coverage, o.Strict, o.Update}
		if o.RunRE != nil {
			p.Run = o.RunRE.String()
		}
		return p
	}
	for _, tc := range []struct {
		argv    []string
		want    proj
		wantErr string
	}{
		{argv: nil, want: proj{Args: []string{}, Format: "table"}},
		{argv: []string{"a.yaml", "dir", "--run", "triage/.*", "-v", "--junit", "r.xml", "--update"},
			want: proj{Args: []string{"a.yaml", "dir"}, Format: "table", Run: "triage/.*", JUnit: "r.xml", Verbose: true, Update: true}},
		{argv: []string{"--strict"}, want: proj{Args: []string{}, Format: "table", Coverage: true, Strict: true}},
		{argv: []string{"--run", "("}, wantErr: `invalid --run "("`},
	} {
		checkParse(t, newTestCmd, tc.argv, project, tc.want, tc.wantErr)
	}
	// --server is refused before anything is read (the scenario runs over hosts of its own)
	if _, err := parseArgv(t, newTestCmd, []string{"examples/tests"}, func(f *Factory) {
		f.Global.RemoteOptions.Server = "http://127.0.0.1:1"
	}); err == nil || !strings.Contains(err.Error(), "test does not run against --server: ") {
		t.Errorf("test --server: err %v, want the refusal", err)
	} else if ee, ok := err.(*ExitError); !ok || ee.ExitCode != ExitUsage {
		t.Errorf("test --server: %#v, want exit %d", err, ExitUsage)
	}
	// the format: -o (the factory's global flag), else SHAREDOS_OUTPUT; yaml is refused
	for _, tc := range []struct {
		output, env, want, wantErr string
	}{
		{output: "json", want: "json"},
		{env: "json", want: "json"},
		{output: "table", env: "json", want: "table"},
		{output: "yaml", wantErr: "prints table or json, not yaml"},
		{env: "xml", wantErr: "xml"},
	} {
		got, err := parseArgv(t, newTestCmd, nil, func(f *Factory) {
			f.Global.Output = tc.output
			f.Env = func(k string) string { return map[string]string{"SHAREDOS_OUTPUT": tc.env}[k] }
		})
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("-o %q, SHAREDOS_OUTPUT %q: error %v, want %q", tc.output, tc.env, err, tc.wantErr)
			}
		case err != nil || got.Format != tc.want:
			t.Errorf("-o %q, SHAREDOS_OUTPUT %q: format %v (err %v), want %s", tc.output, tc.env, got, err, tc.want)
		}
	}
}

func TestNewCmdTokensCreate(t *testing.T) {
	t.Parallel()
	type proj struct {
		Entry           tokens.NewEntry
		Tokens, Expires string
		Grants          []string
	}
	project := func(o *TokensCreateOptions) proj { return proj{o.Entry, o.Tokens, o.Expires, o.Grants} }
	agent, _ := kernel.ParseAddress("agent:helper")
	alice, _ := kernel.ParseAddress("human:alice")
	for _, tc := range []struct {
		global  GlobalOptions
		argv    []string
		want    proj
		wantErr string
	}{
		{global: GlobalOptions{As: "agent:helper", Owner: "human:alice", World: "w", Purpose: "p", Grants: []string{"g.yaml"}},
			argv: []string{"--id", "alice-laptop", "--tokens", "t.yaml", "--expires", "30d"},
			want: proj{Entry: tokens.NewEntry{ID: "alice-laptop", Context: tokens.Context{Actor: agent, Owner: &alice, World: "w", Purpose: "p"}},
				Tokens: "t.yaml", Expires: "30d", Grants: []string{"g.yaml"}}},
		{global: GlobalOptions{As: "agent:helper"}, argv: []string{"--id", "ci", "--expires", "2027-01-01T00:00:00Z"},
			want: proj{Entry: tokens.NewEntry{ID: "ci", Context: tokens.Context{Actor: agent}}, Expires: "2027-01-01T00:00:00Z"}},
		{global: GlobalOptions{As: "agent:x"}, argv: []string{"--id", "bad id"}, wantErr: "invalid or missing --id"},
		{global: GlobalOptions{As: "agent:x"}, argv: nil, wantErr: "invalid or missing --id"},
		// No --as: the actor is left to the grant files' context, read by the run.
		{argv: []string{"--id", "nobody"}, want: proj{Entry: tokens.NewEntry{ID: "nobody"}}},
		{global: GlobalOptions{As: "robot:x"}, argv: []string{"--id", "r"}, wantErr: "invalid address for --as"},
		{global: GlobalOptions{As: "agent:x", Authority: "nobody"}, argv: []string{"--id", "r"}, wantErr: "invalid address for --authority"},
		{global: GlobalOptions{As: "agent:x", World: " w"}, argv: []string{"--id", "r"}, wantErr: `invalid --world " w"`},
		{global: GlobalOptions{As: "agent:x", Purpose: "p "}, argv: []string{"--id", "r"}, wantErr: `invalid --purpose "p "`},
		{global: GlobalOptions{As: "agent:x"}, argv: []string{"--id", "r", "--expires", "soon"}, wantErr: `invalid --expires "soon"`},
		{global: GlobalOptions{As: "agent:x"}, argv: []string{"--id", "r", "--expires", "-3h"}, wantErr: `invalid --expires "-3h"`},
		{global: GlobalOptions{As: "agent:helper"}, argv: []string{"--id", "ops", "--role", "operator"},
			want: proj{Entry: tokens.NewEntry{ID: "ops", Context: tokens.Context{Actor: agent}, Role: tokens.RoleOperator}}},
		{global: GlobalOptions{As: "agent:helper"}, argv: []string{"--id", "bot", "--role", "agent"},
			want: proj{Entry: tokens.NewEntry{ID: "bot", Context: tokens.Context{Actor: agent}}}},
		{global: GlobalOptions{As: "agent:x"}, argv: []string{"--id", "r", "--role", "admin"}, wantErr: `invalid --role "admin"`},
	} {
		got, err := parseArgv(t, newTokensCreateCmd, tc.argv, func(f *Factory) { f.Global = tc.global })
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q %+v: error %v, want one containing %q", tc.argv, tc.global, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", tc.argv, err)
		}
		if p := project(got); !reflect.DeepEqual(p, tc.want) {
			t.Errorf("%q:\n got %+v\nwant %+v", tc.argv, p, tc.want)
		}
	}
}

func TestNewCmdTokensListRevoke(t *testing.T) {
	t.Parallel()
	checkParse(t, newTokensListCmd, []string{"--tokens", "t.yaml"}, func(o *TokensOptions) string { return o.Tokens }, "t.yaml", "")
	checkParse(t, newTokensListCmd, []string{"x"}, func(o *TokensOptions) string { return o.Tokens }, "", "takes no arguments")
	project := func(o *TokensRevokeOptions) [2]string { return [2]string{o.ID, o.Tokens} }
	checkParse(t, newTokensRevokeCmd, []string{"ci", "--tokens", "t.yaml"}, project, [2]string{"ci", "t.yaml"}, "")
	checkParse(t, newTokensRevokeCmd, nil, project, [2]string{}, "one token id")
}

func TestNewCmdMCP(t *testing.T) {
	t.Parallel()
	type proj struct {
		LogFormat string
		HTTP      MCPHTTPOptions
	}
	project := func(o *MCPOptions) proj { return proj{o.LogFormat, o.HTTP} }
	for _, tc := range []struct {
		argv    []string
		want    proj
		wantErr string
	}{
		{argv: nil, want: proj{LogFormat: "text"}},
		{argv: []string{"--log-format", "json"}, want: proj{LogFormat: "json"}},
		{argv: []string{"--listen", "127.0.0.1:8765", "--tokens", "t.yaml", "--max-sessions", "3"},
			want: proj{LogFormat: "text", HTTP: MCPHTTPOptions{Listen: "127.0.0.1:8765", Tokens: "t.yaml", MaxSessions: 3, HostPart: "127.0.0.1"}}},
		{argv: []string{"--listen", "0.0.0.0:80", "--insecure-listen"},
			want: proj{LogFormat: "text", HTTP: MCPHTTPOptions{Listen: "0.0.0.0:80", InsecureListen: true, HostPart: "0.0.0.0", Insecure: true}}},
		{argv: []string{"--listen", "0.0.0.0:443", "--tls-cert", "c.pem", "--tls-key", "k.pem"},
			want: proj{LogFormat: "text", HTTP: MCPHTTPOptions{Listen: "0.0.0.0:443", TLSCert: "c.pem", TLSKey: "k.pem", HostPart: "0.0.0.0"}}},
		{argv: []string{"--log-format", "xml"}, wantErr: `invalid --log-format "xml"`},
		{argv: []string{"--tokens", "t.yaml"}, wantErr: "--tokens applies only with --listen"},
		{argv: []string{"--max-sessions", "2"}, wantErr: "--max-sessions applies only with --listen"},
		{argv: []string{"--listen", "8765"}, wantErr: `invalid --listen "8765"`},
		{argv: []string{"--listen", "127.0.0.1:1", "--tls-cert", "c.pem"}, wantErr: "--tls-cert and --tls-key go together"},
		{argv: []string{"--listen", "0.0.0.0:80"}, wantErr: "refusing to listen on 0.0.0.0:80 without TLS"},
		{argv: []string{"--listen", "127.0.0.1:1", "--max-sessions", "-1"}, wantErr: "invalid --max-sessions -1"},
		{argv: []string{"x"}, wantErr: "takes no arguments"},
	} {
		checkParse(t, newMCPCmd, tc.argv, project, tc.want, tc.wantErr)
	}
}

func TestNewCmdMCPConfig(t *testing.T) {
	t.Parallel()
	type proj struct {
		Client, Name, HTTP, TokenEnv string
		ShowToken                    bool
		Where                        string
	}
	project := func(o *MCPConfigOptions) proj {
		return proj{o.Client, o.Name, o.HTTP, o.TokenEnv, o.ShowToken, o.Where}
	}
	for _, tc := range []struct {
		argv    []string
		want    proj
		wantErr string
	}{
		{argv: []string{"--client", "codex"}, want: proj{Client: "codex", Name: "sharedos", TokenEnv: "SHAREDOS_TOKEN", Where: mcpClients["codex"]}},
		{argv: []string{"--client", "vscode", "--name", "s", "--http", "https://h:1/mcp", "--token-env", "T", "--show-token"},
			want: proj{Client: "vscode", Name: "s", HTTP: "https://h:1/mcp", TokenEnv: "T", ShowToken: true, Where: mcpClients["vscode"]}},
		{argv: nil, wantErr: `unknown or missing --client ""`},
		{argv: []string{"--client", "emacs"}, wantErr: `unknown or missing --client "emacs"`},
		{argv: []string{"--client", "codex", "--name", " "}, wantErr: "empty --name"},
		{argv: []string{"--client", "codex", "--show-token"}, wantErr: "apply only with --http"},
		{argv: []string{"--client", "codex", "--http", "ftp://h/mcp"}, wantErr: `invalid --http "ftp://h/mcp"`},
		{argv: []string{"--client", "codex", "--http", "http://u:p@h/mcp"}, wantErr: "invalid --http"},
		{argv: []string{"--client", "codex", "--http", "http://h/mcp", "--token-env", "1X"}, wantErr: `invalid --token-env "1X"`},
	} {
		checkParse(t, newMCPConfigCmd, tc.argv, project, tc.want, tc.wantErr)
	}
}
