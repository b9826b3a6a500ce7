package pgstore_test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sharedos/sharedos/pkg/pgstore"
)

// gateProxy forwards loopback TCP connections to the server of a DSN. Once armed, the
// first bytes a client sends that hold the marker close the gate before they are
// forwarded: from then on the server's answers do not reach any client (what clients
// send still reaches the server) until release.
type gateProxy struct {
	dsn    string // the DSN through the proxy
	mu     sync.Mutex
	marker []byte        // armed: the bytes that close the gate
	gate   chan struct{} // non-nil while the answers are held
}

func newGateProxy(t *testing.T, dsn string) *gateProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p := &gateProxy{}
	u.Host = ln.Addr().String()
	p.dsn = u.String()
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		ln.Close()
		p.release()
		cmu.Lock()
		for _, c := range conns {
			c.Close()
		}
		cmu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, c, s)
			cmu.Unlock()
			go func() { // what the client sends; the marker closes the gate first
				buf := make([]byte, 32<<10)
				var tail []byte // the end of the last chunk, for a marker across two
				for {
					n, err := c.Read(buf)
					if n > 0 {
						p.see(append(tail, buf[:n]...))
						tail = append([]byte(nil), buf[max(0, n-64):n]...)
						if _, werr := s.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				s.Close()
			}()
			go func() { // the answers, through the gate
				buf := make([]byte, 32<<10)
				for {
					n, err := s.Read(buf)
					if n > 0 {
						p.wait()
						if _, werr := c.Write(buf[:n]); werr != nil {
							break
						}
					}
					if err != nil {
						break
					}
				}
				c.Close()
			}()
		}
	}()
	return p
}

func (p *gateProxy) wait() {
	p.mu.Lock()
	g := p.gate
	p.mu.Unlock()
	if g != nil {
		<-g
	}
}

// arm makes the first client bytes holding marker close the gate.
func (p *gateProxy) arm(marker string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marker = []byte(marker)
}

func (p *gateProxy) see(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.marker != nil && bytes.Contains(b, p.marker) {
		p.marker = nil
		p.gate = make(chan struct{})
	}
}

// held reports whether the gate is closed.
func (p *gateProxy) held() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate != nil
}

func (p *gateProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
}

// TestGroupCommitsInOneMessage: a group of write-ahead appends sends its whole
// transaction — BEGIN, the audit lock, the inserts, COMMIT — in one message, so it
// commits (and releases the audit lock every audit-appending transaction of every
// replica takes) while none of the server's answers has reached this process: the lock
// is never held across a round trip to a loaded `serve`.
func TestGroupCommitsInOneMessage(t *testing.T) {
	_, dsn := openFresh(t)
	p := newGateProxy(t, dsn)
	ctx := context.Background()
	st, err := pgstore.Open(ctx, p.dsn+"&pool_max_conns=1", pgstore.Options{DefaultNamespaces: []string{"files"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pgstore.WithoutListener(st)
	// the pool's one connection opened, and the group's statements prepared on it
	if err := st.AppendWriteAhead(ctx, decision("warm", "g0")); err != nil {
		t.Fatal(err)
	}
	direct, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close(ctx)
	// the answers are held from the first message that carries the event (a health
	// check of the idle connection before it still gets its answer)
	const id = "held-in-one-message"
	p.arm(id)
	done := make(chan error, 1)
	go func() { done <- st.AppendWriteAhead(ctx, decision(id, "g1")) }()
	if !until(30*time.Second, p.held) {
		t.Fatal("the append's event never reached the server")
	}
	committed := until(30*time.Second, func() bool {
		var n int
		err := direct.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE id = $1`, id).Scan(&n)
		return err == nil && n == 1
	})
	var lockFree bool
	if committed { // and the audit lock is free: another transaction takes it at once
		tx, err := direct.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(0x73684f53)).Scan(&lockFree)
		_ = tx.Rollback(ctx)
		if err != nil {
			t.Fatal(err)
		}
	}
	p.release()
	if err := <-done; err != nil {
		t.Errorf("the held append: %v", err)
	}
	if !committed {
		t.Fatal("the group did not commit while the server's answers were held: its transaction waits for a round trip")
	}
	if !lockFree {
		t.Error("the audit lock is still held after the group committed")
	}
}
