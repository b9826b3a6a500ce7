package grantfile

import (
	"strconv"
	"strings"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// fastGrant decodes the grant node gn straight into a grant — the loader's defaults
// applied (namespaceId = world, constraints = {}, issuedAt = the epoch; noIssuedAt says
// whether it was absent) and every string trimmed as the kernel's strict decoder trims
// it — without building the generic JSON value kernel.DecodeGrantValue takes. It returns
// ok=false for any node it does not read exactly as that decoder would (an unknown key,
// a wrong kind, an empty string where the decoder would refuse it, …); the caller then
// takes the decoder's path, which also words every refusal. A grant it returns must
// still pass the kernel's Validate before it is used; FuzzFastGrant holds the pair to
// the decoder's result.
func fastGrant(gn *node, world string) (g kernel.CapabilityGrant, noIssuedAt bool, ok bool) {
	if gn.kind != kObj {
		return g, false, false
	}
	var haveID, haveNS, haveSubject, haveIssuer, haveCaps, haveIssued bool
	for i, k := range gn.keys {
		v := gn.kids[i]
		switch k {
		case "id":
			if v.kind != kStr {
				return g, false, false
			}
			g.ID, haveID = kernel.JSTrim(v.s), true
		case "namespaceId":
			if v.kind != kStr {
				return g, false, false
			}
			g.NamespaceID, haveNS = kernel.JSTrim(v.s), true
		case "subject", "issuer":
			a, ok := fastAddress(v)
			if !ok {
				return g, false, false
			}
			if k == "subject" {
				g.Subject, haveSubject = a, true
			} else {
				g.Issuer, haveIssuer = a, true
			}
		case "capabilities":
			if v.kind != kArr {
				return g, false, false
			}
			g.Capabilities = make([]kernel.Capability, len(v.kids))
			for j, c := range v.kids {
				if !fastCapability(c, &g.Capabilities[j]) {
					return g, false, false
				}
			}
			haveCaps = true
		case "constraints":
			if !fastConstraints(v, &g.Constraints) {
				return g, false, false
			}
		case "issuedAt", "revokedAt":
			if v.kind != kStr || v.s == "" {
				return g, false, false
			}
			if k == "issuedAt" {
				g.IssuedAt, haveIssued = v.s, true
			} else {
				g.RevokedAt = v.s
			}
		case "parentGrantId":
			if v.kind != kStr {
				return g, false, false
			}
			if g.ParentGrantID = kernel.JSTrim(v.s); g.ParentGrantID == "" {
				return g, false, false
			}
		case "metadata":
			if v.kind != kObj {
				return g, false, false
			}
			g.Metadata = nodeValue(v).(map[string]any)
		default:
			return g, false, false
		}
	}
	if !haveID || !haveSubject || !haveIssuer || !haveCaps {
		return g, false, false
	}
	if !haveNS {
		g.NamespaceID = world
	}
	if !haveIssued {
		g.IssuedAt = EpochIssuedAt
	}
	return g, !haveIssued, true
}

// fastAddress reads the kind:id shorthand or the object form.
func fastAddress(v *node) (kernel.Address, bool) {
	switch v.kind {
	case kStr:
		if strings.HasPrefix(strings.TrimSpace(v.s), "{") {
			return kernel.Address{}, false
		}
		a, err := kernel.ParseAddress(v.s)
		return a, err == nil
	case kObj:
		if len(v.keys) != 2 {
			return kernel.Address{}, false
		}
		kindNode, _ := v.get("kind")
		if kindNode == nil || kindNode.kind != kStr {
			return kernel.Address{}, false
		}
		a := kernel.Address{Kind: kernel.AddressKind(kindNode.s)}
		key := addressIDKey(a.Kind)
		id, _ := v.get(key)
		if key == "" || id == nil || id.kind != kStr {
			return kernel.Address{}, false
		}
		a.ID = kernel.JSTrim(id.s)
		return a, true
	}
	return kernel.Address{}, false
}

func fastStrings(v *node, trim bool) ([]string, bool) {
	if v.kind != kArr {
		return nil, false
	}
	out := make([]string, len(v.kids))
	for i, e := range v.kids {
		if e.kind != kStr {
			return nil, false
		}
		out[i] = e.s
		if trim {
			out[i] = kernel.JSTrim(e.s)
		}
	}
	return out, true
}

func fastCapability(c *node, out *kernel.Capability) bool {
	if c.kind != kObj {
		return false
	}
	var haveRes, haveActs, haveScope bool
	for i, k := range c.keys {
		v := c.kids[i]
		switch k {
		case "resource":
			if v.kind != kObj {
				return false
			}
			var havePath, haveNS bool
			for j, rk := range v.keys {
				rv := v.kids[j]
				switch rk {
				case "namespace":
					if rv.kind != kStr {
						return false
					}
					out.Resource.Namespace, haveNS = kernel.JSTrim(rv.s), true
				case "path":
					p, ok := fastStrings(rv, false)
					if !ok {
						return false
					}
					out.Resource.Path, havePath = p, true
				case "owner":
					a, ok := fastAddress(rv)
					if !ok {
						return false
					}
					out.Resource.Owner = &a
				default:
					return false
				}
			}
			if !havePath || !haveNS {
				return false
			}
			haveRes = true
		case "actions":
			acts, ok := fastStrings(v, true)
			if !ok {
				return false
			}
			out.Actions, haveActs = acts, true
		case "scope":
			if v.kind != kStr {
				return false
			}
			out.Scope, haveScope = kernel.Scope(v.s), true
		default:
			return false
		}
	}
	return haveRes && haveActs && haveScope
}

func fastConstraints(v *node, out *kernel.CapabilityConstraints) bool {
	if v.kind != kObj {
		return false
	}
	for i, k := range v.keys {
		c := v.kids[i]
		switch k {
		case "purposes":
			ps, ok := fastStrings(c, true)
			if !ok {
				return false
			}
			out.Purposes = ps
		case "notBefore", "expiresAt":
			if c.kind != kStr || c.s == "" {
				return false
			}
			if k == "notBefore" {
				out.NotBefore = c.s
			} else {
				out.ExpiresAt = c.s
			}
		case "maxUses", "delegationDepth":
			if c.kind != kNum || !plainInt(c.s) {
				return false
			}
			n, err := strconv.ParseInt(c.s, 10, 64)
			if err != nil {
				return false
			}
			if k == "maxUses" {
				out.MaxUses = &n
			} else {
				out.DelegationDepth = &n
			}
		default:
			return false
		}
	}
	return true
}
