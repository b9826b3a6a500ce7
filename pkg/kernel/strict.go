package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// ContractError reports why a value does not match the SharedOS contract. Field is a
// dotted JSON path ("capabilities.0.resource.path.2"); it is empty for the value itself.
type ContractError struct {
	Field   string
	Message string
}

func (e *ContractError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// ErrContract is matched by every *ContractError through errors.Is.
var ErrContract = errors.New("value does not match the SharedOS contract")

// Is makes errors.Is(err, ErrContract) true for contract errors.
func (e *ContractError) Is(target error) bool { return target == ErrContract }

func contractErr(field, format string, args ...any) error {
	return &ContractError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// prefixErr prepends a field name to a contract error's field path.
func prefixErr(prefix string, err error) error {
	var ce *ContractError
	if errors.As(err, &ce) {
		f := prefix
		if ce.Field != "" {
			f = prefix + "." + ce.Field
		}
		return &ContractError{Field: f, Message: ce.Message}
	}
	return &ContractError{Field: prefix, Message: err.Error()}
}

// strictObject holds the members of one JSON object, checked against an allowed key set.
type strictObject struct {
	fields map[string]json.RawMessage
}

// parseObject decodes data as a JSON object whose keys are all in allowed. Key matching
// is exact (encoding/json's case-insensitive matching is never used for contracts).
func parseObject(data []byte, allowed ...string) (*strictObject, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return nil, contractErr("", "must be a JSON object")
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, contractErr("", "must be a JSON object: %v", err)
	}
	if len(m) > 0 {
		if err := checkDuplicateKeys(data, false); err != nil {
			return nil, err
		}
	}
	var unknown []string
	for k := range m {
		ok := false
		for _, a := range allowed {
			if k == a {
				ok = true
				break
			}
		}
		if !ok {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, contractErr(unknown[0], "unknown key %q is not allowed", unknown[0])
	}
	return &strictObject{fields: m}, nil
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

// has reports whether key is present (an explicit null counts as present; the decoders
// reject it, since the contract's optional fields may be omitted but never null).
func (o *strictObject) has(key string) bool { _, ok := o.fields[key]; return ok }

func (o *strictObject) raw(key string) json.RawMessage { return o.fields[key] }

// str decodes a required (or, with optional, an optional) string member.
func (o *strictObject) str(key string, required bool) (string, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		if required {
			return "", false, contractErr(key, "is required")
		}
		return "", false, nil
	}
	var s string
	if isNull(raw) || json.Unmarshal(raw, &s) != nil {
		return "", false, contractErr(key, "must be a string")
	}
	return s, true, nil
}

// strings decodes an array of strings.
func (o *strictObject) strs(key string) ([]string, bool, error) {
	raw, ok := o.fields[key]
	if !ok {
		return nil, false, nil
	}
	var s []string
	if isNull(raw) || json.Unmarshal(raw, &s) != nil {
		return nil, false, contractErr(key, "must be an array of strings")
	}
	if s == nil {
		s = []string{}
	}
	return s, true, nil
}

func decodeJSONObject(raw json.RawMessage) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("not an object")
	}
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// identifier validates an Identifier: JS-trimmed, then 1..256 UTF-16 units.
func identifier(field, s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", contractErr(field, "must be valid UTF-8")
	}
	t := jscompat.JSTrim(s)
	if n := jscompat.UTF16Len(t); n < 1 || n > 256 {
		return "", contractErr(field, "must be 1 to 256 characters after trimming")
	}
	return t, nil
}

func boundedTrimmed(field, s string, max int) (string, error) {
	if !utf8.ValidString(s) {
		return "", contractErr(field, "must be valid UTF-8")
	}
	t := jscompat.JSTrim(s)
	if n := jscompat.UTF16Len(t); n < 1 || n > max {
		return "", contractErr(field, "must be 1 to %d characters after trimming", max)
	}
	return t, nil
}

func (o *strictObject) identifier(key string, required bool) (string, bool, error) {
	s, ok, err := o.str(key, required)
	if err != nil || !ok {
		return "", ok, err
	}
	t, err := identifier(key, s)
	return t, true, err
}

// marshalNoEscape encodes v as compact JSON without HTML escaping.
func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// CheckDuplicateKeys refuses a JSON document in which any object, at any depth, names a
// key twice: a host that derives authority from a document's values (the gateway's
// templates) must read the very values the tool will, and parsers disagree on which of
// two keys wins.
func CheckDuplicateKeys(data []byte) error { return checkDuplicateKeys(data, true) }

// checkDuplicateKeys refuses a JSON document in which an object names a key twice
// (encoding/json keeps the last silently; a contract value must mean one thing). With
// deep unset only the top-level object is checked (its nested objects are checked when
// they are decoded in turn). It assumes data is otherwise valid JSON: a syntax error is
// left to the decoder that follows.
func checkDuplicateKeys(data []byte, deep bool) error {
	if !scanDisabled {
		if err, ok := scanDuplicateKeys(data, deep); ok {
			return err
		}
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	type frame struct {
		object bool
		keys   map[string]struct{}
		expect bool // an object expects a key next
	}
	var stack []frame
	for {
		tok, err := d.Token()
		if err != nil {
			return nil
		}
		if len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.object && top.expect {
				if key, ok := tok.(string); ok {
					if deep || len(stack) == 1 {
						if _, dup := top.keys[key]; dup {
							return contractErr(key, "is given twice")
						}
						top.keys[key] = struct{}{}
					}
					top.expect = false
					continue
				}
			}
		}
		switch tok {
		case json.Delim('{'):
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expect = true
			}
			stack = append(stack, frame{object: true, keys: map[string]struct{}{}, expect: true})
			continue
		case json.Delim('['):
			if len(stack) > 0 && stack[len(stack)-1].object {
				stack[len(stack)-1].expect = true
			}
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				return nil
			}
			if stack[len(stack)-1].object {
				stack[len(stack)-1].expect = true
			}
			continue
		}
		// a scalar value: an object expects its next key
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].expect = true
		}
	}
}

// scanDisabled turns scanDuplicateKeys off (a test compares it with the decoder).
var scanDisabled bool

// scanDuplicateKeys is checkDuplicateKeys without a decoder, for the common document (a
// request body on every call of a server: the decoder's tokens were a tenth of its CPU):
// json.Valid's pass, then one over the bytes, the keys compared as they are written. ok is
// false — decided nothing, the decoder must — for what it does not handle: a document
// that is not valid JSON (the decoder finds the duplicates before its syntax error), a
// string with an escape (its
// key's text is not its bytes), a key that is not valid UTF-8 (the decoder replaces
// invalid bytes, so two different keys can read alike), an object of more than 64 keys
// (compared pairwise here), a document that is not one object or array, anything
// malformed.
func scanDuplicateKeys(data []byte, deep bool) (err error, ok bool) {
	type frame struct {
		object, expect bool
		keys           int // where this object's keys start in keys below
	}
	if !json.Valid(data) {
		return nil, false
	}
	var frames [16]frame
	var keyBuf [32][]byte
	stack, keys := frames[:0], keyBuf[:0]
	for i := 0; i < len(data); {
		c := data[i]
		switch c {
		case ' ', '\t', '\n', '\r', ':':
			i++
		case ',':
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].expect = true
			}
			i++
		case '{', '[':
			if n := len(stack); n > 0 && stack[n-1].object {
				if stack[n-1].expect {
					return nil, false // a key must be a string
				}
			} else if n == 0 && i != firstNonSpace(data) {
				return nil, false
			}
			stack = append(stack, frame{object: c == '{', expect: c == '{', keys: len(keys)})
			i++
		case '}', ']':
			n := len(stack)
			if n == 0 || stack[n-1].object != (c == '}') {
				return nil, false
			}
			keys = keys[:stack[n-1].keys]
			stack = stack[:n-1]
			if len(stack) == 0 {
				return nil, true // the first value is complete: the decoder stops there too
			}
			i++
		case '"':
			j := i + 1
			ascii := true
			for j < len(data) && data[j] != '"' {
				if data[j] == '\\' {
					return nil, false
				}
				if data[j] >= utf8.RuneSelf {
					ascii = false
				}
				j++
			}
			if j == len(data) {
				return nil, false
			}
			n := len(stack)
			if n == 0 {
				return nil, false
			}
			if top := &stack[n-1]; top.object && top.expect {
				key := data[i+1 : j]
				if !ascii && !utf8.Valid(key) {
					return nil, false
				}
				if deep || n == 1 {
					for _, k := range keys[top.keys:] {
						if bytes.Equal(k, key) {
							return contractErr(string(key), "is given twice"), true
						}
					}
					if len(keys)-top.keys >= 64 {
						return nil, false
					}
					keys = append(keys, key)
				}
				top.expect = false
			}
			i = j + 1
		default: // a number, true, false or null
			n := len(stack)
			if n == 0 || stack[n-1].object && stack[n-1].expect {
				return nil, false
			}
			for i < len(data) && !strings.ContainsRune(" \t\n\r,]}:", rune(data[i])) {
				i++
			}
		}
	}
	return nil, false // unterminated
}

// firstNonSpace is the index of data's first byte that is not JSON white space.
func firstNonSpace(data []byte) int {
	for i, c := range data {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return i
		}
	}
	return len(data)
}
