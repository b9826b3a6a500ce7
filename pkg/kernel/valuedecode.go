package kernel

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
)

// The strict decoders of the grant path (Address, ResourceRef, Capability,
// CapabilityConstraints, CapabilityGrant) work on a decoded JSON value — map[string]any,
// []any, string, json.Number, bool, nil — so that a document is scanned once, not once per
// nesting level. UnmarshalJSON decodes into such a value and calls them; hosts that hold a
// value already (a YAML tree turned into JSON values) call DecodeGrantValue directly.

// decodeValue decodes one JSON document into a generic value with json.Number numbers.
func decodeValue(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, contractErr("", "must be JSON: %v", err)
	}
	if err := checkDuplicateKeys(data, true); err != nil {
		return nil, err
	}
	return v, nil
}

// valueObject checks that v is an object whose keys are all in allowed (exact match).
func valueObject(v any, allowed ...string) (map[string]any, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, contractErr("", "must be a JSON object")
	}
	var unknown []string
	for k := range m {
		found := false
		for _, a := range allowed {
			if k == a {
				found = true
				break
			}
		}
		if !found {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, contractErr(unknown[0], "unknown key %q is not allowed", unknown[0])
	}
	return m, nil
}

func valueStr(m map[string]any, key string, required bool) (string, bool, error) {
	v, ok := m[key]
	if !ok {
		if required {
			return "", false, contractErr(key, "is required")
		}
		return "", false, nil
	}
	s, isStr := v.(string)
	if !isStr {
		return "", false, contractErr(key, "must be a string")
	}
	return s, true, nil
}

func valueIdent(m map[string]any, key string, required bool) (string, bool, error) {
	s, ok, err := valueStr(m, key, required)
	if err != nil || !ok {
		return "", ok, err
	}
	t, err := identifier(key, s)
	return t, true, err
}

func valueStrs(m map[string]any, key string) ([]string, bool, error) {
	v, ok := m[key]
	if !ok {
		return nil, false, nil
	}
	arr, isArr := v.([]any)
	if !isArr {
		return nil, false, contractErr(key, "must be an array of strings")
	}
	out := make([]string, len(arr))
	for i, e := range arr {
		s, isStr := e.(string)
		if !isStr {
			return nil, false, contractErr(key, "must be an array of strings")
		}
		out[i] = s
	}
	return out, true, nil
}

// valueInt reads an integral JSON number (1.0 is accepted, 1.5 and "1" are not).
func valueInt(m map[string]any, key string) (int64, bool, error) {
	v, ok := m[key]
	if !ok {
		return 0, false, nil
	}
	n, isNum := v.(json.Number)
	if !isNum {
		return 0, false, contractErr(key, "must be an integer")
	}
	if i, err := n.Int64(); err == nil {
		return i, true, nil
	}
	f, err := n.Float64()
	if err != nil || f != float64(int64(f)) || f > 9007199254740991 || f < -9007199254740991 {
		return 0, false, contractErr(key, "must be an integer")
	}
	return int64(f), true, nil
}

func addressFromValue(v any) (Address, error) {
	m, err := valueObject(v, "kind", "userId", "agentId", "conversationId", "serviceId")
	if err != nil {
		return Address{}, err
	}
	kind, _, err := valueStr(m, "kind", true)
	if err != nil {
		return Address{}, err
	}
	k := AddressKind(kind)
	key := k.idKey()
	if key == "" {
		return Address{}, contractErr("kind", "must be one of human, agent, group, service")
	}
	for _, other := range []string{"userId", "agentId", "conversationId", "serviceId"} {
		if _, has := m[other]; has && other != key {
			return Address{}, contractErr(other, "is not allowed for kind %q", kind)
		}
	}
	id, _, err := valueIdent(m, key, true)
	if err != nil {
		return Address{}, err
	}
	return Address{Kind: k, ID: id}, nil
}

func resourceFromValue(v any) (ResourceRef, error) {
	m, err := valueObject(v, "namespace", "path", "owner")
	if err != nil {
		return ResourceRef{}, err
	}
	var out ResourceRef
	if out.Namespace, _, err = valueIdent(m, "namespace", true); err != nil {
		return ResourceRef{}, err
	}
	path, ok, err := valueStrs(m, "path")
	if err != nil {
		return ResourceRef{}, err
	}
	if !ok {
		return ResourceRef{}, contractErr("path", "is required")
	}
	if err := ValidatePath(path); err != nil {
		return ResourceRef{}, prefixErr("path", err)
	}
	out.Path = path
	if ov, has := m["owner"]; has {
		a, err := addressFromValue(ov)
		if err != nil {
			return ResourceRef{}, prefixErr("owner", err)
		}
		out.Owner = &a
	}
	return out, nil
}

func capabilityFromValue(v any) (Capability, error) {
	m, err := valueObject(v, "resource", "actions", "scope")
	if err != nil {
		return Capability{}, err
	}
	var out Capability
	rv, has := m["resource"]
	if !has {
		return Capability{}, contractErr("resource", "is required")
	}
	if out.Resource, err = resourceFromValue(rv); err != nil {
		return Capability{}, prefixErr("resource", err)
	}
	acts, ok, err := valueStrs(m, "actions")
	if err != nil {
		return Capability{}, err
	}
	if !ok || len(acts) < 1 || len(acts) > 64 {
		return Capability{}, contractErr("actions", "must list 1 to 64 actions")
	}
	for i, a := range acts {
		if acts[i], err = boundedTrimmed("actions."+strconv.Itoa(i), a, 128); err != nil {
			return Capability{}, err
		}
	}
	out.Actions = acts
	scope, _, err := valueStr(m, "scope", true)
	if err != nil {
		return Capability{}, err
	}
	if scope != string(ScopeExact) && scope != string(ScopeDescendants) {
		return Capability{}, contractErr("scope", "must be \"exact\" or \"descendants\"")
	}
	out.Scope = Scope(scope)
	return out, nil
}

func constraintsFromValue(v any) (CapabilityConstraints, error) {
	m, err := valueObject(v, "purposes", "notBefore", "expiresAt", "maxUses", "delegationDepth")
	if err != nil {
		return CapabilityConstraints{}, err
	}
	var out CapabilityConstraints
	if ps, ok, err := valueStrs(m, "purposes"); err != nil {
		return CapabilityConstraints{}, err
	} else if ok {
		if len(ps) < 1 || len(ps) > 64 {
			return CapabilityConstraints{}, contractErr("purposes", "must list 1 to 64 purposes")
		}
		for i, p := range ps {
			if ps[i], err = boundedTrimmed("purposes."+strconv.Itoa(i), p, 512); err != nil {
				return CapabilityConstraints{}, err
			}
		}
		out.Purposes = ps
	}
	var nb, ex int64
	for _, k := range []string{"notBefore", "expiresAt"} {
		s, ok, err := valueStr(m, k, false)
		if err != nil {
			return CapabilityConstraints{}, err
		}
		if !ok {
			continue
		}
		ms, err := ParseTimestamp(s)
		if err != nil {
			return CapabilityConstraints{}, contractErr(k, "must be an RFC 3339 date-time with an offset")
		}
		if k == "notBefore" {
			out.NotBefore, nb = s, ms
		} else {
			out.ExpiresAt, ex = s, ms
		}
	}
	if n, ok, err := valueInt(m, "maxUses"); err != nil {
		return CapabilityConstraints{}, err
	} else if ok {
		if n < 1 {
			return CapabilityConstraints{}, contractErr("maxUses", "must be a positive integer")
		}
		out.MaxUses = &n
	}
	if n, ok, err := valueInt(m, "delegationDepth"); err != nil {
		return CapabilityConstraints{}, err
	} else if ok {
		if n < 0 {
			return CapabilityConstraints{}, contractErr("delegationDepth", "must be a non-negative integer")
		}
		out.DelegationDepth = &n
	}
	if out.NotBefore != "" && out.ExpiresAt != "" && nb > ex {
		return CapabilityConstraints{}, contractErr("notBefore", "is after expiresAt")
	}
	return out, nil
}

// DecodeGrantValue applies the strict grant contract to a decoded JSON value
// (map[string]any with []any, string, json.Number, bool and nil inside) — exactly what
// CapabilityGrant's UnmarshalJSON enforces. Errors are *ContractError with the field path.
func DecodeGrantValue(v any) (CapabilityGrant, error) {
	m, err := valueObject(v, grantKeys...)
	if err != nil {
		return CapabilityGrant{}, err
	}
	var out CapabilityGrant
	if out.ID, _, err = valueIdent(m, "id", true); err != nil {
		return CapabilityGrant{}, err
	}
	if out.NamespaceID, _, err = valueIdent(m, "namespaceId", true); err != nil {
		return CapabilityGrant{}, err
	}
	for _, k := range []string{"subject", "issuer"} {
		av, has := m[k]
		if !has {
			return CapabilityGrant{}, contractErr(k, "is required")
		}
		a, err := addressFromValue(av)
		if err != nil {
			return CapabilityGrant{}, prefixErr(k, err)
		}
		if k == "subject" {
			out.Subject = a
		} else {
			out.Issuer = a
		}
	}
	cv, has := m["capabilities"]
	if !has {
		return CapabilityGrant{}, contractErr("capabilities", "is required")
	}
	caps, isArr := cv.([]any)
	if !isArr {
		return CapabilityGrant{}, contractErr("capabilities", "must be an array")
	}
	if len(caps) < 1 || len(caps) > 64 {
		return CapabilityGrant{}, contractErr("capabilities", "must list 1 to 64 capabilities")
	}
	out.Capabilities = make([]Capability, len(caps))
	for i, c := range caps {
		if out.Capabilities[i], err = capabilityFromValue(c); err != nil {
			return CapabilityGrant{}, prefixErr("capabilities."+strconv.Itoa(i), err)
		}
	}
	kv, has := m["constraints"]
	if !has {
		return CapabilityGrant{}, contractErr("constraints", "is required (it may be {})")
	}
	if out.Constraints, err = constraintsFromValue(kv); err != nil {
		return CapabilityGrant{}, prefixErr("constraints", err)
	}
	for _, k := range []string{"issuedAt", "revokedAt"} {
		s, ok, err := valueStr(m, k, k == "issuedAt")
		if err != nil {
			return CapabilityGrant{}, err
		}
		if !ok {
			continue
		}
		if _, err := ParseTimestamp(s); err != nil {
			return CapabilityGrant{}, contractErr(k, "must be an RFC 3339 date-time with an offset")
		}
		if k == "issuedAt" {
			out.IssuedAt = s
		} else {
			out.RevokedAt = s
		}
	}
	if p, ok, err := valueIdent(m, "parentGrantId", false); err != nil {
		return CapabilityGrant{}, err
	} else if ok {
		if p == out.ID {
			return CapabilityGrant{}, contractErr("parentGrantId", "must differ from id")
		}
		out.ParentGrantID = p
	}
	if mv, has := m["metadata"]; has {
		md, isObj := mv.(map[string]any)
		if !isObj {
			return CapabilityGrant{}, contractErr("metadata", "must be a JSON object")
		}
		out.Metadata = md
	}
	return out, nil
}
