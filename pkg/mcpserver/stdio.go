package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StdioTransport is the MCP stdio transport of `sharedos mcp`: newline-delimited
// JSON-RPC messages over a reader and a writer, like the SDK's mcp.IOTransport, with
// the SDK's own message types, codec (jsonrpc.DecodeMessage, jsonrpc.EncodeMessage)
// and dispatch. What differs is the buffering (issue 28): the SDK's transport decodes
// each message through a json.Decoder into a fresh json.RawMessage and then decodes
// that again (first as a batch array, then as a message), ~400 KB of allocations per
// tools/call; this one reads each line into one reused buffer and decodes it once,
// and writes each message through one reused buffer.
//
// Decisions where the SDK's transport did more: a message is one line, as the MCP
// stdio transport requires ("messages are delimited by newlines and MUST NOT contain
// embedded newlines"), though a value continued over several lines is still
// accepted; blank lines are skipped; a JSON-RPC batch (an array, removed from MCP in
// 2025-06-18 and refused by the SDK from that version on) ends the session with an
// error saying so.
type StdioTransport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxLineLength bounds the bytes of one inbound message: 0 selects
	// mcp.DefaultMaxLineLength, a negative value disables the bound.
	MaxLineLength int
}

// Connect implements mcp.Transport.
func (t *StdioTransport) Connect(context.Context) (mcp.Connection, error) {
	limit := t.MaxLineLength
	if limit == 0 {
		limit = mcp.DefaultMaxLineLength
	}
	c := &stdioConn{r: t.Reader, w: t.Writer, incoming: make(chan readResult), closed: make(chan struct{})}
	// Reads happen in a goroutine of their own so that Close unblocks a Read waiting
	// for input (stdin cannot be interrupted portably), as in the SDK's transport.
	go c.readLoop(limit)
	return c, nil
}

type readResult struct {
	msg jsonrpc.Message
	err error
}

type stdioConn struct {
	r        io.ReadCloser
	w        io.WriteCloser
	incoming chan readResult
	closed   chan struct{}
	once     sync.Once

	wmu  sync.Mutex
	wbuf []byte
}

// errBatch is the error a JSON-RPC batch ends the session with.
var errBatch = errors.New("JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message per line")

// readLoop reads messages line by line into one reused buffer and hands each decoded
// message to Read.
func (c *stdioConn) readLoop(limit int) {
	br := bufio.NewReaderSize(c.r, 64<<10)
	var acc []byte // a message longer than br's buffer, or continued on the next line
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull || len(acc) > 0 {
			acc = append(acc, line...)
			line = acc
		}
		if limit > 0 && len(line) > limit {
			c.deliver(readResult{err: fmt.Errorf("an inbound JSON-RPC message is longer than %d bytes", limit)})
			return
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		msgText := bytes.TrimSpace(line)
		if len(msgText) == 0 {
			acc = acc[:0]
			if err != nil {
				c.deliver(readResult{err: err})
				return
			}
			continue
		}
		if msgText[0] == '[' {
			c.deliver(readResult{err: errBatch})
			return
		}
		if err == nil && !json.Valid(msgText) && incomplete(msgText) {
			// a value continued on the next line
			if len(acc) == 0 {
				acc = append(acc, line...)
			}
			continue
		}
		msg, derr := jsonrpc.DecodeMessage(msgText)
		acc = acc[:0]
		if derr != nil {
			c.deliver(readResult{err: derr})
			return
		}
		if !c.deliver(readResult{msg: msg}) {
			return
		}
		if err != nil { // the last message, without a final newline
			c.deliver(readResult{err: err})
			return
		}
	}
}

// incomplete reports whether b is the beginning of a JSON value that more input could
// complete (rather than invalid JSON).
func incomplete(b []byte) bool {
	var v json.RawMessage
	err := json.Unmarshal(b, &v)
	var se *json.SyntaxError
	return errors.As(err, &se) && se.Offset >= int64(len(b))
}

// deliver hands r to Read; it reports false when the connection was closed first.
func (c *stdioConn) deliver(r readResult) bool {
	select {
	case c.incoming <- r:
		return true
	case <-c.closed:
		return false
	}
}

// Read implements mcp.Connection.
func (c *stdioConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-c.incoming:
		return r.msg, r.err
	case <-c.closed:
		return nil, io.EOF
	}
}

// Write implements mcp.Connection.
func (c *stdioConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wbuf = append(append(c.wbuf[:0], data...), '\n')
	_, err = c.w.Write(c.wbuf)
	if cap(c.wbuf) > 1<<20 {
		c.wbuf = nil // a large answer's buffer is not kept
	}
	return err
}

// Close implements mcp.Connection; it may be called more than once.
func (c *stdioConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		err = errors.Join(c.r.Close(), c.w.Close())
	})
	return err
}

// SessionID implements mcp.Connection (stdio has no session id).
func (c *stdioConn) SessionID() string { return "" }
