package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/store"
)

const execWriterGrants = `version: 1
context:
  actor: agent:writer
  owner: human:alice
grants:
  - id: g-send
    subject: agent:writer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, recorder]}
        actions: [send]
        scope: exact
      - resource: {namespace: sharedos.messaging, path: [agent, broken]}
        actions: [send]
        scope: exact
      - resource: {namespace: sharedos.messaging, path: [agent, missing]}
        actions: [send]
        scope: exact
`

// captureStderr runs fn with os.Stderr sent to a file and returns what was written.
// Tests that call it are not parallel (os.Stderr is the process's).
func captureStderr(t *testing.T, fn func()) string {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := os.Stderr
	os.Stderr = f
	defer func() { os.Stderr = old }()
	fn()
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestExecRecipient: messages.request to an exec recipient runs its command with the
// request on standard input and an environment that names the request and the
// recipient's own context — none of this process's SHAREDOS_ variables — in the config
// file's folder. A command that exits without answering, one that fails (the last line
// of its standard error reported), and one that cannot start each fail the call with
// message_reply_resolution_failed, the reason only on standard error, and the request
// resolved failed; the requester's WaitReply then returns the failed message and a reply
// to it is refused, leaving it failed.
func TestExecRecipient(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("the recipient commands are shell scripts")
	}
	ctx := context.Background()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	cfgDir := filepath.Join(dir, "cfg")
	for _, d := range []string{root, cfgDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, text string, mode os.FileMode) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	grants := write("writer.yaml", execWriterGrants, 0o600)
	cfgFile := filepath.Join(cfgDir, "config.yaml")
	if err := os.WriteFile(cfgFile, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	recorder := write("recorder.sh", "#!/bin/sh\nenv > "+out+".env\npwd > "+out+".pwd\ncat > "+out+".stdin\nexit 0\n", 0o755)
	broken := write("broken.sh", "#!/bin/sh\ncat >/dev/null\necho starting >&2\necho 'no model key configured' >&2\nexit 7\n", 0o755)
	missing := filepath.Join(dir, "no-such-command")
	recipientGrant := filepath.Join(dir, "recorder-grants.yaml")
	addr := func(s string) kernel.Address {
		a, err := kernel.ParseAddress(s)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	cfg, err := MessagingConfig(map[kernel.Address]mailbox.Route{
		addr("agent:recorder"): {Mode: "exec", Command: []string{recorder}, Grants: []string{recipientGrant}},
		addr("agent:broken"):   {Mode: "exec", Command: []string{broken}},
		addr("agent:missing"):  {Mode: "exec", Command: []string{missing}},
	}, "", 0)
	if err != nil {
		t.Fatalf("MessagingConfig: %v", err)
	}
	if got := SortedRoutes(cfg); len(got) != 3 || got[0].String() != "agent:broken" || got[1].String() != "agent:missing" || got[2].String() != "agent:recorder" {
		t.Errorf("SortedRoutes = %v; want agent:broken, agent:missing, agent:recorder", got)
	}
	if got := SortedRoutes(nil); got != nil {
		t.Errorf("SortedRoutes(nil) = %v; want nil", got)
	}
	state := filepath.Join(dir, "state", "state.db")
	s := &Settings{Root: root, State: state, Grants: []string{grants}, ConfigFile: cfgFile,
		DefaultNamespaces: []string{"messages"}, Now: "2026-08-03T09:00:00Z", Trace: "trace-1", Purpose: "summarise",
		Messaging: cfg,
		Environ: func() []string {
			return []string{"PATH=" + os.Getenv("PATH"), "KEEP_ME=1", "SHAREDOS_GRANTS=/the/requesters.yaml", "SHAREDOS_TOKEN=secret"}
		}}
	p, err := Prepare(s, time.Now, Needs{Planes: true, Actor: true})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	h, err := p.Open(ctx)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	svc := h.Service()
	world := h.Prepared.Context.World

	request := func(to string) kernel.ToolResult {
		t.Helper()
		res, err := svc.Invoke(ctx, api.InvokeRequest{Tool: kernel.MessageToolName,
			Arguments: json.RawMessage(`{"recipient":{"kind":"agent","agentId":"` + to + `"},"payload":{"text":"hello"}}`)})
		if err != nil {
			t.Fatalf("invoke messages.request to %s: %v", to, err)
		}
		return res.Result
	}
	for _, tc := range []struct {
		to     string
		stderr string
	}{
		{"recorder", "the recipient's command exited without a reply"},
		{"broken", "the recipient's command exited without a reply (" + broken + ": exit status 7: no model key configured)"},
		{"missing", "the recipient's command exited without a reply (" + missing + ": fork/exec " + missing + ": no such file or directory)"},
	} {
		t.Run(tc.to, func(t *testing.T) {
			var res kernel.ToolResult
			logged := captureStderr(t, func() { res = request(tc.to) })
			if res.Status != kernel.StatusFailed || res.Error == nil || res.Error.Code != "message_reply_resolution_failed" {
				t.Fatalf("result = %+v; want failed with message_reply_resolution_failed", res)
			}
			if strings.Contains(res.Error.Message, "no model key") || strings.Contains(res.Error.Message, "fork/exec") {
				t.Errorf("the requester is told the reason: %q", res.Error.Message)
			}
			recs, err := h.Mailbox().ListMessages(ctx, store.MessageFilter{World: world, Receiver: addr("agent:" + tc.to)})
			if err != nil || len(recs) != 1 || recs[0].Status != store.MessageFailed || recs[0].FailedCode != "message_reply_resolution_failed" || recs[0].Reply != nil {
				t.Fatalf("the request's record = %+v, %v; want one, failed", recs, err)
			}
			if want := "sharedos: message " + recs[0].Envelope.ID + " to agent:" + tc.to + " (world " + world + ") got no reply: " + tc.stderr + "\n"; logged != want {
				t.Errorf("standard error = %q; want %q", logged, want)
			}
		})
	}

	env, err := os.ReadFile(out + ".env")
	if err != nil {
		t.Fatalf("the recorder did not run: %v", err)
	}
	vars := strings.Split(strings.TrimSpace(string(env)), "\n")
	var id string
	for _, v := range vars {
		if strings.HasPrefix(v, "SHAREDOS_MESSAGE_ID=") {
			id = strings.TrimPrefix(v, "SHAREDOS_MESSAGE_ID=")
		}
	}
	bin, _ := os.Executable()
	for _, want := range []string{"KEEP_ME=1", "SHAREDOS_REQUESTER=agent:writer", "SHAREDOS_AS=agent:recorder", "SHAREDOS_WORLD=" + world,
		"SHAREDOS_PURPOSE=summarise", "SHAREDOS_TRACE=trace-1", "SHAREDOS_GRANTS=" + recipientGrant, "SHAREDOS_STATE=" + state,
		"SHAREDOS_ROOT=" + root, "SHAREDOS_BIN=" + bin, "SHAREDOS_CONFIG=" + cfgFile} {
		if !slices.Contains(vars, want) {
			t.Errorf("the recipient's environment lacks %s: %v", want, vars)
		}
	}
	for _, v := range vars {
		if strings.HasPrefix(v, "SHAREDOS_TOKEN=") || v == "SHAREDOS_GRANTS=/the/requesters.yaml" {
			t.Errorf("the requester's %s reached the recipient", v)
		}
	}
	if pwd, _ := os.ReadFile(out + ".pwd"); strings.TrimSpace(string(pwd)) != cfgDir {
		t.Errorf("the recipient ran in %q; want the config file's folder %s", pwd, cfgDir)
	}
	var in kernel.MessageEnvelope
	if b, _ := os.ReadFile(out + ".stdin"); json.Unmarshal(b, &in) != nil || in.ID != id || in.Sender.String() != "agent:writer" ||
		in.Receiver.String() != "agent:recorder" || string(in.Payload) != `{"text":"hello"}` {
		t.Errorf("the recipient's standard input = %+v; want the request %s", in, id)
	}

	// The requester re-attaches: the request is failed already, so WaitReply returns it.
	msg, err := svc.WaitReply(ctx, id)
	if err != nil || msg.Status != store.MessageFailed || msg.Envelope.ID != id || msg.World != world || msg.FailedCode != "message_reply_resolution_failed" {
		t.Fatalf("WaitReply = %+v, %v; want the failed request", msg, err)
	}
	// The requester's own reply to its failed request (its purpose and trace taken from
	// the request) is denied receiver_mismatch — a decision, not an error — and the request stays
	// failed with no reply.
	sent, err := svc.ReplyMessage(ctx, api.ReplyMessageRequest{ID: id, Payload: json.RawMessage(`"late"`)})
	if err != nil || sent.Receipt.Status != kernel.DeliveryDenied || sent.Receipt.Error == nil || sent.Receipt.Error.Code != "receiver_mismatch" || sent.Envelope.ReplyTo != id ||
		sent.Envelope.Receiver.String() != "agent:writer" || sent.Envelope.TraceID != "trace-1" {
		t.Fatalf("a reply to a failed request = %+v, %v; want a denied receipt (receiver_mismatch)", sent, err)
	}
	if after, err := svc.ShowMessage(ctx, id); err != nil || after.Status != store.MessageFailed || after.Reply != nil {
		t.Errorf("after the refused reply: %+v, %v; want still failed, no reply", after, err)
	}
}
