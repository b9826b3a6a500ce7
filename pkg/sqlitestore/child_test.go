package sqlitestore

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// The multi-process tests re-execute the test binary; TestMain sends a process whose
// childEnv is set to runChild instead of the tests.
const (
	childEnv     = "SQLITESTORE_CHILD"     // the role: "consume" or "enable"
	childDB      = "SQLITESTORE_CHILD_DB"  // the database file
	childArg     = "SQLITESTORE_CHILD_ARG" // the namespace to enable
	childN       = "SQLITESTORE_CHILD_N"   // how many TryConsume calls
	childMax     = "SQLITESTORE_CHILD_MAX" // their max
	childWorld   = "w"
	childGrantID = "g-bounded"
)

// runChild runs one child role. It waits for its stdin to close (the start barrier, so all
// children open the database at once), prints its result on stdout and returns the exit
// code; any error goes to stderr with exit code 1.
func runChild(role string) int {
	if strings.HasPrefix(role, "spool-") {
		return runSpoolChild(role)
	}
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		fmt.Fprintln(os.Stderr, "child: wait for start:", err)
		return 1
	}
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv(childDB), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	defer s.Close()
	switch role {
	case "consume":
		// Consuming calls go through the kernel's whole invocation pipeline, with this
		// store as its usage store and audit sink.
		n, _ := strconv.Atoi(os.Getenv(childN))
		max, _ := strconv.ParseInt(os.Getenv(childMax), 10, 64)
		k, actx := boundedKernel(s, max, true)
		spent := 0
		for i := 0; i < n; i++ {
			res := k.InvokeTool(ctx, actx, kernel.ToolCall{ID: fmt.Sprintf("c%d-%d", os.Getpid(), i), Tool: "t.use",
				Arguments: []byte(`{}`), TraceID: actx.TraceID, RequestedAt: actx.Now})
			switch {
			case res.Status == kernel.StatusSucceeded:
				spent++
			case res.Error != nil && (res.Error.Code == kernel.ErrorCodeOf(kernel.ReasonGrantExhausted) || res.Error.Code == kernel.CodeToolUnavailable):
				// refused: spent by another process (discovery already sees it spent)
			default:
				fmt.Fprintf(os.Stderr, "child: unexpected result %+v\n", res.Error)
				return 1
			}
		}
		fmt.Println(spent)
	case "enable":
		sel, err := s.ApplyUpdate(ctx, actxFor(childWorld, alice), kernel.ToolNamespaceUpdate{Enable: []string{os.Getenv(childArg)}})
		if err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		fmt.Println(strings.Join(sel, ","))
	default:
		fmt.Fprintln(os.Stderr, "child: unknown role", role)
		return 1
	}
	return 0
}

// runChildren starts one child per env list, releases them together and returns their
// stdout; it fails the test if any child fails.
func runChildren(t *testing.T, role string, envs [][]string) []string {
	t.Helper()
	type child struct {
		cmd    *exec.Cmd
		stdin  io.WriteCloser
		stdout bytes.Buffer
		stderr bytes.Buffer
	}
	children := make([]*child, len(envs))
	for i, env := range envs {
		c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$")}
		c.cmd.Env = append(append(os.Environ(), childEnv+"="+role), env...)
		c.cmd.Stdout, c.cmd.Stderr = &c.stdout, &c.stderr
		var err error
		if c.stdin, err = c.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[i] = c
	}
	for _, c := range children {
		c.stdin.Close()
	}
	out := make([]string, len(children))
	for i, c := range children {
		if err := c.cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", i, err, c.stderr.String())
		}
		if strings.Contains(c.stderr.String(), "locked") {
			t.Errorf("child %d reported a lock error: %s", i, c.stderr.String())
		}
		out[i] = strings.TrimSpace(c.stdout.String())
	}
	return out
}

func TestMultiProcessTryConsume(t *testing.T) {
	t.Parallel()
	const procs, attempts, max = 8, 50, 100
	path := filepath.Join(t.TempDir(), "fresh", "state.db") // fresh: the migrations race too
	envs := make([][]string, procs)
	for i := range envs {
		envs[i] = []string{childDB + "=" + path, childN + "=" + strconv.Itoa(attempts), childMax + "=" + strconv.Itoa(max)}
	}
	total := 0
	for i, out := range runChildren(t, "consume", envs) {
		n, err := strconv.Atoi(out)
		if err != nil {
			t.Errorf("child %d printed %q", i, out)
			continue
		}
		total += n
	}
	if total != max {
		t.Errorf("children spent %d uses in total, want exactly %d", total, max)
	}
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.GetUsage(context.Background(), uk(childWorld, childGrantID)); n != max || err != nil {
		t.Errorf("GetUsage = %d, %v; want %d", n, err, max)
	}
}

func TestMultiProcessApplyUpdate(t *testing.T) {
	t.Parallel()
	const procs = 8
	path := filepath.Join(t.TempDir(), "state.db")
	// Create the schema first, so this test is about the update transactions.
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	envs := make([][]string, procs)
	want := make([]string, procs)
	for i := range envs {
		want[i] = fmt.Sprintf("ns%d", i)
		envs[i] = []string{childDB + "=" + path, childArg + "=" + want[i]}
	}
	outs := runChildren(t, "enable", envs)
	for i, out := range outs {
		if !strings.Contains(","+out+",", ","+want[i]+",") {
			t.Errorf("child %d: result %q lacks its own namespace %s", i, out, want[i])
		}
	}
	got, stored, err := s.Selection(context.Background(), childWorld, alice)
	if err != nil || !stored || !reflect.DeepEqual(got, want) {
		t.Errorf("Selection = %q, %v, %v; want all of %q", got, stored, err, want)
	}
}

// TestGoroutinesApplyUpdate is the in-process version of TestMultiProcessApplyUpdate.
func TestGoroutinesApplyUpdate(t *testing.T) {
	t.Parallel()
	const workers = 8
	s := openTest(t, Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	want := make([]string, workers)
	for i := range want {
		want[i] = fmt.Sprintf("ns%d", i)
		wg.Add(1)
		go func(ns string) {
			defer wg.Done()
			if _, err := s.ApplyUpdate(ctx, actxFor("w", alice), kernel.ToolNamespaceUpdate{Enable: []string{ns}}); err != nil {
				t.Error(err)
			}
		}(want[i])
	}
	wg.Wait()
	got, _, err := s.Selection(ctx, "w", alice)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Selection = %q, %v; want %q", got, err, want)
	}
}

// staticGrants is a GrantSource of fixed grants.
type staticGrants []kernel.CapabilityGrant

func (g staticGrants) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return g, nil
}

// boundedKernel wires a kernel on s with one tool and one grant bounded to max uses.
func boundedKernel(s *Store, max int64, audit bool) (*kernel.Kernel, kernel.AccessContext) {
	actx := kernel.AccessContext{World: childWorld, Owner: alice, Actor: kernel.Address{Kind: kernel.KindAgent, ID: "helper"},
		Authority: alice, Purpose: "test", TraceID: "trace", EnabledToolNamespaces: []string{"t"}, Now: "2026-01-01T00:00:00Z"}
	g := kernel.CapabilityGrant{ID: childGrantID, NamespaceID: childWorld, Subject: actx.Actor, Issuer: actx.Authority,
		IssuedAt: "2020-01-01T00:00:00Z", Constraints: kernel.CapabilityConstraints{MaxUses: &max},
		Capabilities: []kernel.Capability{{Resource: kernel.ResourceRef{Namespace: "t", Path: []string{}}, Actions: []string{"use"}, Scope: kernel.ScopeDescendants}}}
	cfg := kernel.Config{Grants: staticGrants{g}, Usage: s}
	if audit {
		cfg.Audit = s
	}
	k := kernel.New(cfg)
	err := k.RegisterTool(kernel.ToolHandler{
		Definition: kernel.ToolDefinition{Name: "t.use", Description: "uses the bounded grant", Namespace: "t", Source: "test",
			ReadWrite: kernel.ClassWrite, InputSchema: map[string]any{"type": "object"},
			RequiredCapability: kernel.CapabilityRequirement{Resource: kernel.ResourceRef{Namespace: "t", Path: []string{}}, Action: "use"}},
		Invoke: func(_ context.Context, actx kernel.AccessContext, c kernel.ParsedToolCall) (kernel.ToolResult, error) {
			return kernel.ToolResult{CallID: c.ID, Tool: c.Tool, Status: kernel.StatusSucceeded, Output: map[string]any{}, CompletedAt: actx.Now}, nil
		},
	})
	if err != nil {
		panic(err)
	}
	return k, actx
}
