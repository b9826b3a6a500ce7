package pgstore_test

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// proxy forwards loopback TCP connections to the server of a DSN; stop cuts every
// connection and refuses new ones (the server unreachable), start listens again on the
// same port.
type proxy struct {
	t      *testing.T
	target string // host:port of the server
	addr   string // host:port of the proxy
	dsn    string // the DSN through the proxy

	// pipe, when set, forwards one accepted connection c to its server connection s
	// (both closed by it); refuse, when set, is asked before each connection is
	// forwarded: true closes it at once. commitProxy sets both.
	pipe   func(c, s net.Conn)
	refuse func() bool

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func newProxy(t *testing.T, dsn string) *proxy {
	return newProxyWith(t, dsn, nil, nil)
}

// newProxyWith is newProxy with a pipe and a refusal of its own (see proxy).
func newProxyWith(t *testing.T, dsn string, pipe func(c, s net.Conn), refuse func() bool) *proxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	p := &proxy{t: t, target: u.Host, pipe: pipe, refuse: refuse}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	p.addr = ln.Addr().String()
	u.Host = p.addr
	p.dsn = u.String()
	p.serve(ln)
	t.Cleanup(p.stop)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if p.refuse != nil && p.refuse() {
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			if p.pipe != nil {
				go p.pipe(c, s)
				continue
			}
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
}

// stop closes the listener and every forwarded connection.
func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.closeConnsLocked()
}

// closeConns closes every forwarded connection and keeps listening.
func (p *proxy) closeConns() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeConnsLocked()
}

func (p *proxy) closeConnsLocked() {
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// start listens again on the proxy's address.
func (p *proxy) start() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("listen again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}
