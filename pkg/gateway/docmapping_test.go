package gateway

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestDocsServerFilesystemMapping: the server-filesystem mapping docs/gateway.md shows
// parses, and every mapped tool takes both forms of a path that server works with — the
// absolute one it hands out and the relative one — as the same resource, and refuses a
// path outside the served directory (issue 25 item 2).
func TestDocsServerFilesystemMapping(t *testing.T) {
	doc, err := os.ReadFile("../../docs/gateway.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "#### A complete mapping: `@modelcontextprotocol/server-filesystem`")
	if !ok {
		t.Fatal("docs/gateway.md has no server-filesystem mapping")
	}
	_, rest, _ = strings.Cut(rest, "```yaml\n")
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("the server-filesystem mapping has no yaml block")
	}
	// the config file's mcpServers section, as a file it names would hold it
	_, servers, _ := strings.Cut(block, "\nmcpServers:")
	cfg, err := ParseBytes("/etc/sharedos/servers.yaml", []byte("mcpServers:"+servers), ParseOptions{Home: "/h"})
	if err != nil {
		t.Fatalf("the documented mapping does not parse: %v", err)
	}
	if len(cfg.Servers) != 1 || len(cfg.Servers[0].Tools) < 10 {
		t.Fatalf("the documented mapping: %+v", cfg.Servers)
	}
	args := func(p string) any {
		var v any
		b, _ := json.Marshal(map[string]string{"path": p})
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	for name, m := range cfg.Servers[0].Tools {
		if len(m.Path) == 0 {
			continue // list_allowed_directories: the namespace root
		}
		for _, p := range []string{"/srv/project/docs/a.md", "docs/a.md"} {
			got, err := m.Resolve(args(p))
			if err != nil || !reflect.DeepEqual(got, []string{"docs", "a.md"}) {
				t.Errorf("%s(%s) = %v, %v; want [docs a.md]", name, p, got, err)
			}
		}
		if _, err := m.Resolve(args("/etc/passwd")); err == nil || !strings.Contains(err.Error(), "outside /srv/project") {
			t.Errorf("%s(/etc/passwd): %v", name, err)
		}
	}
}
