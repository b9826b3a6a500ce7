package grantfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// FormatGrantYAML renders g as one YAML list item in the hand-written style of a grant
// file, indented as under the spec's `grants:` key ("  - id: …"), addresses in kind:id
// shorthand, timestamps double-quoted. Appending it under `grants:` of a YAML grant file
// whose list uses that indentation yields a file Parse accepts, with a grant equal to g
// (every field is written out, namespaceId, constraints and issuedAt included, so no
// default of the target file applies). g should pass Validate; for an invalid grant the
// output is best-effort. The result ends with a newline.
func FormatGrantYAML(g kernel.CapabilityGrant) string {
	var b strings.Builder
	b.WriteString("  - id: " + yamlString(g.ID) + "\n")
	b.WriteString("    namespaceId: " + yamlString(g.NamespaceID) + "\n")
	b.WriteString("    subject: " + yamlAddress(g.Subject) + "\n")
	b.WriteString("    issuer: " + yamlAddress(g.Issuer) + "\n")
	b.WriteString("    issuedAt: " + yamlQuote(g.IssuedAt) + "\n")
	if len(g.Capabilities) == 0 {
		b.WriteString("    capabilities: []\n")
	} else {
		b.WriteString("    capabilities:\n")
	}
	for _, c := range g.Capabilities {
		b.WriteString("      - resource: {namespace: " + yamlString(c.Resource.Namespace) +
			", path: " + yamlList(c.Resource.Path))
		if c.Resource.Owner != nil {
			b.WriteString(", owner: " + yamlAddress(*c.Resource.Owner))
		}
		b.WriteString("}\n")
		b.WriteString("        actions: " + yamlList(c.Actions) + "\n")
		b.WriteString("        scope: " + yamlString(string(c.Scope)) + "\n")
	}
	var cs []string
	k := &g.Constraints
	if k.Purposes != nil {
		cs = append(cs, "purposes: "+yamlList(k.Purposes))
	}
	if k.NotBefore != "" {
		cs = append(cs, "notBefore: "+yamlQuote(k.NotBefore))
	}
	if k.ExpiresAt != "" {
		cs = append(cs, "expiresAt: "+yamlQuote(k.ExpiresAt))
	}
	if k.MaxUses != nil {
		cs = append(cs, "maxUses: "+strconv.FormatInt(*k.MaxUses, 10))
	}
	if k.DelegationDepth != nil {
		cs = append(cs, "delegationDepth: "+strconv.FormatInt(*k.DelegationDepth, 10))
	}
	b.WriteString("    constraints: {" + strings.Join(cs, ", ") + "}\n")
	if g.RevokedAt != "" {
		b.WriteString("    revokedAt: " + yamlQuote(g.RevokedAt) + "\n")
	}
	if g.ParentGrantID != "" {
		b.WriteString("    parentGrantId: " + yamlString(g.ParentGrantID) + "\n")
	}
	if g.Metadata != nil {
		b.WriteString("    metadata: " + yamlMetadata(g.Metadata) + "\n")
	}
	return b.String()
}

// jsonGrant mirrors kernel.CapabilityGrant but keeps an empty metadata object (which
// the kernel's omitempty tag would drop, changing the grant).
type jsonGrant struct {
	ID            string                       `json:"id"`
	NamespaceID   string                       `json:"namespaceId"`
	Subject       kernel.Address               `json:"subject"`
	Issuer        kernel.Address               `json:"issuer"`
	Capabilities  []kernel.Capability          `json:"capabilities"`
	Constraints   kernel.CapabilityConstraints `json:"constraints"`
	IssuedAt      string                       `json:"issuedAt"`
	RevokedAt     string                       `json:"revokedAt,omitempty"`
	ParentGrantID string                       `json:"parentGrantId,omitempty"`
	Metadata      *map[string]any              `json:"metadata,omitempty"`
}

// FormatGrantJSON renders g as an indented JSON object in the contract's form (address
// objects, every field written out), suitable as an element of a JSON grant file's
// "grants" array; decoding it yields a grant equal to g. g should pass Validate; for a
// grant that cannot be encoded (an address without a kind, say) the result is "".
func FormatGrantJSON(g kernel.CapabilityGrant) string {
	s, err := marshalGrantJSON(g, "", "  ")
	if err != nil {
		return ""
	}
	return s
}

// marshalGrantJSON encodes g in the contract's form, indented with prefix and indent
// (compact when both are empty), without a trailing newline.
func marshalGrantJSON(g kernel.CapabilityGrant, prefix, indent string) (string, error) {
	jg := jsonGrant{ID: g.ID, NamespaceID: g.NamespaceID, Subject: g.Subject, Issuer: g.Issuer,
		Capabilities: g.Capabilities, Constraints: g.Constraints, IssuedAt: g.IssuedAt,
		RevokedAt: g.RevokedAt, ParentGrantID: g.ParentGrantID}
	if jg.Capabilities == nil {
		jg.Capabilities = []kernel.Capability{}
	}
	if g.Metadata != nil {
		jg.Metadata = &g.Metadata
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if prefix != "" || indent != "" {
		e.SetIndent(prefix, indent)
	}
	if err := e.Encode(jg); err != nil {
		return "", err
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

var (
	yamlPlainRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_.-]*$`) })
	yamlPlainIDRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) })
	yamlReservedRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(?i:true|false|null|yes|no|on|off|y|n|nan|inf|infinity)$`)
	})
	yamlFloatLitRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?$`) })
	yamlLongKeySize = 512 // quoted keys longer than this use the explicit "? key : value" form
)

// yamlString writes s plain when it can only be read back as the same string, else
// double-quoted.
func yamlString(s string) string {
	if yamlPlainRE().MatchString(s) && !yamlReservedRE().MatchString(s) {
		return s
	}
	return yamlQuote(s)
}

// yamlAddress writes a in kind:id shorthand.
func yamlAddress(a kernel.Address) string {
	if yamlPlainRE().MatchString(string(a.Kind)) && yamlPlainIDRE().MatchString(a.ID) {
		return string(a.Kind) + ":" + a.ID
	}
	return yamlQuote(string(a.Kind) + ":" + a.ID)
}

func yamlList(ss []string) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = yamlString(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// yamlQuote writes s as a YAML double-quoted scalar, escaping everything a YAML reader
// would refuse raw or fold (control characters, C1 controls, line and paragraph
// separators, the byte-order mark and non-characters).
func yamlQuote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r == '"':
			b = append(b, `\"`...)
		case r == '\\':
			b = append(b, `\\`...)
		case r == '\n':
			b = append(b, `\n`...)
		case r == '\t':
			b = append(b, `\t`...)
		case r == '\r':
			b = append(b, `\r`...)
		case r < 0x20 || (r >= 0x7f && r <= 0x9f):
			b = fmt.Appendf(b, `\x%02X`, r)
		case r == 0x2028 || r == 0x2029 || r == 0xfeff || r == 0xfffe || r == 0xffff:
			b = fmt.Appendf(b, `\u%04X`, r)
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return string(append(b, '"'))
}

// yamlMetadata writes a JSON object as a YAML flow mapping whose conversion back to JSON
// is the same value (numbers keep their literal text).
func yamlMetadata(m map[string]any) string {
	raw, err := json.Marshal(m)
	if err != nil {
		return "{}"
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "{}"
	}
	var b strings.Builder
	writeYAMLFlow(&b, v)
	return b.String()
}

func writeYAMLFlow(b *strings.Builder, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			q := yamlQuote(k)
			if len(q) > yamlLongKeySize {
				// A YAML implicit key is limited to 1024 characters.
				b.WriteString("? " + q + " : ")
			} else {
				b.WriteString(q + ": ")
			}
			writeYAMLFlow(b, x[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeYAMLFlow(b, e)
		}
		b.WriteByte(']')
	case string:
		b.WriteString(yamlQuote(x))
	case json.Number:
		// A literal YAML would not resolve as a number (1e400 overflows) gets an explicit
		// tag; the loader keeps a tagged number's literal text when it is valid JSON.
		if _, err := strconv.ParseFloat(string(x), 64); err != nil || !yamlFloatLitRE().MatchString(string(x)) {
			b.WriteString("!!float ")
		}
		b.WriteString(string(x))
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case nil:
		b.WriteString("null")
	default:
		b.WriteString("null")
	}
}
