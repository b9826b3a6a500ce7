package gateway

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

const goodConfig = `mcpServers:
  - id: github
    command: [github-mcp-server, stdio]
    env: {GITHUB_TOKEN: {fromEnv: GITHUB_TOKEN}}
    owners: [human:alice]
    connectTimeout: 3s
    callTimeout: 5s
    catalogTTL: 1m
    unmapped: gate
    tools:
      get_file_contents:
        action: read
        resource:
          namespace: gh
          path: [{arg: /owner}, {arg: /repo}, contents, {arg: /path, split: "/"}]
      search_code:
        action: search
        resource: {path: []}
  - id: notes
    namespace: kb
    url: https://mcp.example.test/mcp
    headers: {Authorization: {fromFile: ~/.config/token, prefix: "Bearer "}}
`

func TestParseGood(t *testing.T) {
	cfg, err := ParseBytes("/etc/c.yaml", []byte(goodConfig), ParseOptions{Home: "/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 2 {
		t.Fatalf("servers = %d", len(cfg.Servers))
	}
	gh, kb := cfg.Servers[0], cfg.Servers[1]
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	if gh.ID != "github" || gh.Namespace != "github" || gh.ConnectTimeout != 3*time.Second || gh.CallTimeout != 5*time.Second ||
		gh.CatalogTTL != time.Minute || gh.Unmapped != UnmappedGate || !reflect.DeepEqual(gh.Owners, []kernel.Address{alice}) {
		t.Errorf("github = %+v", gh)
	}
	if gh.Line != 2 || gh.Tools["get_file_contents"].Line != 11 {
		t.Errorf("lines: server %d, tool %d", gh.Line, gh.Tools["get_file_contents"].Line)
	}
	m := gh.Tools["get_file_contents"]
	if m.Namespace != "gh" || m.Action != "read" || m.Template() != `gh:[{arg: /owner}, {arg: /repo}, contents, {arg: /path, split: "/"}]` {
		t.Errorf("template = %s %s", m.Action, m.Template())
	}
	if s := gh.Tools["search_code"]; s.Namespace != "github" || len(s.Path) != 0 {
		t.Errorf("search_code = %+v", s)
	}
	if kb.Namespace != "kb" || kb.URL == "" || kb.Headers["Authorization"].FromFile != "/home/u/.config/token" ||
		kb.Headers["Authorization"].Prefix != "Bearer " || kb.Owners != nil || kb.Unmapped != UnmappedHide ||
		kb.ConnectTimeout != DefaultConnectTimeout || kb.CatalogTTL != DefaultCatalogTTL {
		t.Errorf("kb = %+v", kb)
	}
	if !gh.ServesOwner(alice) || gh.ServesOwner(kernel.Address{Kind: kernel.KindHuman, ID: "bob"}) || !kb.ServesOwner(alice) {
		t.Error("owners filter")
	}
	if got := cfg.SecretFiles(); !reflect.DeepEqual(got, []string{"/home/u/.config/token"}) {
		t.Errorf("secret files = %v", got)
	}
	if d1, d2 := gh.Digest(), gh.Digest(); d1 == kb.Digest() || d1 != d2 {
		t.Error("digest")
	}
}

// The digest changes with the transport and the credentials' names, never with
// timeouts or templates (those do not change what the upstream offers).
func TestDigest(t *testing.T) {
	base := func() *Server {
		return &Server{ID: "a", Command: []string{"x"}, Env: map[string]Secret{"T": {FromEnv: "T"}}}
	}
	d := base().Digest()
	s := base()
	s.CallTimeout = time.Hour
	s.Tools = map[string]*ToolMap{"t": {Action: "read"}}
	if s.Digest() != d {
		t.Error("timeouts or templates changed the digest")
	}
	s = base()
	s.Command = []string{"y"}
	if s.Digest() == d {
		t.Error("command did not change the digest")
	}
	s = base()
	s.Env["T"] = Secret{FromEnv: "U"}
	if s.Digest() == d {
		t.Error("credential reference did not change the digest")
	}
}

func TestParseErrors(t *testing.T) {
	srv := func(body string) string { return "mcpServers:\n  - id: a\n" + body }
	cases := []struct {
		name, doc, want string
		line            int
	}{
		{"not a list", "mcpServers: {a: 1}\n", "must be a list", 1},
		{"no id", "mcpServers:\n  - command: [x]\n", "needs an id", 2},
		{"bad id", "mcpServers:\n  - id: A_b\n    command: [x]\n", "a-z 0-9", 2},
		{"unknown key", srv("    command: [x]\n    bogus: 1\n"), `unknown key "bogus"`, 4},
		{"dup key", srv("    command: [x]\n    command: [y]\n"), "given twice", 4},
		{"neither", srv(""), "exactly one of command", 2},
		{"both", srv("    command: [x]\n    url: http://h/\n"), "exactly one of command", 2},
		{"empty command", srv("    command: []\n"), "non-empty list", 3},
		{"url scheme", srv("    url: file:///x\n"), "http or https", 3},
		{"url userinfo", srv("    url: https://u:p@h/\n"), "must not carry credentials", 3},
		{"inline secret", srv("    command: [x]\n    env: {T: abc}\n"), "only by reference", 4},
		{"secret both", srv("    command: [x]\n    env: {T: {fromEnv: A, fromFile: b}}\n"), "exactly one of fromEnv", 4},
		{"secret unknown", srv("    command: [x]\n    env: {T: {value: A}}\n"), `unknown key "value"`, 4},
		{"env on url", srv("    url: https://h/\n    env: {T: {fromEnv: A}}\n"), "env is for stdio", 4},
		{"headers on cmd", srv("    command: [x]\n    headers: {T: {fromEnv: A}}\n"), "headers are for url", 4},
		{"bad header", srv("    url: https://h/\n    headers: {\"a b\": {fromEnv: A}}\n"), "not an HTTP header name", 4},
		{"owners empty", srv("    command: [x]\n    owners: []\n"), "non-empty list", 4},
		{"owner bad", srv("    command: [x]\n    owners: [alice]\n"), "not an address", 4},
		{"timeout", srv("    command: [x]\n    callTimeout: soon\n"), "positive duration", 4},
		{"timeout negative", srv("    command: [x]\n    connectTimeout: -1s\n"), "positive duration", 4},
		{"unmapped", srv("    command: [x]\n    unmapped: show\n"), "hide or gate", 4},
		{"reserved ns", "mcpServers:\n  - id: files\n    command: [x]\n", "sharedos's own", 2},
		{"reserved resource ns", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {namespace: repo, path: []}}\n"), "sharedos's own", 5},
		{"no action", srv("    command: [x]\n    tools:\n      t: {resource: {path: []}}\n"), "needs an action", 5},
		{"padded action", srv("    command: [x]\n    tools:\n      t: {action: ' read', resource: {path: []}}\n"), "surrounding white space", 5},
		{"no resource", srv("    command: [x]\n    tools:\n      t: {action: read}\n"), "needs a resource", 5},
		{"no path", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {}}\n"), "needs a path", 5},
		{"literal dotdot", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [..]}}\n"), "not a canonical path segment", 5},
		{"literal slash", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [a/b]}}\n"), "not a canonical path segment", 5},
		{"bad pointer", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: owner}]}}\n"), "starts with /", 5},
		{"bad escape", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: /a~2}]}}\n"), "~ must be followed", 5},
		{"whole doc pointer", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: ''}]}}\n"), "point into the arguments", 5},
		{"empty split", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: /a, split: ''}]}}\n"), "non-empty separator", 5},
		{"root without split", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: /a, root: /srv}]}}\n"), "root needs split", 5},
		{"root relative", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: /a, split: /, root: srv}]}}\n"), "must be absolute", 5},
		{"root trailing", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: /a, split: /, root: /srv/}]}}\n"), "empty name", 5},
		{"root dotdot", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: /a, split: /, root: /srv/../etc}]}}\n"), `the name ".."`, 5},
		{"number other", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: /a, number: float}]}}\n"), "number must be int64", 5},
		{"elem unknown", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [{arg: /a, join: x}]}}\n"), `unknown key "join"`, 5},
		{"elem list", srv("    command: [x]\n    tools:\n      t: {action: read, resource: {path: [[a]]}}\n"), "a literal segment or", 5},
		{"dup id", "mcpServers:\n  - id: a\n    command: [x]\n  - id: a\n    namespace: b\n    command: [x]\n", "given twice", 4},
		{"dup namespace", "mcpServers:\n  - id: a\n    command: [x]\n  - id: b\n    namespace: a\n    command: [x]\n", "already the namespace", 4},
		{"file mapping", "other: 1\n", "single key mcpServers", 1},
		{"yaml", "mcpServers: [\n", "", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseBytes("/c.yaml", []byte(c.doc), ParseOptions{Home: "/h"})
			if err == nil {
				t.Fatalf("parsed: %+v", cfg)
			}
			if cfg != nil {
				t.Error("a partial result beside the error")
			}
			ce, ok := err.(*ConfigError)
			if !ok {
				t.Fatalf("error %T %v", err, err)
			}
			if !strings.Contains(err.Error(), c.want) || (c.line > 0 && ce.Line != c.line) {
				t.Errorf("error = %q (line %d), want %q at line %d", err, ce.Line, c.want, c.line)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error is not one line: %q", err)
			}
		})
	}
}

func TestParseNodeFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "servers.yaml"), []byte("- id: a\n  command: [x]\n  env: {T: {fromFile: tok}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseBytes(filepath.Join(dir, "config.yaml"), []byte("mcpServers: servers.yaml\n"), ParseOptions{})
	if err == nil {
		t.Fatalf("a config file is not an mcpServers file: %+v", cfg)
	}
	cfg, err = LoadFile(filepath.Join(dir, "servers.yaml"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.File != filepath.Join(dir, "servers.yaml") || cfg.Servers[0].Env["T"].FromFile != filepath.Join(dir, "tok") {
		t.Errorf("cfg = %+v %+v", cfg, cfg.Servers[0].Env)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing.yaml"), ParseOptions{}); err == nil || !strings.Contains(err.Error(), "cannot read the mcpServers file") {
		t.Errorf("missing file: %v", err)
	}
}
