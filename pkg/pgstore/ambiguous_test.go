package pgstore_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/pgstore"
	"github.com/sharedos/sharedos/pkg/store"
)

// commitProxy forwards loopback connections to a PostgreSQL server and reads the
// frontend protocol's messages. Armed, it cuts the first connection that sends a COMMIT
// (a simple query, or the Bind of a statement parsed as COMMIT) so that the client never
// gets the answer, in one of two ways:
//
//   - forward: the COMMIT is sent on to the server, the proxy waits for the server's
//     CommandComplete "COMMIT" (the transaction committed), discards it, and closes both
//     sides;
//   - swallow: the messages before the COMMIT are sent on, the COMMIT is not, and both
//     sides are closed (the server rolls the transaction back).
//
// Either way the client wrote its COMMIT and lost the connection before an answer. With
// refuseAfter, the proxy then refuses every new connection (the server unreachable).
type commitProxy struct {
	*proxy // the listener, the dial and the connections (proxy_test.go)

	mu          sync.Mutex
	armed       string // "", "forward" or "swallow"
	flushOnly   bool   // cut at the flush round's statement instead of a COMMIT
	refuseAfter bool
	refusing    bool
	fired       chan struct{} // closed once the armed cut happened
}

func newCommitProxy(t *testing.T, dsn string) *commitProxy {
	t.Helper()
	p := &commitProxy{}
	p.proxy = newProxyWith(t, dsn, p.pipe, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.refusing
	})
	return p
}

// arm makes the next COMMIT's connection be cut (mode "forward" or "swallow").
func (p *commitProxy) arm(mode string, refuseAfter bool) chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.refuseAfter, p.flushOnly, p.fired = mode, refuseAfter, false, make(chan struct{})
	return p.fired
}

// armFlush makes the next flush round's connection be cut before the server runs it
// (the commit before it got its answer; the proof of its durability is lost).
func (p *commitProxy) armFlush() chan struct{} {
	fired := p.arm("swallow", false)
	p.mu.Lock()
	p.flushOnly = true
	p.mu.Unlock()
	return fired
}

// take returns the armed mode and disarms (one cut per arm).
func (p *commitProxy) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := p.armed
	p.armed = ""
	return m
}

func (p *commitProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = p.refuseAfter
	if p.refusing { // every connection cut: the server unreachable
		p.closeConns()
	}
	close(p.fired)
}

// pipe forwards c (the client) to s (the server) and back, message by message.
func (p *commitProxy) pipe(c, s net.Conn) {
	defer c.Close()
	defer s.Close()
	var mute sync.Mutex
	muted := false
	committed := make(chan struct{})
	sslReply := make(chan bool, 4) // one per untyped request the client sent: does a 1-byte answer come
	go func() {                    // server → client
		defer c.Close()
		var buf []byte
		chunk := make([]byte, 32<<10)
		pending := 0 // untyped 1-byte answers expected first
		for {
			n, err := s.Read(chunk)
			if err != nil {
				return
			}
			buf = append(buf, chunk[:n]...)
			var out []byte
			for {
				for pending == 0 {
					select {
					case b := <-sslReply:
						if b {
							pending++
						}
						continue
					default:
					}
					break
				}
				if pending > 0 {
					if len(buf) < 1 {
						break
					}
					out, buf, pending = append(out, buf[0]), buf[1:], pending-1
					continue
				}
				if len(buf) < 5 {
					break
				}
				l := int(binary.BigEndian.Uint32(buf[1:5]))
				if len(buf) < 1+l {
					break
				}
				msg := buf[:1+l]
				buf = buf[1+l:]
				mute.Lock()
				m := muted
				mute.Unlock()
				if m {
					if msg[0] == 'C' && strings.HasPrefix(string(msg[5:]), "COMMIT\x00") {
						close(committed)
						return
					}
					continue
				}
				out = append(out, msg...)
			}
			if len(out) > 0 {
				if _, err := c.Write(out); err != nil {
					return
				}
			}
		}
	}()
	stmts := map[string]string{}
	var buf []byte
	chunk := make([]byte, 32<<10)
	untyped := true // the startup message and SSL/GSS requests have no type byte
	for {
		n, err := c.Read(chunk)
		if err != nil {
			return
		}
		buf = append(buf, chunk[:n]...)
		var out []byte
		for {
			if untyped {
				if len(buf) < 8 {
					break
				}
				l := int(binary.BigEndian.Uint32(buf[:4]))
				if len(buf) < l {
					break
				}
				code := binary.BigEndian.Uint32(buf[4:8])
				isRequest := code == 80877103 || code == 80877104 // SSLRequest, GSSENCRequest
				sslReply <- isRequest
				untyped = isRequest
				out, buf = append(out, buf[:l]...), buf[l:]
				continue
			}
			if len(buf) < 5 {
				break
			}
			l := int(binary.BigEndian.Uint32(buf[1:5]))
			if len(buf) < 1+l {
				break
			}
			msg := buf[:1+l]
			body := msg[5:]
			var q string
			switch msg[0] {
			case 'Q':
				q = cstring(body, 0)
			case 'P':
				stmts[cstring(body, 0)] = cstring(body, 1)
			case 'B':
				q = stmts[cstring(body, 1)]
			}
			p.mu.Lock()
			commit := p.armed != "" && (p.flushOnly && strings.Contains(q, "pg_logical_emit_message") || !p.flushOnly && isCommit(q))
			p.mu.Unlock()
			if commit {
				switch p.take() {
				case "forward":
					mute.Lock()
					muted = true
					mute.Unlock()
					// the COMMIT and whatever follows it in this write (its Execute, Sync)
					out = append(out, buf...)
					if _, err := s.Write(out); err != nil {
						p.t.Errorf("proxy: forward the COMMIT: %v", err)
					}
					select {
					case <-committed:
					case <-time.After(time.Minute):
						p.t.Errorf("proxy: no answer to the forwarded COMMIT")
					}
					c.Close()
					s.Close()
					p.cut()
					return
				case "swallow":
					if _, err := s.Write(out); err != nil {
						p.t.Errorf("proxy: forward what precedes the COMMIT: %v", err)
					}
					c.Close()
					s.Close()
					p.cut()
					return
				}
			}
			out, buf = append(out, msg...), buf[1+l:]
		}
		if len(out) > 0 {
			if _, err := s.Write(out); err != nil {
				return
			}
		}
	}
}

// cstring returns the i-th NUL-terminated string of b.
func cstring(b []byte, i int) string {
	for ; ; i-- {
		j := strings.IndexByte(string(b), 0)
		if j < 0 {
			return ""
		}
		if i == 0 {
			return string(b[:j])
		}
		b = b[j+1:]
	}
}

func isCommit(q string) bool {
	return strings.EqualFold(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(q), ";")), "commit")
}

// TestAmbiguousCommitAnswersWhatWasRecorded: a write whose connection is lost after its
// COMMIT was sent (the answer never comes) answers what the database holds: a spend's
// Commit succeeds when the transaction committed (the use spent, its record there) and
// fails with store.ErrUnavailable, having spent nothing, when it did not; a refusal's
// record (the grouped durable append) and an effect's record (Append) are answered
// written when they committed and, when they provably did not, are written again (a
// safe retry); a recorded delivery in a reserved use's transaction the same as a spend;
// a commit answered whose flush round is cut is looked up and flushed again — in every
// case the answer matches the rows. With the server unreachable
// until the deadline, the outcome stays unknown and the call fails with
// store.ErrUnavailable (as before: the only case where a failed call may have a record).
func TestAmbiguousCommitAnswersWhatWasRecorded(t *testing.T) {
	_, dsn := openFresh(t)
	check := openReplica(t, dsn) // reads the rows, not through the proxy
	px := newCommitProxy(t, dsn)
	ctx := context.Background()
	open := func(t *testing.T) *pgstore.Store {
		st, err := pgstore.Open(ctx, px.dsn, pgstore.Options{DefaultNamespaces: []string{"files"}})
		if err != nil {
			t.Fatalf("open through the proxy: %v", err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	recorded := func(t *testing.T, id string) bool {
		t.Helper()
		evs, err := check.ListAudit(ctx, store.AuditFilter{OperationID: id})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) == 1
	}
	uses := func(t *testing.T, grant string) int64 {
		t.Helper()
		n, err := check.GetUsage(ctx, key(grant))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFired := func(t *testing.T, fired chan struct{}) {
		t.Helper()
		select {
		case <-fired:
		case <-time.After(time.Minute):
			t.Fatal("the proxy never saw the COMMIT it was armed for")
		}
	}

	for _, mode := range []string{"forward", "swallow"} {
		t.Run("spend/"+mode, func(t *testing.T) {
			st := open(t)
			grant := "spend-" + mode
			r, ok, err := st.ReserveUse(ctx, key(grant), 5)
			if err != nil || !ok {
				t.Fatalf("ReserveUse = %v, %v", ok, err)
			}
			fired := px.arm(mode, false)
			ev := decision(grant, grant)
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			err = r.Commit(cctx, &ev)
			waitFired(t, fired)
			n, rec := uses(t, grant), recorded(t, grant)
			if mode == "forward" {
				if err != nil || n != 1 || !rec {
					t.Errorf("committed spend: Commit = %v, uses %d, recorded %v; want nil, 1, true", err, n, rec)
				}
			} else if !errors.Is(err, store.ErrUnavailable) || n != 0 || rec {
				t.Errorf("spend not committed: Commit = %v, uses %d, recorded %v; want ErrUnavailable, 0, false", err, n, rec)
			}
		})
		t.Run("refusal/"+mode, func(t *testing.T) {
			st := open(t)
			ev := decision("refusal-"+mode, "refusal-"+mode)
			ev.Outcome = kernel.OutcomeDenied
			fired := px.arm(mode, false)
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			err := st.AppendWriteAhead(cctx, ev)
			waitFired(t, fired)
			if rec := recorded(t, ev.OperationID); err != nil || !rec {
				t.Errorf("refusal's record (%s): AppendWriteAhead = %v, recorded %v; want nil, true", mode, err, rec)
			}
		})
		t.Run("delivery/"+mode, func(t *testing.T) {
			// a message delivered with its record in a reserved use's transaction
			st := open(t)
			grant := "deliver-" + mode
			r, ok, err := st.ReserveUse(ctx, key(grant), 5)
			if err != nil || !ok {
				t.Fatalf("ReserveUse = %v, %v", ok, err)
			}
			env := kernel.MessageEnvelope{Version: "1", ID: "msg-" + mode, Sender: helper, Receiver: alice, Purpose: "test",
				Payload: json.RawMessage(`{"ask":"deploy?"}`), TraceID: "trace-1", CreatedAt: "2026-01-01T00:00:00.000Z"}
			records := func(store.MessageRecord) ([]kernel.AuditEvent, error) {
				return []kernel.AuditEvent{decision(grant, grant)}, nil
			}
			fired := px.arm(mode, false)
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			_, _, err = st.DeliverMessageRecorded(cctx, "w1", env, "2026-01-01T00:00:00Z", 0, r, records)
			waitFired(t, fired)
			_, gerr := check.GetMessage(ctx, "w1", env.ID)
			n, rec := uses(t, grant), recorded(t, grant)
			if mode == "forward" {
				if err != nil || gerr != nil || n != 1 || !rec {
					t.Errorf("committed delivery: = %v, message %v, uses %d, recorded %v; want nil, found, 1, true", err, gerr, n, rec)
				}
			} else if !errors.Is(err, store.ErrUnavailable) || !errors.Is(gerr, store.ErrNotFound) || n != 0 || rec {
				t.Errorf("delivery not committed: = %v, message %v, uses %d, recorded %v; want ErrUnavailable, not found, 0, false", err, gerr, n, rec)
			}
		})
		t.Run("effect/"+mode, func(t *testing.T) {
			st := open(t)
			ev := decision("effect-"+mode, "effect-"+mode)
			fired := px.arm(mode, false)
			cctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			err := st.Append(cctx, ev)
			waitFired(t, fired)
			if rec := recorded(t, ev.OperationID); err != nil || !rec {
				t.Errorf("effect's record (%s): Append = %v, recorded %v; want nil, true", mode, err, rec)
			}
		})
	}
	// the commit answered, the flush that proves it durable cut: the records are read
	// back and flushed again
	t.Run("flush lost/spend", func(t *testing.T) {
		st := open(t)
		grant := "flush-spend"
		r, ok, err := st.ReserveUse(ctx, key(grant), 5)
		if err != nil || !ok {
			t.Fatalf("ReserveUse = %v, %v", ok, err)
		}
		fired := px.armFlush()
		ev := decision(grant, grant)
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err = r.Commit(cctx, &ev)
		waitFired(t, fired)
		if n, rec := uses(t, grant), recorded(t, grant); err != nil || n != 1 || !rec {
			t.Errorf("spend whose flush was cut: Commit = %v, uses %d, recorded %v; want nil, 1, true", err, n, rec)
		}
	})
	t.Run("flush lost/refusal", func(t *testing.T) {
		st := open(t)
		ev := decision("flush-refusal", "flush-refusal")
		ev.Outcome = kernel.OutcomeDenied
		fired := px.armFlush()
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := st.AppendWriteAhead(cctx, ev)
		waitFired(t, fired)
		if rec := recorded(t, ev.OperationID); err != nil || !rec {
			t.Errorf("refusal whose flush was cut: AppendWriteAhead = %v, recorded %v; want nil, true", err, rec)
		}
	})
	t.Run("unreachable until the deadline", func(t *testing.T) {
		st := open(t)
		grant := "spend-unknown"
		r, ok, err := st.ReserveUse(ctx, key(grant), 5)
		if err != nil || !ok {
			t.Fatalf("ReserveUse = %v, %v", ok, err)
		}
		fired := px.arm("forward", true)
		ev := decision(grant, grant)
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err = r.Commit(cctx, &ev)
		waitFired(t, fired)
		// ErrUnavailable when the lookup found no way to the server before the deadline;
		// under load the pool may still hold a connection opened before the proxy was
		// armed (seen once in CI beside a whole go test ./...), and the lookup then reads
		// the truth: committed, answered nil. Either is right; a failure of another kind,
		// or nil without the record (checked below), is not.
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("outcome unknown until the deadline: Commit = %v, want ErrUnavailable (or nil: looked up)", err)
		}
		// it did commit (the proxy saw the server's answer): the one case a call
		// answered failed has its record
		if n, rec := uses(t, grant), recorded(t, grant); n != 1 || !rec {
			t.Errorf("uses %d, recorded %v; want 1, true (the proxy forwarded the COMMIT)", n, rec)
		}
	})
}
