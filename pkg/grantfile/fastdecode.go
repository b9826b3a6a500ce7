package grantfile

import (
	"strconv"
	"strings"

	"github.com/sharedos/sharedos/internal/jscompat"
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
func fastGrant(gn *node, world string, a *grantAlloc) (g kernel.CapabilityGrant, noIssuedAt bool, ok bool) {
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
			g.ID, haveID = jsTrim(v.s), true
		case "namespaceId":
			if v.kind != kStr {
				return g, false, false
			}
			g.NamespaceID, haveNS = jsTrim(v.s), true
		case "subject", "issuer":
			addr, ok := fastAddress(v)
			if !ok {
				return g, false, false
			}
			if k == "subject" {
				g.Subject, haveSubject = addr, true
			} else {
				g.Issuer, haveIssuer = addr, true
			}
		case "capabilities":
			if v.kind != kArr {
				return g, false, false
			}
			g.Capabilities = a.caps(len(v.kids))
			for j, c := range v.kids {
				if !fastCapability(c, &g.Capabilities[j], a) {
					return g, false, false
				}
			}
			haveCaps = true
		case "constraints":
			if !fastConstraints(v, &g.Constraints, a) {
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
			if g.ParentGrantID = jsTrim(v.s); g.ParentGrantID == "" {
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
		a.ID = jsTrim(id.s)
		return a, true
	}
	return kernel.Address{}, false
}

func fastStrings(v *node, trim bool, a *grantAlloc) ([]string, bool) {
	if v.kind != kArr {
		return nil, false
	}
	out := a.strs(len(v.kids))
	for i, e := range v.kids {
		if e.kind != kStr {
			return nil, false
		}
		out[i] = e.s
		if trim {
			out[i] = jsTrim(e.s)
		}
	}
	return out, true
}

func fastCapability(c *node, out *kernel.Capability, al *grantAlloc) bool {
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
					out.Resource.Namespace, haveNS = jsTrim(rv.s), true
				case "path":
					p, ok := fastStrings(rv, false, al)
					if !ok {
						return false
					}
					out.Resource.Path, havePath = p, true
				case "owner":
					a, ok := fastAddress(rv)
					if !ok {
						return false
					}
					out.Resource.Owner = al.addr(a)
				default:
					return false
				}
			}
			if !havePath || !haveNS {
				return false
			}
			haveRes = true
		case "actions":
			acts, ok := fastStrings(v, true, al)
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

func fastConstraints(v *node, out *kernel.CapabilityConstraints, a *grantAlloc) bool {
	if v.kind != kObj {
		return false
	}
	for i, k := range v.keys {
		c := v.kids[i]
		switch k {
		case "purposes":
			ps, ok := fastStrings(c, true, a)
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
				out.MaxUses = a.int(n)
			} else {
				out.DelegationDepth = a.int(n)
			}
		default:
			return false
		}
	}
	return true
}

// grantAlloc cuts the small slices and pointers of decoded grants from slabs
// (capacity-limited, so an append never reaches a neighbour): a thousand grants cost a
// few allocations, not several thousand. Nothing is reused: a failed decode just leaves
// its pieces unused.
type grantAlloc struct {
	strSlab  []string
	capSlab  []kernel.Capability
	addrSlab []kernel.Address
	intSlab  []int64
}

const allocSlab = 1024

func (a *grantAlloc) strs(n int) []string {
	if n == 0 {
		return []string{} // empty, never nil: "path: []" is not an absent path
	}
	if len(a.strSlab) < n {
		a.strSlab = make([]string, max(n, 4*allocSlab))
	}
	out := a.strSlab[:n:n]
	a.strSlab = a.strSlab[n:]
	return out
}

func (a *grantAlloc) caps(n int) []kernel.Capability {
	if n == 0 {
		return []kernel.Capability{}
	}
	if len(a.capSlab) < n {
		a.capSlab = make([]kernel.Capability, max(n, allocSlab))
	}
	out := a.capSlab[:n:n]
	a.capSlab = a.capSlab[n:]
	return out
}

func (a *grantAlloc) addr(v kernel.Address) *kernel.Address {
	if len(a.addrSlab) == 0 {
		a.addrSlab = make([]kernel.Address, allocSlab)
	}
	p := &a.addrSlab[0]
	a.addrSlab = a.addrSlab[1:]
	*p = v
	return p
}

func (a *grantAlloc) int(v int64) *int64 {
	if len(a.intSlab) == 0 {
		a.intSlab = make([]int64, allocSlab)
	}
	p := &a.intSlab[0]
	a.intSlab = a.intSlab[1:]
	*p = v
	return p
}

// jsTrim is jscompat.JSTrim, skipped when s cannot hold surrounding white space (it starts
// and ends with a visible ASCII character).
func jsTrim(s string) string {
	if n := len(s); n > 0 && s[0] > ' ' && s[0] < 0x7f && s[n-1] > ' ' && s[n-1] < 0x7f {
		return s
	}
	return jscompat.JSTrim(s)
}
