// Package storetest is the conformance suite of pkg/store, in the shape of
// testing/fstest.TestFS: every implementation of store.State runs the same suite, from
// its own external test package, and passes it.
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Config{Open: func(t storetest.T, dir string) store.State {
//			st, err := mystore.Open(ctx, filepath.Join(dir, "state.db"))
//			if err != nil {
//				t.Fatalf("open: %v", err)
//			}
//			return st
//		}})
//	}
//
// The suite covers every method of store.State and every optional durability interface
// the kernel looks for that the store implements (kernel.WriteAheadAuditSink,
// kernel.WriteAheadBatchAuditSink, kernel.ReservingUsageStore,
// kernel.AuditedSettingsStore, store.Idempotency); concurrency (16 goroutines spending one maxUses grant,
// exactly maxUses of them succeed, through TryConsume and through ReserveUse); crash
// consistency for a store that keeps its records across opens (see Config.Volatile); and
// the error contracts (store.ErrNotFound, store.ErrAlreadyResolved, store.ErrDuplicate,
// a refused write writes nothing, a closed store fails every method, a write whose
// context is cancelled fails whole or succeeds whole).
//
// Check runs the same suite and returns what failed as an error instead of failing a
// test: the suite's own tests use it to show that a broken store fails.
package storetest

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/store"
)

// T is what the suite needs of a test. *testing.T implements it (Run); so does the
// recorder of Check.
type T interface {
	Helper()
	Name() string
	Logf(format string, args ...any)
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Config says how the suite opens the store under test.
type Config struct {
	// Open opens the store kept in dir: a directory the suite made for one subtest
	// (empty the first time), where the store keeps its files (a store that keeps
	// nothing on disk ignores it). Opening the same dir again must open the same
	// records, as a restarted process does. Open calls t.Fatalf when it cannot open. The
	// suite closes every store it opened.
	Open func(t T, dir string) store.State
	// Volatile says the store keeps nothing across opens (an in-memory store): the
	// crash-consistency subtest, which opens a directory a second time, is left out.
	Volatile bool
	// DeferredDuplicates says the store's write-ahead appends (AppendWriteAhead,
	// AppendWriteAheadBatch) do not refuse another event under a recorded id: they
	// check ids when the record is copied into the trail, and drop the clashing event
	// there (sqlitestore's audit spools). The suite then accepts either answer and checks
	// that the recorded event is never replaced. Durable appends always refuse it.
	DeferredDuplicates bool
}

// subtest is one area of the suite; each opens its own stores.
type subtest struct {
	name string
	run  func(t T, c Config)
	// durable marks a subtest that needs a store kept across opens.
	durable bool
}

// subtests are the suite's areas, in the order they run.
var subtests = []subtest{
	{name: "Settings", run: testSettings},
	{name: "AuditedSettings", run: testAuditedSettings},
	{name: "Usage", run: testUsage},
	{name: "ReservingUsage", run: testReservingUsage},
	{name: "ConcurrentTryConsume", run: testConcurrentTryConsume},
	{name: "ConcurrentReserveUse", run: testConcurrentReserveUse},
	{name: "Audit", run: testAudit},
	{name: "WriteAheadAudit", run: testWriteAheadAudit},
	{name: "WriteAheadBatchAudit", run: testWriteAheadBatch},
	{name: "AuditQuery", run: testAuditQuery},
	{name: "AuditCursor", run: testAuditCursor},
	{name: "AuditRetention", run: testAuditRetention},
	{name: "Escalations", run: testEscalations},
	{name: "EscalationResolve", run: testEscalationResolve},
	{name: "Snapshots", run: testSnapshots},
	{name: "FileDigests", run: testFileDigests},
	{name: "GatewayCatalogs", run: testGatewayCatalogs},
	{name: "Mailbox", run: testMailbox},
	{name: "RecordedMailbox", run: testRecordedMailbox},
	{name: "Idempotency", run: testIdempotency},
	{name: "IdempotencyLease", run: testIdempotencyLease},
	{name: "Closed", run: testClosed},
	{name: "Cancelled", run: testCancelled},
	{name: "CrashConsistency", run: testCrashConsistency, durable: true},
}

// Run runs the suite as subtests of t, each on fresh stores, in parallel.
func Run(t *testing.T, c Config) {
	t.Helper()
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			if st.durable && c.Volatile {
				t.Skip("the store is volatile: it keeps nothing across opens")
			}
			t.Parallel()
			st.run(t, c)
		})
	}
}

// Check runs the suite like Run, one subtest after the other, and returns an error
// naming every subtest that failed and what it reported (nil when all passed). A panic
// of the store counts as a failure.
func Check(c Config) error { return check(c, nil) }

// check is Check of the subtests keep keeps (nil: all).
func check(c Config, keep func(name string) bool) error {
	var errs []error
	for _, st := range subtests {
		if st.durable && c.Volatile || keep != nil && !keep(st.name) {
			continue
		}
		r := &recorder{name: st.name}
		r.do(func() { st.run(r, c) })
		r.runCleanups()
		if r.failed() {
			errs = append(errs, fmt.Errorf("%s:\n\t%s", st.name, strings.Join(r.messages(), "\n\t")))
		}
	}
	return errors.Join(errs...)
}

// recorder is the T of Check: it records failures instead of failing a test. Fatalf
// ends the goroutine it is called on (as testing.T's does), so do runs each function on
// a goroutine of its own.
type recorder struct {
	name     string
	mu       sync.Mutex
	msgs     []string
	fail     bool
	cleanups []func()
}

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }

func (r *recorder) Logf(format string, args ...any) {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail = true
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) TempDir() string {
	dir, err := os.MkdirTemp("", "storetest-")
	if err != nil {
		r.Fatalf("make a temporary directory: %v", err)
	}
	r.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (r *recorder) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fail
}

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.msgs)
}

// do runs f on a goroutine of its own and waits for it to end, returned, ended by
// Fatalf or panicking (recorded as a failure).
func (r *recorder) do(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				r.Errorf("panic: %v", v)
			}
		}()
		f()
	}()
	<-done
}

// runCleanups runs the cleanups, the last registered first, each like do.
func (r *recorder) runCleanups() {
	for {
		r.mu.Lock()
		n := len(r.cleanups)
		if n == 0 {
			r.mu.Unlock()
			return
		}
		f := r.cleanups[n-1]
		r.cleanups = r.cleanups[:n-1]
		r.mu.Unlock()
		r.do(f)
	}
}
