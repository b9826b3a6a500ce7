package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resolveSecrets reads every credential of s by reference, at connect time. An error
// names the variable or the file, never a value.
func resolveSecrets(s *Server, getenv func(string) string) (env, headers map[string]string, err error) {
	read := func(what, name string, sec Secret) (string, error) {
		if sec.FromEnv != "" {
			v := getenv(sec.FromEnv)
			if v == "" {
				return "", fmt.Errorf("%s %s: the environment variable %s is not set", what, name, sec.FromEnv)
			}
			return sec.Prefix + v, nil
		}
		b, err := os.ReadFile(sec.FromFile)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return "", fmt.Errorf("%s %s: cannot read %s: %v", what, name, sec.FromFile, err)
		}
		v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
		if v == "" {
			return "", fmt.Errorf("%s %s: the file %s is empty", what, name, sec.FromFile)
		}
		return sec.Prefix + v, nil
	}
	env = map[string]string{}
	for k, sec := range s.Env {
		if env[k], err = read("env", k, sec); err != nil {
			return nil, nil, err
		}
	}
	headers = map[string]string{}
	for k, sec := range s.Headers {
		if headers[k], err = read("header", k, sec); err != nil {
			return nil, nil, err
		}
	}
	return env, headers, nil
}

// redactor replaces every credential value in a text (an upstream's stderr, an error of
// its transport) before the text goes anywhere.
type redactor []string

func newRedactor(env, headers map[string]string) redactor {
	var r redactor
	for _, m := range []map[string]string{env, headers} {
		for _, v := range m {
			if v != "" {
				r = append(r, v)
				// the bare value of a prefixed credential too ("Bearer " + token)
				if i := strings.LastIndexByte(v, ' '); i >= 0 && i+1 < len(v) {
					r = append(r, v[i+1:])
				}
			}
		}
	}
	// longest first, so that a value containing another is replaced whole
	sort.Slice(r, func(i, j int) bool { return len(r[i]) > len(r[j]) })
	return r
}

func (r redactor) clean(s string) string {
	for _, v := range r {
		if len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
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

// headerTransport adds the configured headers to every request of an HTTP upstream.
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
}

func (h *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.base.RoundTrip(r)
}

// MaxResultBytes is the largest upstream result a call accepts (a larger one fails
// invalid_tool_result).
const MaxResultBytes = 4 << 20

// MaxErrorTextBytes caps the upstream text an upstream_tool_error carries.
const MaxErrorTextBytes = 64 << 10

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

// startedTransport closes started once the wrapped transport's Connect returned (for a
// command: the process was started, so its handle may be read).
type startedTransport struct {
	mcp.Transport
	started chan struct{}
}

func (t *startedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	defer close(t.started)
	return t.Transport.Connect(ctx)
}

// upstream is one open connection to a server, for one owner.
type upstream struct {
	cs     *mcp.ClientSession
	stderr *tailBuffer
	red    redactor
}

// connectUpstream opens a connection to s within its connectTimeout: start (or reach)
// the server and initialize. onListChanged is called when the upstream says its tool list
// changed. The error never carries a credential.
func connectUpstream(ctx context.Context, s *Server, getenv func(string) string, onListChanged func()) (*upstream, error) {
	env, headers, err := resolveSecrets(s, getenv)
	if err != nil {
		return nil, err
	}
	red := newRedactor(env, headers)
	u := &upstream{red: red}
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
		t = &startedTransport{Transport: &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}, started: started}
	} else {
		t = &mcp.StreamableClientTransport{Endpoint: s.URL, MaxRetries: -1,
			HTTPClient: &http.Client{Transport: &headerTransport{base: http.DefaultTransport, headers: headers}}}
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
		msg = fmt.Sprintf("no answer within %s", timeout)
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

// listTools reads the upstream's whole tool list (every page).
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
			return out, nil
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

func (u *upstream) close() {
	if u.cs != nil {
		_ = u.cs.Close()
	}
}
