// Package openapi holds api/openapi.yaml, the published contract of the HTTP /v1 API of
// `sharedos serve` (pkg/httpapi serves it at GET /v1/openapi.json; a test holds the
// router and the document to the same routes, methods and statuses, and every response
// of the handler's tests to the document).
package openapi

import _ "embed"

// YAML is the document as written.
//
//go:embed openapi.yaml
var YAML []byte
