package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sharedos/sharedos/internal/mcpstdio"
	"github.com/sharedos/sharedos/internal/pollstdin"
	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcphttp"
	"github.com/sharedos/sharedos/pkg/mcpserver"
)

// MCPOptions are the options of `mcp`. The server is the embedded backend itself (a
// session of the run's host, or with --listen a principal cache of hosts): it builds them
// through the host package, not through an api.Service.
type MCPOptions struct {
	IO       *IOStreams
	Settings func() (*Settings, error)
	// Host opens the run's host for the stdio server (a long-lived surface).
	Host func(ctx context.Context) (*Host, error)
	// Prepare checks the run's inputs (the ephemeral token's context of --listen).
	Prepare func() error
	Getwd   func() (string, error)
	Clock   func() time.Time

	LogFormat string
	HTTP      MCPHTTPOptions
}

// mcpServeNeeds are the host needs of the stdio server.
var mcpServeNeeds = host.Needs{Planes: true, Actor: true, HoldConnections: true, Workload: host.WorkloadServer}

// newMCPCmd builds `mcp`; runF, when set, replaces the run.
func newMCPCmd(f *Factory, runF func(*MCPOptions) error) *cobra.Command {
	opts := &MCPOptions{IO: f.IOStreams, Settings: f.Settings, Getwd: f.Getwd, Clock: f.Clock,
		Host: func(ctx context.Context) (*Host, error) { return f.Host(ctx, mcpServeNeeds) },
		Prepare: func() error {
			_, err := f.prepared(host.Needs{Planes: true, Actor: true})
			return err
		}}
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the context's tools to an agent over MCP (stdio, or streamable HTTP with --listen)",
		Long: `Serve one MCP session on stdin/stdout to an agent (Claude Code, Codex, Cursor, VS Code,
or any MCP client): tools/list is the context's usable tools, and every tools/call is
decided by the kernel at its own instant against the grant files and namespace selection
current at that call, and audited with surface mcp, the session and the client.

Grant-file edits and 'sharedos namespaces enable|disable' from another process take effect
on the next call; the client is sent notifications/tools/list_changed within 2 s when the
published list changes. An offered sharedos.escalate latches the session: later calls are
denied escalation_pending until an operator resolves the escalation.

The command exits on end of input or SIGTERM. Logs go to stderr, never stdout. Use
'sharedos mcp config --client NAME' to print the snippet a client reads.

With --listen HOST:PORT it serves MCP over streamable HTTP at /mcp (and /health) instead:
every request carries 'Authorization: Bearer TOKEN', and each token of the tokens file
(--tokens FILE, see 'sharedos tokens') runs under its own context and grant files. Without
a tokens file one ephemeral token, bound to this invocation's context, is printed on stderr
with a ready client configuration. Off loopback it needs --tls-cert and --tls-key (or
--insecure-listen). At most --max-sessions sessions per token (default 64); request bodies
up to 4 MiB; SIGTERM or SIGINT lets in-flight calls finish (up to 10 s) and stops.`,
		Example: `  sharedos --root ~/project --grants ~/grants/helper.yaml mcp
  sharedos mcp config --client claude-code
  sharedos --root ~/project mcp --listen 127.0.0.1:8765 --tokens ~/.config/sharedos/tokens.yaml
  sharedos --root ~/project --grants ~/grants/helper.yaml mcp --listen 127.0.0.1:8765`,
		Args: noArgs,
		RunE: runE(opts, opts.check, runF, runMCP),
	}
	c.GroupID = "kernel"
	c.Flags().StringVar(&opts.LogFormat, "log-format", "text", "log format on stderr: text or json")
	_ = c.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringVar(&opts.HTTP.Listen, "listen", "", "serve MCP over streamable HTTP on HOST:PORT (path /mcp) instead of stdio")
	c.Flags().StringVar(&opts.HTTP.Tokens, "tokens", "", "tokens file of --listen, or store: for the tokens of the PostgreSQL state database (default SHAREDOS_TOKENS, else the config key tokens; none: one ephemeral token)")
	c.Flags().StringVar(&opts.HTTP.TLSCert, "tls-cert", "", "PEM certificate of --listen (with --tls-key)")
	c.Flags().StringVar(&opts.HTTP.TLSKey, "tls-key", "", "PEM private key of --listen (with --tls-cert)")
	c.Flags().BoolVar(&opts.HTTP.InsecureListen, "insecure-listen", false, "allow --listen off loopback without TLS (logs a warning)")
	c.Flags().IntVar(&opts.HTTP.MaxSessions, "max-sessions", 0, "open sessions per token of --listen (default: config mcp.maxSessions, else 64)")
	c.AddCommand(newMCPConfigCmd(f, nil))
	return c
}

// runE is the RunE of a command in the options pattern whose arguments are bound by its
// flags: check validates them (before anything is opened), then runF (a test's) or run
// gets the options.
func runE[O any](opts *O, check func() error, runF func(*O) error, run func(context.Context, *O) error) func(*cobra.Command, []string) error {
	return func(c *cobra.Command, _ []string) error {
		if err := check(); err != nil {
			return err
		}
		if runF != nil {
			return runF(opts)
		}
		return run(c.Context(), opts)
	}
}

// check validates the flags of `mcp`: the log format, and the flags of --listen (which
// apply only with it).
func (opts *MCPOptions) check() error {
	if opts.LogFormat != "text" && opts.LogFormat != "json" {
		return usageError("pass --log-format text or --log-format json", "invalid --log-format %q", opts.LogFormat)
	}
	if opts.HTTP.Listen != "" {
		return opts.HTTP.check()
	}
	for _, fl := range []struct {
		name string
		set  bool
	}{{"tokens", opts.HTTP.Tokens != ""}, {"tls-cert", opts.HTTP.TLSCert != ""}, {"tls-key", opts.HTTP.TLSKey != ""},
		{"insecure-listen", opts.HTTP.InsecureListen}, {"max-sessions", opts.HTTP.MaxSessions != 0}} {
		if fl.set {
			return usageError("pass --listen HOST:PORT to serve over HTTP", "--%s applies only with --listen", fl.name)
		}
	}
	return nil
}

// serverLogger is the log of a long-lived surface (mcp, serve) on w, as text or JSON by
// format, also given to the settings' gateway for the MCP servers' connection events.
func serverLogger(w io.Writer, format string, settings func() (*Settings, error)) *slog.Logger {
	var handler slog.Handler = slog.NewTextHandler(w, nil)
	if format == "json" {
		handler = slog.NewJSONHandler(w, nil)
	}
	log := slog.New(handler)
	if s, err := settings(); err == nil {
		s.GatewayLogger = log
	}
	return log
}

func runMCP(ctx context.Context, opts *MCPOptions) error {
	log := serverLogger(opts.IO.ErrOut, opts.LogFormat, opts.Settings)
	if opts.HTTP.Listen != "" {
		return runMCPHTTP(ctx, opts, log)
	}
	h, err := opts.Host(ctx)
	if err != nil {
		return err
	}
	sess, err := h.NewSession(opts.Clock)
	if err != nil {
		return hostError(err)
	}
	sess.OnReload = func(err error) {
		if err != nil {
			log.Warn("grant files changed and were refused; authority is unavailable (every call denied)", "err", err)
			return
		}
		log.Info("grant files changed; reloaded")
	}
	backend := mcphttp.Backend(sess)
	srv := mcpserver.New(mcpserver.Options{
		Backend: backend, Version: buildVersion().Version, Logger: log, OperatorHint: mcpHint,
		Escalations: mcpserver.ServiceResolver(backend),
	})
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	log.Info("serving MCP on stdio", "actor", h.Ctx.Actor.String(), "world", h.Ctx.World,
		"namespaces", strings.Join(h.Ctx.EnabledToolNamespaces, ","))
	var in io.ReadCloser = nopReadCloser{opts.IO.In}
	if f, ok := opts.IO.In.(*os.File); ok {
		// a pipe from the client is read through the poller (issue 28 item 5)
		var restore func()
		in, restore = pollstdin.Open(f)
		defer restore()
	}
	err = srv.Run(ctx, &mcpstdio.Transport{Reader: in, Writer: nopWriteCloser{opts.IO.Out}})
	if err != nil && ctx.Err() == nil {
		log.Error("session ended", "err", err)
		return internalError(err)
	}
	log.Info("session ended")
	return nil
}

// mcpHint is the CLI's one-sentence hint for a refused or failed call: the operator's, which
// the MCP server logs; the agent reads mcpserver.AgentHint instead.
func mcpHint(def *kernel.ToolDefinition, res kernel.ToolResult) string {
	if res.Error == nil {
		return ""
	}
	if res.Status == kernel.StatusDenied {
		return refusalHint(def, res.Tool, string(res.Gate), string(res.Error.Code), string(res.Cause))
	}
	return failureHint(res)
}

type nopReadCloser struct{ io.Reader }

func (nopReadCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// ---- mcp config ----------------------------------------------------------------------

// MCPConfigOptions are the options of `mcp config`.
type MCPConfigOptions struct {
	IO       *IOStreams
	Env      func(string) string
	Settings func() (*Settings, error)
	Service  func() (api.Service, error)
	Getwd    func() (string, error)
	// Flags are the global flags as given (which a launch carries as flags).
	Flags func() *pflag.FlagSet

	Client    string
	Name      string
	HTTP      string
	TokenEnv  string
	ShowToken bool
	Write     bool   // put the entry into the client's file instead of printing it
	File      string // the file --write edits (default: the client's own)

	// Where is the file the client reads its configuration from (RunE's, by Client).
	Where string
}

// mcpClients are the clients `mcp config` knows, and the file each reads.
var mcpClients = map[string]string{
	"claude-code": ".mcp.json in the project (or: claude mcp add-json sharedos '<the sharedos object>')",
	"codex":       "~/.codex/config.toml",
	"cursor":      ".cursor/mcp.json in the project, or ~/.cursor/mcp.json",
	"vscode":      ".vscode/mcp.json in the workspace",
	"generic":     "the client's MCP server configuration (the common mcpServers form)",
}

// newMCPConfigCmd builds `mcp config`; runF, when set, replaces the run.
func newMCPConfigCmd(f *Factory, runF func(*MCPConfigOptions) error) *cobra.Command {
	opts := &MCPConfigOptions{IO: f.IOStreams, Env: f.Env, Settings: f.Settings, Getwd: f.Getwd,
		Service: func() (api.Service, error) { return f.service(callNeeds) },
		Flags:   func() *pflag.FlagSet { return f.flags }}
	c := &cobra.Command{
		Use:   "config --client claude-code|codex|cursor|vscode|generic",
		Short: "Print the snippet an MCP client reads to start 'sharedos mcp' with this invocation's flags",
		Long: `Print the configuration snippet a client reads to start 'sharedos mcp': the absolute
path of this binary and every input in effect now. A client often starts the server with
a minimal environment and in another working directory (the MCP Inspector does), so the
snippet names everything explicitly:

  --config   the configuration file found now (--config, SHAREDOS_CONFIG or
             $XDG_CONFIG_HOME/sharedos/config.yaml), absolute: its ceiling (frozenPaths,
             frozenActions, namespaces) and gateway hold for the agent
  --root     the root (default: the working directory), absolute
  --state    the state database (--state, SHAREDOS_STATE or the $XDG_STATE_HOME/HOME
             default), absolute: the agent's namespace selection and audit live there
  --grants   the grant files, absolute

When the configuration file itself names the root, the state database or grant files,
they are left to it: the server reads the file each time it starts. --as, --owner,
--authority, --world, --purpose and --trace given as flags stay flags; given as SHAREDOS_*
variables, they go into the snippet's env.

--namespaces and --now are pinned when given (as a flag or a SHAREDOS_* variable). Without
--namespaces the agent follows the stored selection of its (world, owner) in that state
database, read at each call, so 'sharedos namespaces enable' takes effect on the next
one; stderr says which selection that is and what it holds now. Without --now every call
is decided at the wall clock. --output and --call-id belong to one run and are never
pinned.

Before printing, the command makes the checks the server makes at start (the root
exists; no grant file, config file or state database lies inside it; an actor is known)
and refuses as 'sharedos mcp' would. It then lists the tools that agent would see now,
and warns on stderr when there are none. The snippet goes to stdout; these notes and the
name of the file the snippet belongs in go to stderr.

With --http URL the snippet connects to a running 'sharedos mcp --listen' instead: the URL
and an Authorization header that reads the token from the environment variable named by
--token-env (default SHAREDOS_TOKEN), in each client's own syntax: ${NAME} for Claude
Code, ${env:NAME} for Cursor and VS Code, bearer_token_env_var for Codex. The token itself
is written only with --show-token, which reads it from that variable now.

With --write the entry goes into the client's file instead of stdout — .mcp.json,
.cursor/mcp.json or .vscode/mcp.json in the working directory, Codex's
$CODEX_HOME/config.toml (default ~/.codex/config.toml), or --file FILE — inserted, or
replacing the entry of the same --name, everything else in the file kept. The file is
replaced atomically; one that does not parse is refused and left as it is. Running it
twice leaves one entry.`,
		Example: `  sharedos --root ~/project --grants ~/grants/helper.yaml mcp config --client claude-code --write
  sharedos --grants grants.yaml mcp config --client codex --write   # ~/.codex/config.toml, run it again safely
  sharedos mcp config --client claude-code --http http://127.0.0.1:8765/mcp --token-env SHAREDOS_TOKEN`,
		Args: noArgs,
		RunE: runE(opts, opts.check, runF, func(ctx context.Context, opts *MCPConfigOptions) error {
			if opts.HTTP != "" {
				return runMCPConfigHTTP(opts)
			}
			return runMCPConfig(ctx, opts)
		}),
	}
	c.Flags().StringVar(&opts.Client, "client", "", "client: claude-code, codex, cursor, vscode or generic")
	c.Flags().StringVar(&opts.Name, "name", "sharedos", "server name in the client's configuration")
	c.Flags().StringVar(&opts.HTTP, "http", "", "connect to 'sharedos mcp --listen' at this URL (http or https, path /mcp) instead of starting it")
	c.Flags().StringVar(&opts.TokenEnv, "token-env", "SHAREDOS_TOKEN", "with --http: the environment variable the client reads the bearer token from")
	c.Flags().BoolVar(&opts.Write, "write", false, "insert or replace the server's entry in the client's file (.mcp.json, ~/.codex/config.toml, .cursor/mcp.json, .vscode/mcp.json), keeping everything else")
	c.Flags().StringVar(&opts.File, "file", "", "with --write: the file to edit instead of the client's own")
	c.Flags().BoolVar(&opts.ShowToken, "show-token", false, "with --http: write the token (read from --token-env now) into the snippet instead of a reference")
	_ = c.RegisterFlagCompletionFunc("client", cobra.FixedCompletions([]string{"claude-code", "codex", "cursor", "vscode", "generic"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// mcpLaunch is how a client starts the server.
type mcpLaunch struct {
	Command string
	Args    []string
	Env     map[string]string
}

// check validates the flags of `mcp config`: the client, the name, and the flags of
// --http (which apply only with it).
func (opts *MCPConfigOptions) check() error {
	where, ok := mcpClients[opts.Client]
	if !ok {
		return usageError("pass --client claude-code, codex, cursor, vscode or generic", "unknown or missing --client %q", opts.Client)
	}
	opts.Where = where
	if strings.TrimSpace(opts.Name) == "" {
		return usageError("pass --name NAME", "empty --name")
	}
	if opts.HTTP != "" {
		u, err := url.Parse(opts.HTTP)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return usageError("pass --http as http://HOST:PORT/mcp (or https://…)", "invalid --http %q", opts.HTTP)
		}
		if !envNameRE().MatchString(opts.TokenEnv) {
			return usageError("pass --token-env NAME with a variable name (letters, digits, _)", "invalid --token-env %q", opts.TokenEnv)
		}
		return nil
	}
	if opts.ShowToken || opts.TokenEnv != "SHAREDOS_TOKEN" {
		return usageError("pass --http URL to print an HTTP snippet", "--token-env and --show-token apply only with --http")
	}
	return nil
}

func runMCPConfig(ctx context.Context, opts *MCPConfigOptions) error {
	where := opts.Where
	s, err := opts.Settings()
	if err != nil {
		return err
	}
	l, err := launchOf(opts.Env, opts.Flags(), s)
	if err != nil {
		return err
	}
	// The host the server would prepare (the same checks, refusing as it would), and the
	// tools its agent would be listed now.
	svc, err := opts.Service()
	if err != nil {
		return err
	}
	list, err := svc.ListTools(ctx)
	if err != nil {
		return serviceError(err)
	}
	defs, actx := list.Tools, list.Context
	var out []byte
	if opts.Client == "codex" {
		out = codexSnippet(opts.Name, l)
	} else {
		out, err = jsonSnippet(opts.Client, opts.Name, l)
		if err != nil {
			return internalError(err)
		}
	}
	ios := opts.IO
	fmt.Fprintf(ios.ErrOut, "# %s reads this from %s\n", opts.Client, where)
	if !s.NamespacesSet {
		now := orNone(actx.EnabledToolNamespaces)
		if list.SelectionSource == "default" {
			now += ", the default: nothing stored yet"
		}
		fmt.Fprintf(ios.ErrOut, "# namespaces: not pinned; the agent follows the stored selection of world %s, owner %s in %s at each call (now: %s); pass --namespaces to pin one\n",
			actx.World, actx.Owner, s.State, now)
	}
	if len(defs) == 0 {
		warn(ios, "the agent this snippet starts would see no tools now: %s has no usable tool (enabled namespaces: %s); 'sharedos tools list --all' with the same flags says why",
			actx.Actor, orNone(actx.EnabledToolNamespaces))
	}
	return opts.emitSnippet(out)
}

// launchFlags are the global flags other than paths that a launch carries as given: a
// flag as a flag, a SHAREDOS_* variable in the env (not --output or --call-id: they
// belong to one run, not to a server).
var launchFlags = []string{"as", "owner", "authority", "world", "purpose", "namespaces", "now", "trace"}

// launchOf is this binary and every input of this invocation, pinned so that a server
// started with an empty environment and another working directory sees the same: the
// configuration file found now, and the root, state database and grant files however
// they were found (flag, SHAREDOS_*, the XDG or working-directory default) as absolute
// flags — except those the configuration file itself names (it is read at each start);
// the other flags as flags, their SHAREDOS_* variables in the env.
func launchOf(env func(string) string, flags *pflag.FlagSet, s *Settings) (mcpLaunch, error) {
	exe, err := os.Executable()
	if err != nil {
		return mcpLaunch{}, internalError(fmt.Errorf("locate the sharedos binary: %w", err))
	}
	l := mcpLaunch{Command: exe, Args: []string{"mcp"}, Env: map[string]string{}}
	fromEnv := func(name string) string {
		return env(envName(name))
	}
	// fromConfig: the value came from the configuration file (no flag, no variable).
	fromConfig := func(name string) bool {
		return !flags.Changed(name) && fromEnv(name) == "" && s.ConfigKeys[name]
	}
	if s.ConfigFile != "" {
		l.Args = append(l.Args, "--config", s.ConfigFile)
	}
	if !fromConfig("root") {
		l.Args = append(l.Args, "--root", s.Root)
	}
	if !fromConfig("state") {
		l.Args = append(l.Args, "--state", s.State)
	}
	if !fromConfig("grants") {
		for _, g := range s.Grants {
			l.Args = append(l.Args, "--grants", g)
		}
	}
	for _, name := range launchFlags {
		if fl := flags.Lookup(name); fl != nil && fl.Changed {
			l.Args = append(l.Args, "--"+name, fl.Value.String())
		} else if v := fromEnv(name); v != "" {
			l.Env[envName(name)] = v
		}
	}
	return l, nil
}

// jsonSnippet is the JSON a client reads: {"mcpServers": {name: …}} (VS Code: "servers").
func jsonSnippet(client, name string, l mcpLaunch) ([]byte, error) {
	server := map[string]any{"command": l.Command, "args": l.Args}
	if len(l.Env) > 0 {
		server["env"] = l.Env
	}
	key := "mcpServers"
	switch client {
	case "claude-code", "vscode":
		server["type"] = "stdio"
	}
	if client == "vscode" {
		key = "servers"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(map[string]any{key: map[string]any{name: server}})
	return buf.Bytes(), err
}

// codexSnippet is the [mcp_servers.NAME] table of Codex's config.toml.
func codexSnippet(name string, l mcpLaunch) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "[mcp_servers.%s]\n", tomlKey(name))
	fmt.Fprintf(&b, "command = %s\n", tomlString(l.Command))
	args := make([]string, len(l.Args))
	for i, a := range l.Args {
		args[i] = tomlString(a)
	}
	fmt.Fprintf(&b, "args = [%s]\n", strings.Join(args, ", "))
	if len(l.Env) > 0 {
		keys := make([]string, 0, len(l.Env))
		for k := range l.Env {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = tomlKey(k) + " = " + tomlString(l.Env[k])
		}
		fmt.Fprintf(&b, "env = { %s }\n", strings.Join(pairs, ", "))
	}
	return []byte(b.String())
}

// tomlString is a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// tomlKey is a bare key when it can be one, else a quoted key.
func tomlKey(k string) string {
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return tomlString(k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

// envNameRE is a portable environment variable name.
var envNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) }) // compiled on first use, not at every start

// runMCPConfigHTTP prints the snippet that connects a client to `mcp --listen` at a URL.
func runMCPConfigHTTP(opts *MCPConfigOptions) error {
	where := opts.Where
	var err error
	token := ""
	if opts.ShowToken {
		if token = opts.Env(opts.TokenEnv); token == "" {
			return usageError("export the token in "+opts.TokenEnv+" (e.g. the output of 'sharedos tokens create')",
				"--show-token: %s is not set", opts.TokenEnv)
		}
	}
	var out []byte
	if opts.Client == "codex" {
		out = codexHTTPSnippet(opts.Name, opts.HTTP, opts.TokenEnv, token)
	} else if out, err = httpJSONSnippet(opts.Client, opts.Name, opts.HTTP, opts.TokenEnv, token); err != nil {
		return internalError(err)
	}
	fmt.Fprintf(opts.IO.ErrOut, "# %s reads this from %s\n", opts.Client, where)
	if token == "" {
		fmt.Fprintf(opts.IO.ErrOut, "# the client reads the token from $%s: export it where the client starts\n", opts.TokenEnv)
	}
	return opts.emitSnippet(out)
}

// httpJSONSnippet is the JSON an HTTP client reads: the URL and an Authorization header,
// with the token or the client's own reference to the environment variable tokenEnv.
func httpJSONSnippet(client, name, url, tokenEnv, token string) ([]byte, error) {
	auth := "Bearer " + token
	if token == "" {
		switch client {
		case "cursor", "vscode":
			auth = "Bearer ${env:" + tokenEnv + "}"
		default: // claude-code and the common form expand ${NAME}
			auth = "Bearer ${" + tokenEnv + "}"
		}
	}
	server := map[string]any{"url": url, "headers": map[string]string{"Authorization": auth}}
	key := "mcpServers"
	switch client {
	case "claude-code", "generic":
		server["type"] = "http"
	case "vscode":
		server["type"] = "http"
		key = "servers"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	err := enc.Encode(map[string]any{key: map[string]any{name: server}})
	return buf.Bytes(), err
}

// codexHTTPSnippet is the [mcp_servers.NAME] table of a streamable HTTP server in Codex's
// config.toml: url and bearer_token_env_var (or, with the token, a static header).
func codexHTTPSnippet(name, url, tokenEnv, token string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "[mcp_servers.%s]\n", tomlKey(name))
	fmt.Fprintf(&b, "url = %s\n", tomlString(url))
	if token != "" {
		fmt.Fprintf(&b, "http_headers = { Authorization = %s }\n", tomlString("Bearer "+token))
	} else {
		fmt.Fprintf(&b, "bearer_token_env_var = %s\n", tomlString(tokenEnv))
	}
	return []byte(b.String())
}
