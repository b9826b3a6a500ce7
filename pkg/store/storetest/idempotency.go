package storetest

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sharedos/sharedos/pkg/store"
)

// testIdempotency (a store that implements store.Idempotency): a free key is claimed
// once; the same fingerprint then finds it pending, then done with the stored response
// byte for byte; another fingerprint finds a conflict; an abandoned claim frees the key;
// a record older than the window is replaced; scopes never meet; completing a key that
// holds no pending claim of the fingerprint is ErrNotFound and stores nothing; of 32
// concurrent claims of one key exactly one wins, and the rest see it.
func testIdempotency(t T, c Config) {
	st, ok := open(t, c).(store.Idempotency)
	if !ok {
		return
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const window = time.Hour
	k := store.IdempotencyKey{Scope: "ctx-a", Key: "key-1"}
	begin := func(what string, k store.IdempotencyKey, fp string, now time.Time, want store.IdempotencyState) store.IdempotencyRecord {
		t.Helper()
		got, rec, err := st.BeginIdempotent(ctx, k, fp, now, window)
		if err != nil {
			t.Fatalf("%s: BeginIdempotent: %v", what, err)
		}
		if got != want {
			t.Errorf("%s: BeginIdempotent = %d, want %d", what, got, want)
		}
		return rec
	}
	begin("a free key", k, "fp-1", t0, store.IdempotencyClaimed)
	if rec := begin("the same request while it runs", k, "fp-1", t0.Add(time.Second), store.IdempotencyPending); rec.Status != 0 || rec.Fingerprint != "fp-1" {
		t.Errorf("pending record = %+v", rec)
	}
	begin("another request while it runs", k, "fp-2", t0.Add(time.Second), store.IdempotencyConflict)
	if err := st.CompleteIdempotent(ctx, k, "fp-2", 200, []byte("x")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CompleteIdempotent of another fingerprint = %v, want ErrNotFound", err)
	}
	body := []byte("{\"status\":\"succeeded\"}\n\x00\xff")
	if err := st.CompleteIdempotent(ctx, k, "fp-1", 200, body); err != nil {
		t.Fatalf("CompleteIdempotent: %v", err)
	}
	if err := st.CompleteIdempotent(ctx, k, "fp-1", 500, []byte("y")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("CompleteIdempotent of a completed key = %v, want ErrNotFound", err)
	}
	if rec := begin("the same request once done", k, "fp-1", t0.Add(2*time.Second), store.IdempotencyDone); rec.Status != 200 || !bytes.Equal(rec.Body, body) {
		t.Errorf("done record = %d %q, want 200 %q", rec.Status, rec.Body, body)
	}
	begin("another request once done", k, "fp-2", t0.Add(2*time.Second), store.IdempotencyConflict)
	if err := st.AbandonIdempotent(ctx, k, "fp-1"); err != nil {
		t.Fatalf("AbandonIdempotent of a completed key: %v", err)
	}
	begin("a completed key is not abandoned", k, "fp-1", t0.Add(3*time.Second), store.IdempotencyDone)
	begin("another scope", store.IdempotencyKey{Scope: "ctx-b", Key: "key-1"}, "fp-2", t0, store.IdempotencyClaimed)
	// a scope or a fingerprint may hold any bytes (a host joins a scope's parts with NUL)
	kb := store.IdempotencyKey{Scope: "ctx\x00b\xff", Key: "key-1"}
	begin("a scope of any bytes", kb, "fp\x00\xfe", t0, store.IdempotencyClaimed)
	begin("a fingerprint of any bytes", kb, "fp\x00\xfe", t0, store.IdempotencyPending)
	begin("after the window", k, "fp-2", t0.Add(window+time.Second), store.IdempotencyClaimed)

	k2 := store.IdempotencyKey{Scope: "ctx-a", Key: "key-2"}
	begin("a free key", k2, "fp-1", t0, store.IdempotencyClaimed)
	if err := st.AbandonIdempotent(ctx, k2, "fp-1"); err != nil {
		t.Fatalf("AbandonIdempotent: %v", err)
	}
	begin("an abandoned key", k2, "fp-1", t0, store.IdempotencyClaimed)

	k3 := store.IdempotencyKey{Scope: "ctx-a", Key: "key-3"}
	var claimed, pending atomic.Int32
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, _, err := st.BeginIdempotent(ctx, k3, "fp-1", t0, window)
			switch {
			case err != nil:
				t.Errorf("concurrent BeginIdempotent: %v", err)
			case got == store.IdempotencyClaimed:
				claimed.Add(1)
			case got == store.IdempotencyPending:
				pending.Add(1)
			}
		}()
	}
	wg.Wait()
	if claimed.Load() != 1 || pending.Load() != 31 {
		t.Errorf("32 concurrent claims: %d claimed, %d pending; want 1 and 31", claimed.Load(), pending.Load())
	}
}
