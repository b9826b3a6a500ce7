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
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mcphttp"
	"github.com/sharedos/sharedos/pkg/mcpserver"
)

// MCPOptions are the options of `mcp`.
type MCPOptions struct {
	f         *Factory
	LogFormat string
	HTTP      MCPHTTPOptions
}

func newMCPCmd(f *Factory) *cobra.Command {
	opts := &MCPOptions{f: f}
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
		RunE: func(c *cobra.Command, _ []string) error { return runMCP(c.Context(), opts) },
	}
	c.GroupID = "kernel"
	c.Flags().StringVar(&opts.LogFormat, "log-format", "text", "log format on stderr: text or json")
	_ = c.RegisterFlagCompletionFunc("log-format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
	c.Flags().StringVar(&opts.HTTP.Listen, "listen", "", "serve MCP over streamable HTTP on HOST:PORT (path /mcp) instead of stdio")
	c.Flags().StringVar(&opts.HTTP.Tokens, "tokens", "", "tokens file of --listen (default SHAREDOS_TOKENS, else the config key tokens; none: one ephemeral token)")
	c.Flags().StringVar(&opts.HTTP.TLSCert, "tls-cert", "", "PEM certificate of --listen (with --tls-key)")
	c.Flags().StringVar(&opts.HTTP.TLSKey, "tls-key", "", "PEM private key of --listen (with --tls-cert)")
	c.Flags().BoolVar(&opts.HTTP.InsecureListen, "insecure-listen", false, "allow --listen off loopback without TLS (logs a warning)")
	c.Flags().IntVar(&opts.HTTP.MaxSessions, "max-sessions", 0, "open sessions per token of --listen (default: config mcp.maxSessions, else 64)")
	c.AddCommand(newMCPConfigCmd(f))
	return c
}

func runMCP(ctx context.Context, opts *MCPOptions) error {
	f := opts.f
	var handler slog.Handler
	switch opts.LogFormat {
	case "text":
		handler = slog.NewTextHandler(f.IOStreams.ErrOut, nil)
	case "json":
		handler = slog.NewJSONHandler(f.IOStreams.ErrOut, nil)
	default:
		return usageError("pass --log-format text or --log-format json", "invalid --log-format %q", opts.LogFormat)
	}
	log := slog.New(handler)
	if s, err := f.Settings(); err == nil {
		s.GatewayLogger = log // the MCP servers' connection events
	}
	if opts.HTTP.Listen != "" {
		return runMCPHTTP(ctx, opts, log)
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
	h, err := f.Host(ctx, host.Needs{Planes: true, Actor: true, HoldConnections: true, SpoolAudit: true})
	if err != nil {
		return err
	}
	sess, err := h.NewSession(f.Clock)
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
	srv := mcpserver.New(mcpserver.Options{
		Backend: sess, Version: buildVersion().Version, Logger: log, OperatorHint: mcpHint,
		Escalations: mcphttp.EscalationResolver(sess),
	})
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM)
	defer stop()
	log.Info("serving MCP on stdio", "actor", h.Ctx.Actor.String(), "world", h.Ctx.World,
		"namespaces", strings.Join(h.Ctx.EnabledToolNamespaces, ","))
	err = srv.Run(ctx, &mcp.IOTransport{Reader: nopReadCloser{f.IOStreams.In}, Writer: nopWriteCloser{f.IOStreams.Out}})
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
	f         *Factory
	Client    string
	Name      string
	HTTP      string
	TokenEnv  string
	ShowToken bool
}

// mcpClients are the clients `mcp config` knows, and the file each reads.
var mcpClients = map[string]string{
	"claude-code": ".mcp.json in the project (or: claude mcp add-json sharedos '<the sharedos object>')",
	"codex":       "~/.codex/config.toml",
	"cursor":      ".cursor/mcp.json in the project, or ~/.cursor/mcp.json",
	"vscode":      ".vscode/mcp.json in the workspace",
	"generic":     "the client's MCP server configuration (the common mcpServers form)",
}

func newMCPConfigCmd(f *Factory) *cobra.Command {
	opts := &MCPConfigOptions{f: f}
	c := &cobra.Command{
		Use:   "config --client claude-code|codex|cursor|vscode|generic",
		Short: "Print the snippet an MCP client reads to start 'sharedos mcp' with this invocation's flags",
		Long: `Print the configuration snippet a client reads to start 'sharedos mcp': the absolute
path of this binary and the flags (and SHAREDOS_* variables) of this invocation, paths made
absolute. The snippet goes to stdout, where it belongs, to stderr.

With --http URL the snippet connects to a running 'sharedos mcp --listen' instead: the URL
and an Authorization header that reads the token from the environment variable
--token-env NAME (default SHAREDOS_TOKEN) in each client's own syntax (Claude Code \${NAME},
Cursor and VS Code \${env:NAME}, Codex bearer_token_env_var). The token itself is written
only with --show-token (it is then read from that variable now).`,
		Example: `  sharedos --root ~/project --grants ~/grants/helper.yaml mcp config --client claude-code > .mcp.json
  sharedos --grants grants.yaml mcp config --client codex >> ~/.codex/config.toml
  sharedos mcp config --client claude-code --http http://127.0.0.1:8765/mcp --token-env SHAREDOS_TOKEN`,
		Args: noArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runMCPConfig(opts) },
	}
	c.Flags().StringVar(&opts.Client, "client", "", "client: claude-code, codex, cursor, vscode or generic")
	c.Flags().StringVar(&opts.Name, "name", "sharedos", "server name in the client's configuration")
	c.Flags().StringVar(&opts.HTTP, "http", "", "connect to 'sharedos mcp --listen' at this URL (http or https, path /mcp) instead of starting it")
	c.Flags().StringVar(&opts.TokenEnv, "token-env", "SHAREDOS_TOKEN", "with --http: the environment variable the client reads the bearer token from")
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

func runMCPConfig(opts *MCPConfigOptions) error {
	f := opts.f
	where, ok := mcpClients[opts.Client]
	if !ok {
		return usageError("pass --client claude-code, codex, cursor, vscode or generic", "unknown or missing --client %q", opts.Client)
	}
	if strings.TrimSpace(opts.Name) == "" {
		return usageError("pass --name NAME", "empty --name")
	}
	if opts.HTTP != "" {
		return runMCPConfigHTTP(opts, where)
	}
	if opts.ShowToken || opts.TokenEnv != "SHAREDOS_TOKEN" {
		return usageError("pass --http URL to print an HTTP snippet", "--token-env and --show-token apply only with --http")
	}
	l, err := launchOf(f)
	if err != nil {
		return err
	}
	var out []byte
	if opts.Client == "codex" {
		out = codexSnippet(opts.Name, l)
	} else {
		out, err = jsonSnippet(opts.Client, opts.Name, l)
		if err != nil {
			return internalError(err)
		}
	}
	fmt.Fprintf(f.IOStreams.ErrOut, "# %s reads this from %s\n", opts.Client, where)
	_, err = f.IOStreams.Out.Write(out)
	return err
}

// pathFlags are the global flags whose values are paths.
var pathFlags = map[string]bool{"config": true, "root": true, "state": true, "grants": true}

// launchFlags are the global flags a launch carries (not --output, --call-id or --now:
// they belong to one run, not to a server).
var launchFlags = []string{"config", "root", "state", "grants", "as", "owner", "authority", "world", "purpose", "namespaces", "trace"}

// launchOf is this binary and the flags and SHAREDOS_* variables of this invocation.
func launchOf(f *Factory) (mcpLaunch, error) {
	exe, err := os.Executable()
	if err != nil {
		return mcpLaunch{}, internalError(fmt.Errorf("locate the sharedos binary: %w", err))
	}
	wd, err := f.Getwd()
	if err != nil {
		return mcpLaunch{}, internalError(err)
	}
	abs := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(wd, p)
	}
	l := mcpLaunch{Command: exe, Args: []string{"mcp"}, Env: map[string]string{}}
	for _, name := range launchFlags {
		fl := f.flags.Lookup(name)
		if fl == nil || !fl.Changed {
			continue
		}
		values := []string{fl.Value.String()}
		if sv, ok := fl.Value.(pflag.SliceValue); ok {
			values = sv.GetSlice()
		}
		for _, v := range values {
			if pathFlags[name] {
				v = abs(v)
			}
			l.Args = append(l.Args, "--"+name, v)
		}
	}
	for _, name := range launchFlags {
		key := envName(name)
		v := f.Env(key)
		if v == "" {
			v = os.Getenv(key)
		}
		if v == "" {
			continue
		}
		if pathFlags[name] {
			parts := filepath.SplitList(v)
			for i := range parts {
				parts[i] = abs(parts[i])
			}
			v = strings.Join(parts, string(filepath.ListSeparator))
		}
		l.Env[key] = v
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
func runMCPConfigHTTP(opts *MCPConfigOptions, where string) error {
	f := opts.f
	u, err := url.Parse(opts.HTTP)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return usageError("pass --http as http://HOST:PORT/mcp (or https://…)", "invalid --http %q", opts.HTTP)
	}
	if !envNameRE().MatchString(opts.TokenEnv) {
		return usageError("pass --token-env NAME with a variable name (letters, digits, _)", "invalid --token-env %q", opts.TokenEnv)
	}
	token := ""
	if opts.ShowToken {
		if token = f.Env(opts.TokenEnv); token == "" {
			token = os.Getenv(opts.TokenEnv)
		}
		if token == "" {
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
	fmt.Fprintf(f.IOStreams.ErrOut, "# %s reads this from %s\n", opts.Client, where)
	if token == "" {
		fmt.Fprintf(f.IOStreams.ErrOut, "# the client reads the token from $%s: export it where the client starts\n", opts.TokenEnv)
	}
	_, err = f.IOStreams.Out.Write(out)
	return err
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
