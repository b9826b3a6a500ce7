package kernel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"reflect"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
)

// DefaultMaxGrants is how many grants one context may resolve before the kernel refuses
// with authority_unavailable (grant_limit_exceeded). The reference allows 256; our CLI
// (spec 40 §7) allows 10,000 by default and makes it configurable.
const DefaultMaxGrants = 10000

// compiledGrant is a validated grant with its instants parsed once.
type compiledGrant struct {
	g                                  *CapabilityGrant
	issuedAt, notBefore, expiresAt     int64
	revokedAt                          int64
	hasNotBefore, hasExpires, hasRevok bool
	bad                                bool // a timestamp did not parse: the grant is never active
}

func compileGrant(g *CapabilityGrant) compiledGrant {
	c := compiledGrant{g: g}
	var err error
	if c.issuedAt, err = ParseTimestamp(g.IssuedAt); err != nil {
		c.bad = true
	}
	if g.Constraints.NotBefore != "" {
		c.hasNotBefore = true
		if c.notBefore, err = ParseTimestamp(g.Constraints.NotBefore); err != nil {
			c.bad = true
		}
	}
	if g.Constraints.ExpiresAt != "" {
		c.hasExpires = true
		if c.expiresAt, err = ParseTimestamp(g.Constraints.ExpiresAt); err != nil {
			c.bad = true
		}
	}
	if g.RevokedAt != "" {
		c.hasRevok = true
		if c.revokedAt, err = ParseTimestamp(g.RevokedAt); err != nil {
			c.bad = true
		}
	}
	return c
}

// active applies the time rules (ADR 0016): the clock may only remove authority. Expiry is
// judged at the later of the admitted and operation instants; issuance, notBefore and
// revocation only at the admitted instant, so they take effect at the next turn.
func (c *compiledGrant) active(admitted, opNow int64) bool {
	if c.bad || c.issuedAt > admitted {
		return false
	}
	if c.hasNotBefore && admitted < c.notBefore {
		return false
	}
	if c.hasExpires && max(admitted, opNow) >= c.expiresAt {
		return false
	}
	if c.hasRevok && admitted >= c.revokedAt {
		return false
	}
	return true
}

// activeAt is active, and also active at the wall-clock instant wall when wall is set
// (non-zero): a host whose turn instant is pinned (--now) may remove authority with it,
// never add any — a grant that has expired, been revoked, or is not yet issued by the
// wall clock stays refused whatever the pinned instant says.
func (c *compiledGrant) activeAt(admitted, opNow, wall int64) bool {
	return c.active(admitted, opNow) && (wall == 0 || c.active(wall, wall))
}

func (c *compiledGrant) purposeOK(purpose string) bool {
	ps := c.g.Constraints.Purposes
	if ps == nil {
		return true
	}
	return slices.Contains(ps, purpose)
}

// pathNode is one node of a per-(resource namespace, action) path trie. exact and desc
// hold the indices of grants with a capability of that scope at exactly this path.
type pathNode struct {
	children    map[string]*pathNode
	exact, desc []int32
}

func (n *pathNode) child(seg string) *pathNode {
	if n.children == nil {
		n.children = make(map[string]*pathNode)
	}
	c := n.children[seg]
	if c == nil {
		c = &pathNode{}
		n.children[seg] = c
	}
	return c
}

func appendUnique(list []int32, idx int32) []int32 {
	if len(list) > 0 && list[len(list)-1] == idx {
		return list
	}
	return append(list, idx)
}

// actionIndex holds the grants with a capability for one (resource namespace, action):
// all of them in source order (what discovery on a root bound needs), and a path trie
// built on first use by a request with a path.
type actionIndex struct {
	all  []int32
	once sync.Once
	trie *pathNode
	// scans counts the lookups answered by scanning all (the first trieAfter; the result
	// is the trie's): a short-lived process decides once or twice and never needs the
	// trie; a long-lived one builds it at its trieAfter+1-th lookup.
	scans atomic.Int32
}

// trieAfter is how many path lookups of one (namespace, action) scan the grants before
// the path trie is built.
const trieAfter = 4

// scan appends the grants the trie would give for path (see candidates): those with a
// capability in ns for action whose path is a proper prefix of path with a descendants
// scope or, when subtree, is path or below it (any scope), else is exactly path.
func (x *actionIndex) scan(a *Authority, ns, action string, path []string, subtree bool, out []int32) []int32 {
	for _, gi := range x.all {
		for _, c := range a.grants[gi].g.Capabilities {
			if c.Resource.Namespace != ns || !slices.Contains(c.Actions, action) {
				continue
			}
			cp := c.Resource.Path
			n := min(len(cp), len(path))
			if !slices.Equal(cp[:n], path[:n]) {
				continue
			}
			if len(cp) < len(path) && c.Scope != ScopeExact || len(cp) == len(path) || subtree && len(cp) > len(path) {
				out = append(out, gi)
				break
			}
		}
	}
	return out
}

func (x *actionIndex) root(a *Authority, ns, action string) *pathNode {
	x.once.Do(func() {
		root := &pathNode{}
		for _, gi := range x.all {
			for _, c := range a.grants[gi].g.Capabilities {
				if c.Resource.Namespace != ns || !slices.Contains(c.Actions, action) {
					continue
				}
				n := root
				for _, seg := range c.Resource.Path {
					n = n.child(seg)
				}
				if c.Scope == ScopeExact {
					n.exact = appendUnique(n.exact, gi)
				} else {
					n.desc = appendUnique(n.desc, gi)
				}
			}
		}
		x.trie = root
	})
	return x.trie
}

type nsIndex struct {
	byAction map[string]*actionIndex // literal actions, and "*" for the wildcard
}

// Authority is the validated, indexed set of grants resolved for one context: the
// authority one turn runs under. It is immutable once built and safe for concurrent use.
//
// Grants are indexed by resource namespace, then action, then path, so the cost of a
// decision depends on the grants that could match, not on how many the set holds.
type Authority struct {
	unavailable string // internal outage code; "" when the grants loaded
	grants      []compiledGrant
	index       map[string]*nsIndex

	hashOnce sync.Once
	hash     string
}

// Unavailable returns the internal outage code (grant_source_failed, …) when the grants
// could not be loaded, or "" when they were.
func (a *Authority) Unavailable() string { return a.unavailable }

// GrantCount is how many grants were resolved.
func (a *Authority) GrantCount() int { return len(a.grants) }

// Grants returns the resolved grants in source order.
func (a *Authority) Grants() []*CapabilityGrant {
	out := make([]*CapabilityGrant, len(a.grants))
	for i := range a.grants {
		out[i] = a.grants[i].g
	}
	return out
}

// GrantIDs returns the sorted ids of the resolved grants.
func (a *Authority) GrantIDs() []string {
	ids := make([]string, len(a.grants))
	for i := range a.grants {
		ids[i] = a.grants[i].g.ID
	}
	sort.Strings(ids)
	return ids
}

// Grant returns the resolved grant with id, or nil.
func (a *Authority) Grant(id string) *CapabilityGrant {
	for i := range a.grants {
		if a.grants[i].g.ID == id {
			return a.grants[i].g
		}
	}
	return nil
}

// Hash is hex(SHA-256(canonicalJSON(sorted canonical JSON of each grant))): the identity
// of this authority in audit records. It is computed on first use.
func (a *Authority) Hash() string {
	a.hashOnce.Do(func() { a.hash = authorityHash(a.grants) })
	return a.hash
}

// UnavailableAuthority is an authority whose grants could not be loaded; every decision
// against it is authority_unavailable.
func UnavailableAuthority(code string) *Authority { return &Authority{unavailable: code} }

// ResolveAuthority loads the grants of actx from src and validates and indexes them. It
// never returns an error: an outage yields an unavailable Authority (fail-closed).
// maxGrants <= 0 means DefaultMaxGrants.
func ResolveAuthority(ctx context.Context, src GrantSource, actx AccessContext, maxGrants int) *Authority {
	if src == nil {
		return UnavailableAuthority(AuthorityGrantSourceFailed)
	}
	if ss, ok := src.(SnapshotGrantSource); ok {
		snap, err := ss.LoadGrantSnapshot(ctx, actx)
		if err != nil {
			return UnavailableAuthority(AuthorityGrantSourceFailed)
		}
		a := NewAuthority(snap.Grants, actx, maxGrants)
		if a.unavailable == "" && snap.Hash != "" {
			a.hashOnce.Do(func() { a.hash = snap.Hash })
		}
		return a
	}
	grants, err := src.LoadGrants(ctx, actx)
	if err != nil {
		return UnavailableAuthority(AuthorityGrantSourceFailed)
	}
	return NewAuthority(grants, actx, maxGrants)
}

// authorityCache keeps the authorities the kernel built from snapshot sources, so that a
// new turn over an unchanged snapshot (an MCP session begins a turn per call) reuses the
// validated, indexed set instead of validating and indexing every grant again. An entry
// is reused only when the snapshot has the same hash, scope and limit, and lists the same
// grant ids in the same order (a cheap check against a source whose hash does not follow
// its content); the kernel validated the grants itself when it built the entry.
type authorityCache struct {
	mu      sync.Mutex
	entries []cachedAuthority // most recent last
}

type cachedAuthority struct {
	key  authorityKey
	ids  []string
	auth *Authority
}

type authorityKey struct {
	hash                string
	world               string
	actor, authority    Address
	maxGrants, hashSize int
}

const authorityCacheSize = 8

func (c *authorityCache) get(key authorityKey, grants []CapabilityGrant) *Authority {
	// The candidates are copied under the lock and their ids compared outside it: the
	// comparison is O(grants) (1,000 on serve's bench) and every request of every
	// session makes it, so holding the lock across it convoyed concurrent requests. An
	// entry's ids are never changed once put.
	var cands [authorityCacheSize]cachedAuthority
	n := 0
	c.mu.Lock()
	for i := len(c.entries) - 1; i >= 0; i-- {
		if e := &c.entries[i]; e.key == key && len(e.ids) == len(grants) {
			cands[n] = *e
			n++
		}
	}
	c.mu.Unlock()
	for _, e := range cands[:n] {
		same := true
		for j := range grants {
			if grants[j].ID != e.ids[j] {
				same = false
				break
			}
		}
		if same {
			return e.auth
		}
	}
	return nil
}

func (c *authorityCache) put(key authorityKey, a *Authority) {
	ids := make([]string, len(a.grants))
	for i := range a.grants {
		ids[i] = a.grants[i].g.ID
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) == authorityCacheSize {
		c.entries = append(c.entries[:0], c.entries[1:]...)
	}
	c.entries = append(c.entries, cachedAuthority{key: key, ids: ids, auth: a})
}

// resolveAuthority is ResolveAuthority with the kernel's per-snapshot cache.
func (k *Kernel) resolveAuthority(ctx context.Context, actx AccessContext) *Authority {
	k.adoptPending()
	ss, ok := k.cfg.Grants.(SnapshotGrantSource)
	if !ok {
		return ResolveAuthority(ctx, k.cfg.Grants, actx, k.cfg.MaxGrants)
	}
	snap, err := ss.LoadGrantSnapshot(ctx, actx)
	if err != nil {
		return UnavailableAuthority(AuthorityGrantSourceFailed)
	}
	if snap.Hash == "" {
		return NewAuthority(snap.Grants, actx, k.cfg.MaxGrants)
	}
	key := snapshotAuthorityKey(snap, actx, k.cfg.MaxGrants)
	if a := k.auths.get(key, snap.Grants); a != nil {
		return a
	}
	a := newSnapshotAuthority(snap, actx, k.cfg.MaxGrants)
	if a.unavailable == "" {
		k.auths.put(key, a)
	}
	return a
}

func snapshotAuthorityKey(snap GrantSnapshot, actx AccessContext, maxGrants int) authorityKey {
	return authorityKey{hash: snap.Hash, world: actx.World, actor: actx.Actor, authority: actx.Authority,
		maxGrants: maxGrants, hashSize: len(snap.Grants)}
}

// newSnapshotAuthority validates and indexes a snapshot's grants and takes its hash.
func newSnapshotAuthority(snap GrantSnapshot, actx AccessContext, maxGrants int) *Authority {
	a := NewAuthority(snap.Grants, actx, maxGrants)
	if a.unavailable == "" {
		a.hashOnce.Do(func() { a.hash = snap.Hash })
	}
	return a
}

// PreparedAuthority is the authority of one context resolved from a snapshot grant
// source before the kernel that will use it exists (PrepareAuthority), so that a host
// can validate and index the grants while it opens its other ports.
type PreparedAuthority struct {
	src  SnapshotGrantSource
	key  authorityKey
	auth *Authority
}

// PrepareAuthority resolves the authority of actx from src exactly as the first turn of
// a kernel with Config.Grants src and Config.MaxGrants maxGrants would: the grants are
// loaded, validated against the contract and indexed by the kernel's own code. It
// returns nil when there is nothing to prepare (src is not a SnapshotGrantSource, its
// snapshot carries no hash, or it failed or was refused: the turn then resolves, and
// fails, on its own).
func PrepareAuthority(ctx context.Context, src GrantSource, actx AccessContext, maxGrants int) *PreparedAuthority {
	ss, ok := src.(SnapshotGrantSource)
	if !ok {
		return nil
	}
	snap, err := ss.LoadGrantSnapshot(ctx, actx)
	if err != nil || snap.Hash == "" {
		return nil
	}
	a := newSnapshotAuthority(snap, actx, maxGrants)
	if a.unavailable != "" {
		return nil
	}
	return &PreparedAuthority{src: ss, key: snapshotAuthorityKey(snap, actx, maxGrants), auth: a}
}

// Authority returns the prepared authority.
func (p *PreparedAuthority) Authority() *Authority { return p.auth }

// AdoptAuthority puts a prepared authority into the kernel's per-snapshot cache, where a
// turn over the same snapshot, context and limit finds it (the turn still loads its
// snapshot and checks it lists the same grant ids, as for any cached authority). It
// reports whether it was adopted: only an authority prepared from this kernel's own
// grant source (Config.Grants, the same value) and grant limit is.
func (k *Kernel) AdoptAuthority(p *PreparedAuthority) bool {
	if p == nil || p.key.maxGrants != k.cfg.MaxGrants {
		return false
	}
	if ss, ok := k.cfg.Grants.(SnapshotGrantSource); !ok || !sameSource(ss, p.src) {
		return false
	}
	k.auths.put(p.key, p.auth)
	return true
}

// AdoptAuthorityLater is AdoptAuthority for an authority still being prepared: get is
// called once, by the first turn that resolves its authority (and not at all when none
// does), and what it returns is adopted before that turn looks in the cache.
func (k *Kernel) AdoptAuthorityLater(get func() *PreparedAuthority) {
	k.mu.Lock()
	k.pending = append(k.pending, get)
	k.mu.Unlock()
}

// adoptPending adopts the authorities AdoptAuthorityLater announced.
func (k *Kernel) adoptPending() {
	k.mu.Lock()
	pending := k.pending
	k.pending = nil
	k.mu.Unlock()
	for _, get := range pending {
		k.AdoptAuthority(get())
	}
}

// sameSource compares two sources as values; values of a type that is not comparable
// are never the same source.
func sameSource(a, b SnapshotGrantSource) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// HashGrants is the authority hash of a grant list (see Authority.Hash); snapshot
// sources use it to compute the hash once per snapshot.
func HashGrants(grants []CapabilityGrant) string {
	compiled := make([]compiledGrant, len(grants))
	for i := range grants {
		compiled[i] = compiledGrant{g: &grants[i]}
	}
	return authorityHash(compiled)
}

// NewAuthority validates grants against the contract and the context's scope and builds
// the index. Any invalid grant makes the whole set unavailable (invalid_grant_material);
// a grant for another world, subject or issuer makes it grant_scope_mismatch; more than
// maxGrants makes it grant_limit_exceeded.
func NewAuthority(grants []CapabilityGrant, actx AccessContext, maxGrants int) *Authority {
	if maxGrants <= 0 {
		maxGrants = DefaultMaxGrants
	}
	if len(grants) > maxGrants {
		return UnavailableAuthority(AuthorityGrantLimitExceeded)
	}
	a := &Authority{grants: make([]compiledGrant, len(grants)), index: make(map[string]*nsIndex)}
	for i := range grants {
		g := &grants[i]
		if err := g.Validate(); err != nil {
			return UnavailableAuthority(AuthorityInvalidGrantMaterial)
		}
		a.grants[i] = compileGrant(g)
	}
	for i := range grants {
		g := &grants[i]
		if g.NamespaceID != actx.World || g.Subject != actx.Actor || g.Issuer != actx.Authority {
			return UnavailableAuthority(AuthorityGrantScopeMismatch)
		}
	}
	for i := range grants {
		idx := int32(i)
		for _, c := range grants[i].Capabilities {
			ns := a.index[c.Resource.Namespace]
			if ns == nil {
				ns = &nsIndex{byAction: make(map[string]*actionIndex)}
				a.index[c.Resource.Namespace] = ns
			}
			for _, act := range c.Actions {
				x := ns.byAction[act]
				if x == nil {
					x = &actionIndex{}
					ns.byAction[act] = x
				}
				x.all = appendUnique(x.all, idx)
			}
		}
	}
	return a
}

// candidates returns, in source order, the indices of the grants that have a capability
// in the request's resource namespace for its action (or "*") whose path could match.
// discovery selects the intersection rule of a declared bound.
func (a *Authority) candidates(req *CapabilityRequirement, discovery bool, buf []int32) []int32 {
	ns := a.index[req.Resource.Namespace]
	if ns == nil {
		return buf
	}
	keys := [2]string{WildcardAction, req.Action}
	n := 2
	if req.Action == WildcardAction {
		n = 1
	}
	out := buf
	for _, key := range keys[:n] {
		x := ns.byAction[key]
		if x == nil {
			continue
		}
		if discovery && len(req.Resource.Path) == 0 {
			out = append(out, x.all...)
			continue
		}
		if x.scans.Load() < trieAfter && x.scans.Add(1) <= trieAfter {
			out = x.scan(a, req.Resource.Namespace, key, req.Resource.Path, discovery, out)
			continue
		}
		node := x.root(a, req.Resource.Namespace, key)
		found := true
		for _, seg := range req.Resource.Path {
			out = append(out, node.desc...)
			c := node.children[seg]
			if c == nil {
				found = false
				break
			}
			node = c
		}
		if !found {
			continue
		}
		if discovery {
			out = collectSubtree(node, out)
		} else {
			out = append(out, node.exact...)
			out = append(out, node.desc...)
		}
	}
	if len(out) > 1 {
		slices.Sort(out)
		out = slices.Compact(out)
	}
	return out
}

func collectSubtree(n *pathNode, out []int32) []int32 {
	out = append(out, n.exact...)
	out = append(out, n.desc...)
	for _, c := range n.children {
		out = collectSubtree(c, out)
	}
	return out
}

// authorityHash computes the hash of Authority.Hash: each grant's canonical JSON goes
// into an arena, the parts are sorted and then streamed, escaped as the elements of a
// JSON array, straight into SHA-256. (Sharing the work with a second goroutine from 512
// grants on was measured: no faster at 1,000 grants, twice the memory; not kept.)
func authorityHash(grants []compiledGrant) string {
	var p hashPart
	p.canonicalize(grants)
	parts := p.sorted()
	h := sha256.New()
	var out bytes.Buffer
	out.Grow(64 << 10)
	out.WriteByte('[')
	escapeParts(&out, parts, true, h)
	out.WriteByte(']')
	h.Write(out.Bytes())
	return hex.EncodeToString(h.Sum(nil))
}

// hashPart is the canonical JSON of some grants, cut from blocks of hashBlock bytes: a
// single arena that doubles as it grows would allocate (and fault in) about twice the
// bytes and copy them once more, which for 10,000 grants is most of the hash's cost.
type hashPart struct {
	parts [][]byte
}

// hashBlock is the size of one block of canonical JSON (a grant larger than a block gets
// a block of its own).
const hashBlock = 256 << 10

func (p *hashPart) canonicalize(grants []compiledGrant) {
	var scratch bytes.Buffer
	var block []byte
	p.parts = make([][]byte, len(grants))
	for i := range grants {
		scratch.Reset()
		canonicalGrant(&scratch, grants[i].g)
		n := scratch.Len()
		if n > cap(block)-len(block) {
			block = make([]byte, 0, max(hashBlock, n))
		}
		start := len(block)
		block = append(block, scratch.Bytes()...)
		p.parts[i] = block[start:len(block):len(block)]
	}
}

func (p *hashPart) sorted() [][]byte {
	slices.SortFunc(p.parts, bytes.Compare)
	return p.parts
}

// escapeParts writes parts as JSON strings separated by commas (a comma before the first
// too unless first), handing the buffer to h whenever it grows past 60 KiB (h nil: the
// buffer keeps everything).
func escapeParts(out *bytes.Buffer, parts [][]byte, first bool, h hash.Hash) {
	for i, part := range parts {
		if i > 0 || !first {
			out.WriteByte(',')
		}
		writeJSBytes(out, part)
		if h != nil && out.Len() > 60<<10 {
			h.Write(out.Bytes())
			out.Reset()
		}
	}
}
