package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

var (
	alice  = kernel.Address{Kind: kernel.KindHuman, ID: "alice"}
	helper = kernel.Address{Kind: kernel.KindAgent, ID: "helper"}
)

func key(id string) kernel.UsageKey {
	return kernel.UsageKey{World: "w1", Issuer: alice, Subject: helper, GrantID: id}
}

// decision is the allowed decision record of a spent use, id its event id.
func decision(id, grant string) kernel.AuditEvent {
	return kernel.AuditEvent{Version: "1", ID: id, Type: kernel.EventAuthorizationChecked, Outcome: kernel.OutcomeAllowed,
		At: "2026-01-01T00:00:00Z", TraceID: "trace-1", NamespaceID: "w1", Actor: helper, Authority: alice, Owner: alice,
		Purpose: "pgstore test", Tool: "files.read", OperationID: grant}
}

// openReplica opens another store (its own pool: another replica) on dsn.
func openReplica(t *testing.T, dsn string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{DefaultNamespaces: []string{"files"}})
	if err != nil {
		t.Fatalf("open replica: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// allowedRecords counts the allowed decision records of grant in st's trail.
func allowedRecords(t *testing.T, st *pgstore.Store, grant string) int {
	t.Helper()
	evs, err := st.ListAudit(context.Background(), store.AuditFilter{OperationID: grant, Outcomes: []string{string(kernel.OutcomeAllowed)}})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	return len(evs)
}

// TestReplicasSpendExactly: replicas (stores each with its own pool, as separate
// processes have) spending one maxUses grant at once, half through ReserveUse + Commit
// with the decision record and half through TryConsume, spend exactly max uses; the
// reserving ones write exactly one allowed record per use they spent.
func TestReplicasSpendExactly(t *testing.T) {
	_, dsn := openFresh(t)
	const replicas, perReplica, max = 6, 30, 60
	stores := make([]*pgstore.Store, replicas)
	for i := range stores {
		stores[i] = openReplica(t, dsn)
	}
	ctx := context.Background()
	var allowed, reserved atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, replicas*perReplica)
	for i, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perReplica {
				if i%2 == 0 {
					r, ok, err := st.ReserveUse(ctx, key("hot"), max)
					if err != nil {
						errs <- err
						continue
					}
					if !ok {
						continue
					}
					ev := decision(fmt.Sprintf("r%d-%d", i, j), "hot")
					if err := r.Commit(ctx, &ev); err != nil {
						errs <- err
						continue
					}
					reserved.Add(1)
					allowed.Add(1)
				} else {
					ok, err := st.TryConsume(ctx, key("hot"), max)
					if err != nil {
						errs <- err
					} else if ok {
						allowed.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a spend failed: %v", err)
	}
	if n := allowed.Load(); n != max {
		t.Errorf("%d replicas allowed %d uses of a grant of max %d", replicas, n, max)
	}
	if n, err := stores[0].GetUsage(ctx, key("hot")); err != nil || n != max {
		t.Errorf("GetUsage = %d, %v; want %d", n, err, max)
	}
	if n := allowedRecords(t, stores[1], "hot"); int64(n) != reserved.Load() {
		t.Errorf("%d allowed records for %d reserved uses", n, reserved.Load())
	}
}

// backendPID returns the pid of the one backend of st's database that is idle in a
// transaction (an open reservation's), seen from another connection.
func backendPID(t *testing.T, admin *pgx.Conn) int32 {
	t.Helper()
	var pid int32
	err := admin.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND state = 'idle in transaction' AND pid <> pg_backend_pid()`).Scan(&pid)
	if err != nil {
		t.Fatalf("find the reservation's backend: %v", err)
	}
	return pid
}

// TestDroppedConnectionSpendsNothing: the connection of a reservation is killed
// (pg_terminate_backend) before it commits: Commit fails, and neither the use nor its
// record is there; the grant is still spendable, through the same store, afterwards.
func TestDroppedConnectionSpendsNothing(t *testing.T) {
	st, dsn := openFresh(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer admin.Close(ctx)

	r, ok, err := st.ReserveUse(ctx, key("g"), 1)
	if err != nil || !ok {
		t.Fatalf("ReserveUse = %v, %v", ok, err)
	}
	pid := backendPID(t, admin)
	var done bool
	if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", pid).Scan(&done); err != nil || !done {
		t.Fatalf("pg_terminate_backend = %v, %v", done, err)
	}
	ev := decision("d1", "g")
	if err := r.Commit(ctx, &ev); err == nil {
		t.Fatalf("Commit on a killed connection succeeded")
	}
	_ = r.Release()
	if n, err := st.GetUsage(ctx, key("g")); err != nil || n != 0 {
		t.Errorf("after the killed commit, GetUsage = %d, %v; want 0", n, err)
	}
	if n := allowedRecords(t, st, "g"); n != 0 {
		t.Errorf("after the killed commit, %d records", n)
	}
	r, ok, err = st.ReserveUse(ctx, key("g"), 1)
	if err != nil || !ok {
		t.Fatalf("ReserveUse after the kill = %v, %v; want the use still there", ok, err)
	}
	ev = decision("d2", "g")
	if err := r.Commit(ctx, &ev); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if n, err := st.GetUsage(ctx, key("g")); err != nil || n != 1 {
		t.Errorf("GetUsage = %d, %v; want 1", n, err)
	}
	if n := allowedRecords(t, st, "g"); n != 1 {
		t.Errorf("%d records, want 1", n)
	}
}

// TestKilledBackendsNeverSplitUseAndRecord: replicas spend a grant while another
// connection kills their backends again and again (wherever they are: before the
// spend, between it and the record, in the commit). At the end the uses spent equal the
// allowed records written, every acknowledged Commit's record is there, and no more
// than max were spent.
func TestKilledBackendsNeverSplitUseAndRecord(t *testing.T) {
	_, dsn := openFresh(t)
	ctx := context.Background()
	const replicas, perReplica, max = 4, 40, 100
	stores := make([]*pgstore.Store, replicas)
	for i := range stores {
		stores[i] = openReplica(t, dsn)
	}
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer admin.Close(ctx)
	stop := make(chan struct{})
	var kills atomic.Int64
	killerDone := make(chan struct{})
	go func() {
		defer close(killerDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			time.Sleep(10 * time.Millisecond) // pacing only: some transactions finish between kills
			var n int64
			if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`).Scan(&n); err == nil {
				kills.Add(n)
			}
		}
	}()
	var acked sync.Map
	var wg sync.WaitGroup
	for i, st := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perReplica {
				r, ok, err := st.ReserveUse(ctx, key("hot"), max)
				if err != nil || !ok {
					continue
				}
				id := fmt.Sprintf("k%d-%d", i, j)
				ev := decision(id, "hot")
				if err := r.Commit(ctx, &ev); err == nil {
					acked.Store(id, true)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-killerDone
	if kills.Load() == 0 {
		t.Fatalf("no backend was killed: the test proved nothing")
	}
	check := openReplica(t, dsn)
	used, err := check.GetUsage(ctx, key("hot"))
	if err != nil {
		t.Fatalf("GetUsage: %v", err)
	}
	evs, err := check.ListAudit(ctx, store.AuditFilter{OperationID: "hot"})
	if err != nil {
		t.Fatalf("ListAudit: %v", err)
	}
	if int64(len(evs)) != used {
		t.Errorf("%d uses spent, %d records: a use without its record (or a record without its use)", used, len(evs))
	}
	if used > max {
		t.Errorf("%d uses spent of a max of %d", used, max)
	}
	recorded := map[string]bool{}
	for _, ev := range evs {
		recorded[ev.ID] = true
	}
	acked.Range(func(k, _ any) bool {
		if !recorded[k.(string)] {
			t.Errorf("Commit of %s succeeded but its record is not there", k)
		}
		return true
	})
	t.Logf("%d backends killed, %d uses spent and recorded", kills.Load(), used)
}

// TestUnreachableFailsClosed: with the server unreachable (its connections cut and new
// ones refused, through a loopback proxy that stops), spending fails with an error
// wrapping store.ErrUnavailable — never an allowed use — and so do reads and records;
// when the server is reachable again the same store works, without being reopened.
func TestUnreachableFailsClosed(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	if _, err := pgstore.Migrate(ctx, dsn); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	p := newProxy(t, dsn)
	st := openReplica(t, p.dsn)
	if ok, err := st.TryConsume(ctx, key("g"), 5); err != nil || !ok {
		t.Fatalf("TryConsume through the proxy = %v, %v", ok, err)
	}
	p.stop()
	if ok, err := st.TryConsume(ctx, key("g"), 5); ok || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("TryConsume with the server unreachable = %v, %v; want false and store.ErrUnavailable", ok, err)
	}
	if r, ok, err := st.ReserveUse(ctx, key("g"), 5); ok || r != nil || !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ReserveUse with the server unreachable = %v, %v, %v; want nil, false and store.ErrUnavailable", r, ok, err)
	}
	if _, err := st.ListAudit(ctx, store.AuditFilter{}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ListAudit with the server unreachable = %v; want store.ErrUnavailable", err)
	}
	if err := st.Append(ctx, decision("d1", "g")); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Append with the server unreachable = %v; want store.ErrUnavailable", err)
	}
	if _, err := pgstore.Open(ctx, p.dsn, pgstore.Options{}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open with the server unreachable = %v; want store.ErrUnavailable", err)
	}
	direct := openReplica(t, dsn)
	if n, err := direct.GetUsage(ctx, key("g")); err != nil || n != 1 {
		t.Errorf("after the outage GetUsage = %d, %v; want 1 (nothing spent while unreachable)", n, err)
	}
	p.start()
	if ok, err := st.TryConsume(ctx, key("g"), 5); err != nil || !ok {
		t.Errorf("TryConsume after the server came back = %v, %v; want true (recovered without reopening)", ok, err)
	}
}
