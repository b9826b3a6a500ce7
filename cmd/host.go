package cmd

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sharedos/sharedos/pkg/fsplane"
	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/hostceiling"
	"github.com/sharedos/sharedos/pkg/kernel"
	"github.com/sharedos/sharedos/pkg/repoplane"
	"github.com/sharedos/sharedos/pkg/sqlitestore"
)

// Host is the embedded kernel of one run and the context of its one turn.
type Host struct {
	Settings *Settings
	Kernel   *kernel.Kernel
	Turn     *kernel.Turn
	Ctx      kernel.AccessContext
	Store    *sqlitestore.Store
	// Grants is the loaded grant set (nil when no grant file was named or it was invalid).
	Grants *grantfile.Set
	// GrantErr is why the grant files were refused (the kernel then sees an unavailable
	// grant source); nil when they loaded.
	GrantErr error
	// SelectionSource says where Ctx.EnabledToolNamespaces came from: "flag" (--namespaces),
	// "stored" or "default" (defaultNamespaces, nothing stored yet).
	SelectionSource string
	// CallID is the id the run's tool call gets.
	CallID string
}

// hostNeeds says what a command will ask of its host.
type hostNeeds struct {
	// authority: the command lists, explains or calls tools, so the turn's authority is
	// resolved while the state database opens (namespace commands never need it).
	authority bool
}

// Host builds the kernel and the turn's context (once). It enforces the trust boundary,
// loads the grant files, checks every input, and only then opens the state database and
// registers the planes, on other goroutines while the authority resolves (the costly part
// with many grants), so start-up takes the longest of them rather than their sum. Bad
// input therefore never touches the state database.
func (f *Factory) Host(ctx context.Context, needs hostNeeds) (*Host, error) {
	if f.host != nil {
		return f.host, nil
	}
	s, err := f.Settings()
	if err != nil {
		return nil, err
	}
	rootReal, err := checkRoot(s.Root)
	if err != nil {
		return nil, err
	}
	if err := checkTrustBoundary(s, rootReal); err != nil {
		return nil, err
	}
	var ceiling kernel.HostCeiling
	if len(s.FrozenPaths) > 0 || len(s.FrozenActions) > 0 {
		c, err := hostceiling.New(s.FrozenPaths, s.FrozenActions)
		if err != nil {
			return nil, configError("fix the ceiling section of the config file", "config file %s: ceiling: %v", s.ConfigFile, err)
		}
		ceiling = c
	}
	h := &Host{Settings: s}
	stateDir := filepath.Dir(s.State)

	// Grant files: none ⇒ an empty source; invalid ⇒ an unavailable one (fail-closed).
	var src kernel.GrantSource = emptySource{}
	var resolver kernel.DelegationChainResolver
	var gctx grantfile.Context
	if len(s.Grants) > 0 {
		set, err := grantfile.LoadSet(s.Grants, grantfile.SetOptions{CacheDir: filepath.Join(stateDir, "cache", "grants")})
		switch {
		case err == nil:
			h.Grants, src, resolver, gctx = set, set, set, set.Context()
		case isContextConflict(err):
			return nil, usageError("make the grant files' context blocks agree, or pass the field as a flag",
				"grant files disagree: %v", err)
		default:
			h.GrantErr = err
			src = unavailableSource{err: err}
			gctx = lenientContext(s.Grants)
		}
	}
	if h.GrantErr != nil {
		// Once per run, whatever the command: the grants it runs under were refused.
		warnGrants(f.IOStreams, h.GrantErr)
	}
	if h.Ctx, err = f.accessContext(s, gctx); err != nil {
		return nil, err
	}
	h.CallID = s.CallID
	if h.CallID == "" {
		h.CallID = newUUID()
	}
	if s.NamespacesSet {
		sel, err := kernel.ValidateEnabledToolNamespaces(s.Namespaces)
		if err != nil {
			return nil, usageError("pass --namespaces as a comma-separated list of namespaces, e.g. files,repo",
				"invalid --namespaces %q: %v", strings.Join(s.Namespaces, ","), err)
		}
		h.Ctx.EnabledToolNamespaces = withoutNamespaces(sel, s.CeilingNamespaces)
		h.SelectionSource = "flag"
	}

	// Every input is valid: the state database opens meanwhile.
	ps := &pendingStore{ready: make(chan struct{})}
	go func() {
		ps.st, ps.err = f.Store(ctx)
		close(ps.ready)
	}()
	h.Kernel = kernel.New(kernel.Config{Grants: src, Resolver: resolver, Usage: ps, Ceiling: ceiling,
		Settings: ps, Audit: ps, MaxGrants: s.MaxGrants})
	registered := make(chan error, 1)
	go func() { registered <- f.registerTools(h.Kernel, s, ps, stateDir) }()
	h.Turn = h.Kernel.BeginTurn(h.Ctx)
	if needs.authority {
		// Resolve (and audit) the turn's authority now; the selection does not enter it.
		h.Turn.Authority(ctx, h.Ctx)
	}
	regErr := <-registered
	<-ps.ready
	if ps.err != nil {
		return nil, ps.err
	}
	if regErr != nil {
		return nil, regErr
	}
	h.Store = ps.st
	if !s.NamespacesSet {
		sel, stored, err := h.Store.Selection(ctx, h.Ctx.NamespaceID, h.Ctx.Owner)
		if err != nil {
			return nil, stateError(err, stateHint(s.State))
		}
		h.Ctx.EnabledToolNamespaces = sel
		h.SelectionSource = map[bool]string{true: "stored", false: "default"}[stored]
	}
	kernel.SortLocale(h.Ctx.EnabledToolNamespaces)
	f.host = h
	return h, nil
}

// registerTools registers the 12 files tools, the 5 repo tools and sharedos.escalate.
// Both providers are cheap to build: no walk, no repository opened.
func (f *Factory) registerTools(k *kernel.Kernel, s *Settings, index fsplane.SnapshotIndex, stateDir string) error {
	var clock func() time.Time
	if s.Now != "" {
		if fixed, err := time.Parse(time.RFC3339Nano, s.Now); err == nil {
			clock = func() time.Time { return fixed }
		}
	}
	files, err := fsplane.NewProvider(s.Root, fsplane.ProviderOptions{
		SnapshotDir: filepath.Join(stateDir, "snapshots"), Index: index, Now: clock})
	if err != nil {
		return usageError("keep the state directory outside --root", "files plane: %v", err)
	}
	repo, err := repoplane.NewProvider(s.Root, repoplane.ProviderOptions{
		AuthorName: s.RepoAuthorName, AuthorEmail: s.RepoAuthorEmail, Now: clock})
	if err != nil {
		return internalError(fmt.Errorf("repo plane: %w", err))
	}
	fileTools, err := fsplane.Tools(files)
	if err != nil {
		return internalError(err)
	}
	repoTools, err := repoplane.Tools(repo)
	if err != nil {
		return internalError(err)
	}
	for _, t := range append(append(fileTools, repoTools...), kernel.EscalationTool()) {
		if err := k.RegisterTool(t); err != nil {
			return internalError(fmt.Errorf("register %s: %w", t.Definition.Name, err))
		}
	}
	return nil
}

// pendingStore stands in for the state database while it opens: every port method waits
// until it is open and then delegates (or returns the open error, which refuses the
// operation). It lets the kernel be built, and the authority resolved, in the meantime.
type pendingStore struct {
	ready chan struct{}
	st    *sqlitestore.Store
	err   error
}

var (
	_ kernel.UsageStore                 = (*pendingStore)(nil)
	_ kernel.ToolNamespaceSettingsStore = (*pendingStore)(nil)
	_ kernel.AuditSink                  = (*pendingStore)(nil)
	_ fsplane.SnapshotIndex             = (*pendingStore)(nil)
)

func (p *pendingStore) get() (*sqlitestore.Store, error) {
	<-p.ready
	return p.st, p.err
}

func (p *pendingStore) Append(ctx context.Context, ev kernel.AuditEvent) error {
	st, err := p.get()
	if err != nil {
		return err
	}
	return st.Append(ctx, ev)
}

func (p *pendingStore) TryConsume(ctx context.Context, world, grantID string, max int64) (bool, error) {
	st, err := p.get()
	if err != nil {
		return false, err
	}
	return st.TryConsume(ctx, world, grantID, max)
}

func (p *pendingStore) GetUsage(ctx context.Context, world, grantID string) (int64, error) {
	st, err := p.get()
	if err != nil {
		return 0, err
	}
	return st.GetUsage(ctx, world, grantID)
}

func (p *pendingStore) ApplyUpdate(ctx context.Context, actx kernel.AccessContext, u kernel.ToolNamespaceUpdate) ([]string, error) {
	st, err := p.get()
	if err != nil {
		return nil, err
	}
	return st.ApplyUpdate(ctx, actx, u)
}

func (p *pendingStore) PutSnapshot(ctx context.Context, rec fsplane.SnapshotRecord) error {
	st, err := p.get()
	if err != nil {
		return err
	}
	return st.PutSnapshot(ctx, rec)
}

func (p *pendingStore) ListSnapshots(ctx context.Context, root string, path []string, limit int) ([]fsplane.SnapshotRecord, error) {
	st, err := p.get()
	if err != nil {
		return nil, err
	}
	return st.ListSnapshots(ctx, root, path, limit)
}

func (p *pendingStore) GetSnapshot(ctx context.Context, root string, path []string, id string) (*fsplane.SnapshotRecord, error) {
	st, err := p.get()
	if err != nil {
		return nil, err
	}
	return st.GetSnapshot(ctx, root, path, id)
}

// accessContext resolves actor, owner, authority, world, purpose, now and trace (spec 40 §2).
func (f *Factory) accessContext(s *Settings, g grantfile.Context) (kernel.AccessContext, error) {
	var actx kernel.AccessContext
	var err error
	switch {
	case s.As != "":
		if actx.Actor, err = parseAddressFlag("as", s.As); err != nil {
			return actx, err
		}
	case g.Actor != nil:
		actx.Actor = *g.Actor
	default:
		return actx, usageError("pass --as kind:id (e.g. --as agent:helper), or name a grant file whose context sets actor",
			"no actor: pass --as or a grant file context")
	}
	switch {
	case s.Owner != "":
		if actx.Owner, err = parseAddressFlag("owner", s.Owner); err != nil {
			return actx, err
		}
	case g.Owner != nil:
		actx.Owner = *g.Owner
	default:
		actx.Owner = actx.Actor
	}
	switch {
	case s.Authority != "":
		if actx.Authority, err = parseAddressFlag("authority", s.Authority); err != nil {
			return actx, err
		}
	case g.Authority != nil:
		actx.Authority = *g.Authority
	default:
		actx.Authority = actx.Owner
	}
	actx.NamespaceID = firstNonEmpty(s.World, g.World, "default")
	if t := strings.TrimSpace(actx.NamespaceID); t != actx.NamespaceID || t == "" || len(t) > 256 {
		return actx, usageError("a world is an identifier of 1 to 256 characters", "invalid --world %q", actx.NamespaceID)
	}
	actx.Purpose = firstNonEmpty(s.Purpose, g.Purpose, "cli")
	if t := strings.TrimSpace(actx.Purpose); t != actx.Purpose || t == "" {
		return actx, usageError("a purpose is 1 to 512 characters without surrounding white space", "invalid --purpose %q", actx.Purpose)
	}
	if s.Now != "" {
		ms, err := kernel.ParseTimestamp(s.Now)
		if err != nil {
			return actx, usageError("pass --now as an RFC 3339 date-time with an offset, e.g. 2026-08-03T09:00:00Z",
				"invalid --now %q: not an RFC 3339 date-time with an offset", s.Now)
		}
		actx.Now = kernel.FormatTimestamp(ms)
	} else {
		actx.Now = kernel.FormatTimestamp(f.Clock().UnixMilli())
	}
	actx.TraceID = s.Trace
	if actx.TraceID == "" {
		actx.TraceID = newUUID()
	}
	actx.EnabledToolNamespaces = []string{}
	if err := actx.Validate(); err != nil {
		return actx, usageError("check --trace, --world and --purpose", "invalid access context: %v", err)
	}
	return actx, nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func withoutNamespaces(sel, never []string) []string {
	out := make([]string, 0, len(sel))
	for _, n := range sel {
		skip := false
		for _, x := range never {
			if n == x {
				skip = true
			}
		}
		if !skip {
			out = append(out, n)
		}
	}
	return out
}

// checkRoot requires --root to be an existing directory and returns its real path.
func checkRoot(root string) (string, error) {
	fi, err := os.Stat(root)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", usageError("pass --root DIR naming an existing directory (default: the working directory), or create it",
				"root directory %s does not exist", root)
		}
		return "", usageError("pass --root DIR naming a readable directory", "root directory %s: %v", root, unwrapPathErr(err))
	}
	if !fi.IsDir() {
		return "", usageError("pass --root DIR naming a directory", "root %s is not a directory", root)
	}
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", usageError("", "root directory %s: %v", root, unwrapPathErr(err))
	}
	return real, nil
}

// checkTrustBoundary refuses to start when a grant file, the config file or the state
// database resolves (after symbolic links) inside the root: a files grant could then
// rewrite the very authority that limits it (spec 40 §1).
func checkTrustBoundary(s *Settings, rootReal string) error {
	type item struct{ what, path string }
	items := []item{}
	if s.ConfigFile != "" {
		items = append(items, item{"config file", s.ConfigFile})
	}
	for _, g := range s.Grants {
		items = append(items, item{"grant file", g})
	}
	items = append(items, item{"state database", s.State})
	for _, it := range items {
		real := resolveExisting(it.path)
		if within(rootReal, real) {
			return usageError("keep grant files, the config file and the state database outside --root, so that no files grant can rewrite them",
				"%s %s lies inside the root %s; refusing to start", it.what, it.path, rootReal)
		}
	}
	return nil
}

// resolveExisting resolves symbolic links in p; for a path that does not exist yet, it
// resolves its nearest existing parent and appends the rest.
func resolveExisting(p string) string {
	rest := ""
	cur := filepath.Clean(p)
	for {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(real, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return filepath.Clean(p)
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// emptySource is the grant source without grant files: no grants at all.
type emptySource struct{}

func (emptySource) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return []kernel.CapabilityGrant{}, nil
}

// unavailableSource is the grant source of refused grant files: every load fails, so
// the kernel denies authority_unavailable (fail-closed).
type unavailableSource struct{ err error }

func (u unavailableSource) LoadGrants(context.Context, kernel.AccessContext) ([]kernel.CapabilityGrant, error) {
	return nil, u.err
}

func isContextConflict(err error) bool {
	var ge *grantfile.Error
	return errors.As(err, &ge) && strings.HasPrefix(ge.Field, "context.") && strings.Contains(ge.Message, "conflicts with")
}

// warnGrants prints the one-line warning for refused grant files.
func warnGrants(ios *IOStreams, err error) {
	warn(ios, "grant files refused, authority is unavailable (every tool hidden, every call denied): %v", err)
}

// lenientContext reads only the context blocks of grant files that were refused as a
// whole, so the run still knows its actor and owner (and can report the refusal as the
// kernel sees it: authority_unavailable). A context confers no authority.
func lenientContext(paths []string) grantfile.Context {
	var out grantfile.Context
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil || len(data) > grantfile.MaxFileSize {
			continue
		}
		var doc struct {
			Context map[string]any `yaml:"context"`
		}
		if yaml.Unmarshal(data, &doc) != nil {
			continue
		}
		str := func(k string) string { s, _ := doc.Context[k].(string); return s }
		addr := func(k string) *kernel.Address {
			v, ok := doc.Context[k]
			if !ok {
				return nil
			}
			var text string
			switch x := v.(type) {
			case string:
				text = x
			default:
				b, err := json.Marshal(x)
				if err != nil {
					return nil
				}
				text = string(b)
			}
			a, err := kernel.ParseAddress(text)
			if err != nil {
				return nil
			}
			return &a
		}
		if out.World == "" {
			out.World = str("world")
		}
		if out.Purpose == "" {
			out.Purpose = str("purpose")
		}
		if out.Actor == nil {
			out.Actor = addr("actor")
		}
		if out.Owner == nil {
			out.Owner = addr("owner")
		}
		if out.Authority == nil {
			out.Authority = addr("authority")
		}
	}
	return out
}

// newUUID returns a random (version 4) UUID.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}
