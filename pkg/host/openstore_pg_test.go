package host

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sharedos/sharedos/internal/pgtest"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/mailbox"
	"github.com/sharedos/sharedos/pkg/store"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// withPassword is dsn with a password (the throwaway cluster trusts loopback, so any
// password is accepted): what must never be echoed.
func withPassword(t *testing.T, dsn string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-pw")
	return u.String()
}

// TestPostgresState: a host opens the PostgreSQL store a DSN names once it is migrated
// (MigrateState), with the settings' default namespaces; before, the open is refused as
// KindState with a hint that says to migrate, and neither the message nor the hint nor
// the migration's result echoes the DSN's password. A file is not migrated by
// MigrateState (KindUsage).
func TestPostgresState(t *testing.T) {
	ctx := context.Background()
	dsn := withPassword(t, pgtest.DSN(t))
	s := &Settings{State: dsn, StateDir: t.TempDir(), DefaultNamespaces: []string{"files"}}

	_, err := openPostgresState(ctx, s, WorkloadCommand)
	var he *Error
	if !errors.As(err, &he) || he.Kind != KindState || !strings.Contains(he.Hint, "sharedos store migrate") {
		t.Fatalf("open of an unmigrated database = %v; want a KindState error whose hint says to migrate", err)
	}
	if strings.Contains(he.Message+he.Hint+StateHint(s.State), "s3cret-pw") {
		t.Errorf("the refusal echoes the password: %s (%s)", he.Message, he.Hint)
	}

	res, err := MigrateState(ctx, dsn)
	if err != nil {
		t.Fatalf("MigrateState: %v", err)
	}
	if res.From != 0 || res.To < 1 || len(res.Applied) == 0 || strings.Contains(res.State, "s3cret-pw") {
		t.Errorf("MigrateState = %+v; want from 0, migrations applied, the DSN without its password", res)
	}
	st, err := openPostgresState(ctx, s, WorkloadCommand)
	if err != nil {
		t.Fatalf("open after migrating: %v", err)
	}
	defer st.Close()
	sel, stored, err := st.Selection(ctx, "default", kernel.Address{Kind: kernel.KindHuman, ID: "alice"})
	if err != nil || stored || !slices.Equal(sel, []string{"files"}) {
		t.Errorf("Selection = %v, %v, %v; want the default [files], not stored", sel, stored, err)
	}

	if _, err := MigrateState(ctx, "/var/lib/sharedos/state.db"); !errors.As(err, &he) || he.Kind != KindUsage {
		t.Errorf("MigrateState of a file = %v; want a KindUsage error", err)
	}
}

// TestMessageHintsOfThePostgresStore: over a PostgreSQL store the routers' hints are the
// store's (NOTIFY) and their poll the fallback (0: mailbox.FallbackPoll); a waiter given
// those hints (its poll an hour) is woken by a reply recorded through another store of
// the same database (another replica). With NoStoreHints, no hints and the fallback
// poll; over SQLite, the process's hub and the 50 ms poll, as before.
func TestMessageHintsOfThePostgresStore(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.DSN(t)
	if _, err := MigrateState(ctx, dsn); err != nil {
		t.Fatal(err)
	}
	st, err := OpenState(ctx, &Settings{State: dsn, StateDir: t.TempDir()}, WorkloadServer)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	other, err := OpenState(ctx, &Settings{State: dsn, StateDir: t.TempDir()}, WorkloadServer)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	asker, answerer := kernel.Address{Kind: kernel.KindAgent, ID: "asker"}, kernel.Address{Kind: kernel.KindAgent, ID: "answerer"}
	cfg := &mailbox.Config{Routes: map[kernel.Address]mailbox.Route{answerer: {Mode: mailbox.ModeWait}}, ReplyTimeout: time.Hour}
	hints, poll := hintsFor(mailboxOf(st), cfg)
	if hints == nil || hints == mailbox.Notifier(mailboxHints) || poll != 0 {
		t.Fatalf("hints over PostgreSQL = %v, poll %v; want the store's, poll 0 (the fallback)", hints, poll)
	}
	req := kernel.MessageEnvelope{Version: "1", ID: "m-1", Sender: asker, Receiver: answerer, Purpose: "p",
		Payload: json.RawMessage(`{"n":1}`), TraceID: "t-1", CreatedAt: "2026-01-01T00:00:00.000Z"}
	if _, _, err := mailboxOf(other).DeliverMessage(ctx, "w", req, kernel.FormatTimestamp(time.Now().UnixMilli()), 0); err != nil {
		t.Fatal(err)
	}
	// the listener connected (it wakes every waiter once when it does) before the wait
	hints.Subscribe("w", "none")
	if !pollUntil(time.Minute, func() bool { return st.(interface{ ListenerPID() uint32 }).ListenerPID() != 0 }) {
		t.Fatal("the store's listener did not connect within a minute")
	}
	box := &readCounter{Mailbox: mailboxOf(st)}
	r := &mailbox.Router{Box: box, Config: cfg, Notifier: hints, Poll: time.Hour}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := r.ResolveReply(wctx, kernel.AccessContext{World: "w", Actor: asker}, req, kernel.MessageDeliveryResult{})
		done <- err
	}()
	// the reply, through the other store, as soon as the waiter subscribed and read once
	// (a reply before its first read would be found by that read, not by a hint)
	if !pollUntil(time.Minute, func() bool { return box.reads.Load() > 0 }) {
		t.Fatal("the waiter did not read the mailbox within a minute")
	}
	reply := kernel.MessageEnvelope{Version: "1", ID: "m-2", ReplyTo: "m-1", Sender: answerer, Receiver: asker, Purpose: "p",
		Payload: json.RawMessage(`{"ok":true}`), TraceID: "t-1", CreatedAt: "2026-01-01T00:00:01.000Z"}
	if _, err := mailboxOf(other).ReplyMessage(ctx, "w", reply, kernel.FormatTimestamp(time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the waiter returned %v; want the reply", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter (polling every hour) was not woken within a minute by the other store's reply")
	}

	if h, p := hintsFor(mailboxOf(st), &mailbox.Config{NoStoreHints: true}); h != nil || p != mailbox.FallbackPoll {
		t.Errorf("hints with NoStoreHints = %v, %v; want none, the fallback poll", h, p)
	}
	lite, err := OpenState(ctx, &Settings{State: t.TempDir() + "/state.db"}, WorkloadServer)
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	if h, p := hintsFor(mailboxOf(lite), cfg); h != mailbox.Notifier(mailboxHints) || p != mailbox.DefaultPoll {
		t.Errorf("hints over SQLite = %v, %v; want the process's hub, 50 ms", h, p)
	}
}

// readCounter is a mailbox that counts the reads of a message that returned.
type readCounter struct {
	store.Mailbox
	reads atomic.Int64
}

func (c *readCounter) GetMessage(ctx context.Context, world, id string) (store.MessageRecord, error) {
	rec, err := c.Mailbox.GetMessage(ctx, world, id)
	c.reads.Add(1)
	return rec, err
}

// pollUntil polls cond (every 10 ms) until it holds or limit passes — a test bound, not
// a measured delay — and reports whether it held.
func pollUntil(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
