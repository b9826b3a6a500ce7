package cmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sharedos/sharedos/pkg/gateway"
	"github.com/sharedos/sharedos/pkg/host"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
)

// GlobalOptions are the persistent flags every command shares (spec 40 §2).
type GlobalOptions struct {
	Config     string
	Root       string
	State      string
	Grants     []string
	As         string
	Owner      string
	Authority  string
	World      string
	Purpose    string
	Now        string
	Namespaces string
	Trace      string
	CallID     string
	Output     string
	RemoteOptions
}

func (g *GlobalOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&g.Config, "config", "", "configuration file (default $XDG_CONFIG_HOME/sharedos/config.yaml when present)")
	fs.StringVar(&g.Root, "root", ".", "root directory of the files and repo planes (checked only by tools call and explain)")
	fs.StringVar(&g.State, "state", "", "SQLite state database (default $XDG_STATE_HOME/sharedos/state.db, else ~/.local/state/sharedos/state.db)")
	fs.StringArrayVar(&g.Grants, "grants", nil, "grant file (repeatable; SHAREDOS_GRANTS takes a :-separated list)")
	fs.StringVar(&g.As, "as", "", "context actor, kind:id (default: the grant files' context.actor)")
	fs.StringVar(&g.Owner, "owner", "", "whose resources, kind:id (default: context.owner, else the actor)")
	fs.StringVar(&g.Authority, "authority", "", "whose grants are exercised, kind:id (default: context.authority, else the owner)")
	fs.StringVar(&g.World, "world", "", "world (namespaceId) of the context (default: context.world, else \"default\")")
	fs.StringVar(&g.Purpose, "purpose", "", "declared purpose (default: context.purpose, else \"cli\")")
	fs.StringVar(&g.Now, "now", "", "the turn's instant, RFC 3339 (default: the wall clock)")
	fs.StringVar(&g.Namespaces, "namespaces", "", "this run's enabled tool namespaces, comma-separated, not stored (default: the stored selection)")
	fs.StringVar(&g.Trace, "trace", "", "trace id of this run (default: a random UUID)")
	fs.StringVar(&g.CallID, "call-id", "", "id of the tool call (default: a random UUID)")
	fs.StringVarP(&g.Output, "output", "o", "", "output format: table, json or yaml (yml) (default: table on a terminal, json otherwise)")
	g.RemoteOptions.bind(fs)
}

// Settings are the resolved configuration of one run: every value after flag > env >
// config file > default, with paths made absolute.
type Settings struct {
	host.Settings
	Output string // "" = default for the terminal
	// MCPMaxSessions is config mcp.maxSessions: sessions per token of `mcp --listen`
	// (0: the default).
	MCPMaxSessions int
	// ConfigKeys are the top-level keys the configuration file set (nil: no file).
	ConfigKeys map[string]bool
	// AuditRetention is config audit.retention (e.g. 90d): how long `store prune` keeps
	// audit events (0: not set).
	AuditRetention time.Duration
}

// keyKind is the type of a configuration key.
type keyKind int

const (
	kString keyKind = iota
	kStrings
	kInt
	kMap
	kMCPServers // the gateway's mcpServers: parsed by pkg/gateway
	kAgents     // the messaging recipients: parsed by pkg/host
)

type keySpec struct {
	kind     keyKind
	children map[string]keySpec
	path     bool // a path, relative to the config file's folder
}

// configSchema lists every key a configuration file may hold; anything else is an error.
var configSchema = map[string]keySpec{
	"root":              {kind: kString, path: true},
	"state":             {kind: kString, path: true},
	"grants":            {kind: kStrings, path: true},
	"as":                {kind: kString},
	"owner":             {kind: kString},
	"authority":         {kind: kString},
	"world":             {kind: kString},
	"purpose":           {kind: kString},
	"output":            {kind: kString},
	"defaultNamespaces": {kind: kStrings},
	"limits":            {kind: kMap, children: map[string]keySpec{"maxGrants": {kind: kInt}}},
	"repo": {kind: kMap, children: map[string]keySpec{"author": {kind: kMap, children: map[string]keySpec{
		"name": {kind: kString}, "email": {kind: kString}}}, "excludesFiles": {kind: kStrings, path: true}}},
	"ceiling": {kind: kMap, children: map[string]keySpec{
		"namespaces": {kind: kStrings}, "frozenPaths": {kind: kStrings}, "frozenActions": {kind: kStrings}}},
	"mcpServers": {kind: kMCPServers},
	// mcp --listen and the tokens commands (spec 50 §3)
	"tokens": {kind: kString, path: true},
	"mcp":    {kind: kMap, children: map[string]keySpec{"maxSessions": {kind: kInt}}},
	// messaging (spec 80 §4)
	"agents":   {kind: kAgents},
	"messages": {kind: kMap, children: map[string]keySpec{"replyTimeout": {kind: kString}, "maxInFlight": {kind: kInt}}},
	// audit retention (issue 23): `sharedos store prune`
	"audit": {kind: kMap, children: map[string]keySpec{"retention": {kind: kString}}},
}

// configPath finds the configuration file: --config, else SHAREDOS_CONFIG, else
// $XDG_CONFIG_HOME/sharedos/config.yaml when it exists. explicit reports whether the
// user named it (then it must exist).
func configPath(g *GlobalOptions, flags *pflag.FlagSet, env func(string) string) (path string, explicit bool) {
	if flags.Changed("config") {
		return g.Config, true
	}
	if p := env("SHAREDOS_CONFIG"); p != "" {
		return p, true
	}
	dir := env("XDG_CONFIG_HOME")
	if dir == "" {
		home := env("HOME")
		if home == "" {
			return "", false
		}
		dir = filepath.Join(home, ".config")
	}
	p := filepath.Join(dir, "sharedos", "config.yaml")
	if _, err := os.Stat(p); err == nil {
		return p, false
	}
	return "", false
}

// loadConfigFile reads and validates a configuration file into a nested map (settingLayers),
// with relative paths resolved against the file's folder.
// home expands an MCP server's "~/" fromFile path (the factory's Env's HOME).
func loadConfigFile(path, home string) (map[string]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// A usage error (exit 2), as a missing grant file is: the name is wrong.
			return nil, usageError("pass --config FILE naming an existing file, or unset SHAREDOS_CONFIG",
				"config file %s does not exist", path)
		}
		return nil, configError("check the file's permissions", "read config file %s: %v", path, unwrapPathErr(err))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, configError("the config file must be a YAML mapping of the keys listed in the README",
			"config file %s: %v", path, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if len(doc.Content) == 0 {
		return map[string]any{}, nil
	}
	dir := filepath.Dir(path)
	return decodeConfigMap(path, dir, home, doc.Content[0], configSchema, "")
}

func unwrapPathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func decodeConfigMap(file, dir, home string, n *yaml.Node, schema map[string]keySpec, prefix string) (map[string]any, error) {
	if n.Kind != yaml.MappingNode {
		what := "the file"
		if prefix != "" {
			what = "key " + strings.TrimSuffix(prefix, ".")
		}
		return nil, configError("see the README for the configuration keys",
			"config file %s:%d: %s must be a mapping", file, n.Line, what)
	}
	out := make(map[string]any, len(n.Content)/2)
	lines := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := prefix + k.Value
		if first, dup := lines[k.Value]; dup {
			// a second ceiling: would silently drop the first one's frozen paths
			return nil, configError("keep one of them (merge their values)",
				"config file %s:%d: key %q is given twice (first at line %d)", file, k.Line, name, first)
		}
		lines[k.Value] = k.Line
		spec, ok := schema[k.Value]
		if !ok && prefix == "" && looksLikeGrantFile(file) {
			return nil, configError("pass it with --grants "+file+" (--config takes the configuration file: root, grants, namespaces, …)",
				"config file %s: this looks like a grant file (version, context, grants), not a config file", file)
		}
		if !ok {
			return nil, configError("remove it, or check its spelling against the README's list of keys",
				"config file %s:%d: unknown key %q", file, k.Line, name)
		}
		bad := func(want string) error {
			return configError("see the README for the configuration keys",
				"config file %s:%d: key %q must be %s", file, v.Line, name, want)
		}
		switch spec.kind {
		case kString:
			if v.Kind != yaml.ScalarNode || v.Tag == "!!null" {
				return nil, bad("a string")
			}
			s := v.Value
			if spec.path && s != "" && !filepath.IsAbs(s) && !(k.Value == "state" && host.IsPostgresState(s)) {
				s = filepath.Join(dir, s)
			}
			out[k.Value] = s
		case kStrings:
			var list []string
			switch {
			case v.Kind == yaml.ScalarNode && v.Tag != "!!null":
				list = []string{v.Value}
			case v.Kind == yaml.SequenceNode:
				for _, e := range v.Content {
					if e.Kind != yaml.ScalarNode || e.Tag == "!!null" {
						return nil, bad("a list of strings")
					}
					list = append(list, e.Value)
				}
			default:
				return nil, bad("a list of strings")
			}
			if spec.path {
				for i, s := range list {
					if s != "" && !filepath.IsAbs(s) {
						list[i] = filepath.Join(dir, s)
					}
				}
			}
			if list == nil {
				list = []string{}
			}
			out[k.Value] = list
		case kInt:
			n, err := strconv.Atoi(v.Value)
			if v.Kind != yaml.ScalarNode || err != nil || !plainDecimal(v.Value) {
				return nil, bad("a plain decimal integer")
			}
			out[k.Value] = n
		case kMap:
			m, err := decodeConfigMap(file, dir, home, v, spec.children, name+".")
			if err != nil {
				return nil, err
			}
			out[k.Value] = m
		case kMCPServers:
			cfg, err := gateway.ParseNode(file, v, gateway.ParseOptions{Home: home})
			if err != nil {
				return nil, configError("fix the mcpServers section ('sharedos gateway lint' checks it); docs/gateway.md describes it",
					"config file %v", err)
			}
			out[k.Value] = cfg
		case kAgents:
			routes, err := host.ParseAgents(file, dir, v)
			if err != nil {
				return nil, configError("fix the agents section: each recipient (kind:id) has mode wait or exec", "config file %v", err)
			}
			out[k.Value] = routes
		}
	}
	return out, nil
}

// plainDecimal reports whether s is a plain decimal integer: YAML 1.1 forms (010, 0x10,
// 1_000, +5) are refused rather than read as something else.
func plainDecimal(s string) bool {
	if s == "0" {
		return true
	}
	if s == "" || s[0] == '0' {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// envName is the environment variable of a flag: SHAREDOS_ + upper case, dashes to underscores.
func envName(flag string) string {
	return "SHAREDOS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// resolveSettings applies flag > SHAREDOS_* environment > config file > default to every
// setting (settingLayers); grant files are resolved here because their environment form
// is a :-separated list.
func resolveSettings(g *GlobalOptions, flags *pflag.FlagSet, env func(string) string, getwd func() (string, error)) (*Settings, error) {
	s := &Settings{}
	s.Env = env
	cfgPath, _ := configPath(g, flags, env)
	var fileCfg map[string]any
	if cfgPath != "" {
		abs, err := absPath(cfgPath, getwd)
		if err != nil {
			return nil, configError("", "config file %s: %v", cfgPath, err)
		}
		s.ConfigFile = abs
		if fileCfg, err = loadConfigFile(abs, env("HOME")); err != nil {
			return nil, err
		}
		s.ConfigKeys = make(map[string]bool, len(fileCfg))
		for k := range fileCfg {
			s.ConfigKeys[k] = true
		}
		if cfg, ok := fileCfg["mcpServers"].(*gateway.Config); ok {
			s.MCPServers = cfg
		}
		if err := messagingSettings(s, fileCfg); err != nil {
			return nil, err
		}
	}
	v := settingLayers{flags: flags, env: env, file: fileCfg}
	s.Root = v.str("root")
	if _, set := v.lookup("root"); !set {
		s.Root = "."
	}
	s.State = v.str("state")
	s.As = v.str("as")
	s.Owner = v.str("owner")
	s.Authority = v.str("authority")
	s.World = v.str("world")
	s.Purpose = v.str("purpose")
	s.Output = v.str("output")
	s.Now = v.str("now")
	s.Trace = v.str("trace")
	s.CallID = v.str("call-id")
	if _, set := v.lookup("namespaces"); set {
		s.NamespacesSet = true
		s.Namespaces = splitList(v.str("namespaces"))
	}
	s.DefaultNamespaces = v.strs("defaultNamespaces")
	s.MaxGrants = v.int("limits.maxGrants")
	if _, set := v.lookup("limits.maxGrants"); set && s.MaxGrants < 1 {
		return nil, configError("set limits.maxGrants to a positive integer", "config file %s: limits.maxGrants must be positive", s.ConfigFile)
	}
	s.RepoAuthorName = v.str("repo.author.name")
	s.RepoAuthorEmail = v.str("repo.author.email")
	if _, set := v.lookup("repo.excludesFiles"); set {
		s.RepoExcludesFiles = v.strs("repo.excludesFiles")
		if s.RepoExcludesFiles == nil {
			s.RepoExcludesFiles = []string{} // set, and empty: none
		}
	}
	s.ForbiddenNamespaces = v.strs("ceiling.namespaces")
	s.FrozenPaths = v.strs("ceiling.frozenPaths")
	s.FrozenActions = v.strs("ceiling.frozenActions")
	s.MCPMaxSessions = v.int("mcp.maxSessions")
	if _, set := v.lookup("mcp.maxSessions"); set && s.MCPMaxSessions < 1 {
		return nil, configError("set mcp.maxSessions to a positive integer", "config file %s: mcp.maxSessions must be positive", s.ConfigFile)
	}
	if _, set := v.lookup("audit.retention"); set {
		d, err := parseRetention(v.str("audit.retention"))
		if err != nil {
			return nil, configError("set audit.retention to a number of days such as 90d (or a duration such as 720h)",
				"config file %s: audit.retention: %v", s.ConfigFile, err)
		}
		s.AuditRetention = d
	}
	// The tokens file: SHAREDOS_TOKENS, else the config file (--tokens, a flag of the
	// commands that use it, overrides both there).
	if t := v.str("tokens"); host.IsStoreTokens(t) {
		s.Tokens = t // the state database's tokens, not a file
	} else if t != "" {
		var err error
		if s.Tokens, err = absPath(t, getwd); err != nil {
			return nil, usageError("", "tokens file %s: %v", t, err)
		}
	}

	// Grant files: --grants, else SHAREDOS_GRANTS (":"-separated), else the config file.
	switch {
	case flags.Changed("grants"):
		s.Grants = append([]string(nil), g.Grants...)
	case env("SHAREDOS_GRANTS") != "":
		s.Grants = filepath.SplitList(env("SHAREDOS_GRANTS"))
	case fileCfg != nil && fileCfg["grants"] != nil:
		s.Grants = fileCfg["grants"].([]string)
	}

	var err error
	if s.Root, err = absPath(s.Root, getwd); err != nil {
		return nil, usageError("", "--root %s: %v", s.Root, err)
	}
	for i, p := range s.Grants {
		if p == "" {
			return nil, usageError("name a grant file", "--grants: empty file name")
		}
		if s.Grants[i], err = absPath(p, getwd); err != nil {
			return nil, usageError("", "--grants %s: %v", p, err)
		}
	}
	// The same file named twice is one grant file (shell completion parses the flags
	// twice, and a repeated --grants of one file is not two sources).
	seen := map[string]bool{}
	s.Grants = slices.DeleteFunc(s.Grants, func(p string) bool { dup := seen[p]; seen[p] = true; return dup })
	if s.State == "" {
		if s.State, err = defaultStatePath(env); err != nil {
			return nil, err
		}
	}
	if host.IsPostgresState(s.State) {
		// A PostgreSQL store (a DSN, kept as given): the host's local files (grant cache,
		// snapshot blobs) go where the default database's folder is.
		def, err := defaultStatePath(env)
		if err != nil {
			return nil, err
		}
		s.StateDir = filepath.Dir(def)
	} else if s.State, err = absPath(s.State, getwd); err != nil {
		return nil, usageError("", "--state %s: %v", s.State, err)
	}
	if s.Output != "" {
		source := "--output"
		switch {
		case flags.Changed("output"):
		case env(envName("output")) != "":
			source = envName("output")
		case fileCfg != nil && fileCfg["output"] != nil:
			source = "output in config file " + s.ConfigFile
		}
		if s.Output, err = parseFormatFrom(s.Output, source); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// flagSettings are the settings a global flag sets, and with it its SHAREDOS_* variable.
var flagSettings = []string{"root", "state", "as", "owner", "authority", "world", "purpose", "output",
	"now", "namespaces", "trace", "call-id"}

// settingLayers is one setting's value by precedence: its flag when given on the command
// line (flagSettings), else its SHAREDOS_* environment variable (read through the
// factory's Env, as every environment read of the CLI is; an empty variable is unset;
// flagSettings and "tokens"), else the configuration file (a dotted key names a nested
// mapping: "limits.maxGrants"). Issue 28: this replaced viper, whose packages (and their
// inits: cast, afero, fsnotify, mapstructure, gotenv, html/template) every sharedos
// process linked for these few lookups; the layers and their order are unchanged.
type settingLayers struct {
	flags *pflag.FlagSet
	env   func(string) string
	file  map[string]any // loadConfigFile's values (nil: no file)
}

// lookup is the value of key and whether any layer sets it.
func (l settingLayers) lookup(key string) (any, bool) {
	isFlag := slices.Contains(flagSettings, key)
	if isFlag {
		if f := l.flags.Lookup(key); f != nil && f.Changed {
			return f.Value.String(), true
		}
	}
	if isFlag || key == "tokens" {
		if val := l.env(envName(key)); val != "" {
			return val, true
		}
	}
	m := l.file
	for {
		head, rest, nested := strings.Cut(key, ".")
		v, ok := m[head]
		if !ok || !nested {
			return v, ok
		}
		if m, ok = v.(map[string]any); !ok {
			return nil, false
		}
		key = rest
	}
}

// str is a string setting ("" when unset); strs a list (nil when unset); int an integer
// (0 when unset). The configuration file's schema (configSchema) gives each key its type.
func (l settingLayers) str(key string) string {
	v, _ := l.lookup(key)
	s, _ := v.(string)
	return s
}

func (l settingLayers) strs(key string) []string {
	v, _ := l.lookup(key)
	s, _ := v.([]string)
	return s
}

func (l settingLayers) int(key string) int {
	v, _ := l.lookup(key)
	n, _ := v.(int)
	return n
}

// defaultStatePath is $XDG_STATE_HOME/sharedos/state.db, else ~/.local/state/sharedos/state.db.
func defaultStatePath(env func(string) string) (string, error) {
	if d := env("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "sharedos", "state.db"), nil
	}
	home := env("HOME")
	if home == "" {
		return "", usageError("pass --state FILE or set XDG_STATE_HOME", "cannot place the state database: neither XDG_STATE_HOME nor HOME is set")
	}
	return filepath.Join(home, ".local", "state", "sharedos", "state.db"), nil
}

func absPath(p string, getwd func() (string, error)) (string, error) {
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	wd, err := getwd()
	if err != nil {
		return "", err
	}
	return filepath.Join(wd, p), nil
}

// splitList splits a comma-separated list, dropping empty items and surrounding space.
func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseAddressFlag parses an address flag the host's way (host.ParseAddressFlag), as a
// usage error of the CLI.
func parseAddressFlag(flag, value string) (kernel.Address, error) {
	a, err := host.ParseAddressFlag(flag, value)
	if err != nil {
		return kernel.Address{}, hostError(err)
	}
	return a, nil
}

// ceilingWarnings names the ceiling entries of the configuration that can never match a
// registered tool (a namespace or action no tool uses — a wrong case, a typo), with the
// closest registered name. They still apply as written; a warning is all they get.
func ceilingWarnings(s *Settings, defs []kernel.ToolDefinition) []string {
	resNS, toolNS, actions := map[string]bool{}, map[string]bool{}, map[string]map[string]bool{}
	for _, d := range defs {
		rc := d.RequiredCapability
		resNS[rc.Resource.Namespace] = true
		toolNS[d.Namespace] = true
		if actions[rc.Resource.Namespace] == nil {
			actions[rc.Resource.Namespace] = map[string]bool{}
		}
		actions[rc.Resource.Namespace][rc.Action] = true
		actions[""] = mergeSet(actions[""], rc.Action)
	}
	keys := func(m map[string]bool) []string {
		out := make([]string, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	hint := func(s string, cands map[string]bool) string {
		if c := closest(s, keys(cands)); c != "" {
			return "; did you mean " + c + "?"
		}
		return ""
	}
	var out []string
	for _, fp := range s.FrozenPaths {
		ns, _, _ := strings.Cut(fp, ":")
		if !resNS[ns] {
			out = append(out, fmt.Sprintf("ceiling.frozenPaths entry %q can never match: no registered tool uses the resource namespace %q%s", fp, ns, hint(ns, resNS)))
		}
	}
	for _, fa := range s.FrozenActions {
		ns, act := "", fa
		if n, a, ok := strings.Cut(fa, ":"); ok && !strings.HasPrefix(fa, "snapshot:") {
			ns, act = n, a
		}
		switch {
		case ns != "" && !resNS[ns]:
			out = append(out, fmt.Sprintf("ceiling.frozenActions entry %q can never match: no registered tool uses the resource namespace %q%s", fa, ns, hint(ns, resNS)))
		case !actions[ns][act]:
			out = append(out, fmt.Sprintf("ceiling.frozenActions entry %q can never match: no registered tool requires the action %q%s", fa, act, hint(act, actions[ns])))
		}
	}
	for _, n := range s.ForbiddenNamespaces {
		if !toolNS[n] {
			out = append(out, fmt.Sprintf("ceiling.namespaces entry %q can never match: no registered tool is in the tool namespace %q%s", n, n, hint(n, toolNS)))
		}
	}
	return out
}

func mergeSet(m map[string]bool, k string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[k] = true
	return m
}

// messagingSettings reads the agents: and messages: sections into s.Messaging.
func messagingSettings(s *Settings, fileCfg map[string]any) error {
	routes, _ := fileCfg["agents"].(map[kernel.Address]mailbox.Route)
	msgs, _ := fileCfg["messages"].(map[string]any)
	timeout, _ := msgs["replyTimeout"].(string)
	maxInFlight, _ := msgs["maxInFlight"].(int)
	if _, set := msgs["maxInFlight"]; set && maxInFlight < 1 {
		return configError("set messages.maxInFlight to a positive integer", "config file %s: messages.maxInFlight must be positive", s.ConfigFile)
	}
	cfg, err := host.MessagingConfig(routes, timeout, maxInFlight)
	if err != nil {
		return configError("see the README's messaging section", "config file %s: %v", s.ConfigFile, err)
	}
	s.Messaging = cfg
	return nil
}

// parseRetention reads a retention: a whole number of days ("90d") or a Go duration
// ("720h"), positive.
func parseRetention(v string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n > 1_000_000 {
			return 0, fmt.Errorf("%q is not a number of days", v)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, fmt.Errorf("%q is neither a number of days (90d) nor a duration (720h)", v)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not positive", v)
	}
	return d, nil
}
