package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// Pointer is a parsed RFC 6901 JSON pointer: its reference tokens, unescaped.
type Pointer []string

// ParsePointer parses an RFC 6901 JSON pointer: "" (the whole document) or "/" followed
// by reference tokens separated by "/", where "~0" is "~" and "~1" is "/"; any other "~"
// is refused.
func ParsePointer(s string) (Pointer, error) {
	if s == "" {
		return Pointer{}, nil
	}
	if s[0] != '/' {
		return nil, errors.New("a JSON pointer starts with /")
	}
	parts := strings.Split(s[1:], "/")
	out := make(Pointer, len(parts))
	for i, p := range parts {
		var b strings.Builder
		for j := 0; j < len(p); j++ {
			if p[j] != '~' {
				b.WriteByte(p[j])
				continue
			}
			if j+1 >= len(p) || (p[j+1] != '0' && p[j+1] != '1') {
				return nil, errors.New("~ must be followed by 0 or 1 in a JSON pointer")
			}
			if p[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		out[i] = b.String()
	}
	return out, nil
}

// String renders p in RFC 6901 form.
func (p Pointer) String() string {
	var b strings.Builder
	for _, t := range p {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// Lookup returns the value p points at in doc (decoded with json.Decoder.UseNumber), and
// whether it exists. An array index is a decimal without leading zeros ("-" never exists).
func (p Pointer) Lookup(doc any) (any, bool) {
	cur := doc
	for _, t := range p {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[t]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			if t == "" || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(v) || strings.TrimLeft(t, "0123456789") != "" {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// DecodeArguments decodes a call's arguments once, as both the templates and the
// upstream will read them: numbers kept as json.Number (their exact JSON text), and
// refused when an object, at any depth, names a key twice — exactly, or under Unicode
// simple case folding ({"repo": …, "Repo": …}): a Go upstream decoding into a struct
// matches keys case-insensitively, so two such keys would let the template read one
// resource while the upstream serves the other. The value returned is what is
// authorized and, re-encoded by EncodeArguments, exactly what is forwarded.
func DecodeArguments(raw []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, errors.New("arguments must be a JSON object")
	}
	if d.More() {
		return nil, errors.New("arguments must be one JSON object")
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, errors.New("arguments must be a JSON object")
	}
	// {"repo":"app","repo":"other"}: the template must read what the upstream will
	if err := kernel.CheckDuplicateKeys(raw); err != nil {
		return nil, fmt.Errorf("arguments: %v", err)
	}
	if err := checkFoldedKeys(v, nil); err != nil {
		return nil, err
	}
	return v, nil
}

// checkFoldedKeys refuses an object (at any depth of v) with two keys equal under
// Unicode simple case folding, the equivalence of encoding/json's field matching
// (bytes.EqualFold).
func checkFoldedKeys(v any, at Pointer) error {
	switch x := v.(type) {
	case map[string]any:
		seen := make(map[string]string, len(x))
		for k := range x {
			f := foldKey(k)
			if other, dup := seen[f]; dup {
				a, b := min(k, other), max(k, other)
				return fmt.Errorf("arguments: the keys %q and %q%s differ only by letter case; an MCP server may read either, so give one", a, b, where(at))
			}
			seen[f] = k
		}
		for k, e := range x {
			if err := checkFoldedKeys(e, append(at[:len(at):len(at)], k)); err != nil {
				return err
			}
		}
	case []any:
		for i, e := range x {
			if err := checkFoldedKeys(e, append(at[:len(at):len(at)], strconv.Itoa(i))); err != nil {
				return err
			}
		}
	}
	return nil
}

func where(at Pointer) string {
	if len(at) == 0 {
		return ""
	}
	return " at " + at.String()
}

// foldKey maps every rune of s to the smallest rune of its simple case-folding orbit
// (K, k and the Kelvin sign K all become K), so that two strings have the same key
// exactly when bytes.EqualFold says they are equal.
func foldKey(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToUpper(s)
	}
	var b strings.Builder
	for _, r := range s {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// EncodeArguments re-encodes decoded arguments for the upstream: the value that was
// authorized, never the caller's raw bytes (numbers keep their exact JSON text).
func EncodeArguments(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("arguments cannot be encoded: %v", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Resolve computes the template's path from a call's decoded arguments. Every resulting
// segment is checked against the contract's segment rules; nothing is normalized, and
// an empty piece of a split is refused, not dropped.
func (t *ToolMap) Resolve(args any) ([]string, error) {
	path := make([]string, 0, len(t.Path))
	for _, e := range t.Path {
		if e.Arg == nil {
			path = append(path, e.Literal)
			continue
		}
		v, ok := e.Arg.Lookup(args)
		if !ok {
			return nil, fmt.Errorf("argument %s is required (it names the resource)", e.Arg)
		}
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case json.Number:
			var err error
			if s, err = numberSegment(x, e.Number); err != nil {
				return nil, fmt.Errorf("argument %s %v", e.Arg, err)
			}
		default:
			return nil, fmt.Errorf("argument %s must be a string or a number (it names the resource)", e.Arg)
		}
		pieces := []string{s}
		if e.Split != "" {
			var err error
			if pieces, err = splitArg(e, s); err != nil {
				return nil, err
			}
		}
		for _, piece := range pieces {
			if err := kernel.ValidatePathSegment(piece); err != nil {
				if e.Split != "" {
					return nil, fmt.Errorf("argument %s: %q has the piece %q, which cannot name a resource (%v); %s",
						e.Arg, s, piece, err, acceptedForm(e))
				}
				return nil, fmt.Errorf("argument %s: %v", e.Arg, err)
			}
			path = append(path, piece)
		}
	}
	if len(path) > kernel.MaxPathSegments {
		return nil, fmt.Errorf("the resource path has %d segments; at most %d are allowed", len(path), kernel.MaxPathSegments)
	}
	return path, nil
}

// Number renderings of a template element ({arg: …, number: …}).
const (
	// NumberSafe (the default) takes integers within ±(2^53−1): every common reader
	// of JSON (float64, int64, uint64, arbitrary precision) reads the same value.
	NumberSafe = ""
	// NumberInt64 takes every 64-bit signed integer, for upstreams that decode into
	// int64 (Go servers, most databases); a float64 reader would round the larger ones.
	NumberInt64 = "int64"
)

// maxSafeInteger is 2^53−1, the largest integer n such that n and n+1 are both
// exactly representable as float64.
const maxSafeInteger = 1<<53 - 1

// numberSegment renders a number argument as a path segment from its exact JSON text.
// Only integers written plainly are taken (no fraction, exponent or negative zero,
// which readers render differently: 1.0, 1e3 and -0 name 1, 1000 and 0 to most
// upstreams), within the range of the element's rendering; anything else is refused
// rather than guessed.
func numberSegment(x json.Number, mode string) (string, error) {
	s := string(x)
	if strings.ContainsAny(s, ".eE") {
		return "", errors.New("must be an integer written without a fraction or an exponent (it names the resource)")
	}
	if s == "-0" {
		return "", errors.New("is negative zero, which MCP servers read as 0; give 0")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || s != strconv.FormatInt(n, 10) {
		return "", errors.New("is not a 64-bit integer (pass a larger identifier as a string)")
	}
	if mode == NumberSafe && (n > maxSafeInteger || n < -maxSafeInteger) {
		return "", errors.New("is outside ±9007199254740991, where MCP servers that read numbers as float64 would round it; pass it as a string (or set number: int64 on the template when the server reads 64-bit integers)")
	}
	return s, nil
}

// Template renders the template as "namespace:elem/elem/…" for listings and hints.
func (t *ToolMap) Template() string {
	parts := make([]string, len(t.Path))
	for i, e := range t.Path {
		parts[i] = e.String()
	}
	return t.Namespace + ":[" + strings.Join(parts, ", ") + "]"
}

// TopProperties returns the first token of every pointer of the template (the
// input-schema property each one reads).
func (t *ToolMap) TopProperties() []string {
	var out []string
	for _, e := range t.Path {
		if e.Arg != nil && len(*e.Arg) > 0 {
			out = append(out, (*e.Arg)[0])
		}
	}
	return out
}
