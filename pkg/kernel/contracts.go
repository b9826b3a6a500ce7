package kernel

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// AddressKind is the tag of an Address.
type AddressKind string

// The four address kinds of the contract.
const (
	KindHuman   AddressKind = "human"
	KindAgent   AddressKind = "agent"
	KindGroup   AddressKind = "group"
	KindService AddressKind = "service"
)

// idKey is the JSON member that carries the id for each kind.
func (k AddressKind) idKey() string {
	switch k {
	case KindHuman:
		return "userId"
	case KindAgent:
		return "agentId"
	case KindGroup:
		return "conversationId"
	case KindService:
		return "serviceId"
	}
	return ""
}

// Address names a principal: a human, an agent, a group conversation or a service.
// Two addresses are equal when their kinds and ids are equal (== on the struct).
type Address struct {
	Kind AddressKind
	ID   string
}

// IsZero reports whether a is the zero Address (no kind).
func (a Address) IsZero() bool { return a.Kind == "" }

// String renders a in the CLI's kind:id shorthand.
func (a Address) String() string { return string(a.Kind) + ":" + a.ID }

// Validate checks the kind and that the id is an Identifier.
func (a Address) Validate() error {
	key := a.Kind.idKey()
	if key == "" {
		return contractErr("kind", "must be one of human, agent, group, service")
	}
	t, err := identifier(key, a.ID)
	if err != nil {
		return err
	}
	if t != a.ID {
		return contractErr(key, "must not have surrounding white space")
	}
	return nil
}

// MarshalJSON encodes the tagged-union form, e.g. {"kind":"human","userId":"u1"}.
func (a Address) MarshalJSON() ([]byte, error) {
	key := a.Kind.idKey()
	if key == "" {
		return nil, contractErr("kind", "must be one of human, agent, group, service")
	}
	id, err := marshalNoEscape(a.ID)
	if err != nil {
		return nil, err
	}
	return []byte(`{"kind":"` + string(a.Kind) + `","` + key + `":` + string(id) + `}`), nil
}

// UnmarshalJSON decodes the strict tagged-union form; the id is trimmed as an Identifier.
func (a *Address) UnmarshalJSON(data []byte) error {
	v, err := decodeValue(data)
	if err != nil {
		return err
	}
	out, err := addressFromValue(v)
	if err != nil {
		return err
	}
	*a = out
	return nil
}

// ParseAddress parses the kind:id shorthand (human:alice) or the JSON object form.
func ParseAddress(s string) (Address, error) {
	t := strings.TrimSpace(s)
	if strings.HasPrefix(t, "{") {
		var a Address
		if err := json.Unmarshal([]byte(t), &a); err != nil {
			return Address{}, err
		}
		return a, nil
	}
	kind, id, ok := strings.Cut(t, ":")
	if !ok {
		return Address{}, contractErr("", "address %q must be kind:id (kind one of human, agent, group, service)", s)
	}
	a := Address{Kind: AddressKind(kind)}
	if a.Kind.idKey() == "" {
		return Address{}, contractErr("kind", "address %q has unknown kind %q (want human, agent, group or service)", s, kind)
	}
	v, err := identifier(a.Kind.idKey(), id)
	if err != nil {
		return Address{}, contractErr("", "address %q: id must be 1 to 256 characters", s)
	}
	a.ID = v
	return a, nil
}

// ValidatePathSegment applies the path-segment rules of the contract: 1..256 UTF-16 units,
// valid UTF-8, no leading or trailing white space, not "." or "..", no "/" or "\", no C0 control
// character or DEL. Segments are never normalized.
func ValidatePathSegment(seg string) error {
	if n, ok := asciiTrimmed(seg); ok && n >= 1 && n <= 256 && seg != "." && seg != ".." && !strings.ContainsAny(seg, `/\`) {
		return nil // printable ASCII: the common case in one pass
	}
	if !utf8.ValidString(seg) {
		return contractErr("", "path segment must be valid UTF-8")
	}
	n := jscompat.UTF16Len(seg)
	if n < 1 || n > 256 {
		return contractErr("", "path segment must be 1 to 256 characters")
	}
	if seg == "." || seg == ".." {
		return contractErr("", "path segment %q is a traversal marker", seg)
	}
	first, _ := utf8.DecodeRuneInString(seg)
	last, _ := utf8.DecodeLastRuneInString(seg)
	if jscompat.IsJSSpace(first) || jscompat.IsJSSpace(last) {
		return contractErr("", "path segment %q has leading or trailing white space", seg)
	}
	for _, r := range seg {
		switch {
		case r == '/' || r == '\\':
			return contractErr("", "path segment %q contains a separator", seg)
		case r < 0x20 || r == 0x7f:
			return contractErr("", "path segment %q contains a control character", seg)
		}
	}
	return nil
}

// MaxPathSegments is the longest path the contract allows.
const MaxPathSegments = 64

// ValidatePath checks a segment array (0..64 canonical segments).
func ValidatePath(path []string) error {
	if len(path) > MaxPathSegments {
		return contractErr("", "path has %d segments; at most %d are allowed", len(path), MaxPathSegments)
	}
	for i, s := range path {
		if err := ValidatePathSegment(s); err != nil {
			return prefixErr(strconv.Itoa(i), err)
		}
	}
	return nil
}

// ResourceRef names a resource: an authority namespace, a segment path, and an optional
// owner (absent means the context's owner wherever compared).
type ResourceRef struct {
	Namespace string   `json:"namespace"`
	Path      []string `json:"path"`
	Owner     *Address `json:"owner,omitempty"`
}

// MarshalJSON always writes path as an array (never null).
func (r ResourceRef) MarshalJSON() ([]byte, error) {
	type plain ResourceRef
	p := plain(r)
	if p.Path == nil {
		p.Path = []string{}
	}
	return marshalNoEscape(p)
}

// UnmarshalJSON decodes and validates a strict ResourceRef.
func (r *ResourceRef) UnmarshalJSON(data []byte) error {
	v, err := decodeValue(data)
	if err != nil {
		return err
	}
	out, err := resourceFromValue(v)
	if err != nil {
		return err
	}
	*r = out
	return nil
}

// Validate checks a ResourceRef built in Go (not decoded from JSON).
func (r ResourceRef) Validate() error {
	if t, err := identifier("namespace", r.Namespace); err != nil || t != r.Namespace {
		return contractErr("namespace", "must be an identifier of 1 to 256 characters without surrounding white space")
	}
	if err := ValidatePath(r.Path); err != nil {
		return prefixErr("path", err)
	}
	if r.Owner != nil {
		if err := r.Owner.Validate(); err != nil {
			return prefixErr("owner", err)
		}
	}
	return nil
}

// Scope says how a capability's path applies: exactly, or to the path and all below it.
type Scope string

// The two scopes.
const (
	ScopeExact       Scope = "exact"
	ScopeDescendants Scope = "descendants"
)

// WildcardAction is the one action that covers every other in a grant.
const WildcardAction = "*"

// Capability is one resource, a set of actions on it, and a scope.
type Capability struct {
	Resource ResourceRef `json:"resource"`
	Actions  []string    `json:"actions"`
	Scope    Scope       `json:"scope"`
}

// UnmarshalJSON decodes a strict Capability.
func (c *Capability) UnmarshalJSON(data []byte) error {
	v, err := decodeValue(data)
	if err != nil {
		return err
	}
	out, err := capabilityFromValue(v)
	if err != nil {
		return err
	}
	*c = out
	return nil
}

// CapabilityConstraints narrow a grant: purposes, a time window, a use bound and how far it
// may be delegated. All fields are optional.
type CapabilityConstraints struct {
	Purposes        []string `json:"purposes,omitempty"`
	NotBefore       string   `json:"notBefore,omitempty"`
	ExpiresAt       string   `json:"expiresAt,omitempty"`
	MaxUses         *int64   `json:"maxUses,omitempty"`
	DelegationDepth *int64   `json:"delegationDepth,omitempty"`
}

// UnmarshalJSON decodes strict constraints.
func (c *CapabilityConstraints) UnmarshalJSON(data []byte) error {
	v, err := decodeValue(data)
	if err != nil {
		return err
	}
	out, err := constraintsFromValue(v)
	if err != nil {
		return err
	}
	*c = out
	return nil
}

// CapabilityGrant is authority one principal (issuer) gives another (subject) in one world.
type CapabilityGrant struct {
	ID            string                `json:"id"`
	NamespaceID   string                `json:"namespaceId"`
	Subject       Address               `json:"subject"`
	Issuer        Address               `json:"issuer"`
	Capabilities  []Capability          `json:"capabilities"`
	Constraints   CapabilityConstraints `json:"constraints"`
	IssuedAt      string                `json:"issuedAt"`
	RevokedAt     string                `json:"revokedAt,omitempty"`
	ParentGrantID string                `json:"parentGrantId,omitempty"`
	Metadata      map[string]any        `json:"metadata,omitempty"`
}

// GrantKeys are the members a CapabilityGrant may have.
var grantKeys = []string{"id", "namespaceId", "subject", "issuer", "capabilities", "constraints",
	"issuedAt", "revokedAt", "parentGrantId", "metadata"}

// UnmarshalJSON decodes and validates a strict grant.
func (g *CapabilityGrant) UnmarshalJSON(data []byte) error {
	v, err := decodeValue(data)
	if err != nil {
		return err
	}
	out, err := DecodeGrantValue(v)
	if err != nil {
		return err
	}
	*g = out
	return nil
}

// Validate checks a grant built in Go (or returned by a GrantSource) against the contract
// the JSON decoder enforces. Values must already be in canonical (trimmed) form.
func (g *CapabilityGrant) Validate() error {
	if err := validIdent("id", g.ID); err != nil {
		return err
	}
	if err := validIdent("namespaceId", g.NamespaceID); err != nil {
		return err
	}
	if err := g.Subject.Validate(); err != nil {
		return prefixErr("subject", err)
	}
	if err := g.Issuer.Validate(); err != nil {
		return prefixErr("issuer", err)
	}
	if len(g.Capabilities) < 1 || len(g.Capabilities) > 64 {
		return contractErr("capabilities", "must list 1 to 64 capabilities")
	}
	for i := range g.Capabilities {
		if err := g.Capabilities[i].Validate(); err != nil {
			return prefixErr("capabilities."+strconv.Itoa(i), err)
		}
	}
	if err := g.Constraints.Validate(); err != nil {
		return prefixErr("constraints", err)
	}
	if _, err := ParseTimestamp(g.IssuedAt); err != nil {
		return contractErr("issuedAt", "must be an RFC 3339 date-time with an offset")
	}
	if g.RevokedAt != "" {
		if _, err := ParseTimestamp(g.RevokedAt); err != nil {
			return contractErr("revokedAt", "must be an RFC 3339 date-time with an offset")
		}
	}
	if g.ParentGrantID != "" {
		if err := validIdent("parentGrantId", g.ParentGrantID); err != nil {
			return err
		}
		if g.ParentGrantID == g.ID {
			return contractErr("parentGrantId", "must differ from id")
		}
	}
	return nil
}

// Validate checks a Capability built in Go.
func (c *Capability) Validate() error {
	if err := c.Resource.Validate(); err != nil {
		return prefixErr("resource", err)
	}
	if len(c.Actions) < 1 || len(c.Actions) > 64 {
		return contractErr("actions", "must list 1 to 64 actions")
	}
	for i, a := range c.Actions {
		if err := validTrimmed("", a, 128); err != nil {
			return prefixErr("actions."+strconv.Itoa(i), err)
		}
	}
	if c.Scope != ScopeExact && c.Scope != ScopeDescendants {
		return contractErr("scope", "must be \"exact\" or \"descendants\"")
	}
	return nil
}

// Validate checks constraints built in Go.
func (c *CapabilityConstraints) Validate() error {
	if c.Purposes != nil {
		if len(c.Purposes) < 1 || len(c.Purposes) > 64 {
			return contractErr("purposes", "must list 1 to 64 purposes")
		}
		for i, p := range c.Purposes {
			if err := validTrimmed("", p, 512); err != nil {
				return prefixErr("purposes."+strconv.Itoa(i), err)
			}
		}
	}
	var nb, ex int64
	var err error
	if c.NotBefore != "" {
		if nb, err = ParseTimestamp(c.NotBefore); err != nil {
			return contractErr("notBefore", "must be an RFC 3339 date-time with an offset")
		}
	}
	if c.ExpiresAt != "" {
		if ex, err = ParseTimestamp(c.ExpiresAt); err != nil {
			return contractErr("expiresAt", "must be an RFC 3339 date-time with an offset")
		}
	}
	if c.NotBefore != "" && c.ExpiresAt != "" && nb > ex {
		return contractErr("notBefore", "is after expiresAt")
	}
	if c.MaxUses != nil && *c.MaxUses < 1 {
		return contractErr("maxUses", "must be a positive integer")
	}
	if c.DelegationDepth != nil && *c.DelegationDepth < 0 {
		return contractErr("delegationDepth", "must be a non-negative integer")
	}
	return nil
}

func validIdent(field, s string) error {
	return validTrimmed(field, s, 256)
}

// validTrimmed is the contract's bounded string: valid UTF-8 (the canonical hash writes
// bytes as they are, so a string encoders would repair must never be valid), 1..max
// UTF-16 units, no surrounding white space.
func validTrimmed(field, s string, max int) error {
	if n, ok := asciiTrimmed(s); ok {
		// the common case in one pass: printable ASCII is valid UTF-8, one UTF-16 unit
		// per byte, and trimmed when its ends are not white space
		if n < 1 || n > max {
			return contractErr(field, "must be 1 to %d characters without surrounding white space", max)
		}
		return nil
	}
	if !utf8.ValidString(s) {
		return contractErr(field, "must be valid UTF-8")
	}
	if n := jscompat.UTF16Len(s); n < 1 || n > max || jscompat.JSTrim(s) != s {
		return contractErr(field, "must be 1 to %d characters without surrounding white space", max)
	}
	return nil
}

// asciiTrimmed reports, for a string of printable ASCII (0x20..0x7e) without white space
// at either end, its length; ok is false for anything else (which the full checks take).
func asciiTrimmed(s string) (n int, ok bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x21 || c > 0x7e {
			if c != ' ' || i == 0 || i == len(s)-1 {
				return 0, false
			}
		}
	}
	return len(s), true
}

// AccessContext is the trusted, server-built context of one operation. It carries no grants.
type AccessContext struct {
	// World is the context's world (its wire name is namespaceId): grants, settings,
	// usage and audit of one world never mix with another's.
	World                 string   `json:"namespaceId"`
	Actor                 Address  `json:"actor"`
	Authority             Address  `json:"authority"`
	Owner                 Address  `json:"owner"`
	Purpose               string   `json:"purpose"`
	TraceID               string   `json:"traceId"`
	EnabledToolNamespaces []string `json:"enabledToolNamespaces"`
	Now                   string   `json:"now"`
}

// MarshalJSON always writes enabledToolNamespaces as an array.
func (c AccessContext) MarshalJSON() ([]byte, error) {
	type plain AccessContext
	p := plain(c)
	if p.EnabledToolNamespaces == nil {
		p.EnabledToolNamespaces = []string{}
	}
	return marshalNoEscape(p)
}

// UnmarshalJSON decodes a strict context (a "grants" key is a parse error like any other).
func (c *AccessContext) UnmarshalJSON(data []byte) error {
	o, err := parseObject(data, "namespaceId", "actor", "authority", "owner", "purpose", "traceId",
		"enabledToolNamespaces", "now")
	if err != nil {
		return err
	}
	var out AccessContext
	if out.World, _, err = o.identifier("namespaceId", true); err != nil {
		return err
	}
	for _, k := range []string{"actor", "authority", "owner"} {
		if !o.has(k) {
			return contractErr(k, "is required")
		}
		var a Address
		if err := json.Unmarshal(o.raw(k), &a); err != nil {
			return prefixErr(k, err)
		}
		switch k {
		case "actor":
			out.Actor = a
		case "authority":
			out.Authority = a
		default:
			out.Owner = a
		}
	}
	if s, _, err := o.str("purpose", true); err != nil {
		return err
	} else if out.Purpose, err = boundedTrimmed("purpose", s, 512); err != nil {
		return err
	}
	if out.TraceID, _, err = o.identifier("traceId", true); err != nil {
		return err
	}
	ns, ok, err := o.strs("enabledToolNamespaces")
	if err != nil {
		return err
	}
	if !ok {
		return contractErr("enabledToolNamespaces", "is required")
	}
	if out.EnabledToolNamespaces, err = ValidateEnabledToolNamespaces(ns); err != nil {
		return prefixErr("enabledToolNamespaces", err)
	}
	if out.Now, _, err = o.str("now", true); err != nil {
		return err
	}
	if _, err := ParseTimestamp(out.Now); err != nil {
		return contractErr("now", "must be an RFC 3339 date-time with an offset")
	}
	*c = out
	return nil
}

// Validate checks a context built in Go.
func (c *AccessContext) Validate() error {
	if err := validIdent("namespaceId", c.World); err != nil {
		return err
	}
	if err := c.Actor.Validate(); err != nil {
		return prefixErr("actor", err)
	}
	if err := c.Authority.Validate(); err != nil {
		return prefixErr("authority", err)
	}
	if err := c.Owner.Validate(); err != nil {
		return prefixErr("owner", err)
	}
	if err := validTrimmed("purpose", c.Purpose, 512); err != nil {
		return err
	}
	if err := validIdent("traceId", c.TraceID); err != nil {
		return err
	}
	if _, err := ValidateEnabledToolNamespaces(c.EnabledToolNamespaces); err != nil {
		return prefixErr("enabledToolNamespaces", err)
	}
	if _, err := ParseTimestamp(c.Now); err != nil {
		return contractErr("now", "must be an RFC 3339 date-time with an offset")
	}
	return nil
}

// ValidateEnabledToolNamespaces checks a selection: at most 256 unique identifiers.
func ValidateEnabledToolNamespaces(ns []string) ([]string, error) {
	if len(ns) > 256 {
		return nil, contractErr("", "at most 256 namespaces may be enabled")
	}
	out := make([]string, len(ns))
	seen := make(map[string]bool, len(ns))
	for i, n := range ns {
		t, err := identifier(strconv.Itoa(i), n)
		if err != nil {
			return nil, err
		}
		if seen[t] {
			return nil, contractErr(strconv.Itoa(i), "namespace %q is listed twice", t)
		}
		seen[t] = true
		out[i] = t
	}
	return out, nil
}

// CapabilityRequirement is what one operation needs: one action on one resource.
type CapabilityRequirement struct {
	Resource ResourceRef `json:"resource"`
	Action   string      `json:"action"`
}

// UnmarshalJSON decodes a strict requirement.
func (r *CapabilityRequirement) UnmarshalJSON(data []byte) error {
	o, err := parseObject(data, "resource", "action")
	if err != nil {
		return err
	}
	var out CapabilityRequirement
	if !o.has("resource") {
		return contractErr("resource", "is required")
	}
	if err := json.Unmarshal(o.raw("resource"), &out.Resource); err != nil {
		return prefixErr("resource", err)
	}
	s, _, err := o.str("action", true)
	if err != nil {
		return err
	}
	if out.Action, err = boundedTrimmed("action", s, 128); err != nil {
		return err
	}
	*r = out
	return nil
}

// CapabilityRequest describes authority somebody asks for: on a no_matching_grant denial
// at execution, the exact missing authority; on an escalation, what would resolve it.
type CapabilityRequest struct {
	ID           string                 `json:"id"`
	NamespaceID  string                 `json:"namespaceId"`
	Requester    Address                `json:"requester"`
	Owner        Address                `json:"owner"`
	Capabilities []Capability           `json:"capabilities"`
	Purpose      string                 `json:"purpose"`
	Constraints  *CapabilityConstraints `json:"constraints,omitempty"`
	RequestedAt  string                 `json:"requestedAt"`
	Metadata     map[string]any         `json:"metadata,omitempty"`
}

// AuthorizationDecision is the outcome of one authorization. A denial is a value, never a
// Go error.
type AuthorizationDecision struct {
	Allowed           bool               `json:"allowed"`
	ReasonCode        ReasonCode         `json:"reasonCode"`
	MatchedGrantID    string             `json:"matchedGrantId,omitempty"`
	RequiredAuthority *CapabilityRequest `json:"requiredAuthority,omitempty"`
	Metadata          map[string]any     `json:"metadata,omitempty"`
}

// ParseTimestamp parses an RFC 3339 date-time with a Z or ±hh:mm offset (seconds
// required, any fraction) and returns it as Unix milliseconds, the precision the contract
// compares at. It is hand-written because it runs on every decision.
func ParseTimestamp(s string) (int64, error) {
	bad := func() (int64, error) {
		return 0, contractErr("", "%q is not an RFC 3339 date-time with an offset", s)
	}
	if len(s) < 20 {
		return bad()
	}
	num := func(i, n int) (int, bool) {
		v := 0
		for j := i; j < i+n; j++ {
			c := s[j]
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return bad()
	}
	i := 19
	ms := 0
	if i < len(s) && s[i] == '.' {
		i++
		start := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if i-start < 3 {
				ms = ms*10 + int(s[i]-'0')
			}
			i++
		}
		if i == start {
			return bad()
		}
		for d := i - start; d < 3; d++ {
			ms *= 10
		}
	}
	offset := 0
	switch {
	case i == len(s)-1 && s[i] == 'Z':
	case i == len(s)-6 && (s[i] == '+' || s[i] == '-') && s[i+3] == ':':
		oh, ok1 := num(i+1, 2)
		om, ok2 := num(i+4, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return bad()
		}
		offset = (oh*60 + om) * 60
		if s[i] == '-' {
			offset = -offset
		}
	default:
		return bad()
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(month, year) || hour > 23 || minute > 59 || sec > 59 {
		return bad()
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	return t.Unix()*1000 - int64(offset)*1000 + int64(ms), nil
}

func daysIn(month, year int) int {
	switch month {
	case 2:
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// FormatTimestamp renders Unix milliseconds the way JavaScript's toISOString does.
func FormatTimestamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
