package kernel

// This file holds the tool registry: registration of static tools and per-context
// providers, the definition digest and the per-turn catalogue they resolve to.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/sharedos/sharedos/internal/jscompat"
)

type registered struct {
	handler ToolHandler
	digest  [32]byte
	from    string // the provider id that supplied it ("" for a static tool)
}

func validateHandler(h *ToolHandler) error {
	if err := h.Definition.Validate(); err != nil {
		return fmt.Errorf("tool definition does not match the SharedOS contract: %w", err)
	}
	if h.Invoke == nil {
		return fmt.Errorf("tool %s: %w", h.Definition.Name, contractErr("invoke", "is required"))
	}
	if h.ResolveRequirement != nil && h.ResolveCall != nil {
		return fmt.Errorf("tool %s: %w", h.Definition.Name, contractErr("resolveCall", "cannot be set beside resolveRequirement"))
	}
	return nil
}

// digestDefinition identifies a definition inside the catalogue hash: the SHA-256 of
// every field of the definition, each length-prefixed or tagged (so two definitions that
// differ anywhere differ in the bytes hashed), map keys sorted. It walks the values
// itself instead of encoding JSON (a process registers its tools once, on the way to its
// first answer); a value of a type it does not know is hashed as its encoding/json
// encoding. The catalogue hash is an opaque audit identity, not a cross-host format.
func digestDefinition(d *ToolDefinition) [32]byte {
	w := digester{h: sha256.New(), buf: make([]byte, 0, 8<<10)}
	w.str("sharedos tool definition v2")
	w.str(d.Name)
	w.str(d.Description)
	w.str(d.Namespace)
	w.str(d.Source)
	w.str(string(d.ReadWrite))
	w.value(d.InputSchema)
	w.value(d.OutputSchema)
	r := &d.RequiredCapability
	w.str(r.Resource.Namespace)
	w.strs(r.Resource.Path)
	w.addr(r.Resource.Owner)
	w.str(r.Action)
	if a := d.Annotations; a == nil {
		w.tag('-')
	} else {
		w.tag('a')
		w.optBool(a.ReadOnly)
		w.optBool(a.Destructive)
		w.optBool(a.Idempotent)
	}
	w.value(d.Metadata)
	w.flush()
	var sum [32]byte
	w.h.Sum(sum[:0])
	return sum
}

// digester writes values, unambiguously, into a hash, through one buffer.
type digester struct {
	h   hash.Hash
	buf []byte
}

func (w *digester) flush() {
	w.h.Write(w.buf)
	w.buf = w.buf[:0]
}

func (w *digester) tag(c byte) { w.buf = append(w.buf, c) }

func (w *digester) count(n int) { w.buf = binary.AppendUvarint(w.buf, uint64(n)) }

func (w *digester) str(s string) {
	w.count(len(s))
	w.buf = append(w.buf, s...)
	if len(w.buf) > 4<<10 {
		w.flush()
	}
}

func (w *digester) strs(ss []string) {
	w.count(len(ss))
	for _, s := range ss {
		w.str(s)
	}
}

func (w *digester) addr(a *Address) {
	if a == nil {
		w.tag('-')
		return
	}
	w.tag('@')
	w.str(string(a.Kind))
	w.str(a.ID)
}

func (w *digester) optBool(b *bool) {
	switch {
	case b == nil:
		w.tag('-')
	case *b:
		w.tag('t')
	default:
		w.tag('f')
	}
}

func (w *digester) value(v any) {
	switch x := v.(type) {
	case nil:
		w.tag('n')
	case bool:
		if x {
			w.tag('t')
		} else {
			w.tag('f')
		}
	case string:
		w.tag('s')
		w.str(x)
	case json.Number:
		w.tag('#')
		w.str(string(x))
	case float64:
		w.tag('#')
		w.str(strconv.FormatFloat(x, 'g', -1, 64))
	case int:
		w.tag('#')
		w.str(strconv.Itoa(x))
	case int64:
		w.tag('#')
		w.str(strconv.FormatInt(x, 10))
	case []string:
		w.tag('[')
		w.strs(x)
	case []any:
		w.tag('[')
		w.count(len(x))
		for _, e := range x {
			w.value(e)
		}
	case map[string]any:
		if x == nil {
			w.tag('n')
			return
		}
		w.tag('{')
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.count(len(keys))
		for _, k := range keys {
			w.str(k)
			w.value(x[k])
		}
	default:
		b, err := json.Marshal(x)
		if err != nil {
			b = []byte(fmt.Sprintf("%T %v", x, x))
		}
		w.tag('j')
		w.str(string(b))
	}
}

// RegisterTool adds a static, process-wide tool. It fails on an invalid definition or a
// name already registered (ErrDuplicateRegistration).
func (k *Kernel) RegisterTool(h ToolHandler) error {
	t, err := PrepareTool(h)
	if err != nil {
		return err
	}
	return k.RegisterPrepared(t)
}

// PreparedTool is a tool handler the kernel has checked against the contract and
// digested for the catalogue hash, ready for RegisterPrepared. Preparing needs no
// kernel, so a host can prepare its tools while it loads its other inputs.
type PreparedTool struct{ r *registered }

// PrepareTool checks h as RegisterTool does (an invalid definition fails) and digests its
// definition.
func PrepareTool(h ToolHandler) (PreparedTool, error) {
	if err := validateHandler(&h); err != nil {
		return PreparedTool{}, err
	}
	return PreparedTool{&registered{handler: h, digest: digestDefinition(&h.Definition)}}, nil
}

// RegisterPrepared adds a prepared static tool; it is RegisterTool without the work
// PrepareTool did. It fails on a tool that was not prepared or a name already registered
// (ErrDuplicateRegistration). A prepared tool may be registered on several kernels.
func (k *Kernel) RegisterPrepared(t PreparedTool) error {
	if t.r == nil {
		return contractErr("tool", "was not prepared with PrepareTool")
	}
	name := t.r.handler.Definition.Name
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, dup := k.static[name]; dup {
		return fmt.Errorf("tool %q: %w", name, ErrDuplicateRegistration)
	}
	k.static[name] = t.r
	k.staticReg = nil
	return nil
}

// RegisterToolProvider adds a per-context tool provider; ids are trimmed, non-empty and unique.
func (k *Kernel) RegisterToolProvider(p ContextToolProvider) error {
	id := jscompat.JSTrim(p.ID())
	if id == "" {
		return contractErr("id", "tool provider id must not be empty")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, q := range k.providers {
		if jscompat.JSTrim(q.ID()) == id {
			return fmt.Errorf("tool provider %q: %w", id, ErrDuplicateRegistration)
		}
	}
	k.providers = append(k.providers, p)
	sort.SliceStable(k.providers, func(i, j int) bool {
		return jscompat.LocaleLess(jscompat.JSTrim(k.providers[i].ID()), jscompat.JSTrim(k.providers[j].ID()))
	})
	return nil
}

// registry is the resolved, unfiltered catalogue of one turn.
type registry struct {
	byName map[string]*registered
	names  []string
	hash   string

	// unavailable holds the tool namespaces whose provider could not list its tools (a
	// ProviderUnavailableError), sorted by namespace; their tools are absent.
	unavailable []UnavailableNamespace

	nsOnce     sync.Once
	namespaces []ToolNamespaceDescriptor // namespaceSummary
}

// unavailableFor is the unavailable namespace a tool name falls in ("<namespace>.…"), or nil.
func (r *registry) unavailableFor(name string) *UnavailableNamespace {
	for i := range r.unavailable {
		u := &r.unavailable[i]
		if strings.HasPrefix(name, u.Namespace+".") {
			return u
		}
	}
	return nil
}

func newRegistry(byName map[string]*registered) *registry {
	r := &registry{byName: byName, names: make([]string, 0, len(byName))}
	for n := range byName {
		r.names = append(r.names, n)
	}
	sort.Strings(r.names)
	hs := sha256.New()
	for _, n := range r.names {
		d := byName[n].digest
		hs.Write(d[:])
	}
	r.hash = hex.EncodeToString(hs.Sum(nil))
	return r
}

// staticRegistry is the registry of the static tools, built once per set of
// registrations and shared by every turn without per-context providers.
func (k *Kernel) staticRegistry() (*registry, []ContextToolProvider) {
	k.mu.RLock()
	r, providers := k.staticReg, k.providers
	k.mu.RUnlock()
	if r != nil {
		return r, providers
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.staticReg == nil {
		k.staticReg = newRegistry(maps.Clone(k.static))
	}
	return k.staticReg, k.providers
}

func (k *Kernel) resolveRegistry(ctx context.Context, actx AccessContext) (*registry, error) {
	static, providers := k.staticRegistry()
	if len(providers) == 0 {
		return static, nil
	}
	byName := maps.Clone(static.byName)
	var unavailable []UnavailableNamespace
	for _, p := range providers {
		hs, err := p.ListTools(ctx, cloneContext(actx))
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			var pu *ProviderUnavailableError
			if errors.As(err, &pu) && len(pu.Namespaces) > 0 && !slices.Contains(pu.Namespaces, "") {
				for _, ns := range pu.Namespaces {
					unavailable = append(unavailable, UnavailableNamespace{Namespace: ns, Provider: p.ID(), Cause: pu.Cause})
				}
				continue
			}
			return nil, &CatalogError{Provider: p.ID(), Cause: err,
				msg: fmt.Sprintf("context tool provider %q failed to resolve its catalog", p.ID())}
		}
		for i := range hs {
			h := hs[i]
			if err := validateHandler(&h); err != nil {
				return nil, &CatalogError{Provider: p.ID(), msg: fmt.Sprintf("context tool provider %q: %v", p.ID(), err)}
			}
			if prev, dup := byName[h.Definition.Name]; dup {
				first := "the static tools"
				if prev.from != "" {
					first = fmt.Sprintf("provider %q", prev.from)
				}
				return nil, &CatalogError{Provider: p.ID(),
					msg: fmt.Sprintf("tool %q is offered by both %s and provider %q", h.Definition.Name, first, p.ID())}
			}
			byName[h.Definition.Name] = &registered{handler: h, digest: digestDefinition(&h.Definition), from: p.ID()}
		}
	}
	if len(unavailable) == 0 {
		return newRegistry(byName), nil
	}
	// a confined failure must not hide a tool another provider (or the host) offers in
	// the namespace, nor take a name one of them could take: such a namespace fails the
	// whole catalogue, as any provider error does
	sort.SliceStable(unavailable, func(i, j int) bool { return unavailable[i].Namespace < unavailable[j].Namespace })
	for i, u := range unavailable {
		if i > 0 && unavailable[i-1].Namespace == u.Namespace {
			return nil, &CatalogError{Provider: u.Provider, Cause: u.Cause,
				msg: fmt.Sprintf("tool namespace %q is reported unavailable by both provider %q and provider %q", u.Namespace, unavailable[i-1].Provider, u.Provider)}
		}
		for name, r := range byName {
			if r.handler.Definition.Namespace == u.Namespace || strings.HasPrefix(name, u.Namespace+".") {
				return nil, &CatalogError{Provider: u.Provider, Cause: u.Cause,
					msg: fmt.Sprintf("context tool provider %q failed to resolve its catalog (its tool namespace %q is also used by tool %q)", u.Provider, u.Namespace, name)}
			}
		}
	}
	r := newRegistry(byName)
	r.unavailable = unavailable
	hs := sha256.New()
	hs.Write([]byte(r.hash))
	for _, u := range unavailable {
		hs.Write([]byte("\x00unavailable\x00" + u.Namespace))
	}
	r.hash = hex.EncodeToString(hs.Sum(nil))
	return r, nil
}

func cloneContext(actx AccessContext) AccessContext {
	actx.EnabledToolNamespaces = slices.Clone(actx.EnabledToolNamespaces)
	return actx
}
