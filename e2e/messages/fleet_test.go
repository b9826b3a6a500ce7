// Package messages_test runs the durability proofs of issue 24 on PostgreSQL with real
// processes: `sharedos serve` replicas over one database (internal/pgtest's cluster,
// loopback only), a requester waiting on 100 messages.request calls to a `wait`
// recipient, the waiting replica killed with SIGKILL and started again, a recipient
// answering through another replica, the database restarted under the waiters, a reply
// sent to two replicas at once, and one message sent 1,000 times through 4 replicas. The
// package also holds run.sh, the TypeScript MCP client's end to end test of messages
// (run by .ci/run on its own).
//
//	go test ./e2e/messages -count=1 -v
package messages_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/tokens"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// sharedosBin builds the sharedos binary once per test binary (as e2e/replicas does),
// into a temporary directory removed by TestMain's end.
func sharedosBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sharedos-messages-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sharedos")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// The world's people and agents: agent:writer asks agent:reviewer (a wait recipient,
// answering through the operator's routes) and may send it without bound (maxUses
// given by the test, 0: none); the reviewer may answer the writer.
const writerGrants = `version: 1
grants:
  - id: g-ask-reviewer
    subject: agent:writer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, reviewer]}
        actions: [send]
        scope: exact
`

const reviewerGrants = `version: 1
grants:
  - id: g-answer-writer
    subject: agent:reviewer
    issuer: human:alice
    capabilities:
      - resource: {namespace: sharedos.messaging, path: [agent, writer]}
        actions: [send]
        scope: exact
`

// replica is one `sharedos serve` process on a fixed loopback port (kept across
// restarts).
type replica struct {
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	log    *syncBuffer
}

// fleet is n serve processes over one database, with one tokens file, one root and one
// configuration (the messages: and agents: sections).
type fleet struct {
	t                *testing.T
	bin, work, state string
	root, config     string
	tokensPath       string
	tok              map[string]string // token by id: writer, reviewer
	mu               sync.Mutex
	reps             []*replica
	hc               *http.Client
}

// newFleet writes the files and starts n replicas over dsn (migrated here), with
// writerMaxUses bounding the writer's send grant (0: no bound).
func newFleet(t *testing.T, dsn string, n int, writerMaxUses int) *fleet {
	t.Helper()
	fl := &fleet{t: t, bin: sharedosBin(t), work: t.TempDir(), state: dsn, tok: map[string]string{},
		hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	fl.root = filepath.Join(fl.work, "root")
	must(t, os.MkdirAll(fl.root, 0o755))
	etc := filepath.Join(fl.work, "etc")
	must(t, os.MkdirAll(etc, 0o755))
	fl.config = filepath.Join(etc, "config.yaml")
	// a reply timeout far beyond the test: a request is resolved failed only when its
	// requester gives up (its wait cancelled), never because the machine is slow
	must(t, os.WriteFile(fl.config, []byte(`messages:
  replyTimeout: 1h
  maxInFlight: 1000
agents:
  agent:reviewer: {mode: wait}
  agent:writer: {mode: wait}
`), 0o644))
	wg := writerGrants
	if writerMaxUses > 0 {
		wg += "    constraints: {maxUses: " + strconv.Itoa(writerMaxUses) + "}\n"
	}
	must(t, os.WriteFile(filepath.Join(etc, "writer.yaml"), []byte(wg), 0o600))
	must(t, os.WriteFile(filepath.Join(etc, "reviewer.yaml"), []byte(reviewerGrants), 0o600))
	fl.tokensPath = filepath.Join(etc, "tokens.yaml")
	owner, _ := kernel.ParseAddress("human:alice")
	for _, id := range []string{"writer", "reviewer"} {
		tok, err := tokens.New()
		must(t, err)
		fl.tok[id] = tok
		actor, _ := kernel.ParseAddress("agent:" + id)
		role := ""
		if id == "reviewer" {
			role = tokens.RoleOperator // it reads its inbox and answers through the operator's routes
		}
		must(t, tokens.Append(fl.tokensPath, tokens.NewEntry{ID: id, SHA256: tokens.Hash(tok), Role: role,
			Context: tokens.Context{Actor: actor, Owner: &owner, Purpose: "review"}, Grants: []string{id + ".yaml"}}))
	}
	fl.sos("store", "migrate")
	fl.sos("--owner", "human:alice", "namespaces", "enable", "messages")
	for i := range n {
		port, err := freePort()
		must(t, err)
		fl.reps = append(fl.reps, &replica{port: port})
		fl.start(i)
	}
	t.Cleanup(func() {
		for i := range fl.reps {
			fl.kill(i)
		}
		fl.hc.CloseIdleConnections()
		if t.Failed() {
			for i, r := range fl.reps {
				log := r.log.String()
				t.Logf("replica %d's last output:\n%s", i, log[max(0, len(log)-4000):])
			}
		}
	})
	for i := range n {
		fl.waitReady(i)
	}
	return fl
}

func (fl *fleet) env() []string {
	home := filepath.Join(fl.work, "home")
	return append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_STATE_HOME="+filepath.Join(home, "state"), "SHAREDOS_STATE=", "SHAREDOS_TOKENS=",
		"SHAREDOS_GRANTS=", "SHAREDOS_CONFIG="+fl.config)
}

// sos runs one sharedos command on the fleet's database and fails t when it fails.
func (fl *fleet) sos(args ...string) {
	fl.t.Helper()
	cmd := exec.Command(fl.bin, append([]string{"--root", fl.root, "--state", fl.state}, args...)...)
	cmd.Env = fl.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		fl.t.Fatalf("sharedos %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// sosOut runs one sharedos command on the fleet's database and returns its standard
// output and exit code (-1: it did not run).
func (fl *fleet) sosOut(args ...string) ([]byte, int) {
	cmd := exec.Command(fl.bin, append([]string{"--root", fl.root, "--state", fl.state}, args...)...)
	cmd.Env = fl.env()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return append(out, stderr.Bytes()...), ee.ExitCode()
		}
		return []byte(err.Error()), -1
	}
	return out, 0
}

// start starts replica i's serve process (it does not wait for it to be ready); it gets
// SIGKILL if this test binary dies (Pdeathsig, from a thread kept locked while it runs).
func (fl *fleet) start(i int) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	r := fl.reps[i]
	cmd := exec.Command(fl.bin, "--root", fl.root, "--state", fl.state, "serve",
		"--listen", "127.0.0.1:"+strconv.Itoa(r.port), "--tokens", fl.tokensPath, "--log-format", "text")
	cmd.Env = fl.env()
	r.log = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = r.log, r.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	exited := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			close(exited)
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	must(fl.t, <-started)
	r.cmd, r.exited = cmd, exited
}

// kill sends replica i SIGKILL and waits for it to exit.
func (fl *fleet) kill(i int) {
	fl.mu.Lock()
	r := fl.reps[i]
	cmd, exited := r.cmd, r.exited
	fl.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

func (fl *fleet) url(i int) string {
	return "http://127.0.0.1:" + strconv.Itoa(fl.reps[i].port)
}

// waitReady polls replica i's /readyz until it answers 200 (at most two minutes: a
// bound for a loaded machine, not a measured delay) and fails t otherwise.
func (fl *fleet) waitReady(i int) {
	fl.t.Helper()
	if got := fl.readyWithin(i, 200, 2*time.Minute); got != 200 {
		fl.mu.Lock()
		log := fl.reps[i].log.String()
		fl.mu.Unlock()
		fl.t.Fatalf("replica %d: /readyz %d, want 200; its log:\n%s", i, got, log)
	}
}

// readyWithin polls replica i's /readyz until it answers want or limit passes, and
// returns the last status (0: no answer).
func (fl *fleet) readyWithin(i, want int, limit time.Duration) int {
	hc := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(limit); ; {
		got := 0
		if resp, err := hc.Get(fl.url(i) + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got = resp.StatusCode
		}
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond) // polling for a state, not waiting for time to pass
	}
}

// reply is one HTTP answer: its status and body (status 0: no answer, err says why).
type reply struct {
	status int
	body   []byte
	err    error
}

// do sends one request to replica i as token who, with headers (name, value pairs).
func (fl *fleet) do(ctx context.Context, i int, method, path, who, body string, headers ...string) reply {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, fl.url(i)+path, rd)
	if err != nil {
		return reply{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+fl.tok[who])
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for j := 0; j+1 < len(headers); j += 2 {
		req.Header.Set(headers[j], headers[j+1])
	}
	resp, err := fl.hc.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, body: b, err: err}
}

// message is the body of GET /v1/admin/messages/{id} and POST /v1/messages/{id}/wait.
type message struct {
	Envelope   kernel.MessageEnvelope  `json:"envelope"`
	Status     string                  `json:"status"`
	Reply      *kernel.MessageEnvelope `json:"reply"`
	FailedCode kernel.ErrorCode        `json:"failedCode"`
}

// sent is the body of POST /v1/messages and POST /v1/admin/messages/{id}/reply.
type sent struct {
	Envelope kernel.MessageEnvelope       `json:"envelope"`
	Receipt  kernel.MessageDeliveryResult `json:"receipt"`
}

// answer sends the reviewer's reply to message id with payload through replica i.
func (fl *fleet) answer(i int, id, payload string) (sent, error) {
	r := fl.do(context.Background(), i, "POST", "/v1/admin/messages/"+id+"/reply", "reviewer", `{"payload":`+payload+`}`)
	if r.err != nil || r.status != 200 {
		return sent{}, fmt.Errorf("reply to %s through replica %d: %d %s %v", id, i, r.status, r.body, r.err)
	}
	var s sent
	if err := json.Unmarshal(r.body, &s); err != nil {
		return sent{}, fmt.Errorf("reply to %s: %v: %s", id, err, r.body)
	}
	return s, nil
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// syncBuffer is a process's output, written by its two streams (the last MiB or two).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 2<<20 {
		rest := append([]byte(nil), s.b.Bytes()[s.b.Len()-1<<20:]...)
		s.b.Reset()
		s.b.Write(rest)
	}
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
