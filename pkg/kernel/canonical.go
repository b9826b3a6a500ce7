package kernel

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// CanonicalJSON re-encodes a JSON document with object keys sorted (in the order of
// jscompat.LocaleLess, close to JavaScript's localeCompare), no insignificant white space and
// strings escaped as JSON.stringify escapes them. It fails on anything but exactly one
// JSON value.
func CanonicalJSON(doc []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("canonical JSON: more than one JSON value")
	}
	var b bytes.Buffer
	writeCanonical(&b, v)
	return b.Bytes(), nil
}

// mustCanonical is CanonicalJSON of a document this package just encoded itself.
func mustCanonical(doc []byte) []byte {
	out, err := CanonicalJSON(doc)
	if err != nil {
		panic(err)
	}
	return out
}

func writeCanonical(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		if f, err := strconv.ParseFloat(string(x), 64); err == nil {
			b.WriteString(formatJSNumber(f))
		} else {
			b.WriteString(string(x))
		}
	case string:
		writeJSString(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeCanonical(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return jscompat.LocaleLess(keys[i], keys[j]) })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSString(b, k)
			b.WriteByte(':')
			writeCanonical(b, x[k])
		}
		b.WriteByte('}')
	}
}

func formatJSNumber(f float64) string {
	if f == float64(int64(f)) && f < 1e21 && f > -1e21 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// writeJSString escapes like JSON.stringify: ", \\ and C0 controls only.
func writeJSString(b *bytes.Buffer, s string) { b.Write(appendJS(b.AvailableBuffer(), s)) }

// writeJSBytes is writeJSString for bytes.
func writeJSBytes(b *bytes.Buffer, s []byte) { b.Write(appendJS(b.AvailableBuffer(), s)) }

// appendJS appends s as a JSON string escaped like JSON.stringify. Runs of bytes that need
// no escape are copied in bulk (this is on the authority-hash path).
func appendJS[T string | []byte](dst []byte, s T) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, `\"`...)
		case '\\':
			dst = append(dst, `\\`...)
		case '\n':
			dst = append(dst, `\n`...)
		case '\r':
			dst = append(dst, `\r`...)
		case '\t':
			dst = append(dst, `\t`...)
		case '\b':
			dst = append(dst, `\b`...)
		case '\f':
			dst = append(dst, `\f`...)
		default:
			dst = append(dst, `\u00`...)
			dst = append(dst, hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// canonicalGrant writes g's canonical JSON directly (the same bytes CanonicalJSON gives
// for json.Marshal(g); a test holds the two together). The authority hash needs it for
// every grant, and the generic path costs a decode and re-encode per grant.
func canonicalGrant(b *bytes.Buffer, g *CapabilityGrant) {
	b.WriteString(`{"capabilities":[`)
	for i := range g.Capabilities {
		if i > 0 {
			b.WriteByte(',')
		}
		c := &g.Capabilities[i]
		b.WriteString(`{"actions":[`)
		for j, a := range c.Actions {
			if j > 0 {
				b.WriteByte(',')
			}
			writeJSString(b, a)
		}
		b.WriteString(`],"resource":{"namespace":`)
		writeJSString(b, c.Resource.Namespace)
		if c.Resource.Owner != nil {
			b.WriteString(`,"owner":`)
			canonicalAddress(b, *c.Resource.Owner)
		}
		b.WriteString(`,"path":[`)
		for j, s := range c.Resource.Path {
			if j > 0 {
				b.WriteByte(',')
			}
			writeJSString(b, s)
		}
		b.WriteString(`]},"scope":`)
		writeJSString(b, string(c.Scope))
		b.WriteByte('}')
	}
	b.WriteString(`],"constraints":{`)
	k := &g.Constraints
	sep := ""
	if k.DelegationDepth != nil {
		b.WriteString(`"delegationDepth":` + strconv.FormatInt(*k.DelegationDepth, 10))
		sep = ","
	}
	if k.ExpiresAt != "" {
		b.WriteString(sep + `"expiresAt":`)
		writeJSString(b, k.ExpiresAt)
		sep = ","
	}
	if k.MaxUses != nil {
		b.WriteString(sep + `"maxUses":` + strconv.FormatInt(*k.MaxUses, 10))
		sep = ","
	}
	if k.NotBefore != "" {
		b.WriteString(sep + `"notBefore":`)
		writeJSString(b, k.NotBefore)
		sep = ","
	}
	if len(k.Purposes) > 0 {
		b.WriteString(sep + `"purposes":[`)
		for j, p := range k.Purposes {
			if j > 0 {
				b.WriteByte(',')
			}
			writeJSString(b, p)
		}
		b.WriteByte(']')
	}
	b.WriteString(`},"id":`)
	writeJSString(b, g.ID)
	b.WriteString(`,"issuedAt":`)
	writeJSString(b, g.IssuedAt)
	b.WriteString(`,"issuer":`)
	canonicalAddress(b, g.Issuer)
	if len(g.Metadata) > 0 {
		b.WriteString(`,"metadata":`)
		raw, err := json.Marshal(g.Metadata)
		if err != nil { // metadata decoded from JSON always encodes; a Go value may not
			raw = []byte("null")
		}
		b.Write(mustCanonical(raw))
	}
	b.WriteString(`,"namespaceId":`)
	writeJSString(b, g.NamespaceID)
	if g.ParentGrantID != "" {
		b.WriteString(`,"parentGrantId":`)
		writeJSString(b, g.ParentGrantID)
	}
	if g.RevokedAt != "" {
		b.WriteString(`,"revokedAt":`)
		writeJSString(b, g.RevokedAt)
	}
	b.WriteString(`,"subject":`)
	canonicalAddress(b, g.Subject)
	b.WriteByte('}')
}

func canonicalAddress(b *bytes.Buffer, a Address) {
	key := a.Kind.idKey()
	if key == "agentId" || key == "conversationId" {
		b.WriteString(`{"` + key + `":`)
		writeJSString(b, a.ID)
		b.WriteString(`,"kind":`)
		writeJSString(b, string(a.Kind))
		b.WriteByte('}')
		return
	}
	b.WriteString(`{"kind":`)
	writeJSString(b, string(a.Kind))
	b.WriteString(`,"` + key + `":`)
	writeJSString(b, a.ID)
	b.WriteByte('}')
}

// CanonicalGrant returns the canonical JSON of g (keys sorted, no white space).
func CanonicalGrant(g *CapabilityGrant) []byte {
	var b bytes.Buffer
	canonicalGrant(&b, g)
	return b.Bytes()
}
