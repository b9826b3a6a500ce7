// Package mcpstdio is the MCP stdio transport of `sharedos mcp` and of the gateway's
// connections to stdio servers (issue 28): the SDK's semantics and message types at a
// fraction of its transport's allocations.
package mcpstdio

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport is an MCP stdio transport, for a server (`sharedos mcp`) or a client (the
// gateway's connection to a stdio server): newline-delimited JSON-RPC over a reader and a writer, with the semantics of the SDK's
// mcp.IOTransport, the SDK's message types (jsonrpc.Request, jsonrpc.Response), its
// encoder (jsonrpc.EncodeMessage) and its dispatch. What differs is the cost of reading:
// the SDK's transport copies every message out of a json.Decoder and then decodes it
// twice more through a decoder that allocates a 32 KiB buffer on every call (first as a
// batch array, then as a message, then its method name): ~100 KB per message. This one
// reads lines into one reused buffer and decodes the envelope of an ordinary message
// (one JSON object on its own line, `jsonrpc`, `id`, `method`, `params`, `result`) in
// place; only `params` and `result` are copied, because the SDK keeps them.
//
// Everything else takes the SDK's own path, so the two transports agree on every byte
// stream (TestStdioTransportMatchesTheSDKs, FuzzDecodeLine):
//   - a line the fast decoder does not take (a batch, an `error` response, a numeric id
//     that is not a small integer, escapes in a key or the method, a value continued on
//     the next line, two values on one line, malformed JSON) switches the session to a
//     stream decoder that does what the SDK's does, from that line on: std json.Decoder
//     framing, the SDK's trailing-data check, jsonrpc.DecodeMessage for each message;
//   - batches: accepted until the session negotiated 2025-06-18 or later, then refused
//     with the SDK's error; their answers go out as one array once every request of the
//     batch is answered (the SDK's bookkeeping, quirks included: a notification inside a
//     batch is tracked as a request under the empty id);
//   - a malformed message, an over-long one (MaxLineLength) or the end of input ends the
//     session with the SDK's error (io.EOF at the end of input), which `sharedos mcp`
//     logs on stderr (spec 50 §2);
//   - concurrent Writes are serialized, one line per write call; Close unblocks a Read
//     that waits for input even when closing the reader does not (the CLI's stdin).
//
// The negotiated protocol version, which the SDK hands its own transport through an
// unexported hook, is read here from the server's answer to `initialize` (its
// result.protocolVersion is the negotiated version): the client sends nothing else
// before that answer arrives, so the batch rule applies from the same message on.
type Transport struct {
	Reader io.ReadCloser
	Writer io.WriteCloser
	// MaxLineLength bounds the bytes of one inbound message: 0 selects
	// mcp.DefaultMaxLineLength, a negative value disables the bound.
	MaxLineLength int
}

// Connect implements mcp.Transport.
func (t *Transport) Connect(context.Context) (mcp.Connection, error) {
	limit := t.MaxLineLength
	if limit == 0 {
		limit = mcp.DefaultMaxLineLength
	}
	c := &conn{r: t.Reader, w: t.Writer, incoming: make(chan readResult), closed: make(chan struct{})}
	// Reads happen in a goroutine of their own so that Close unblocks a Read waiting for
	// input (stdin cannot be interrupted portably), as in the SDK's transport.
	go c.readLoop(limit)
	return c, nil
}

type readResult struct {
	raw []byte          // a message the stream decoder framed (decoded by Read)
	msg jsonrpc.Message // a message the fast decoder decoded
	err error
}

type conn struct {
	r        io.ReadCloser
	w        io.WriteCloser
	incoming chan readResult
	closed   chan struct{}
	once     sync.Once
	closeErr error

	queue []jsonrpc.Message // the unread messages of the last batch (reads are serialized)

	wmu sync.Mutex

	mu           sync.Mutex
	version      string      // the negotiated protocol version, "" before initialize
	initID       *jsonrpc.ID // the id of the initialize request, until it is answered
	batches      map[jsonrpc.ID]*msgBatch
	initAnswered bool
}

// The SDK's messages for what ends a session, so that the log line reads the same.
var (
	errFrameTooLarge = errors.New("inbound JSON-RPC frame exceeded the configured maximum line length")
	errTrailing      = errors.New("invalid trailing data at the end of stream")
	errInvalidReq    = &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "invalid request"}
)

// version20250618 is the first protocol revision without JSON-RPC batches.
const version20250618 = "2025-06-18"

// readLoop reads the input line by line into one reused buffer and hands each message
// to Read, until an error (io.EOF included), which it hands over last.
func (c *conn) readLoop(limit int) {
	buf := make([]byte, 0, 64<<10)
	start, scanned := 0, 0 // the current line begins at buf[start]; buf[start:scanned] has no newline
	var open valueScan     // how far buf[start:scanned] is into a JSON object or array
	for {
		if i := bytes.IndexByte(buf[scanned:], '\n'); i >= 0 {
			end := scanned + i + 1
			line := buf[start:end]
			if limit > 0 && len(line) > limit {
				c.deliver(readResult{err: errFrameTooLarge})
				return
			}
			start, scanned, open = end, end, valueScan{}
			if msg, ok := decodeLine(line, false); ok {
				if !c.deliver(readResult{msg: msg}) {
					return
				}
			} else if !isSpace(line) {
				c.stream(buf[start-len(line):], limit, nil)
				return
			}
			continue
		}
		pending := buf[start:]
		if limit > 0 && len(pending) > limit {
			c.deliver(readResult{err: errFrameTooLarge})
			return
		}
		// A value without its newline yet: the SDK's decoder answers it as soon as it is
		// complete, so this one hands the session to the stream decoder then.
		if open.scan(pending, scanned-start) {
			c.stream(pending, limit, nil)
			return
		}
		scanned = len(buf)
		if start > 0 && (start == len(buf) || len(buf) == cap(buf)) {
			n := copy(buf, pending) // the line moves to the buffer's start
			buf, scanned, start = buf[:n], n, 0
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, cap(buf))
		}
		n, err := c.r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			rest := buf[start:]
			if err == io.EOF && !isSpace(rest) {
				if msg, ok := decodeLine(rest, true); ok {
					if c.deliver(readResult{msg: msg}) {
						c.deliver(readResult{err: io.EOF})
					}
					return
				}
			}
			if err != io.EOF && bytes.IndexByte(rest, '\n') < 0 && !open.scan(rest, scanned-start) && open.depth > 0 {
				// a read error inside a value (the gateway's frame cap): the stream
				// decoder would read it all only to end with err
				c.deliver(readResult{err: err})
				return
			}
			c.stream(rest, limit, err)
			return
		}
		if cap(buf) > 1<<20 && start == len(buf) {
			buf = make([]byte, 0, 64<<10) // an exceptional line's buffer is not kept
			start, scanned = 0, 0
		}
	}
}

// valueScan follows a JSON object or array across reads, to tell when it is complete.
type valueScan struct {
	depth            int
	inString, escape bool
	started          bool
}

// scan scans b[from:] (b is the current line so far) and reports whether b now holds a
// complete object or array after leading white space.
func (v *valueScan) scan(b []byte, from int) bool {
	for _, c := range b[from:] {
		if !v.started {
			if isSpaceByte(c) {
				continue
			}
			if c != '{' && c != '[' {
				v.depth = -1 // not a composite value: wait for the newline
			}
			v.started = true
		}
		if v.depth < 0 {
			return false
		}
		if v.inString {
			switch {
			case v.escape:
				v.escape = false
			case c == '\\':
				v.escape = true
			case c == '"':
				v.inString = false
			}
			continue
		}
		switch c {
		case '"':
			v.inString = true
		case '{', '[':
			v.depth++
		case '}', ']':
			v.depth--
			if v.depth == 0 {
				return true
			}
		}
	}
	return false
}

// stream reads the rest of the session the way the SDK's transport does, from pending
// (read already, not yet decoded) on: a json.Decoder frames the values, a value must be followed by a
// newline (or nothing), and each is decoded by Read with the SDK's decoder.
func (c *conn) stream(pending []byte, limit int, readErr error) {
	var rest io.Reader = c.r
	if readErr != nil {
		rest = errReader{readErr}
	}
	// pending is not copied: the read loop ends with this call
	lim := &frameLimitReader{r: io.MultiReader(bytes.NewReader(pending), rest), limit: limit}
	dec := json.NewDecoder(lim)
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if err == nil {
			var tr [1]byte
			if n, rerr := dec.Buffered().Read(tr[:]); n > 0 {
				if tr[0] != '\n' && tr[0] != '\r' {
					err = errTrailing
				}
			} else if rerr != nil && rerr != io.EOF {
				err = rerr
			}
		}
		if !c.deliver(readResult{raw: raw, err: err}) || err != nil {
			return
		}
		lim.count = 0
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// frameLimitReader bounds the bytes the stream decoder reads for one value, as the
// SDK's transport does (read-ahead included).
type frameLimitReader struct {
	r     io.Reader
	limit int
	count int
}

func (r *frameLimitReader) Read(p []byte) (int, error) {
	if r.limit <= 0 {
		return r.r.Read(p)
	}
	if r.count >= r.limit {
		return 0, errFrameTooLarge
	}
	if len(p) > r.limit-r.count {
		p = p[:r.limit-r.count]
	}
	n, err := r.r.Read(p)
	r.count += n
	return n, err
}

// deliver hands r to Read; it reports false when the connection was closed first.
func (c *conn) deliver(r readResult) bool {
	select {
	case c.incoming <- r:
		return true
	case <-c.closed:
		return false
	}
}

// Read implements mcp.Connection.
func (c *conn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(c.queue) > 0 {
		next := c.queue[0]
		c.queue = c.queue[1:]
		return next, nil
	}
	var r readResult
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r = <-c.incoming:
	case <-c.closed:
		return nil, io.EOF
	}
	if r.err != nil {
		return nil, r.err
	}
	if r.msg != nil {
		c.sawRequest(r.msg)
		return r.msg, nil
	}
	return c.decodeRaw(r.raw)
}

// decodeRaw decodes a message the stream decoder framed: a batch or one message, as
// the SDK's transport does (its readBatch and batch bookkeeping).
func (c *conn) decodeRaw(raw []byte) (jsonrpc.Message, error) {
	msgs, batch, err := splitBatch(raw)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	version := c.version
	c.mu.Unlock()
	if batch && version >= version20250618 {
		return nil, fmt.Errorf("JSON-RPC batching is not supported in %s and later (request version: %s)", version20250618, version)
	}
	c.queue = msgs[1:]
	if batch {
		var b *msgBatch
		for _, msg := range msgs {
			if req, ok := msg.(*jsonrpc.Request); ok {
				if b == nil {
					b = &msgBatch{unresolved: make(map[jsonrpc.ID]int)}
				}
				if _, ok := b.unresolved[req.ID]; ok {
					return nil, fmt.Errorf("duplicate message ID %q", req.ID)
				}
				b.unresolved[req.ID] = len(b.responses)
				b.responses = append(b.responses, nil)
			}
		}
		if b != nil {
			if err := c.addBatch(b); err != nil {
				return nil, err
			}
		}
	}
	for _, m := range msgs {
		c.sawRequest(m)
	}
	return msgs[0], nil
}

// splitBatch is the SDK's readBatch: a JSON array (or null) is a batch of messages,
// anything else one message. A value nested deeper than the SDK's decoder allows is not
// a batch to it either, and fails as a message with its error.
func splitBatch(raw []byte) ([]jsonrpc.Message, bool, error) {
	if first := firstByte(raw); (first == '[' || first == 'n') && depthOK(raw) {
		var elems []json.RawMessage
		if err := json.Unmarshal(raw, &elems); err == nil {
			if len(elems) == 0 {
				return nil, true, errors.New("empty batch")
			}
			msgs := make([]jsonrpc.Message, 0, len(elems))
			for _, e := range elems {
				msg, err := jsonrpc.DecodeMessage(e)
				if err != nil {
					return nil, true, err
				}
				msgs = append(msgs, msg)
			}
			return msgs, true, nil
		}
	}
	msg, err := jsonrpc.DecodeMessage(raw)
	return []jsonrpc.Message{msg}, false, err
}

func firstByte(b []byte) byte {
	for _, x := range b {
		if !isSpaceByte(x) {
			return x
		}
	}
	return 0
}

// maxDepth is the nesting the SDK's decoder accepts.
const maxDepth = 1000

// depthOK reports whether b nests no deeper than maxDepth, counted as the SDK's decoder
// counts (brackets outside strings).
func depthOK(b []byte) bool {
	depth, inString, escaped := 0, false, false
	for _, x := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case x == '\\':
				escaped = true
			case x == '"':
				inString = false
			}
			continue
		}
		switch x {
		case '"':
			inString = true
		case '{', '[':
			depth++
			if depth > maxDepth {
				return false
			}
		case '}', ']':
			if depth > 0 {
				depth--
			}
		}
	}
	return true
}

// sawRequest remembers the id of the initialize request, whose answer carries the
// negotiated protocol version.
func (c *conn) sawRequest(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.Method == "initialize" && req.ID.IsValid() {
		c.mu.Lock()
		if !c.initAnswered && c.initID == nil {
			id := req.ID
			c.initID = &id
		}
		c.mu.Unlock()
	}
}

// sawResponse reads the negotiated protocol version from the answer to initialize.
func (c *conn) sawResponse(resp *jsonrpc.Response) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.initID == nil || *c.initID != resp.ID {
		return
	}
	c.initID = nil
	if resp.Error != nil {
		return
	}
	var r struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(resp.Result, &r) == nil {
		c.initAnswered = true
		c.version = r.ProtocolVersion
		if c.version == "" {
			c.version = "2025-03-26" // what the SDK's transport assumes for an unset version
		}
	}
}

// A msgBatch tracks the requests of an inbound batch and their answers (the SDK's).
type msgBatch struct {
	unresolved map[jsonrpc.ID]int
	responses  []*jsonrpc.Response
}

func (c *conn) addBatch(b *msgBatch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range b.unresolved {
		if _, ok := c.batches[id]; ok {
			return fmt.Errorf("%w: batch contains previously seen request %v", errInvalidReq, id.Raw())
		}
	}
	for id := range b.unresolved {
		if c.batches == nil {
			c.batches = make(map[jsonrpc.ID]*msgBatch)
		}
		c.batches[id] = b
	}
	return nil
}

// updateBatch records resp in its batch; ok reports whether it belongs to one, and
// done is the batch's answers once resp completed it.
func (c *conn) updateBatch(resp *jsonrpc.Response) (done []*jsonrpc.Response, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.batches[resp.ID]
	if !ok {
		return nil, false
	}
	b.responses[b.unresolved[resp.ID]] = resp
	delete(b.unresolved, resp.ID)
	delete(c.batches, resp.ID)
	if len(b.unresolved) == 0 {
		return b.responses, true
	}
	return nil, true
}

// Write implements mcp.Connection.
func (c *conn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	var data []byte
	if resp, ok := msg.(*jsonrpc.Response); ok {
		c.sawResponse(resp)
		if batch, ok := c.updateBatch(resp); ok {
			if len(batch) == 0 {
				return nil
			}
			raws := make([]json.RawMessage, 0, len(batch))
			for _, r := range batch {
				raw, err := jsonrpc.EncodeMessage(r)
				if err != nil {
					return fmt.Errorf("encoding batch message: %w", err)
				}
				raws = append(raws, raw)
			}
			d, err := json.Marshal(raws)
			if err != nil {
				return err
			}
			data = d
		}
	}
	if data == nil {
		d, err := jsonrpc.EncodeMessage(msg)
		if err != nil {
			return fmt.Errorf("marshaling message: %v", err)
		}
		data = d
	}
	_, err := c.w.Write(append(data, '\n'))
	return err
}

// Close implements mcp.Connection; it may be called more than once.
func (c *conn) Close() error {
	c.once.Do(func() {
		c.closeErr = errors.Join(c.r.Close(), c.w.Close())
		close(c.closed)
	})
	return c.closeErr
}

// SessionID implements mcp.Connection (stdio has no session id).
func (c *conn) SessionID() string { return "" }

func isSpaceByte(b byte) bool { return b == ' ' || b == '\t' || b == '\r' || b == '\n' }

func isSpace(b []byte) bool {
	for _, x := range b {
		if !isSpaceByte(x) {
			return false
		}
	}
	return true
}
