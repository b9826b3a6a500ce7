package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// DecodeArguments decodes a call's arguments as the templates read them (numbers kept as
// json.Number).
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
	return v, nil
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
			_, ferr := strconv.ParseFloat(string(x), 64)
			c, err := kernel.CanonicalJSON([]byte(x))
			if err != nil || ferr != nil {
				return nil, fmt.Errorf("argument %s is not a valid number", e.Arg)
			}
			s = string(c)
		default:
			return nil, fmt.Errorf("argument %s must be a string or a number (it names the resource)", e.Arg)
		}
		pieces := []string{s}
		if e.Split != "" {
			pieces = strings.Split(s, e.Split)
		}
		for _, piece := range pieces {
			if piece == "" && e.Split != "" {
				return nil, fmt.Errorf("argument %s has an empty piece when split on %q", e.Arg, e.Split)
			}
			if err := kernel.ValidatePathSegment(piece); err != nil {
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
