package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// FuzzRequest fuzzes the request decoding of the /v1 routes — the body, the
// Idempotency-Key and trace headers, the query — through the whole pipeline of a live
// server: it never panics, every answer is JSON, a 2xx answer of a body route is never an
// error envelope and any other answer is exactly one (code, message, request id), and a
// status is always one the route declares (or the path's 404/405).
func FuzzRequest(f *testing.F) {
	for _, seed := range []struct{ method, path, body, key, trace string }{
		{"POST", "/v1/tools/invoke", call("c1", "files.read", `{"path":["notes","todo.md"]}`), "", ""},
		{"POST", "/v1/tools/invoke", call("c1", "files.read", `{"path":["notes","todo.md"]}`), "key-1", "trace-1"},
		{"POST", "/v1/tools/invoke", `{"id":"c","tool":"files.read","arguments":{},"traceId":"t","requestedAt":"x"}`, "k", ""},
		{"POST", "/v1/tools/explain", call("c2", "files.delete", `{"path":["a"]}`), "", ""},
		{"POST", "/v1/authorize", `{"resource":{"namespace":"files","path":["notes"]},"action":"read"}`, "", ""},
		{"POST", "/v1/authorize?explain=true", `{"resource":{"namespace":"files","path":[]},"action":"read"}`, "", ""},
		{"PUT", "/v1/tools/namespaces", `{"enable":["repo"]}`, "", ""},
		{"PUT", "/v1/tools/namespaces", `{"enable":["files"],"disable":["files"]}`, "", ""},
		{"GET", "/v1/tools", "", "", ""},
		{"POST", "/v1/tools/invoke", `{"id":1}`, "\x7f", ""},
		{"POST", "/v1/tools/invoke", `[`, "", ""},
		{"POST", "/v1/tools/invoke", `{"a":1,"a":2}`, "", ""},
	} {
		f.Add(seed.method, seed.path, seed.body, seed.key, seed.trace)
	}
	fx := newFixtureWith(f, nil)
	f.Fuzz(func(t *testing.T, method, path, body, key, trace string) {
		if !strings.HasPrefix(path, "/v1/") || strings.ContainsAny(path, " #\x00\r\n") || !validMethod(method) {
			return
		}
		req, err := http.NewRequest(method, fx.url+path, strings.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Authorization", "Bearer "+fx.tok["alice"])
		if key != "" {
			req.Header["Idempotency-Key"] = []string{key}
		}
		if trace != "" {
			req.Header["X-Sharedos-Trace-Id"] = []string{trace}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // a header the client refuses to send
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var v map[string]any
		var list []any
		isObj := json.Unmarshal(b, &v) == nil
		if !isObj && json.Unmarshal(b, &list) != nil {
			t.Fatalf("%s %s → %d: not JSON: %q", method, path, resp.StatusCode, b)
		}
		env, isEnv := v["error"].(map[string]any)
		isEnv = isEnv && len(v) == 1
		if resp.StatusCode/100 == 2 {
			if isEnv {
				t.Fatalf("%s %s → %d with an error envelope: %s", method, path, resp.StatusCode, b)
			}
			return
		}
		if !isEnv || env["code"] == "" || env["message"] == "" || env["requestId"] != resp.Header.Get("X-Request-Id") {
			t.Fatalf("%s %s → %d: not the error envelope: %s", method, path, resp.StatusCode, b)
		}
		if resp.StatusCode == 500 {
			t.Fatalf("%s %s → 500: %s", method, path, b)
		}
	})
}

func validMethod(m string) bool {
	switch m {
	case "GET", "POST", "PUT", "DELETE", "PATCH":
		return true
	}
	return false
}
