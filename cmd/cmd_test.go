package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// sandbox returns an env func with HOME and XDG_* under a temp dir.
func sandbox(t *testing.T) (string, func(string) string) {
	t.Helper()
	dir := t.TempDir()
	env := map[string]string{
		"HOME": filepath.Join(dir, "home"), "XDG_STATE_HOME": filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME": filepath.Join(dir, "config"), "XDG_CACHE_HOME": filepath.Join(dir, "cache"),
	}
	return dir, func(k string) string { return env[k] }
}

func run1(t *testing.T, env func(string) string, args ...string) (int, string, string) {
	t.Helper()
	ios, _, out, errOut := Test()
	code := MainWith(args, ios, env)
	return code, out.String(), errOut.String()
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{&resultExit{code: ExitDenied}, 3},
		{&resultExit{code: ExitEscalated}, 5},
		{usageError("", "x"), 2},
		{argumentsError("", "x"), 2},
		{stateError(errors.New("x"), ""), 1},
		{internalError(errors.New("x")), 1},
		{errors.New("plain"), 1},
	} {
		if got := exitCodeOf(tc.err); got != tc.want {
			t.Errorf("exitCodeOf(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
	for s, want := range map[kernel.ToolStatus]int{kernel.StatusSucceeded: 0, kernel.StatusDenied: 3, kernel.StatusFailed: 4} {
		if got := exitForStatus(s); got != want {
			t.Errorf("exitForStatus(%s) = %d, want %d", s, got, want)
		}
	}
}

func TestErrorEnvelope(t *testing.T) {
	t.Parallel()
	ios, _, _, errOut := Test()
	printError(ios, FormatJSON, usageError("a hint", "bad %s", "thing"))
	var env errorEnvelope
	if err := json.Unmarshal(errOut.Bytes(), &env); err != nil {
		t.Fatalf("not one JSON object: %q", errOut)
	}
	if env.Error.Code != CodeInvalidRequest || env.Error.Message != "bad thing" || strings.Count(errOut.String(), "\n") != 1 {
		t.Fatalf("got %q", errOut)
	}
	ios, _, _, errOut = Test()
	printError(ios, FormatTable, usageError("a hint", "bad thing"))
	if errOut.String() != "sharedos: bad thing\nhint: a hint\n" {
		t.Fatalf("got %q", errOut)
	}
}

func TestYAMLKeepsJSONOrder(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	res := kernel.ToolResult{CallID: "c", Tool: "t", Status: kernel.StatusSucceeded, Output: map[string]any{"z": 1, "a": "x\ny"}, CompletedAt: "2026-01-01T00:00:00.000Z"}
	if err := writeYAML(&b, res); err != nil {
		t.Fatal(err)
	}
	want := "callId: c\ntool: t\nstatus: succeeded\noutput:\n  a: |-\n    x\n    y\n  z: 1\ncompletedAt: \"2026-01-01T00:00:00.000Z\"\n"
	if b.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestColorConventions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tty  bool
		env  map[string]string
		want bool
	}{
		{true, nil, true},
		{false, nil, false},
		{true, map[string]string{"NO_COLOR": "1"}, false},
		{true, map[string]string{"CLICOLOR": "0"}, false},
		{false, map[string]string{"CLICOLOR_FORCE": "1"}, true},
		{true, map[string]string{"CLICOLOR": "0", "CLICOLOR_FORCE": "1"}, true},
		{false, map[string]string{"NO_COLOR": "1", "CLICOLOR_FORCE": "1"}, false},
		{false, map[string]string{"CLICOLOR_FORCE": "0"}, false},
	} {
		ios := &IOStreams{StdoutTTY: tc.tty}
		if got := ios.ColorEnabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("tty=%v env=%v: colour %v, want %v", tc.tty, tc.env, got, tc.want)
		}
	}
}

// TestFixGrantCoversExactlyTheRequirement: the suggested grant is deterministic, valid,
// round-trips through the grant-file format, and authorizes the requirement and nothing
// next to it.
func TestFixGrantCoversExactlyTheRequirement(t *testing.T) {
	t.Parallel()
	alice := kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	actx := kernel.AccessContext{World: "w", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "a"}, Authority: alice,
		Owner: alice, Purpose: "p", TraceID: "t", Now: "2026-08-03T09:00:00.000Z", EnabledToolNamespaces: []string{}}
	req := kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a", "b.md"}, Owner: &alice}, Action: "replace"}
	g := fixGrant(actx, req, nil)
	if g2 := fixGrant(actx, req, nil); !strings.HasPrefix(g.ID, "fix-") || len(g.ID) != 16 || g.ID != g2.ID {
		t.Fatalf("ids %q, %q: want one deterministic fix-<12 hex>", g.ID, g2.ID)
	}
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	f, err := grantfile.Parse("fix.yaml", []byte("version: 1\ngrants:\n"+grantfile.FormatGrantYAML(g)))
	if err != nil {
		t.Fatal(err)
	}
	auth := kernel.NewAuthority(f.Grants, actx, 0)
	var z kernel.Authorizer
	if d, _ := z.Authorize(t.Context(), auth, actx, req, kernel.AuthorizeOptions{}); !d.Allowed {
		t.Fatalf("fix grant does not allow the requirement: %s", d.ReasonCode)
	}
	for _, other := range []kernel.CapabilityRequirement{
		{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a", "c.md"}}, Action: "replace"},
		{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a", "b.md", "x"}}, Action: "replace"},
		{Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a", "b.md"}}, Action: "delete"},
	} {
		if d, _ := z.Authorize(t.Context(), auth, actx, other, kernel.AuthorizeOptions{}); d.Allowed {
			t.Errorf("fix grant also allows %s on %v", other.Action, other.Resource.Path)
		}
	}
}

// TestMainWithInProcess runs a few commands in-process against a sandboxed state.
func TestMainWithInProcess(t *testing.T) {
	dir, env := sandbox(t)
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run1(t, env, "--root", root, "--as", "agent:a", "namespaces", "enable", "files")
	if code != 0 || !strings.Contains(out, `"effectiveSelection": [`) {
		t.Fatalf("enable: %d %s %s", code, out, errOut)
	}
	code, _, errOut = run1(t, env, "--root", root, "--as", "agent:a", "tools", "call", "files.read", "-a", "path=x")
	if code != ExitDenied {
		t.Fatalf("call without grants: exit %d (%s), want 3", code, errOut)
	}
	code, _, errOut = run1(t, env, "--root", root, "--as", "nope", "tools", "list")
	if code != ExitUsage || !strings.Contains(errOut, `"code":"invalid_request"`) {
		t.Fatalf("bad address: exit %d %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(dir, "state", "sharedos", "state.db")); err != nil {
		t.Fatalf("state database not in XDG_STATE_HOME: %v", err)
	}
}

// TestSettingLayersEveryKey: each setting's layers as they were under viper (issue 28
// replaced it with settingLayers): a flag given on the command line wins, even when
// empty; an empty SHAREDOS_* variable is unset; SHAREDOS_TOKENS overrides the file's
// tokens and a --tokens flag is not a global setting; the file's nested keys (an empty
// list is set, and empty) and defaults when nothing sets a key.
func TestSettingLayersEveryKey(t *testing.T) {
	dir, sandboxEnv := sandbox(t)
	cfg := filepath.Join(dir, "config.yaml")
	body := "world: cfg\nas: agent:cfg\ntokens: t.yaml\ndefaultNamespaces: [files]\n" +
		"repo: {author: {name: N, email: e@x}, excludesFiles: []}\n" +
		"ceiling: {namespaces: [web], frozenPaths: [a/b], frozenActions: [write]}\n" +
		"mcp: {maxSessions: 3}\naudit: {retention: 2d}\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"SHAREDOS_WORLD": "env", "SHAREDOS_AS": "", "SHAREDOS_NAMESPACES": "files, repo",
		"SHAREDOS_TOKENS": "/etc/tok.yaml", "SHAREDOS_MCP_MAXSESSIONS": "9", "SHAREDOS_OWNER": "human:env"}
	env := func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return sandboxEnv(k)
	}
	f := &Factory{Env: env, Getwd: func() (string, error) { return "/wd", nil }}
	fs := pflag.NewFlagSet("sharedos", pflag.ContinueOnError)
	f.Global.bind(fs)
	fs.String("tokens", "", "a command's own flag")
	f.flags = fs
	if err := fs.Parse([]string{"--config", cfg, "--owner", "", "--tokens", "/flag/tok.yaml"}); err != nil {
		t.Fatal(err)
	}
	s, err := f.Settings()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{
		"world": s.World, "as": s.As, "owner": s.Owner, "root": s.Root, "tokens": s.Tokens,
		"namespaces": s.Namespaces, "namespacesSet": s.NamespacesSet, "defaultNamespaces": s.DefaultNamespaces,
		"author": s.RepoAuthorName + " " + s.RepoAuthorEmail, "excludes": s.RepoExcludesFiles,
		"ceiling":     [][]string{s.ForbiddenNamespaces, s.FrozenPaths, s.FrozenActions},
		"maxSessions": s.MCPMaxSessions, "maxGrants": s.MaxGrants, "retention": s.AuditRetention,
	}
	want := map[string]any{
		"world": "env", "as": "agent:cfg", "owner": "", "root": "/wd", "tokens": "/etc/tok.yaml",
		"namespaces": []string{"files", "repo"}, "namespacesSet": true, "defaultNamespaces": []string{"files"},
		"author": "N e@x", "excludes": []string{},
		"ceiling":     [][]string{{"web"}, {"a/b"}, {"write"}},
		"maxSessions": 3, "maxGrants": 0, "retention": 48 * time.Hour,
	}
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s = %#v, want %#v", k, got[k], w)
		}
	}

	// nothing set: the defaults, and the unset forms
	f = &Factory{Env: sandboxEnv, Getwd: func() (string, error) { return "/wd", nil }}
	fs = pflag.NewFlagSet("sharedos", pflag.ContinueOnError)
	f.Global.bind(fs)
	f.flags = fs
	if s, err = f.Settings(); err != nil {
		t.Fatal(err)
	}
	if s.Root != "/wd" || s.NamespacesSet || s.Namespaces != nil || s.RepoExcludesFiles != nil || s.Tokens != "" || s.DefaultNamespaces != nil {
		t.Errorf("no layer: root %q, namespaces %v/%v, excludes %#v, tokens %q, defaultNamespaces %#v",
			s.Root, s.NamespacesSet, s.Namespaces, s.RepoExcludesFiles, s.Tokens, s.DefaultNamespaces)
	}
}

// TestConfigPrecedence: flag > SHAREDOS_* > config file > default, relative config paths
// resolved against the config file's folder.
func TestConfigPrecedence(t *testing.T) {
	dir, env := sandbox(t)
	cfg := filepath.Join(dir, "conf", "config.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("root: ../r\nworld: cfg\npurpose: cfg\ngrants: [g.yaml]\nlimits: {maxGrants: 7}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SHAREDOS_OWNER", "human:process")
	sandboxEnv := env
	env = func(k string) string {
		if k == "SHAREDOS_PURPOSE" || k == "SHAREDOS_WORLD" {
			return "env"
		}
		return sandboxEnv(k)
	}
	f := &Factory{Env: env, Getwd: func() (string, error) { return "/wd", nil }}
	fs := pflag.NewFlagSet("sharedos", pflag.ContinueOnError)
	f.Global.bind(fs)
	f.flags = fs
	if err := fs.Parse([]string{"--config", cfg, "--world", "flag"}); err != nil {
		t.Fatal(err)
	}
	s, err := f.Settings()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]string{
		"world":   {s.World, "flag"},
		"purpose": {s.Purpose, "env"},
		"root":    {s.Root, filepath.Join(dir, "r")},
		"grants":  {strings.Join(s.Grants, ","), filepath.Join(dir, "conf", "g.yaml")},
		"state":   {s.State, filepath.Join(dir, "state", "sharedos", "state.db")},
	}
	for k, v := range want {
		if v[0] != v[1] {
			t.Errorf("%s = %q, want %q", k, v[0], v[1])
		}
	}
	if s.MaxGrants != 7 {
		t.Errorf("limits.maxGrants = %d, want 7", s.MaxGrants)
	}
	// every variable is read through the factory's Env: the process's is not consulted
	if s.Owner != "" {
		t.Errorf("owner = %q from the process environment, want none (Env has none)", s.Owner)
	}
}
