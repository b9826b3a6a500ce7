package host

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
)

func agentsNode(t *testing.T, text string) *yaml.Node {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Content[0]
}

// TestParseAgents: routes by address, grant paths and a relative command made absolute
// against the config's folder; every malformed entry is one error naming it.
func TestParseAgents(t *testing.T) {
	routes, err := ParseAgents("c.yaml", "/cfg", agentsNode(t, `
agent:summarizer: {mode: exec, command: [./bin/sum, --fast], grants: [g/s.yaml, /abs/t.yaml]}
human:alice: {mode: wait}
`))
	if err != nil {
		t.Fatal(err)
	}
	sum := routes[kernel.Address{Kind: kernel.KindAgent, ID: "summarizer"}]
	if sum.Mode != mailbox.ModeExec || sum.Command[0] != "/cfg/bin/sum" || sum.Command[1] != "--fast" ||
		sum.Grants[0] != "/cfg/g/s.yaml" || sum.Grants[1] != "/abs/t.yaml" {
		t.Fatalf("summarizer %+v", sum)
	}
	if routes[kernel.Address{Kind: kernel.KindHuman, ID: "alice"}].Mode != mailbox.ModeWait {
		t.Fatalf("alice %+v", routes)
	}
	for text, want := range map[string]string{
		`[a]`:                               "must be a mapping",
		`robot:x: {mode: wait}`:             "not an address",
		`agent:x: {mode: wait, timeout: 3}`: `unknown key "timeout"`,
		`agent:x: wait`:                     "must be a mapping",
		`agent:x: {mode: [wait]}`:           "agents.agent:x",
	} {
		if _, err := ParseAgents("c.yaml", "/cfg", agentsNode(t, text)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", text, err, want)
		}
	}
}

// TestMessagingConfig: no agents is no messaging (and messages: alone is an error); the
// reply timeout is a duration within its bounds; the routes are validated.
func TestMessagingConfig(t *testing.T) {
	if c, err := MessagingConfig(nil, "", 0); c != nil || err != nil {
		t.Fatalf("no agents: %+v %v", c, err)
	}
	if _, err := MessagingConfig(nil, "5m", 0); err == nil {
		t.Fatal("messages: without agents: accepted")
	}
	routes := map[kernel.Address]mailbox.Route{{Kind: kernel.KindAgent, ID: "r"}: {Mode: mailbox.ModeWait}}
	c, err := MessagingConfig(routes, "90s", 3)
	if err != nil || c.ReplyTimeout.Seconds() != 90 || c.MaxInFlight != 3 {
		t.Fatalf("%+v %v", c, err)
	}
	for _, bad := range []string{"soon", "-1m", "0s", "25h", "10ms"} {
		if _, err := MessagingConfig(routes, bad, 0); err == nil {
			t.Errorf("replyTimeout %q accepted", bad)
		}
	}
	if _, err := MessagingConfig(map[kernel.Address]mailbox.Route{{Kind: kernel.KindAgent, ID: "r"}: {Mode: mailbox.ModeExec}}, "", 0); err == nil {
		t.Error("an exec route without a command accepted")
	}
}
