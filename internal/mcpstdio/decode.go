package mcpstdio

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// decodeLine is the fast decoder of Transport: it decodes one line of input that
// holds one ordinary JSON-RPC message, in place, into the SDK's message types. It takes
// only what it can decode exactly as the SDK's transport would (FuzzDecodeLine checks
// every message it takes against jsonrpc.DecodeMessage):
//
//   - one JSON object, alone on its line, followed by the newline (or by the end of
//     input when atEOF), nested no deeper than the SDK's decoder allows, valid UTF-8;
//   - members `jsonrpc` (exactly "2.0", required), `id` (a string or an integer of at
//     most 15 digits), `method`, `params`, `result` (an object or an array), each at
//     most once; keys and strings without escapes;
//   - either `method` (a request or notification) or `result` with an id (a response).
//
// Anything else (a batch, an `error` response, null values, unknown members, malformed
// JSON) reports false and is decoded by the SDK's path.
func decodeLine(line []byte, atEOF bool) (jsonrpc.Message, bool) {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, false
	}
	const (
		hasVersion = 1 << iota
		hasID
		hasMethod
		hasParams
		hasResult
	)
	var (
		seen   int
		id     jsonrpc.ID
		method string
		params []byte
		result []byte
	)
	i++
	for {
		i = skipSpace(line, i)
		if i >= len(line) {
			return nil, false
		}
		if line[i] == '}' && seen == 0 {
			return nil, false // {} is no message
		}
		key, next, ok := plainString(line, i)
		if !ok {
			return nil, false
		}
		i = skipSpace(line, next)
		if i >= len(line) || line[i] != ':' {
			return nil, false
		}
		i = skipSpace(line, i+1)
		if i >= len(line) {
			return nil, false
		}
		var bit int
		switch string(key) {
		case "jsonrpc":
			bit = hasVersion
			v, next, ok := plainString(line, i)
			if !ok || string(v) != "2.0" {
				return nil, false
			}
			i = next
		case "id":
			bit = hasID
			if line[i] == '"' {
				v, next, ok := plainString(line, i)
				if !ok {
					return nil, false
				}
				id, _ = jsonrpc.MakeID(string(v))
				i = next
			} else {
				n, next, ok := smallInt(line, i)
				if !ok {
					return nil, false
				}
				id, i = n, next
			}
		case "method":
			bit = hasMethod
			v, next, ok := plainString(line, i)
			if !ok {
				return nil, false
			}
			method, i = methodName(v), next
		case "params", "result":
			bit = hasParams
			if key[0] == 'r' {
				bit = hasResult
			}
			end, ok := compositeEnd(line, i)
			if !ok {
				return nil, false
			}
			v := line[i:end]
			if !json.Valid(v) || !utf8.Valid(v) {
				return nil, false
			}
			if bit == hasParams {
				params = v
			} else {
				result = v
			}
			i = end
		default:
			return nil, false
		}
		if seen&bit != 0 {
			return nil, false // a member given twice
		}
		seen |= bit
		i = skipSpace(line, i)
		if i >= len(line) {
			return nil, false
		}
		if line[i] == ',' {
			i++
			continue
		}
		if line[i] != '}' {
			return nil, false
		}
		i++
		break
	}
	// What follows the object: the newline (a carriage return before it allowed), or
	// nothing at the end of input; the SDK's transport refuses anything else there.
	rest := line[i:]
	switch {
	case len(rest) == 0:
		if !atEOF {
			return nil, false
		}
	case rest[0] != '\n' && rest[0] != '\r':
		return nil, false
	case !isSpace(rest):
		return nil, false
	}
	if seen&hasVersion == 0 || !depthOK(line) {
		return nil, false
	}
	switch {
	case seen&hasMethod != 0 && seen&hasResult == 0:
		return &jsonrpc.Request{ID: id, Method: method, Params: bytes.Clone(params)}, true
	case seen&(hasMethod|hasParams) == 0 && seen&hasResult != 0 && id.IsValid():
		return &jsonrpc.Response{ID: id, Result: bytes.Clone(result)}, true
	}
	return nil, false
}

// methodName returns the method as a string, without an allocation for MCP's own
// methods.
func methodName(v []byte) string {
	switch string(v) {
	case "tools/call":
		return "tools/call"
	case "tools/list":
		return "tools/list"
	case "ping":
		return "ping"
	case "initialize":
		return "initialize"
	case "notifications/initialized":
		return "notifications/initialized"
	case "notifications/cancelled":
		return "notifications/cancelled"
	}
	return string(v)
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpaceByte(b[i]) {
		i++
	}
	return i
}

// plainString reads the JSON string at b[i] that has no escape and only printable
// ASCII, and returns its content and the index after it.
func plainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20 || c >= 0x7f:
			return nil, 0, false
		}
	}
	return nil, 0, false
}

// smallInt reads the integer at b[i] (at most 15 digits, so exact as the float64 the
// SDK decodes ids into), followed by a delimiter.
func smallInt(b []byte, i int) (jsonrpc.ID, int, bool) {
	neg := false
	if i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	start := i
	var n int64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		n = n*10 + int64(b[i]-'0')
		i++
	}
	digits := i - start
	if digits == 0 || digits > 15 || (digits > 1 && b[start] == '0') {
		return jsonrpc.ID{}, 0, false
	}
	if i < len(b) && !isSpaceByte(b[i]) && b[i] != ',' && b[i] != '}' {
		return jsonrpc.ID{}, 0, false // a fraction, an exponent, or garbage
	}
	if neg {
		n = -n
	}
	id, err := jsonrpc.MakeID(float64(n))
	return id, i, err == nil
}

// compositeEnd returns the index after the object or array that starts at b[i], found
// by its brackets outside strings (json.Valid then checks it).
func compositeEnd(b []byte, i int) (int, bool) {
	if b[i] != '{' && b[i] != '[' {
		return 0, false
	}
	depth, inString, escaped := 0, false, false
	for j := i; j < len(b); j++ {
		c := b[j]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth == 0 {
				return j + 1, true
			}
		}
	}
	return 0, false
}
