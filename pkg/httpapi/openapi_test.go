package httpapi_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/sharedos/sharedos/pkg/httpapi"
)

// document loads the published document (as the server serves it) once.
var document = sync.OnceValues(func() (*openapi3.T, error) {
	b, err := httpapi.Document()
	if err != nil {
		return nil, err
	}
	return openapi3.NewLoader().LoadFromData(b)
})

var router = sync.OnceValues(func() (routers.Router, error) {
	// JSON lines: every line must be a JSON object; the body is then its text
	openapi3filter.RegisterBodyDecoder("application/x-ndjson", func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(r)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			var m map[string]any
			if line != "" {
				if err := jsonUnmarshal([]byte(line), &m); err != nil {
					return nil, err
				}
			}
		}
		return string(b), nil
	})
	doc, err := document()
	if err != nil {
		return nil, err
	}
	return gorillamux.NewRouter(doc)
})

// TestOpenAPIDocument: the document is valid, and the router and the document have the
// same routes, methods and statuses: neither has one the other lacks.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := document()
	must(t, err)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the document is not valid: %v", err)
	}
	inRouter := map[string][]int{}
	for _, r := range httpapi.Routes() {
		inRouter[r.Method+" "+r.Path] = r.Statuses()
	}
	inDoc := map[string][]int{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			var statuses []int
			for code := range op.Responses.Map() {
				n, err := strconv.Atoi(code)
				if err != nil {
					t.Errorf("%s %s: response %q is not a status", method, path, code)
				}
				statuses = append(statuses, n)
			}
			sort.Ints(statuses)
			inDoc[method+" "+path] = statuses
		}
	}
	for k, st := range inRouter {
		d, ok := inDoc[k]
		switch {
		case !ok:
			t.Errorf("the router has %s; the document does not", k)
		case !slices.Equal(st, d):
			t.Errorf("%s: the router answers %v, the document says %v", k, st, d)
		}
	}
	for k := range inDoc {
		if _, ok := inRouter[k]; !ok {
			t.Errorf("the document has %s; the router does not", k)
		}
	}
}

// validateResponse validates one response of the tests against the document: its route
// and status must be in it, and its body must match the status's schema.
func validateResponse(t testing.TB, method, path string, status int, header http.Header, body []byte) {
	t.Helper()
	rt, err := router()
	must(t, err)
	req := httptest.NewRequest(method, "http://127.0.0.1:8080"+path, nil)
	route, params, err := rt.FindRoute(req)
	if err != nil {
		if status == 404 || status == 405 || (status == 401 || status == 503 || status == 403) && strings.HasPrefix(path, "/v1/") {
			// an unknown path or verb: the envelope is all there is to check
			validateEnvelope(t, method, path, status, body)
			return
		}
		t.Errorf("%s %s answered %d, but the document has no such route: %v", method, path, status, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s → %d does not match the document: %v\nbody: %.300s", method, path, status, err, body)
	}
}

// validateEnvelope checks an error response of a path the document does not route.
func validateEnvelope(t testing.TB, method, path string, status int, body []byte) {
	t.Helper()
	doc, err := document()
	must(t, err)
	schema := doc.Components.Schemas["ErrorEnvelope"].Value
	var v any
	if err := jsonUnmarshal(body, &v); err != nil {
		t.Errorf("%s %s → %d: not JSON: %v", method, path, status, err)
		return
	}
	if err := schema.VisitJSON(v); err != nil {
		t.Errorf("%s %s → %d: not the error envelope: %v", method, path, status, err)
	}
}
