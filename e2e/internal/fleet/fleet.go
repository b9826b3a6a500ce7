// Package fleet runs `sharedos serve` replicas as real processes for the end-to-end
// tests (e2e/replicas, e2e/messages): it builds the binary once per test binary, starts
// each replica on a loopback port kept across restarts, kills it with SIGKILL, polls
// its /readyz, and runs one-off sharedos commands on the fleet's state. Test-only code:
// nothing in the product imports it (it lives under e2e/).
package fleet

import (
	"bytes"
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
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Bin builds the sharedos binary (the module's root, two levels above the calling test's
// package directory) once per test binary, into a temporary directory, and returns its
// path.
func Bin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sharedos-e2e-bin-")
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

// replica is one serve process on a fixed loopback port (kept across restarts).
type replica struct {
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	log    *SyncBuffer
}

// Fleet is serve processes over one state (a PostgreSQL DSN), with one root and one
// tokens file. Fill the exported fields, then Add the replicas.
type Fleet struct {
	T          testing.TB
	Bin        string
	Root       string
	State      string
	TokensPath string
	// Env is the environment of replica i's processes (-1: a one-off command).
	Env func(i int) []string
	// ServeArgs are more flags of every serve process.
	ServeArgs []string

	mu   sync.Mutex
	reps []*replica
}

// Add starts n replicas (without waiting for them to be ready) and registers their end
// with the test: killed, and their last output logged when the test failed.
func (fl *Fleet) Add(n int) {
	fl.T.Helper()
	first := len(fl.reps)
	for range n {
		port, err := FreePort()
		Must(fl.T, err)
		fl.mu.Lock()
		fl.reps = append(fl.reps, &replica{port: port})
		fl.mu.Unlock()
	}
	for i := first; i < first+n; i++ {
		fl.Start(i)
	}
	fl.T.Cleanup(func() {
		for i := first; i < first+n; i++ {
			fl.Kill(i)
		}
		if fl.T.Failed() {
			for i := first; i < first+n; i++ {
				log := fl.Log(i)
				fl.T.Logf("replica %d's last output:\n%s", i, log[max(0, len(log)-4000):])
			}
		}
	})
}

// Len is the number of replicas.
func (fl *Fleet) Len() int {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return len(fl.reps)
}

// Log is replica i's output (the last MiB or two).
func (fl *Fleet) Log(i int) string {
	fl.mu.Lock()
	r := fl.reps[i]
	fl.mu.Unlock()
	if r.log == nil {
		return ""
	}
	return r.log.String()
}

func (fl *Fleet) command(i int, args ...string) *exec.Cmd {
	cmd := exec.Command(fl.Bin, append([]string{"--root", fl.Root, "--state", fl.State}, args...)...)
	cmd.Env = fl.Env(i)
	return cmd
}

// Sos runs one sharedos command on the fleet's state, in the environment of replica i
// (-1: a one-off command), and fails the test when it fails.
func (fl *Fleet) Sos(i int, args ...string) {
	fl.T.Helper()
	if out, err := fl.command(i, args...).CombinedOutput(); err != nil {
		fl.T.Fatalf("sharedos %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// SosOut runs one sharedos command like Sos and returns its standard output (followed
// by its standard error when it failed) and exit code (-1: it did not run).
func (fl *Fleet) SosOut(i int, args ...string) ([]byte, int) {
	cmd := fl.command(i, args...)
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

// Start starts replica i's serve process (it does not wait for it to be ready). The
// process gets SIGKILL if this test binary dies (Pdeathsig, from a thread kept locked
// while it runs).
func (fl *Fleet) Start(i int) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	r := fl.reps[i]
	args := append([]string{"serve", "--listen", "127.0.0.1:" + strconv.Itoa(r.port), "--tokens", fl.TokensPath,
		"--log-format", "text"}, fl.ServeArgs...)
	cmd := fl.command(i, args...)
	r.log = &SyncBuffer{}
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
	Must(fl.T, <-started)
	r.cmd, r.exited = cmd, exited
}

// Kill sends replica i SIGKILL and waits for it to exit.
func (fl *Fleet) Kill(i int) {
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

// URL is replica i's base URL (i modulo the number of replicas).
func (fl *Fleet) URL(i int) string {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return "http://127.0.0.1:" + strconv.Itoa(fl.reps[i%len(fl.reps)].port)
}

// WaitReady polls replica i's /readyz until it answers want (at most two minutes: a
// bound for a loaded machine, not a measured delay) and fails the test otherwise.
func (fl *Fleet) WaitReady(i, want int) {
	fl.T.Helper()
	if got := fl.ReadyWithin(i, want, 2*time.Minute); got != want {
		fl.T.Fatalf("replica %d: /readyz %d, want %d; its log:\n%s", i, got, want, fl.Log(i))
	}
}

// ReadyWithin polls replica i's /readyz until it answers want or limit passes, and
// returns the last status (0: no answer).
func (fl *Fleet) ReadyWithin(i, want int, limit time.Duration) int {
	hc := &http.Client{Timeout: 5 * time.Second}
	for deadline := time.Now().Add(limit); ; {
		got := 0
		if resp, err := hc.Get(fl.URL(i) + "/readyz"); err == nil {
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

// Must fails t with err when it is not nil.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// FreePort is a loopback port free right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// SyncBuffer is a process's output, written by its two streams (the last MiB or two).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 2<<20 {
		rest := append([]byte(nil), s.b.Bytes()[s.b.Len()-1<<20:]...)
		s.b.Reset()
		s.b.Write(rest)
	}
	return s.b.Write(p)
}

// String is the output kept.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
