package kernel

import "encoding/json"

// DecodeRequirement decodes a strict CapabilityRequirement document (the body of
// POST /v1/authorize): no key twice at any depth (CheckDuplicateKeys), then
// CapabilityRequirement's own rules (UnmarshalJSON). The common document — an object of
// exactly "resource" {"namespace", "path"} and "action", whose strings are printable
// ASCII without escapes — is read by one scan of the bytes (decodeRequirementFast: no
// reflection, no intermediate maps); anything else, and any document the rules refuse,
// goes the general way, so the result and the refusals are the same either way
// (TestDecodeRequirementFastAgreesWithUnmarshal, FuzzDecodeRequirementFast).
func DecodeRequirement(body []byte) (CapabilityRequirement, error) {
	if r, ok := decodeRequirementFast(body); ok {
		return r, nil
	}
	var r CapabilityRequirement
	if err := CheckDuplicateKeys(body); err != nil {
		return CapabilityRequirement{}, err
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return CapabilityRequirement{}, err
	}
	return r, nil
}

// decodeRequirementFast reads the common form of a requirement; ok is false for any
// other document (which may still be valid) and for one the rules refuse.
func decodeRequirementFast(b []byte) (CapabilityRequirement, bool) {
	var r CapabilityRequirement
	p := reqScanner{b: b}
	var haveRes, haveAction bool
	var action string
	ok := p.object(func(key string) bool {
		switch key {
		case "resource":
			if haveRes {
				return false
			}
			haveRes = true
			return p.resource(&r.Resource)
		case "action":
			if haveAction {
				return false
			}
			haveAction = true
			var ok bool
			action, ok = p.str()
			return ok
		}
		return false
	})
	p.ws()
	if !ok || p.i != len(b) || !haveRes || !haveAction {
		return CapabilityRequirement{}, false
	}
	a, err := boundedTrimmed("action", action, 128)
	if err != nil {
		return CapabilityRequirement{}, false
	}
	r.Action = a
	return r, true
}

// reqScanner scans the common form of a requirement document.
type reqScanner struct {
	b []byte
	i int
}

func (p *reqScanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *reqScanner) byte(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string of printable ASCII without escapes.
func (p *reqScanner) str() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := string(p.b[start:p.i])
			p.i++
			return s, true
		}
		if c < 0x20 || c > 0x7e || c == '\\' {
			return "", false
		}
		p.i++
	}
	return "", false
}

// object reads an object, calling member after each key and its colon (member reads
// the value); an empty object is refused (not the common form).
func (p *reqScanner) object(member func(key string) bool) bool {
	if !p.byte('{') {
		return false
	}
	for {
		k, ok := p.str()
		if !ok || !p.byte(':') || !member(k) {
			return false
		}
		if p.byte(',') {
			continue
		}
		return p.byte('}')
	}
}

// resource reads {"namespace": string, "path": [string, …]} (each once, both present, no
// other key) and applies ResourceRef's rules.
func (p *reqScanner) resource(r *ResourceRef) bool {
	var haveNS, havePath bool
	var ns string
	var path []string
	ok := p.object(func(key string) bool {
		switch key {
		case "namespace":
			if haveNS {
				return false
			}
			haveNS = true
			var ok bool
			ns, ok = p.str()
			return ok
		case "path":
			if havePath {
				return false
			}
			havePath = true
			if !p.byte('[') {
				return false
			}
			path = []string{}
			if p.byte(']') {
				return true
			}
			for {
				s, ok := p.str()
				if !ok {
					return false
				}
				path = append(path, s)
				if p.byte(',') {
					continue
				}
				return p.byte(']')
			}
		}
		return false
	})
	if !ok || !haveNS || !havePath {
		return false
	}
	t, err := identifier("namespace", ns)
	if err != nil || ValidatePath(path) != nil {
		return false
	}
	r.Namespace, r.Path = t, path
	return true
}
