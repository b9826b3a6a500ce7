package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sharedos/sharedos/internal/mcpstdio"
)

// resolveSecrets reads every credential of s by reference, at connect time, and
// returns the redactor of their values. An error names the variable or the file, never
// a value.
func resolveSecrets(s *Server, getenv func(string) string) (env, headers map[string]string, red *redactor, err error) {
	var values []string
	read := func(what, name string, sec Secret) (string, error) {
		var v string
		if sec.FromEnv != "" {
			v = getenv(sec.FromEnv)
			if v == "" {
				return "", fmt.Errorf("%s %s: the environment variable %s is not set", what, name, sec.FromEnv)
			}
		} else {
			b, err := os.ReadFile(sec.FromFile)
			if err != nil {
				var pe *os.PathError
				if errors.As(err, &pe) {
					err = pe.Err
				}
				return "", fmt.Errorf("%s %s: cannot read %s: %v", what, name, sec.FromFile, err)
			}
			v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
			if v == "" {
				return "", fmt.Errorf("%s %s: the file %s is empty", what, name, sec.FromFile)
			}
		}
		// the bare value too: an upstream may echo the token without its "Bearer "
		values = append(values, v, sec.Prefix+v)
		return sec.Prefix + v, nil
	}
	env = map[string]string{}
	for k, sec := range s.Env {
		if env[k], err = read("env", k, sec); err != nil {
			return nil, nil, nil, err
		}
	}
	headers = map[string]string{}
	for k, sec := range s.Headers {
		if headers[k], err = read("header", k, sec); err != nil {
			return nil, nil, nil, err
		}
	}
	return env, headers, newRedactor(values), nil
}

// Redacted replaces a credential in text that came from an upstream.
const Redacted = "[redacted]"

// minSecretLen is the shortest credential value the redactor replaces: a shorter one
// would blank ordinary words (gateway lint says so of such a credential).
const minSecretLen = 4

// redactor replaces every configured credential value of a server — as given, without
// its prefix, and in its base64 (standard and URL alphabets, padded or not) and URL
// encodings — in text that came from the upstream. It is applied once, where upstream
// text enters sharedos (the upstream type's methods: tool lists, call results, errors,
// stderr), so that no result, audit record, log line or message downstream holds one.
type redactor struct {
	needles []string // longest first, so that a value containing another goes whole
	json    []string // the needles as they appear inside a JSON string
}

func newRedactor(values []string) *redactor {
	seen := map[string]bool{}
	r := &redactor{}
	add := func(n string) {
		if len(n) >= minSecretLen && !seen[n] {
			seen[n] = true
			r.needles = append(r.needles, n)
		}
	}
	for _, v := range values {
		add(v)
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			add(enc.EncodeToString([]byte(v)))
		}
		add(url.QueryEscape(v))
		add(url.PathEscape(v))
	}
	sort.Slice(r.needles, func(i, j int) bool {
		if len(r.needles[i]) != len(r.needles[j]) {
			return len(r.needles[i]) > len(r.needles[j])
		}
		return r.needles[i] < r.needles[j]
	})
	for _, n := range r.needles {
		b, _ := json.Marshal(n)
		r.json = append(r.json, string(b[1:len(b)-1]))
	}
	return r
}

// clean returns s with every credential form replaced.
func (r *redactor) clean(s string) string {
	if r == nil {
		return s
	}
	for _, n := range r.needles {
		if strings.Contains(s, n) {
			s = strings.ReplaceAll(s, n, Redacted)
		}
	}
	return s
}

// cleanJSON returns a JSON document with every credential form replaced in its
// strings (keys included). A document without escapes that could spell a needle
// otherwise ("\u…", "\/") is cleaned as bytes (when the result is still JSON); any
// other is decoded, cleaned string by string and encoded again.
func (r *redactor) cleanJSON(b []byte) ([]byte, error) {
	if r == nil || len(r.needles) == 0 {
		return b, nil
	}
	if !bytes.Contains(b, []byte(`\u`)) && !bytes.Contains(b, []byte(`\/`)) {
		out, changed := b, false
		for _, n := range r.json {
			if bytes.Contains(out, []byte(n)) {
				out, changed = bytes.ReplaceAll(out, []byte(n), []byte(Redacted)), true
			}
		}
		// a needle can also spell JSON outside a string (a numeric credential and a
		// number of the result): then clean string by string instead
		if !changed || json.Valid(out) {
			return out, nil
		}
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	v, changed := r.cleanValue(v)
	if !changed {
		return b, nil
	}
	return json.Marshal(v)
}

func (r *redactor) cleanValue(v any) (any, bool) {
	switch x := v.(type) {
	case string:
		c := r.clean(x)
		return c, c != x
	case []any:
		changed := false
		for i, e := range x {
			var ch bool
			if x[i], ch = r.cleanValue(e); ch {
				changed = true
			}
		}
		return x, changed
	case map[string]any:
		changed := false
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, ch := r.cleanValue(e)
			ck := r.clean(k)
			if ch || ck != k {
				changed = true
			}
			out[ck] = c
		}
		return out, changed
	}
	return v, false
}

// cleanAs redacts v (an upstream's decoded message) through its JSON form, decoding the
// result into a fresh value of the same type when anything was replaced.
func cleanAs[T any](r *redactor, v T) (T, error) {
	var zero T
	b, err := json.Marshal(v)
	if err != nil {
		return zero, err
	}
	c, err := r.cleanJSON(b)
	if err != nil {
		return zero, err
	}
	if bytes.Equal(b, c) {
		return v, nil
	}
	var out T
	if err := json.Unmarshal(c, &out); err != nil {
		return zero, err
	}
	return out, nil
}

// tailBuffer keeps the last bytes written to it (an upstream's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}

// upstreamTransport adds the configured headers to every request of an HTTP upstream
// and caps what it reads of every answer (frameCap).
type upstreamTransport struct {
	base    http.RoundTripper
	headers map[string]string
	cap     *frameCap
}

func (h *upstreamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	resp, err := h.base.RoundTrip(r)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	// an event stream is capped per event (its frames), any other body as a whole
	events := strings.HasPrefix(strings.ToLower(resp.Header.Get("Content-Type")), "text/event-stream")
	resp.Body = &cappedBody{ReadCloser: resp.Body, c: &cappedReader{cap: h.cap, events: events}}
	return resp, nil
}

// MaxResultBytes is the largest upstream result a call accepts (a larger one fails
// invalid_tool_result).
const MaxResultBytes = 4 << 20

// MaxFrameBytes is the largest message read from an upstream: a result of
// MaxResultBytes and its envelope. It is enforced while reading (a stdio line, an HTTP
// body, an event of an event stream), so a larger answer costs no more memory than
// this: the read fails, the call fails invalid_tool_result, and the connection is
// dropped (it is reopened for the next call).
const MaxFrameBytes = MaxResultBytes + 64<<10

// MaxErrorTextBytes caps the upstream text an upstream_tool_error carries.
const MaxErrorTextBytes = 64 << 10

// errFrameTooLarge is the read error of a frame over the cap.
var errFrameTooLarge = fmt.Errorf("the MCP server sent a message larger than %d bytes", MaxFrameBytes)

// frameCap counts the frames of one connection that went over MaxFrameBytes.
type frameCap struct {
	max       int
	overflows atomic.Int64
}

// cappedReader passes through what an upstream sends while its current frame is
// within the cap: a frame is a line (stdio), an event (events: lines up to an empty
// one), or the whole body. Past the cap it counts an overflow and fails every read.
type cappedReader struct {
	cap    *frameCap
	events bool
	n      int  // bytes of the current frame
	nl     bool // the last byte was a line end (events: an empty line ends a frame)
	failed bool
}

// scan accounts for p and returns how much of it may be passed on.
func (c *cappedReader) scan(p []byte, lines bool) (int, bool) {
	for i, b := range p {
		switch {
		case b == '\r':
		case b == '\n' && (lines || c.nl):
			c.n, c.nl = 0, false
			continue
		case b == '\n':
			c.nl = true
		default:
			c.nl = false
		}
		c.n++
		if c.n > c.cap.max {
			c.failed = true
			c.cap.overflows.Add(1)
			return i, false
		}
	}
	return len(p), true
}

type cappedBody struct {
	io.ReadCloser
	c *cappedReader
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.c.failed {
		return 0, errFrameTooLarge
	}
	n, err := b.ReadCloser.Read(p)
	var ok bool
	if b.c.events {
		n, ok = b.c.scan(p[:n], false)
	} else {
		n, ok = b.c.scanWhole(p[:n])
	}
	if !ok {
		return n, nil
	}
	return n, err
}

// scanWhole accounts for p as part of one frame.
func (c *cappedReader) scanWhole(p []byte) (int, bool) {
	if c.n+len(p) > c.cap.max {
		ok := c.cap.max - c.n
		c.n = c.cap.max + 1
		c.failed = true
		c.cap.overflows.Add(1)
		return max(ok, 0), false
	}
	c.n += len(p)
	return len(p), true
}

// cappedPipe is a stdio server's stdout, capped per line.
type cappedPipe struct {
	r io.Reader
	c *cappedReader
}

func (p *cappedPipe) Read(b []byte) (int, error) {
	if p.c.failed {
		return 0, errFrameTooLarge
	}
	n, err := p.r.Read(b)
	if m, ok := p.c.scan(b[:n], true); !ok {
		return m, nil
	}
	return n, err
}

func (p *cappedPipe) Close() error { return nil }

// commandTransport runs a stdio server: its stdin and stdout carry MCP (stdout read
// through the frame cap), its stderr goes to stderr. started is closed once Connect
// returned (the process was started, so its handle may be read).
type commandTransport struct {
	cmd       *exec.Cmd
	cap       *frameCap
	terminate time.Duration
	started   chan struct{}
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	defer close(t.started)
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	// the SDK's stdio semantics over sharedos' transport (internal/mcpstdio): an
	// upstream's answer is decoded in place instead of through three 32 KiB buffers
	t2 := &mcpstdio.Transport{Reader: &cappedPipe{r: stdout, c: &cappedReader{cap: t.cap}},
		Writer: &processInput{WriteCloser: stdin, cmd: t.cmd, terminate: t.terminate}, MaxLineLength: -1}
	return t2.Connect(ctx)
}

// processInput is a stdio server's stdin; closing it ends the server as the MCP stdio
// transport says: close its input, wait, then SIGTERM, then SIGKILL.
type processInput struct {
	io.WriteCloser
	cmd       *exec.Cmd
	terminate time.Duration
	once      sync.Once
	err       error
}

func (p *processInput) Close() error {
	p.once.Do(func() {
		_ = p.WriteCloser.Close()
		done := make(chan error, 1)
		go func() { done <- p.cmd.Wait() }()
		wait := func() bool {
			t := time.NewTimer(p.terminate)
			defer t.Stop()
			select {
			case p.err = <-done:
				return true
			case <-t.C:
				return false
			}
		}
		if wait() {
			return
		}
		if p.cmd.Process.Signal(syscall.SIGTERM) == nil && wait() {
			return
		}
		_ = p.cmd.Process.Kill()
		if !wait() {
			p.err = errors.New("the MCP server process did not exit")
		}
	})
	return p.err
}

// stdioEnv is the environment of a stdio upstream: the configured variables, plus PATH
// and HOME from the sharedos process, and nothing else of the caller's environment.
func stdioEnv(env map[string]string, getenv func(string) string) []string {
	out := make([]string, 0, len(env)+2)
	for _, k := range []string{"PATH", "HOME"} {
		if _, set := env[k]; !set {
			if v := getenv(k); v != "" {
				out = append(out, k+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

// upstream is one open connection to a server, for one owner.
type upstream struct {
	cs     *mcp.ClientSession
	stderr *tailBuffer
	red    *redactor
	cap    *frameCap
	proc   *exec.Cmd // a stdio server's process
}

// connectUpstream opens a connection to s within its connectTimeout: start (or reach)
// the server and initialize. onListChanged is called when the upstream says its tool list
// changed. The error never carries a credential.
func connectUpstream(ctx context.Context, s *Server, getenv func(string) string, onListChanged func()) (*upstream, error) {
	env, headers, red, err := resolveSecrets(s, getenv)
	if err != nil {
		return nil, err
	}
	u := &upstream{red: red, cap: &frameCap{max: MaxFrameBytes}}
	var t mcp.Transport
	var cmd *exec.Cmd
	started := make(chan struct{})
	if len(s.Command) > 0 {
		// not CommandContext: the process lives as long as the connection, not the
		// connect call; Close ends it
		cmd = exec.Command(s.Command[0], s.Command[1:]...)
		cmd.Env = stdioEnv(env, getenv)
		u.stderr = &tailBuffer{max: 2048}
		cmd.Stderr = u.stderr
		u.proc = cmd
		t = &commandTransport{cmd: cmd, cap: u.cap, terminate: 2 * time.Second, started: started}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: s.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: &upstreamTransport{base: http.DefaultTransport, headers: headers, cap: u.cap}}}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "sharedos-gateway", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if onListChanged != nil {
				onListChanged()
			}
		},
	})
	cctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
	defer cancel()
	type result struct {
		cs  *mcp.ClientSession
		err error
	}
	done := make(chan result, 1)
	go func() {
		cs, err := client.Connect(cctx, t, nil)
		done <- result{cs, err}
	}()
	var r result
	select {
	case r = <-done:
	case <-cctx.Done():
		// a server that never answers initialize is ended now (Connect's own close
		// would wait for it), and the cancelled context ends Connect
		select {
		case <-started:
			if cmd != nil && cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
		default:
		}
		select {
		case r = <-done:
			if r.cs != nil {
				_ = r.cs.Close()
			}
		case <-time.After(5 * time.Second):
		}
		r.err = cctx.Err()
	}
	if r.err != nil {
		return nil, u.describe(r.err, s.ConnectTimeout)
	}
	u.cs = r.cs
	return u, nil
}

// describe is the cause of a failed exchange, with the upstream's last stderr lines,
// credentials redacted.
func (u *upstream) describe(err error, timeout time.Duration) error {
	msg := err.Error()
	if errors.Is(err, context.DeadlineExceeded) {
		// Every exchange described here runs under the server's connectTimeout (start or
		// reach, initialize, list): the message names the setting that would change it.
		msg = fmt.Sprintf("no answer within %s (its connectTimeout; raise connectTimeout in the server's entry if it is only slow to start)", timeout)
	}
	if u.stderr != nil {
		if tail := u.stderr.String(); tail != "" {
			msg += "; its stderr ends: " + strings.Join(strings.Fields(tail), " ")
		}
	}
	return errors.New(printable(u.red.clean(msg)))
}

// printable escapes what an upstream could use to forge terminal output (control
// characters, invalid UTF-8) in text that reaches a message: the server's stderr, its
// error strings.
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case unicode.IsControl(r) || r == '\u2028' || r == '\u2029':
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// listTools reads the upstream's whole tool list (every page), credentials redacted.
func (u *upstream) listTools(ctx context.Context, timeout time.Duration) ([]*mcp.Tool, error) {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []*mcp.Tool
	params := &mcp.ListToolsParams{}
	for pages := 0; ; pages++ {
		if pages > 1000 {
			return nil, errors.New("the tool list has more than 1000 pages")
		}
		res, err := u.cs.ListTools(lctx, params)
		if err != nil {
			return nil, u.describe(err, timeout)
		}
		out = append(out, res.Tools...)
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	out, err := cleanAs(u.red, out)
	if err != nil {
		return nil, fmt.Errorf("the tool list cannot be read: %v", err)
	}
	return out, nil
}

// errResultTooLarge is callTool's error for an answer over MaxFrameBytes.
var errResultTooLarge = errors.New("the result is larger than 4 MiB")

// callTool runs one call upstream and returns its result, credentials redacted. An
// answer over the frame cap is errResultTooLarge (the connection is then unusable); any
// other error is the upstream's cause, redacted.
func (u *upstream) callTool(ctx context.Context, name string, args json.RawMessage) (*mcp.CallToolResult, error) {
	before := u.cap.overflows.Load()
	r, err := u.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if u.cap.overflows.Load() != before {
		return nil, errResultTooLarge
	}
	if err != nil {
		return nil, errors.New(printable(u.red.clean(err.Error())))
	}
	if r, err = cleanAs(u.red, r); err != nil {
		return nil, fmt.Errorf("the result cannot be read: %v", err)
	}
	return r, nil
}

// abort ends a connection that cannot go on (an answer was cut at the cap): a stdio
// server is killed at once (it may be blocked writing the rest), then the session closed.
func (u *upstream) abort() {
	if u.proc != nil && u.proc.Process != nil {
		_ = u.proc.Process.Kill()
	}
	u.close()
}

func (u *upstream) close() {
	if u.cs != nil {
		_ = u.cs.Close()
	}
}
