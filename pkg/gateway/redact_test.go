package gateway

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestRedactor(t *testing.T) {
	const tok = "s3cr3t/tok+en=="
	r := newRedactor([]string{tok, "Bearer " + tok, "abc"})
	cases := map[string]string{
		"failed with " + tok:                                          "failed with [redacted]",
		"header Bearer " + tok + " refused":                           "header [redacted] refused",
		"b64 " + base64.StdEncoding.EncodeToString([]byte(tok)):       "b64 [redacted]",
		"b64url " + base64.RawURLEncoding.EncodeToString([]byte(tok)): "b64url [redacted]",
		"q=" + url.QueryEscape(tok):                                   "q=[redacted]",
		"path/" + url.PathEscape(tok):                                 "path/[redacted]",
		"abc is too short to redact":                                  "abc is too short to redact",
	}
	for in, want := range cases {
		if got := r.clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
	// JSON: the byte path, and the decoding path for escapes that could spell a needle
	for _, doc := range []string{
		`{"text":"s3cr3t/tok+en=="}`,
		`{"text":"s3cr3t\/tok+en=="}`,
		`{"text":"s3cr3t\u002ftok+en=="}`,
		`{"s3cr3t/tok\u002Ben==":1}`,
		`{"a":["x",{"b":"\u0073\u0033cr3t/tok+en== and more"}],"n":1.50}`,
	} {
		out, err := r.cleanJSON([]byte(doc))
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		var v any
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("%s → %s: %v", doc, out, err)
		}
		back, _ := json.Marshal(v)
		if strings.Contains(string(back), "s3cr3t") || !strings.Contains(string(out), Redacted) {
			t.Errorf("cleanJSON(%s) = %s", doc, out)
		}
	}
	// a numeric credential that also appears as a number: only strings are cleaned
	num := newRedactor([]string{"123456"})
	out, err := num.cleanJSON([]byte(`{"n":123456,"t":"pin 123456"}`))
	if err != nil || string(out) != `{"n":123456,"t":"pin [redacted]"}` {
		t.Errorf("cleanJSON with a numeric credential = %s, %v", out, err)
	}
	// nothing to redact: the same bytes
	doc := `{"n":1.50,"t":"a\u0041"}`
	if out, _ := r.cleanJSON([]byte(doc)); string(out) != doc {
		t.Errorf("cleanJSON changed a clean document: %s", out)
	}
	// a typed message comes back as the same type
	res, err := cleanAs(r, &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "token " + tok}}})
	if err != nil || res.Content[0].(*mcp.TextContent).Text != "token [redacted]" {
		t.Errorf("cleanAs = %+v, %v", res, err)
	}
}

// The frame cap: a stdio line, an event of an event stream, or a JSON body over the
// cap fails the read at the cap (nothing past it is passed on) and counts an overflow;
// frames within it pass whole.
func TestCappedReaders(t *testing.T) {
	read := func(r interface{ Read([]byte) (int, error) }) (string, error) {
		var b strings.Builder
		buf := make([]byte, 3)
		for {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				return b.String(), err
			}
		}
	}
	fc := &frameCap{max: 8}
	got, err := read(&cappedPipe{r: strings.NewReader("12345678\nabcdefgh\n123456789\nnever"), c: &cappedReader{cap: fc}})
	if got != "12345678\nabcdefgh\n12345678" || err != errFrameTooLarge || fc.overflows.Load() != 1 {
		t.Errorf("stdio: %q, %v, %d overflows", got, err, fc.overflows.Load())
	}
	fc = &frameCap{max: 21}
	body := "data: 1234\ndata: 12\n\ndata: 12345\n\ndata: 1234\ndata: 1234\n\n"
	got, err = read(&cappedBody{ReadCloser: nopCloser{strings.NewReader(body)}, c: &cappedReader{cap: fc, events: true}})
	if !strings.HasPrefix(body, got) || len(got) >= len(body) || err != errFrameTooLarge || fc.overflows.Load() != 1 ||
		!strings.Contains(got, "12345\n\n") {
		t.Errorf("events: %q, %v", got, err)
	}
	fc = &frameCap{max: 10}
	got, err = read(&cappedBody{ReadCloser: nopCloser{strings.NewReader("12345\n12345\n1")}, c: &cappedReader{cap: fc}})
	if got != "12345\n1234" || err != errFrameTooLarge {
		t.Errorf("json body: %q, %v", got, err)
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

// A key the input schema does not declare is refused when the schema says
// additionalProperties: false, and passes through (forwarded as authorized) when not.
func TestUndeclaredKeys(t *testing.T) {
	m := &ToolMap{Namespace: "gh", Path: []Elem{{Arg: ptrOf("/repo")}}}
	closed := &Entry{mapping: m, schema: &lazySchema{doc: map[string]any{"type": "object", "additionalProperties": false,
		"properties": map[string]any{"repo": map[string]any{"type": "string"}}}}}
	open := &Entry{mapping: m, schema: &lazySchema{doc: map[string]any{"type": "object",
		"properties": map[string]any{"repo": map[string]any{"type": "string"}}}}}
	if _, err := closed.parse(json.RawMessage(`{"repo":"app","branch":"x"}`)); err == nil || !strings.Contains(err.Error(), "input schema") {
		t.Errorf("an undeclared key under additionalProperties: false: %v", err)
	}
	v, err := open.parse(json.RawMessage(`{"branch":"x", "repo":"app"}`))
	if err != nil {
		t.Fatal(err)
	}
	if pc := v.(*parsedCall); string(pc.raw) != `{"branch":"x","repo":"app"}` || strings.Join(pc.path, "/") != "app" {
		t.Errorf("forwarded %s for %q", pc.raw, pc.path)
	}
	// the template read U+FFFD for a lone surrogate; that is what is forwarded (a
	// JavaScript server would read the raw escape as another name)
	v, err = open.parse(json.RawMessage(`{"repo":"a\ud800"}`))
	if err != nil {
		t.Fatal(err)
	}
	if pc := v.(*parsedCall); string(pc.raw) != "{\"repo\":\"a\ufffd\"}" || pc.path[0] != "a\ufffd" {
		t.Errorf("forwarded %s for %q", pc.raw, pc.path)
	}
}
