package grantfile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/sharedos/sharedos/internal/par"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// SetOptions tune LoadSet.
type SetOptions struct {
	// CacheDir and CacheKeyFile, when both are non-empty, enable a cache of validated
	// snapshots of loaded sets, so that loading unchanged files again skips parsing.
	// Each entry is bound to the SHA-256 of every path and its exact content and
	// authenticated by an HMAC-SHA256 keyed by the secret in CacheKeyFile: an entry that
	// is missing, truncated, damaged, built from other bytes or forged (its MAC does not
	// verify) is ignored, the files are parsed, and the entry is rewritten. A failure to
	// write an entry is ignored.
	//
	// The cache is not used at all (the files are parsed; LoadSet does not fail) when
	// CacheDir is a symbolic link or not a directory, or when the key file cannot be
	// used: a symbolic link, not a regular file, accessible to group or others, or not
	// 32 bytes. A missing key file is created (mode 0600, 32 random bytes; its directory
	// 0700). Keep both outside the files plane's root, beside the state database.
	CacheDir     string
	CacheKeyFile string
	// WriteBehind writes the cache entry of a miss (and computes the authority hashes it
	// holds, and creates the key file if need be) on another goroutine: LoadSet returns
	// once the files are parsed and checked. Set.Wait waits for the write; a process
	// that exits without waiting may leave no entry (the next load parses again) or a
	// temporary file (pruned like an old entry).
	WriteBehind bool
}

// Set is several grant files loaded as one grant source: their grants concatenated in
// argument order. It is immutable and safe for concurrent use; LoadGrants, ResolveGrant
// and Files hand out deep copies (LoadGrantSnapshot shares, see there).
type Set struct {
	files []*File
	ctx   Context
	n     int // number of grants

	// The indexes are built on first use, each on its own: a command that only needs the
	// context (or none of the grants) does not pay for them, and a turn that resolves one
	// scope does not build the id index ResolveGrant uses.
	//
	// scope holds each (world, subject, issuer) scope's grants as one immutable slice,
	// shared by every LoadGrantSnapshot of the scope (a long-lived host begins a turn per
	// call; the kernel reuses its validated authority for an unchanged snapshot): a
	// scope whose grants are one contiguous run of one file (the usual grant file, written
	// for one agent) is that run of the file's own slice, capacity-limited, not a copy.
	once   sync.Once
	scope  map[scopeKey][]kernel.CapabilityGrant
	scopes []scopeKey // in order of first appearance
	idOnce sync.Once
	byID   map[string]*kernel.CapabilityGrant

	// written writes the entry of a WriteBehind load.
	written *par.Task

	// hashes holds the authority hash of each scope's grants, from the cached snapshot
	// or computed on first use (the authority hash is computed once per snapshot).
	mu     sync.Mutex
	hashes map[scopeKey]string
}

type scopeKey struct {
	world           string
	subject, issuer kernel.Address
}

var (
	_ kernel.GrantSource             = (*Set)(nil)
	_ kernel.SnapshotGrantSource     = (*Set)(nil)
	_ kernel.DelegationChainResolver = (*Set)(nil)
)

// ErrContextConflict is the cause of the error LoadSet returns when two grant files'
// context blocks set one field to different values: errors.Is(err, ErrContextConflict).
// The error is an *Error naming the second file and the field, its message naming the
// first file. It is a usage problem (no context can be chosen), not a refused grant.
var ErrContextConflict = errors.New("grant files' context blocks conflict")

// RefusedError is the error LoadSet returns when the files were read but a grant-level
// problem refuses them as a whole: a file that fails the contract (syntax, an unknown
// key, a bad grant, too large, not UTF-8) or a grant id defined twice. Err is the
// *Error naming the file, grant, field and line (errors.As(err, &*Error) still works);
// Context holds the merged context blocks (actor, owner, authority, world, purpose) of
// the files whose context block was read completely and is valid — from the same parse
// that refused them, so a caller can still name the turn's actor when reporting the
// refusal (authority_unavailable). A context confers no authority: no grant of a
// refused set is ever served.
//
// LoadSet returns neither for an unreadable file (a plain *Error whose cause is the I/O
// error, so errors.Is(err, fs.ErrNotExist) works) nor for a context conflict
// (ErrContextConflict).
type RefusedError struct {
	Err     error
	Context Context
}

// Error returns Err's message: one line naming the file.
func (e *RefusedError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *RefusedError) Unwrap() error { return e.Err }

// LoadSet loads the grant files at paths as one grant source. No paths gives an empty
// set. Refusals, in this order of precedence:
//
//   - a file that cannot be read: an *Error (cause: the I/O error);
//   - two context blocks that set one field differently (among the blocks that parsed
//     cleanly, even in files refused otherwise): an *Error wrapping ErrContextConflict;
//   - a file that fails the contract, or a grant id defined twice (within or across
//     files): a *RefusedError wrapping the *Error of the first problem in argument order.
func LoadSet(paths []string, opts SetOptions) (*Set, error) {
	var macKey []byte
	caching := opts.CacheDir != "" && opts.CacheKeyFile != "" && usableCacheDir(opts.CacheDir)
	if caching {
		macKey, _ = loadCacheKey(opts.CacheKeyFile, false) // a missing key: nothing cached yet
	}
	if macKey != nil {
		if s, ok := loadCached(paths, opts.CacheDir, macKey); ok {
			return s, nil
		}
	}
	// A miss (or no cache): the files are read once, and those very bytes are parsed
	// and digested for the entry written.
	datas := make([]string, len(paths))
	for i, p := range paths {
		data, err := readFileString(p)
		if err != nil {
			return nil, err
		}
		datas[i] = data
	}
	ps := make([]*parsed, len(paths))
	ctxs := make([]*fileContext, len(paths))
	var refused *Error
	for i, p := range paths {
		pf, fc, err := parseDirect(p, datas[i])
		if err != nil && refused == nil {
			refused = err
		}
		ps[i], ctxs[i] = pf, fc
	}
	if err := checkContexts(paths, ctxs); err != nil {
		return nil, err
	}
	if refused == nil {
		refused = checkIDs(ps)
	}
	if refused != nil {
		var merged Context
		for _, fc := range ctxs {
			if fc != nil {
				mergeContext(&merged, &fc.ctx)
			}
		}
		return nil, &RefusedError{Err: refused, Context: cloneContext(merged)}
	}
	files := make([]*File, len(ps))
	for i, p := range ps {
		files[i] = p.file
	}
	s := newSet(files)
	if !caching {
		return s, nil
	}
	write := func() {
		if macKey == nil {
			// The set loaded cleanly: only now may the key file be created.
			if macKey, _ = loadCacheKey(opts.CacheKeyFile, true); macKey == nil {
				return
			}
		}
		_ = writeCache(opts.CacheDir, macKey, cacheKey(paths, datas), files, s.allHashes())
	}
	if !opts.WriteBehind {
		write()
		return s, nil
	}
	s.written = par.Go(write)
	return s, nil
}

// loadCached serves the set from the cache when it holds an entry for the files as they
// are now. Their digest is streamed from the files on another goroutine (a hit needs no
// copy of them) while the latest entry of these paths is read, authenticated and
// decoded; that entry is used only if it carries the digest, else the entry the digest
// names is read (and becomes the latest). ok=false on a miss, and when a file cannot be
// streamed as readFile reads it: the caller reads the files and reports what is wrong.
func loadCached(paths []string, dir string, macKey []byte) (*Set, bool) {
	var d struct {
		key [32]byte
		ok  bool
	}
	digest := par.Go(func() { d.key, d.ok = streamCacheKey(paths) })
	latest, ok := readEntryAt(latestPath(dir, paths), macKey, paths)
	digest.Wait()
	if !d.ok {
		return nil, false
	}
	if ok && latest.digest == d.key {
		s := newSet(latest.files)
		s.hashes = latest.hashes
		return s, true
	}
	files, hashes, ok := readCache(dir, macKey, d.key, paths)
	if !ok {
		return nil, false
	}
	linkLatest(dir, d.key, paths)
	s := newSet(files)
	s.hashes = hashes
	return s, true
}

// Wait waits until the cache entry a SetOptions.WriteBehind load is writing is written
// (or failed), writing it itself if that has not started; it returns at once for any
// other set.
func (s *Set) Wait() {
	if s.written != nil {
		s.written.Wait()
	}
}

// checkIDs refuses a grant id defined in two files.
func checkIDs(ps []*parsed) *Error {
	if len(ps) < 2 {
		return nil // Parse refuses a duplicate within one file
	}
	type where struct {
		file int
		line int
	}
	n := 0
	for _, p := range ps {
		n += len(p.file.Grants)
	}
	ids := make(map[string]where, n)
	for fi, p := range ps {
		for gi := range p.file.Grants {
			id := p.file.Grants[gi].ID
			line := p.idLine(gi)
			if w, dup := ids[id]; dup {
				return &Error{File: p.file.Path, Grant: id, Field: "id", Line: line,
					Message: fmt.Sprintf("duplicate grant id %q: also defined in %s", id, at(ps[w.file].file.Path, w.line))}
			}
			ids[id] = where{fi, line}
		}
	}
	return nil
}

// checkContexts refuses two context blocks (nil: none, or not read) that set one field
// differently.
func checkContexts(paths []string, ctxs []*fileContext) *Error {
	type setBy struct {
		value string
		file  int
	}
	seen := map[string]setBy{}
	for fi, fc := range ctxs {
		if fc == nil {
			continue
		}
		for _, k := range contextKeys {
			v := contextField(&fc.ctx, k)
			if v == "" {
				continue
			}
			prev, ok := seen[k]
			if !ok {
				seen[k] = setBy{v, fi}
				continue
			}
			if prev.value != v {
				return &Error{File: paths[fi], Field: "context." + k, Line: fc.lines[k], cause: ErrContextConflict,
					Message: fmt.Sprintf("context.%s %q conflicts with %q in %s", k, v, prev.value, at(paths[prev.file], ctxs[prev.file].lines[k]))}
			}
		}
	}
	return nil
}

func at(file string, line int) string {
	if line > 0 {
		return fmt.Sprintf("%s:%d", file, line)
	}
	return file
}

// contextField renders one context field for comparison ("" when unset).
func contextField(c *Context, k string) string {
	addr := func(a *kernel.Address) string {
		if a == nil {
			return ""
		}
		return a.String()
	}
	switch k {
	case "world":
		return c.World
	case "actor":
		return addr(c.Actor)
	case "owner":
		return addr(c.Owner)
	case "authority":
		return addr(c.Authority)
	}
	return c.Purpose
}

func newSet(files []*File) *Set {
	s := &Set{files: files}
	for _, f := range files {
		mergeContext(&s.ctx, &f.Context)
		s.n += len(f.Grants)
	}
	return s
}

// index builds the scope table once.
func (s *Set) index() {
	s.once.Do(func() {
		// A scope is a run while all its grants so far are adjacent in one file.
		type run struct {
			file, lo, hi int
			n            int  // grants in the scope
			split        bool // not one run: its grants are copied
		}
		runs := map[scopeKey]*run{}
		var last *run // the previous grant's scope: a file's grants mostly share one
		var lastKey scopeKey
		for fi, f := range s.files {
			for i := range f.Grants {
				g := &f.Grants[i]
				k := scopeKey{g.NamespaceID, g.Subject, g.Issuer}
				if last != nil && k == lastKey && last.file == fi && last.hi == i && !last.split {
					last.n++
					last.hi++
					continue
				}
				r := runs[k]
				lastKey, last = k, r
				if r == nil {
					last = &run{file: fi, lo: i, hi: i + 1, n: 1}
					runs[k] = last
					s.scopes = append(s.scopes, k)
					continue
				}
				r.n++
				switch {
				case !r.split && r.file == fi && r.hi == i:
					r.hi++
				default:
					r.split = true
				}
			}
		}
		s.scope = make(map[scopeKey][]kernel.CapabilityGrant, len(runs))
		split := false
		for k, r := range runs {
			if !r.split {
				s.scope[k] = s.files[r.file].Grants[r.lo:r.hi:r.hi]
			}
			split = split || r.split
		}
		for _, f := range s.files {
			if !split {
				break
			}
			for i := range f.Grants {
				g := &f.Grants[i]
				k := scopeKey{g.NamespaceID, g.Subject, g.Issuer}
				if r := runs[k]; r.split {
					if s.scope[k] == nil {
						s.scope[k] = make([]kernel.CapabilityGrant, 0, r.n)
					}
					s.scope[k] = append(s.scope[k], *g)
				}
			}
		}
	})
}

// ids builds the id table once.
func (s *Set) ids() {
	s.idOnce.Do(func() {
		s.byID = make(map[string]*kernel.CapabilityGrant, s.n)
		for _, f := range s.files {
			for i := range f.Grants {
				s.byID[f.Grants[i].ID] = &f.Grants[i]
			}
		}
	})
}

// mergeContext fills the unset fields of dst from src (conflicts were refused before).
func mergeContext(dst, src *Context) {
	if dst.World == "" {
		dst.World = src.World
	}
	if dst.Purpose == "" {
		dst.Purpose = src.Purpose
	}
	if dst.Actor == nil {
		dst.Actor = src.Actor
	}
	if dst.Owner == nil {
		dst.Owner = src.Owner
	}
	if dst.Authority == nil {
		dst.Authority = src.Authority
	}
}

// Context returns the merged context of the set's files: each field as set by any file
// (they agree where several set it), unset fields empty or nil.
func (s *Set) Context() Context {
	return cloneContext(s.ctx)
}

func cloneContext(c Context) Context {
	cp := func(a *kernel.Address) *kernel.Address {
		if a == nil {
			return nil
		}
		v := *a
		return &v
	}
	c.Actor, c.Owner, c.Authority = cp(c.Actor), cp(c.Owner), cp(c.Authority)
	return c
}

// Files returns deep copies of the set's files, in argument order.
func (s *Set) Files() []*File {
	out := make([]*File, len(s.files))
	for i, f := range s.files {
		c := &File{Path: f.Path, Context: cloneContext(f.Context), Derived: maps.Clone(f.Derived),
			Grants: make([]kernel.CapabilityGrant, len(f.Grants))}
		for j := range f.Grants {
			c.Grants[j] = CloneGrant(&f.Grants[j])
		}
		out[i] = c
	}
	return out
}

// Len returns the number of grants in the set.
func (s *Set) Len() int { return s.n }

// LoadGrants returns copies of exactly the grants with NamespaceID == actx.World,
// Subject == actx.Actor and Issuer == actx.Authority, in file order. It never fails.
func (s *Set) LoadGrants(_ context.Context, actx kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	s.index()
	gs := s.scope[scopeKey{actx.World, actx.Actor, actx.Authority}]
	out := make([]kernel.CapabilityGrant, len(gs))
	for i := range gs {
		out[i] = CloneGrant(&gs[i])
	}
	return out, nil
}

// LoadGrantSnapshot is LoadGrants plus what the set's snapshot already knows: the grants
// passed the strict contract when they were parsed (a cached snapshot holds only sets that
// did), and the authority hash of each (world, subject, issuer) scope is computed once per
// snapshot and kept in the cache with it.
//
// Unlike LoadGrants, the grants are one slice per scope, built once and shared (with
// their slices and maps) with the set and with every later snapshot of the scope: the
// kernel only reads them, and copying a thousand grants on every turn is what a long-lived
// host would otherwise pay per call. Callers must not modify them.
func (s *Set) LoadGrantSnapshot(ctx context.Context, actx kernel.AccessContext) (kernel.GrantSnapshot, error) {
	s.index()
	k := scopeKey{actx.World, actx.Actor, actx.Authority}
	grants := s.scope[k]
	if grants == nil {
		grants = []kernel.CapabilityGrant{}
	}
	return kernel.GrantSnapshot{Grants: grants, Hash: s.hashOf(k)}, nil
}

func (s *Set) hashOf(k scopeKey) string {
	s.index()
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.hashes[k]; ok {
		return h
	}
	h := kernel.HashGrants(s.scope[k])
	if s.hashes == nil {
		s.hashes = map[scopeKey]string{}
	}
	s.hashes[k] = h
	return h
}

// allHashes computes the authority hash of every scope of the set (for the cache).
func (s *Set) allHashes() map[scopeKey]string {
	s.index()
	out := make(map[scopeKey]string, len(s.scope))
	for _, k := range s.scopes {
		out[k] = s.hashOf(k)
	}
	return out
}

// ResolveGrant returns a copy of the grant with id in world namespaceID, from all the
// set's grants (whoever they were issued to), or (nil, nil) when there is none.
func (s *Set) ResolveGrant(_ context.Context, namespaceID, grantID string) (*kernel.CapabilityGrant, error) {
	s.ids()
	g, ok := s.byID[grantID]
	if !ok || g.NamespaceID != namespaceID {
		return nil, nil
	}
	c := CloneGrant(g)
	return &c, nil
}

// CloneGrant returns a deep copy of g: no slice, pointer or map is shared with it.
func CloneGrant(g *kernel.CapabilityGrant) kernel.CapabilityGrant {
	c := *g
	if g.Capabilities != nil {
		c.Capabilities = make([]kernel.Capability, len(g.Capabilities))
		for i, cap := range g.Capabilities {
			cap.Resource.Path = slices.Clone(cap.Resource.Path)
			if cap.Resource.Owner != nil {
				o := *cap.Resource.Owner
				cap.Resource.Owner = &o
			}
			cap.Actions = slices.Clone(cap.Actions)
			c.Capabilities[i] = cap
		}
	}
	c.Constraints.Purposes = slices.Clone(g.Constraints.Purposes)
	if g.Constraints.MaxUses != nil {
		v := *g.Constraints.MaxUses
		c.Constraints.MaxUses = &v
	}
	if g.Constraints.DelegationDepth != nil {
		v := *g.Constraints.DelegationDepth
		c.Constraints.DelegationDepth = &v
	}
	if g.Metadata != nil {
		c.Metadata = cloneJSON(g.Metadata).(map[string]any)
	}
	return c
}

func cloneJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = cloneJSON(e)
		}
		return m
	case []any:
		a := make([]any, len(x))
		for i, e := range x {
			a[i] = cloneJSON(e)
		}
		return a
	}
	return v
}
