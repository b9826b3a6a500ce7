// Package pgtest gives tests a real PostgreSQL server: the one SHAREDOS_TEST_POSTGRES
// names (a DSN), or else a throwaway cluster it starts itself from the Debian PostgreSQL
// binaries (initdb and postgres under /usr/lib/postgresql/*/bin), in a temporary
// directory, listening on a free loopback port with its unix socket in that directory.
// Nothing is downloaded and no container runs. When neither is there, a test that asks
// for a server is skipped with one line saying how to enable it (it fails instead when
// SHAREDOS_TEST_POSTGRES_REQUIRED is set, as CI sets it).
//
// One cluster serves a whole test binary; each test gets a database of its own
// (CREATE DATABASE), dropped when it ends, so tests are independent. A test binary that
// uses pgtest runs its tests through Main, which stops the cluster and removes its
// directory at the end:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// PostgreSQL refuses to run as root: when the test runs as root (CI does), initdb and
// postgres run as the postgres system user, which owns the temporary directory. The server
// is a child of the test binary that dies with it (pg_ctl would detach it: a test binary
// killed by a timeout would leave it running).
//
// The throwaway cluster runs with fsync=off: it is thrown away with the test binary, and
// no test here can observe a power failure.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvRequired names the environment variable that makes a missing server a failure
// instead of a skip (CI sets it, having installed the binaries).
const EnvRequired = "SHAREDOS_TEST_POSTGRES_REQUIRED"

// EnvDSN names the environment variable of an existing server to test against: a DSN
// (postgres://user:password@host:port/dbname) of a role that may create databases.
const EnvDSN = "SHAREDOS_TEST_POSTGRES"

// skipHint is the one line a test skipped for want of a server says.
const skipHint = "no PostgreSQL for this test: install the postgresql package (initdb and postgres under /usr/lib/postgresql/*/bin) or set " + EnvDSN + " to a DSN"

var (
	mainRunning atomic.Bool

	once    sync.Once
	cluster *Cluster
	skipMsg string // why there is no server (a skip), when cluster is nil
	failErr error  // a server was there but could not be started (a failure)

	dbSeq atomic.Int64
)

// Main runs the tests of m and then stops the throwaway cluster, if one was started, and
// removes its directory. It returns m.Run's exit code (1 when stopping failed).
func Main(m *testing.M) int {
	mainRunning.Store(true)
	code := m.Run()
	if cluster != nil && cluster.stop != nil {
		if err := cluster.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop the throwaway PostgreSQL cluster: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Cluster is a PostgreSQL server the tests of a binary share.
type Cluster struct {
	// admin is the DSN of its maintenance database (where databases are created).
	admin string
	stop  func() error
	// server stops the server alone; restart starts it again on its port and data; dir
	// is the cluster's directory (a started cluster's).
	server  func() error
	restart func() (*Cluster, error)
	dir     string
}

// Private is a throwaway cluster of one test's own, which the test may stop and start
// (a database outage): see StartPrivate.
type Private struct {
	c       *Cluster
	stopped bool
}

// StartPrivate starts a throwaway cluster for t alone (from the Debian binaries; it
// skips t without them, fails it under SHAREDOS_TEST_POSTGRES_REQUIRED), removed when t
// ends. An existing server (SHAREDOS_TEST_POSTGRES) is not used: the test stops it.
func StartPrivate(t testing.TB) *Private {
	t.Helper()
	bin := findBin()
	if bin == "" {
		if os.Getenv(EnvRequired) != "" {
			t.Fatalf("pgtest: %s is set: %s", EnvRequired, skipHint)
		}
		t.Skip(skipHint)
	}
	c, err := startCluster(bin)
	if err != nil {
		t.Fatalf("pgtest: start a private PostgreSQL cluster: %v", err)
	}
	p := &Private{c: c}
	t.Cleanup(func() {
		var err error
		if !p.stopped {
			err = p.c.server()
		}
		if err = errors.Join(err, os.RemoveAll(p.c.dir)); err != nil {
			t.Errorf("pgtest: stop the private cluster: %v", err)
		}
	})
	return p
}

// DSN returns the DSN of a fresh database of the private cluster.
func (p *Private) DSN(t testing.TB) string {
	t.Helper()
	dsn, _, err := p.c.CreateDatabase(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return dsn
}

// Stop stops the server (an immediate shutdown: every connection is dropped), keeping
// its data.
func (p *Private) Stop(t testing.TB) {
	t.Helper()
	if p.stopped {
		return
	}
	if err := p.c.server(); err != nil {
		t.Fatalf("pgtest: stop the private cluster: %v", err)
	}
	p.stopped = true
}

// Restart starts the stopped server again on the same port and data.
func (p *Private) Restart(t testing.TB) {
	t.Helper()
	if !p.stopped {
		return
	}
	c2, err := p.c.restart()
	if err != nil {
		t.Fatalf("pgtest: restart the private cluster: %v", err)
	}
	p.c.server, p.stopped = c2.stop, false
}

// Start returns the binary's server, starting the throwaway cluster on first use. It
// skips t when there is none (one line saying how to enable it) and fails t when one
// should be there but cannot be started or reached.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if !mainRunning.Load() {
		t.Fatalf("pgtest: the test binary does not run through pgtest.Main (add func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }), so a cluster would outlive it")
	}
	once.Do(func() { cluster, skipMsg, failErr = start() })
	switch {
	case failErr != nil:
		t.Fatalf("pgtest: %v", failErr)
	case cluster == nil && os.Getenv(EnvRequired) != "":
		t.Fatalf("pgtest: %s is set: %s", EnvRequired, skipMsg)
	case cluster == nil:
		t.Skip(skipMsg)
	}
	return cluster
}

// DSN returns the DSN of a fresh database for t on the binary's server, dropped when t
// ends (see Start for when t is skipped or failed).
func DSN(t testing.TB) string {
	t.Helper()
	c := Start(t)
	dsn, drop, err := c.CreateDatabase(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return dsn
}

// CreateDatabase creates a fresh, empty database and returns its DSN and the function
// that drops it (ending any session still connected to it).
func (c *Cluster) CreateDatabase(ctx context.Context) (dsn string, drop func() error, err error) {
	name := fmt.Sprintf("sharedos_test_%d_%d", os.Getpid(), dbSeq.Add(1))
	if err := c.admin1(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(c.admin)
	if err != nil {
		return "", nil, fmt.Errorf("parse the server's DSN: %w", err)
	}
	u.Path = "/" + name
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.admin1(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop database %s: %w", name, err)
		}
		return nil
	}
	return u.String(), drop, nil
}

// admin1 runs one statement on the maintenance database.
func (c *Cluster) admin1(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// start finds or starts the server: SHAREDOS_TEST_POSTGRES, else a throwaway cluster;
// with neither, a skip message.
func start() (*Cluster, string, error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		c := &Cluster{admin: dsn}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.admin1(ctx, "SELECT 1"); err != nil {
			return nil, "", fmt.Errorf("%s is set but its server cannot be reached: %w", EnvDSN, err)
		}
		return c, "", nil
	}
	bin := findBin()
	if bin == "" {
		return nil, skipHint, nil
	}
	c, err := startCluster(bin)
	if err != nil {
		return nil, "", fmt.Errorf("start a throwaway PostgreSQL cluster from %s: %w", bin, err)
	}
	return c, "", nil
}

// findBin returns the directory of initdb and postgres: the newest
// /usr/lib/postgresql/N/bin that has both, else the directory of initdb on PATH when
// postgres is beside it, else "".
func findBin() string {
	dirs, _ := filepath.Glob(binGlob)
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	if p, err := exec.LookPath("initdb"); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "postgres")) {
			return d
		}
	}
	return ""
}

// binGlob is where the Debian packages put each major version's binaries.
var binGlob = "/usr/lib/postgresql/*/bin"

// version is the major version N of /usr/lib/postgresql/N/bin (0 when not a number).
func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// startCluster runs initdb from bin in a new temporary directory and starts the server
// (bin/postgres) as a child of this process, as the postgres system user when this
// process is root. The server gets SIGQUIT (immediate shutdown) when this process dies
// (Pdeathsig), so a test binary killed by a timeout or a crash leaves no server behind
// (only its temporary directory).
func startCluster(bin string) (*Cluster, error) {
	var cred *syscall.Credential
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL needs another user and there is no postgres user: %w", err)
		}
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	dir, err := os.MkdirTemp("", "sharedos-pgtest-")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT}
		return cmd
	}
	if out, err := command("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--no-instructions").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, strings.TrimSpace(string(out)))
	}
	var lastErr error
	for range 3 { // a free port can be taken between finding it and binding it
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		c, err := serve(command, data, dir, port)
		if err == nil {
			ok = true
			c.restart = func() (*Cluster, error) { return serve(command, data, dir, port) }
			c.server, c.dir = c.stop, dir
			stop := c.stop
			c.stop = func() error { return errors.Join(stop(), os.RemoveAll(dir)) }
			return c, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// serve starts the server of data on port and waits until it accepts connections (at
// most two minutes: a loaded machine is slow, a server that cannot start exits).
func serve(command func(string, ...string) *exec.Cmd, data, sockDir string, port int) (*Cluster, error) {
	var log strings.Builder
	cmd := command("postgres", "-D", data, "-p", strconv.Itoa(port), "-k", sockDir, "-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = &syncWriter{w: &log}, &syncWriter{w: &log}
	// Pdeathsig follows the thread that started the child: start it on a thread that
	// stays locked (and alive) while the server runs.
	started := make(chan error, 1)
	exited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	admin := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("postgres exited (%v): %s", err, strings.TrimSpace(log.String()))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		conn, err := pgx.Connect(ctx, admin)
		cancel()
		if err == nil {
			conn.Close(context.Background())
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Signal(syscall.SIGQUIT)
			<-exited
			return nil, fmt.Errorf("postgres did not accept connections: %v: %s", err, strings.TrimSpace(log.String()))
		}
		time.Sleep(50 * time.Millisecond) // polling for readiness, not waiting for time to pass
	}
	stop := func() error {
		if err := cmd.Process.Signal(syscall.SIGQUIT); err != nil {
			return err
		}
		<-exited // an immediate shutdown exits non-zero by design
		return nil
	}
	return &Cluster{admin: admin, stop: stop}, nil
}

// syncWriter serializes the server's two output streams into one log.
type syncWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
