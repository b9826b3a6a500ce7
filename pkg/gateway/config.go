// Package gateway publishes the tools of external MCP servers (the config file's
// mcpServers) as per-context kernel tools: one kernel.ContextToolProvider per server,
// resolved per context (the server's owners filter), each upstream tool a kernel tool
// with a declared ceiling and a requirement derived from the call's arguments by the
// server's templates, so that grants, scopes, owners, purposes, maxUses, delegation,
// explain and audit apply to it exactly as to the planes (spec 60).
//
// The gateway must never authorize, filter or audit on its own: it only builds tool
// handlers for the kernel. It must never write a credential anywhere but to the upstream
// it belongs to (no audit record, log line, error message, cache entry or listing holds
// one), and never share a connection, or the credentials it was opened with, between
// contexts of different owners.
package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/internal/procenv"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Defaults of a server's timeouts.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	DefaultCatalogTTL     = 10 * time.Minute
)

// Unmapped policies.
const (
	UnmappedHide = "hide"
	UnmappedGate = "gate"
)

// reservedNamespaces are the namespaces of sharedos's own planes and affordances: a
// gateway tool in one of them would be authorized (or enabled) by grants written for the
// planes, so the configuration refuses them.
var reservedNamespaces = []string{"files", "repo", "sharedos"}

// Server is one configured MCP server.
type Server struct {
	ID        string
	Namespace string
	// Command is a stdio upstream's argv; URL a streamable-HTTP upstream's endpoint.
	// Exactly one is set.
	Command []string
	URL     string
	Env     map[string]Secret
	Headers map[string]Secret
	// Owners are the context owners that get this server; nil means every owner.
	Owners         []kernel.Address
	ConnectTimeout time.Duration
	CallTimeout    time.Duration
	CatalogTTL     time.Duration
	Unmapped       string
	// CaseInsensitive says the server treats resource names that differ only by letter
	// case as one resource (GitHub owners and repositories, a database with a
	// case-insensitive collation, a case-insensitive file system): the host ceiling's
	// frozen paths then match its resource namespaces case-folded. Grants still match
	// exactly (a grant on acme/app does not allow acme/App: a refusal, never a widening).
	CaseInsensitive bool
	// Tools are the mapped upstream tools, by upstream name.
	Tools map[string]*ToolMap

	// File and Line say where the server was declared.
	File string
	Line int
}

// Secret is a credential given by reference: the value of an environment variable of
// the sharedos process, or the content of a file (one trailing line break removed),
// with an optional prefix. The value itself never appears in a configuration.
type Secret struct {
	FromEnv  string `json:"fromEnv,omitempty"`
	FromFile string `json:"fromFile,omitempty"`
	Prefix   string `json:"prefix,omitempty"`
}

// ToolMap is the requirement template of one mapped upstream tool.
type ToolMap struct {
	Name      string // the upstream tool name
	Action    string
	Namespace string // the resource namespace (default: the server's namespace)
	Path      []Elem
	Line      int
}

// Elem is one element of a path template: a literal segment, or a JSON pointer into the
// call's arguments (optionally split on a separator).
type Elem struct {
	Literal string
	Arg     *Pointer
	Split   string
	// Root, with Split, is the directory the upstream's absolute paths start with (for
	// server-filesystem: the directory it serves). A value that starts with Split must
	// lie under Root, which is removed before the split; a relative value is split as it
	// is. "" when the template takes relative values only.
	Root string
	// Number is how a number argument becomes a segment: NumberSafe (integers within
	// ±(2^53−1)) or NumberInt64.
	Number string
}

// String renders the element as the config writes it.
func (e Elem) String() string {
	if e.Arg == nil {
		return e.Literal
	}
	out := "{arg: " + e.Arg.String()
	if e.Split != "" {
		out += fmt.Sprintf(", split: %q", e.Split)
	}
	if e.Root != "" {
		out += fmt.Sprintf(", root: %q", e.Root)
	}
	if e.Number != "" {
		out += ", number: " + e.Number
	}
	return out + "}"
}

// ConfigError is a configuration problem at a line of a file.
type ConfigError struct {
	File string
	Line int
	Msg  string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// ParseOptions say how to read a configuration.
type ParseOptions struct {
	// Home expands a fromFile path that starts with "~/" ("": the process's $HOME,
	// internal/procenv; the command line passes its Env's).
	Home string
}

// Config is the parsed mcpServers section: the servers, and the file that held them
// (the config file itself, or the file it named).
type Config struct {
	Servers []*Server
	File    string
}

// ParseNode parses the value of a config file's mcpServers key: a list of servers, or
// the name of a file (relative to the config file's folder) that holds them (a list, or
// a mapping whose only key is mcpServers).
func ParseNode(file string, n *yaml.Node, opts ParseOptions) (*Config, error) {
	if n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		p := n.Value
		if p == "" {
			return nil, &ConfigError{file, n.Line, "mcpServers must name a file or list the servers"}
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(file), p)
		}
		return LoadFile(p, opts)
	}
	servers, err := parseServers(file, n, opts)
	if err != nil {
		return nil, err
	}
	return &Config{Servers: servers, File: file}, nil
}

// LoadFile reads an mcpServers file: a YAML list of servers, or a mapping whose only
// key is mcpServers holding that list.
func LoadFile(path string, opts ParseOptions) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, &ConfigError{path, 0, fmt.Sprintf("cannot read the mcpServers file: %v", err)}
	}
	return ParseBytes(path, data, opts)
}

// ParseBytes parses the content of an mcpServers file named path.
func ParseBytes(path string, data []byte, opts ParseOptions) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, &ConfigError{path, 0, strings.TrimPrefix(err.Error(), "yaml: ")}
	}
	if len(doc.Content) == 0 {
		return &Config{File: path}, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.MappingNode {
		if len(root.Content) != 2 || root.Content[0].Value != "mcpServers" {
			return nil, &ConfigError{path, root.Line, "an mcpServers file is a list of servers, or a mapping with the single key mcpServers"}
		}
		root = root.Content[1]
	}
	servers, err := parseServers(path, root, opts)
	if err != nil {
		return nil, err
	}
	return &Config{Servers: servers, File: path}, nil
}

func parseServers(file string, n *yaml.Node, opts ParseOptions) ([]*Server, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode {
		return nil, &ConfigError{file, n.Line, "mcpServers must be a list of servers (or the name of a file that holds them)"}
	}
	if opts.Home == "" {
		opts.Home = procenv.Getenv("HOME")
	}
	p := &parser{file: file, opts: opts}
	var out []*Server
	ids, namespaces := map[string]int{}, map[string]int{}
	for _, e := range n.Content {
		s, err := p.server(e)
		if err != nil {
			return nil, err
		}
		if first, dup := ids[s.ID]; dup {
			return nil, p.errf(e, "server id %q is given twice (first at line %d)", s.ID, first)
		}
		ids[s.ID] = s.Line
		if first, dup := namespaces[s.Namespace]; dup {
			return nil, p.errf(e, "namespace %q of server %q is already the namespace of the server at line %d", s.Namespace, s.ID, first)
		}
		namespaces[s.Namespace] = s.Line
		out = append(out, s)
	}
	return out, nil
}

type parser struct {
	file string
	opts ParseOptions
}

func (p *parser) errf(n *yaml.Node, format string, args ...any) error {
	return &ConfigError{p.file, n.Line, fmt.Sprintf(format, args...)}
}

// mapping returns the key/value pairs of a mapping node, refusing duplicate and unknown
// keys.
func (p *parser) mapping(n *yaml.Node, what string, allowed ...string) (map[string]*yaml.Node, error) {
	if n.Kind != yaml.MappingNode {
		return nil, p.errf(n, "%s must be a mapping", what)
	}
	out := make(map[string]*yaml.Node, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, p.errf(k, "%s: keys must be strings", what)
		}
		if _, dup := out[k.Value]; dup {
			return nil, p.errf(k, "%s: key %q is given twice", what, k.Value)
		}
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			return nil, p.errf(k, "%s: unknown key %q (known: %s)", what, k.Value, strings.Join(allowed, ", "))
		}
		out[k.Value] = v
	}
	return out, nil
}

func (p *parser) str(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", p.errf(n, "%s must be a string", what)
	}
	return n.Value, nil
}

func validID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

var serverKeys = []string{"id", "namespace", "command", "url", "env", "headers", "owners", "connectTimeout",
	"callTimeout", "catalogTTL", "unmapped", "caseInsensitive", "tools"}

func (p *parser) server(n *yaml.Node) (*Server, error) {
	m, err := p.mapping(n, "an mcpServers entry", serverKeys...)
	if err != nil {
		return nil, err
	}
	s := &Server{File: p.file, Line: n.Line, ConnectTimeout: DefaultConnectTimeout, CallTimeout: DefaultCallTimeout,
		CatalogTTL: DefaultCatalogTTL, Unmapped: UnmappedHide, Tools: map[string]*ToolMap{}}
	idn, ok := m["id"]
	if !ok {
		return nil, p.errf(n, "an mcpServers entry needs an id")
	}
	if s.ID, err = p.str(idn, "id"); err != nil {
		return nil, err
	}
	if !validID(s.ID) {
		return nil, p.errf(idn, "server id %q must be 1 to 64 characters of a-z 0-9 -", s.ID)
	}
	s.Namespace = s.ID
	if v, ok := m["namespace"]; ok {
		if s.Namespace, err = p.str(v, "namespace"); err != nil {
			return nil, err
		}
		if !validID(s.Namespace) {
			return nil, p.errf(v, "server %s: namespace %q must be 1 to 64 characters of a-z 0-9 -", s.ID, s.Namespace)
		}
	}
	if slices.Contains(reservedNamespaces, s.Namespace) {
		return nil, p.errf(n, "server %s: namespace %q is sharedos's own; pick another (a gateway tool there would be authorized by grants written for it)", s.ID, s.Namespace)
	}
	cmdN, hasCmd := m["command"]
	urlN, hasURL := m["url"]
	switch {
	case hasCmd == hasURL:
		return nil, p.errf(n, "server %s needs exactly one of command (a stdio server) or url (a streamable-HTTP server)", s.ID)
	case hasCmd:
		if cmdN.Kind != yaml.SequenceNode || len(cmdN.Content) == 0 {
			return nil, p.errf(cmdN, "server %s: command must be a non-empty list (the program and its arguments)", s.ID)
		}
		for _, a := range cmdN.Content {
			v, err := p.str(a, "command element")
			if err != nil {
				return nil, err
			}
			s.Command = append(s.Command, v)
		}
		if s.Command[0] == "" {
			return nil, p.errf(cmdN, "server %s: command names no program", s.ID)
		}
	default:
		if s.URL, err = p.str(urlN, "url"); err != nil {
			return nil, err
		}
		u, perr := url.Parse(s.URL)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, p.errf(urlN, "server %s: url must be an http or https URL", s.ID)
		}
		if u.User != nil {
			return nil, p.errf(urlN, "server %s: url must not carry credentials; give them in headers by reference", s.ID)
		}
	}
	if v, ok := m["env"]; ok {
		if !hasCmd {
			return nil, p.errf(v, "server %s: env is for stdio servers (a url server takes headers)", s.ID)
		}
		if s.Env, err = p.secrets(v, s.ID, "env"); err != nil {
			return nil, err
		}
		for k := range s.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, p.errf(v, "server %s: env name %q is not a variable name", s.ID, k)
			}
		}
	}
	if v, ok := m["headers"]; ok {
		if !hasURL {
			return nil, p.errf(v, "server %s: headers are for url servers (a stdio server takes env)", s.ID)
		}
		if s.Headers, err = p.secrets(v, s.ID, "headers"); err != nil {
			return nil, err
		}
		for k := range s.Headers {
			if !validHeaderName(k) {
				return nil, p.errf(v, "server %s: %q is not an HTTP header name", s.ID, k)
			}
		}
	}
	if v, ok := m["owners"]; ok {
		if v.Kind != yaml.SequenceNode || len(v.Content) == 0 {
			return nil, p.errf(v, "server %s: owners must be a non-empty list of addresses (omit it for every owner)", s.ID)
		}
		for _, e := range v.Content {
			str, err := p.str(e, "an owner")
			if err != nil {
				return nil, err
			}
			a, aerr := kernel.ParseAddress(str)
			if aerr == nil {
				aerr = a.Validate()
			}
			if aerr != nil {
				return nil, p.errf(e, "server %s: owner %q is not an address kind:id: %v", s.ID, str, aerr)
			}
			s.Owners = append(s.Owners, a)
		}
	}
	for key, dst := range map[string]*time.Duration{"connectTimeout": &s.ConnectTimeout, "callTimeout": &s.CallTimeout, "catalogTTL": &s.CatalogTTL} {
		v, ok := m[key]
		if !ok {
			continue
		}
		str, err := p.str(v, key)
		if err != nil {
			return nil, err
		}
		d, derr := time.ParseDuration(str)
		if derr != nil || d <= 0 {
			return nil, p.errf(v, "server %s: %s must be a positive duration such as 10s or 2m", s.ID, key)
		}
		*dst = d
	}
	if v, ok := m["unmapped"]; ok {
		if s.Unmapped, err = p.str(v, "unmapped"); err != nil {
			return nil, err
		}
		if s.Unmapped != UnmappedHide && s.Unmapped != UnmappedGate {
			return nil, p.errf(v, "server %s: unmapped must be hide or gate", s.ID)
		}
	}
	if v, ok := m["caseInsensitive"]; ok {
		if v.Kind != yaml.ScalarNode || (v.Value != "true" && v.Value != "false") {
			return nil, p.errf(v, "server %s: caseInsensitive must be true or false", s.ID)
		}
		s.CaseInsensitive = v.Value == "true"
	}
	if v, ok := m["tools"]; ok {
		tm, err := p.mapping(v, "server "+s.ID+": tools")
		if err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := v.Content[i]
			t, err := p.tool(s, k.Value, tm[k.Value], k.Line)
			if err != nil {
				return nil, err
			}
			s.Tools[k.Value] = t
		}
	}
	return s, nil
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func (p *parser) secrets(n *yaml.Node, id, what string) (map[string]Secret, error) {
	m, err := p.mapping(n, "server "+id+": "+what)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Secret, len(m))
	for k, v := range m {
		if v.Kind == yaml.ScalarNode {
			return nil, p.errf(v, "server %s: %s %s: a value is given only by reference, {fromEnv: VAR} or {fromFile: PATH}, never inline", id, what, k)
		}
		sm, err := p.mapping(v, "server "+id+": "+what+" "+k, "fromEnv", "fromFile", "prefix")
		if err != nil {
			return nil, err
		}
		var s Secret
		if e, ok := sm["fromEnv"]; ok {
			if s.FromEnv, err = p.str(e, "fromEnv"); err != nil {
				return nil, err
			}
			if s.FromEnv == "" || strings.ContainsAny(s.FromEnv, "=\x00") {
				return nil, p.errf(e, "server %s: %s %s: fromEnv must name an environment variable", id, what, k)
			}
		}
		if f, ok := sm["fromFile"]; ok {
			if s.FromFile, err = p.str(f, "fromFile"); err != nil {
				return nil, err
			}
			if s.FromFile == "" {
				return nil, p.errf(f, "server %s: %s %s: fromFile must name a file", id, what, k)
			}
			s.FromFile = p.expand(s.FromFile)
		}
		if (s.FromEnv == "") == (s.FromFile == "") {
			return nil, p.errf(v, "server %s: %s %s needs exactly one of fromEnv or fromFile", id, what, k)
		}
		if pr, ok := sm["prefix"]; ok {
			if s.Prefix, err = p.str(pr, "prefix"); err != nil {
				return nil, err
			}
		}
		out[k] = s
	}
	return out, nil
}

// expand makes a fromFile path absolute: "~/" is the home folder, a relative path is
// relative to the file that names it.
func (p *parser) expand(path string) string {
	if strings.HasPrefix(path, "~/") && p.opts.Home != "" {
		return filepath.Join(p.opts.Home, path[2:])
	}
	if !filepath.IsAbs(path) {
		return filepath.Join(filepath.Dir(p.file), path)
	}
	return filepath.Clean(path)
}

func (p *parser) tool(s *Server, name string, n *yaml.Node, line int) (*ToolMap, error) {
	m, err := p.mapping(n, "server "+s.ID+": tool "+name, "action", "resource")
	if err != nil {
		return nil, err
	}
	t := &ToolMap{Name: name, Namespace: s.Namespace, Line: line}
	if name == "" {
		return nil, p.errf(n, "server %s: a tool name must not be empty", s.ID)
	}
	an, ok := m["action"]
	if !ok {
		return nil, p.errf(n, "server %s: tool %s needs an action", s.ID, name)
	}
	if t.Action, err = p.str(an, "action"); err != nil {
		return nil, err
	}
	if a := strings.TrimSpace(t.Action); a != t.Action || a == "" || len(a) > 128 {
		return nil, p.errf(an, "server %s: tool %s: action %q must be 1 to 128 characters without surrounding white space", s.ID, name, t.Action)
	}
	rn, ok := m["resource"]
	if !ok {
		return nil, p.errf(n, "server %s: tool %s needs a resource (resource: {path: []} for the namespace root)", s.ID, name)
	}
	rm, err := p.mapping(rn, "server "+s.ID+": tool "+name+": resource", "namespace", "path")
	if err != nil {
		return nil, err
	}
	if v, ok := rm["namespace"]; ok {
		if t.Namespace, err = p.str(v, "resource namespace"); err != nil {
			return nil, err
		}
		if !validID(t.Namespace) {
			return nil, p.errf(v, "server %s: tool %s: resource namespace %q must be 1 to 64 characters of a-z 0-9 -", s.ID, name, t.Namespace)
		}
		if slices.Contains(reservedNamespaces, t.Namespace) {
			return nil, p.errf(v, "server %s: tool %s: resource namespace %q is sharedos's own; grants written for it must not authorize an upstream tool", s.ID, name, t.Namespace)
		}
	}
	pn, ok := rm["path"]
	if !ok {
		return nil, p.errf(rn, "server %s: tool %s: resource needs a path ([] for the namespace root)", s.ID, name)
	}
	if pn.Kind != yaml.SequenceNode {
		return nil, p.errf(pn, "server %s: tool %s: resource path must be a list", s.ID, name)
	}
	if len(pn.Content) > kernel.MaxPathSegments {
		return nil, p.errf(pn, "server %s: tool %s: resource path has more than %d elements", s.ID, name, kernel.MaxPathSegments)
	}
	for _, e := range pn.Content {
		el, err := p.elem(s, name, e)
		if err != nil {
			return nil, err
		}
		t.Path = append(t.Path, el)
	}
	return t, nil
}

func (p *parser) elem(s *Server, tool string, n *yaml.Node) (Elem, error) {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return Elem{}, p.errf(n, "server %s: tool %s: a path element must not be null", s.ID, tool)
		}
		if err := kernel.ValidatePathSegment(n.Value); err != nil {
			return Elem{}, p.errf(n, "server %s: tool %s: literal segment %q is not a canonical path segment: %v", s.ID, tool, n.Value, err)
		}
		return Elem{Literal: n.Value}, nil
	case yaml.MappingNode:
		m, err := p.mapping(n, "server "+s.ID+": tool "+tool+": a path element", "arg", "split", "root", "number")
		if err != nil {
			return Elem{}, err
		}
		an, ok := m["arg"]
		if !ok {
			return Elem{}, p.errf(n, "server %s: tool %s: a path element mapping needs arg (a JSON pointer such as /owner)", s.ID, tool)
		}
		str, err := p.str(an, "arg")
		if err != nil {
			return Elem{}, err
		}
		ptr, err := ParsePointer(str)
		if err != nil {
			return Elem{}, p.errf(an, "server %s: tool %s: arg %q: %v", s.ID, tool, str, err)
		}
		if len(ptr) == 0 {
			return Elem{}, p.errf(an, "server %s: tool %s: arg must point into the arguments (\"\" is the whole object)", s.ID, tool)
		}
		e := Elem{Arg: &ptr}
		if sn, ok := m["split"]; ok {
			if e.Split, err = p.str(sn, "split"); err != nil {
				return Elem{}, err
			}
			if e.Split == "" {
				return Elem{}, p.errf(sn, "server %s: tool %s: split must be a non-empty separator", s.ID, tool)
			}
		}
		if rn, ok := m["root"]; ok {
			if e.Root, err = p.str(rn, "root"); err != nil {
				return Elem{}, err
			}
			if e.Split == "" {
				return Elem{}, p.errf(rn, "server %s: tool %s: root needs split (root is the directory the upstream's absolute paths start with)", s.ID, tool)
			}
			if err := validRoot(e.Root, e.Split); err != nil {
				return Elem{}, p.errf(rn, "server %s: tool %s: root %q: %v", s.ID, tool, e.Root, err)
			}
		}
		if nn, ok := m["number"]; ok {
			if e.Number, err = p.str(nn, "number"); err != nil {
				return Elem{}, err
			}
			if e.Number != NumberInt64 {
				return Elem{}, p.errf(nn, "server %s: tool %s: number must be int64 (omit it for integers within ±(2^53−1))", s.ID, tool)
			}
		}
		return e, nil
	}
	return Elem{}, p.errf(n, "server %s: tool %s: a path element is a literal segment or {arg: POINTER[, split: SEP[, root: DIR]][, number: int64]}", s.ID, tool)
}

// Namespaces returns the tool namespaces of the configured servers.
func (c *Config) Namespaces() []string {
	var out []string
	for _, s := range c.Servers {
		out = append(out, s.Namespace)
	}
	return out
}

// ResourceNamespaces returns the resource namespaces a server's tools can require: its
// namespace and every mapped tool's.
func (s *Server) ResourceNamespaces() []string {
	out := []string{s.Namespace}
	for _, m := range s.Tools {
		out = append(out, m.Namespace)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// CaseInsensitiveNamespaces returns the resource namespaces of the servers that declare
// caseInsensitive: true.
func (c *Config) CaseInsensitiveNamespaces() []string {
	var out []string
	for _, s := range c.Servers {
		if s.CaseInsensitive {
			out = append(out, s.ResourceNamespaces()...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// SecretFiles returns every fromFile path of the configuration (the host keeps them
// outside the root, like the config file).
func (c *Config) SecretFiles() []string {
	var out []string
	for _, s := range c.Servers {
		for _, m := range []map[string]Secret{s.Env, s.Headers} {
			for _, sec := range m {
				if sec.FromFile != "" {
					out = append(out, sec.FromFile)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ServesOwner reports whether a context of owner gets this server.
func (s *Server) ServesOwner(owner kernel.Address) bool {
	return s.Owners == nil || slices.Contains(s.Owners, owner)
}

// Digest identifies everything of the server's configuration that can change what its
// upstream offers: the transport, and the names (never the values) of its credentials.
// It keys the cached tool list.
func (s *Server) Digest() string {
	type digestOf struct {
		ID      string            `json:"id"`
		Command []string          `json:"command,omitempty"`
		URL     string            `json:"url,omitempty"`
		Env     map[string]Secret `json:"env,omitempty"`
		Headers map[string]Secret `json:"headers,omitempty"`
	}
	b, _ := json.Marshal(digestOf{s.ID, s.Command, s.URL, s.Env, s.Headers})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
