package cmd

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sharedos test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

type bearerRT struct {
	token string
	base  http.RoundTripper
}

func (b bearerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}

// listenRun is a `sharedos mcp --listen` running in process.
type listenRun struct {
	url, token string
	stderr     *syncBuffer
	cancel     context.CancelFunc
	done       chan error
}

// startListen runs `sharedos args...` (an `mcp --listen` with no tokens file) in process
// and waits for the URL (of scheme) and the ephemeral token it prints on stderr.
func startListen(t *testing.T, env func(string) string, scheme string, args ...string) *listenRun {
	t.Helper()
	l := &listenRun{stderr: &syncBuffer{}, done: make(chan error, 1)}
	ios := &IOStreams{In: strings.NewReader(""), Out: &syncBuffer{}, ErrOut: l.stderr}
	f := &Factory{IOStreams: ios, Env: env, Getwd: os.Getwd, Clock: time.Now}
	rc := NewRootCmd(f)
	rc.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	go func() { l.done <- rc.ExecuteContext(ctx); f.close() }()
	t.Cleanup(cancel)
	urlRE := regexp.MustCompile(`(?m)^url:\s+(` + scheme + `://127\.0\.0\.1:\d+/mcp)$`)
	deadline := time.Now().Add(10 * time.Second)
	for (l.url == "" || l.token == "") && time.Now().Before(deadline) {
		out := l.stderr.String()
		if m := urlRE.FindStringSubmatch(out); m != nil {
			l.url = m[1]
		}
		if m := regexp.MustCompile(`(?m)^token: (sharedos_\S+)$`).FindStringSubmatch(out); m != nil {
			l.token = m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l.url == "" || l.token == "" {
		select {
		case err := <-l.done:
			t.Fatalf("the server stopped: %v\n%s", err, l.stderr.String())
		default:
		}
		t.Fatalf("no url or token on stderr:\n%s", l.stderr.String())
	}
	return l
}

// TestMCPListenTLS runs `sharedos mcp --listen 127.0.0.1:0` with a generated self-signed
// certificate and no tokens file: the ephemeral token and a client configuration that
// parses are printed on stderr; a go-sdk client over HTTPS with that token lists and
// calls; a plain-HTTP request to the TLS port fails; cancelling the run (as SIGTERM does)
// drains and returns exit 0.
func TestMCPListenTLS(t *testing.T) {
	dir, env := sandbox(t)
	root, grants := readFixture(t, dir)
	certFile, keyFile, pool := selfSigned(t, dir)
	l := startListen(t, env, "https", "mcp", "--log-format", "json", "--root", root, "--grants", grants, "--namespaces", "files",
		"--state", filepath.Join(dir, "state", "state.db"), "--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile)
	url, token, stderr, cancel, done := l.url, l.token, l.stderr, l.cancel, l.done
	// the printed client configuration parses and carries the URL and the token
	out := stderr.String()
	start := strings.Index(out, "{\n  \"mcpServers\"")
	if start < 0 {
		t.Fatalf("no client configuration on stderr:\n%s", out)
	}
	var snippet struct {
		MCPServers map[string]struct {
			Type, URL string
			Headers   map[string]string
		} `json:"mcpServers"`
	}
	if err := json.NewDecoder(strings.NewReader(out[start:])).Decode(&snippet); err != nil {
		t.Fatalf("client configuration: %v", err)
	}
	if s := snippet.MCPServers["sharedos"]; s.Type != "http" || s.URL != url || s.Headers["Authorization"] != "Bearer "+token {
		t.Fatalf("client configuration %+v", snippet)
	}

	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	client := mcp.NewClient(&mcp.Implementation{Name: "tls-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearerRT{token, tr}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(list.Tools) != 2 {
		t.Fatalf("list over TLS: %v %v", err, list)
	}
	r, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "files.read", Arguments: map[string]any{"path": []string{"notes", "todo.md"}}})
	if err != nil || r.IsError {
		t.Fatalf("call over TLS: %v %+v", err, r)
	}
	// plain HTTP to the TLS port is not served
	if resp, err := http.Get(strings.Replace(strings.TrimSuffix(url, "/mcp"), "https:", "http:", 1) + "/health"); err == nil {
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP answered on the TLS port")
		}
		resp.Body.Close()
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after cancel: %v", err)
		}
	case <-time.After(12 * time.Second):
		t.Fatal("the server did not stop within the grace period")
	}
	if !strings.Contains(stderr.String(), "server stopped") {
		t.Fatalf("no shutdown log:\n%s", stderr.String())
	}
	_ = cs.Close()
}

// TestListenPolicy: loopback is served as is; off loopback only with TLS, or with
// --insecure-listen, which is then warned about; otherwise a usage error (exit 2).
func TestListenPolicy(t *testing.T) {
	for _, tc := range []struct {
		host               string
		tls, insecure      bool
		wantWarn, wantFail bool
	}{
		{"127.0.0.1", false, false, false, false},
		{"127.1.2.3", false, false, false, false},
		{"localhost", false, false, false, false},
		{"::1", false, false, false, false},
		{"[::1]", false, false, false, false},
		{"0.0.0.0", false, false, false, true},
		{"", false, false, false, true},
		{"::", false, false, false, true},
		{"192.0.2.1", false, false, false, true},
		{"example.com", false, false, false, true},
		{"localhost.example.com", false, false, false, true},
		{"0.0.0.0", true, false, false, false},
		{"0.0.0.0", false, true, true, false},
		{"0.0.0.0", true, true, false, false},
		{"127.0.0.1", false, true, false, false},
	} {
		warn, err := listenPolicy(tc.host+":1", tc.host, tc.tls, tc.insecure)
		var ee *ExitError
		if (err != nil) != tc.wantFail || warn != tc.wantWarn || (err != nil && (!errors.As(err, &ee) || ee.ExitCode != ExitUsage)) {
			t.Errorf("%q tls=%v insecure=%v: warn %v err %v", tc.host, tc.tls, tc.insecure, warn, err)
		}
	}
}
