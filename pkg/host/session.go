package host

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Session is an opened host serving many operations over a long time (an MCP session
// lives for hours): a session is not a turn. Every operation begins a fresh kernel turn
// at its own instant (the clock, unless --now pinned it), against the grant files and the
// namespace selection current at that operation: the grant files are reloaded when their
// content digest changes (a stat per file and operation; contents are hashed only when a
// stat changed or is too recent to trust), and the selection is re-read from the state
// database (unless --namespaces set it).
//
// The session's identity (actor, owner, authority, world, purpose, trace) is the one the
// host resolved when it was prepared; an edited context block of a grant file takes
// effect at the next start. A reloaded set that cannot be used (unreadable, refused,
// conflicting contexts) makes the authority unavailable, so every call is denied
// authority_unavailable until the files are fixed (fail-closed).
//
// Every operation's turn writes its authority.resolved record only when the kernel has
// not written one for the same grant snapshot, identity and audit metadata (an MCP
// session's), so a session records its authority once per snapshot, not once per call;
// every call's own records name that authorityHash (kernel.TurnOptions).
//
// Like the host, a session never authorizes, filters or audits on its own. It is safe for
// concurrent use.
type Session struct {
	h     *Host
	clock func() time.Time
	// OnReload, when set, is called after the grant files were reloaded (err is why the
	// new content was refused, nil when it loaded).
	OnReload func(err error)

	mu      sync.Mutex
	stamps  []fileStamp
	digest  string // content digest of the grant files the kernel was built from
	kern    *kernel.Kernel
	checked time.Time
}

// fileStamp is what a stat says about one grant file.
type fileStamp struct {
	ok    bool
	size  int64
	mtime time.Time
	ino   uint64
}

// racyWindow: a file modified this recently may be modified again without its stat
// changing (coarse timestamps), so its content is hashed anyway.
const racyWindow = 2 * time.Second

// NewSession starts a session on an opened host. clock is read at every operation unless
// --now pinned the instant.
func (h *Host) NewSession(clock func() time.Time) (*Session, error) {
	if clock == nil {
		clock = time.Now
	}
	s := &Session{h: h, clock: clock, kern: h.Kernel}
	stamps, digest, err := s.readGrantInputs()
	if err != nil {
		return nil, &Error{Kind: KindInternal, Message: err.Error(), Err: err}
	}
	s.stamps, s.digest, s.checked = stamps, digest, time.Now()
	return s, nil
}

// Host returns the session's host.
func (s *Session) Host() *Host { return s.h }

// Definition returns the definition of a registered tool, or nil.
func (s *Session) Definition(name string) *kernel.ToolDefinition { return s.h.Definition(name) }

// Begin begins the turn of one operation: the grant files reloaded if they changed, the
// namespace selection read now, the instant read now. meta goes to every audit event of
// the turn (kernel.TurnOptions.AuditMetadata; not copied, do not change it after).
func (s *Session) Begin(ctx context.Context, meta map[string]any) (*kernel.Turn, error) {
	t, _, _, err := s.begin(ctx, meta, "", "")
	return t, err
}

// begin is Begin under trace (the session's own when "") and sessionKey
// (kernel.TurnOptions.SessionKey) and also returns the kernel the turn runs on and where
// the turn's selection came from (as selection).
func (s *Session) begin(ctx context.Context, meta map[string]any, trace, sessionKey string) (*kernel.Turn, *kernel.Kernel, string, error) {
	k, err := s.kernel()
	if err != nil {
		return nil, nil, "", err
	}
	actx, source, err := s.context(ctx)
	if err != nil {
		return nil, nil, "", err
	}
	if trace != "" {
		actx.TraceID = trace
	}
	// A session writes authority.resolved once per authority snapshot (and identity and
	// metadata), not once per operation: every call's records name the authorityHash.
	t, err := k.BeginTurnWith(actx, kernel.TurnOptions{AuditMetadata: meta, AuthorityResolvedOnce: true, SessionKey: sessionKey})
	if err != nil {
		return nil, nil, "", usageError("check --as, --owner, --authority, --world and --purpose", "%v", err)
	}
	return t, k, source, nil
}

// InputsDigest is a digest of everything a session's published list depends on but the
// clock: the grant files' contents, the namespace selection and the version of the MCP
// servers' held tool lists. It reloads nothing and
// writes nothing; a surface polls it to notice changes made by another process.
func (s *Session) InputsDigest(ctx context.Context) (string, error) {
	_, digest, err := s.grantInputs()
	if err != nil {
		return "", err
	}
	sel, _, err := s.selection(ctx)
	if err != nil {
		return "", err
	}
	sum := sha256.New()
	fmt.Fprintf(sum, "%s\x00%q\x00%d", digest, sel, s.h.gw.Version())
	return hex.EncodeToString(sum.Sum(nil)), nil
}

// context is the access context of one operation, and where its selection came from
// (as selection).
func (s *Session) context(ctx context.Context) (kernel.AccessContext, string, error) {
	actx := s.h.Prepared.Context
	actx.EnabledToolNamespaces = append([]string(nil), actx.EnabledToolNamespaces...)
	instant := s.h.Instant
	if !s.h.Pinned {
		instant = s.clock()
	}
	actx.Now = kernel.FormatTimestamp(instant.UnixMilli())
	sel, source, err := s.selection(ctx)
	if err != nil {
		return actx, "", err
	}
	actx.EnabledToolNamespaces = sel
	return actx, source, nil
}

// selection is the context's enabled namespaces now: --namespaces, else the stored (or
// default) selection; source says which ("flag", "stored" or "default", as
// api.Namespaces.SelectionSource).
func (s *Session) selection(ctx context.Context) ([]string, string, error) {
	if s.h.Settings.NamespacesSet {
		return append([]string(nil), s.h.Prepared.Context.EnabledToolNamespaces...), "flag", nil
	}
	sel, stored, err := s.h.Store.Selection(ctx, s.h.Prepared.Context.World, s.h.Prepared.Context.Owner)
	if err != nil {
		return nil, "", stateError(err, s.h.Settings.State)
	}
	jscompat.SortLocale(sel)
	return sel, map[bool]string{true: "stored", false: "default"}[stored], nil
}

// kernel returns the kernel of the current grant files, rebuilding it when their content
// changed.
func (s *Session) kernel() (*kernel.Kernel, error) {
	stamps, digest, err := s.grantInputs()
	if err != nil {
		return nil, &Error{Kind: KindInternal, Message: err.Error(), Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stamps = stamps
	if digest == s.digest {
		return s.kern, nil
	}
	source, resolver, loadErr := s.loadGrants()
	k, err := s.h.buildKernel(source, resolver)
	if err != nil {
		return nil, err
	}
	s.kern, s.digest = k, digest
	if s.OnReload != nil {
		s.OnReload(loadErr)
	}
	return k, nil
}

// loadGrants loads the grant files again; a refusal becomes an unavailable source.
func (s *Session) loadGrants() (kernel.GrantSource, kernel.DelegationChainResolver, error) {
	st := s.h.Settings
	if len(st.Grants) == 0 {
		return emptySource{}, nil, nil
	}
	stateDir := st.LocalDir()
	set, err := grantfile.LoadSet(st.Grants, grantfile.SetOptions{CacheDir: filepath.Join(stateDir, "cache", "grants"),
		CacheKeyFile: filepath.Join(stateDir, "cache", "grants.key")})
	if err != nil {
		return unavailableSource{err: err}, nil, err
	}
	return set, set, nil
}

// grantInputs stats the grant files and returns their stamps and content digest, hashing
// contents only when a stat changed or is too recent to trust.
func (s *Session) grantInputs() ([]fileStamp, string, error) {
	s.mu.Lock()
	prev, digest, checked := s.stamps, s.digest, s.checked
	s.mu.Unlock()
	now := time.Now()
	stamps := s.statGrants()
	same := len(prev) == len(stamps)
	for i := 0; same && i < len(stamps); i++ {
		same = stamps[i] == prev[i] && (!stamps[i].ok || checked.Sub(stamps[i].mtime) > racyWindow)
	}
	if same {
		return stamps, digest, nil
	}
	stamps, digest, err := s.readGrantInputs()
	if err == nil {
		s.mu.Lock()
		s.checked = now
		s.mu.Unlock()
	}
	return stamps, digest, err
}

func (s *Session) statGrants() []fileStamp {
	out := make([]fileStamp, len(s.h.Settings.Grants))
	for i, p := range s.h.Settings.Grants {
		fi, err := os.Stat(p)
		if err != nil {
			continue
		}
		out[i] = fileStamp{ok: true, size: fi.Size(), mtime: fi.ModTime(), ino: inode(fi)}
	}
	return out
}

// readGrantInputs stats and hashes every grant file. A missing or unreadable file is part
// of the digest (its error class), so that it appearing or vanishing is a change.
func (s *Session) readGrantInputs() ([]fileStamp, string, error) {
	stamps := s.statGrants()
	sum := sha256.New()
	for _, p := range s.h.Settings.Grants {
		data, err := os.ReadFile(p)
		fh := sha256.Sum256(data)
		state := "ok"
		if err != nil {
			state = "unreadable"
			if errors.Is(err, os.ErrNotExist) {
				state = "missing"
			}
			fh = [32]byte{}
		}
		fmt.Fprintf(sum, "%q\x00%s\x00%x\n", p, state, fh)
	}
	return stamps, hex.EncodeToString(sum.Sum(nil)), nil
}

// buildKernel builds a kernel like Open does, over the host's stores and ceiling, with
// another grant source.
func (h *Host) buildKernel(source kernel.GrantSource, resolver kernel.DelegationChainResolver) (*kernel.Kernel, error) {
	s := h.Settings
	k := kernel.New(kernel.Config{Grants: source, Resolver: resolver, Usage: h.Store, Ceiling: h.ceiling,
		Settings: h.Store, Audit: h.Store, MaxGrants: s.MaxGrants, ForbiddenNamespaces: s.ForbiddenNamespaces})
	for _, t := range h.tools {
		if err := k.RegisterTool(t); err != nil {
			return nil, &Error{Kind: KindInternal, Message: fmt.Sprintf("register %s: %v", t.Definition.Name, err), Err: err}
		}
	}
	if err := registerProviders(k, h.gw); err != nil {
		return nil, err
	}
	return k, nil
}

// EscalationStatus returns the status of the escalation recorded for call callID in the
// session's world and owner ("" when there is none), and the operator's note when the
// record carries one. It reads the state database (one query by call id: Escalations.ByCall)
// and writes nothing.
func (s *Session) EscalationStatus(ctx context.Context, callID string) (status, note string, err error) {
	actx := s.h.Prepared.Context
	r, ok, err := s.h.Escalations().ByCall(ctx, actx.World, actx.Owner, callID)
	if err != nil {
		return "", "", stateError(err, s.h.Settings.State)
	}
	if !ok {
		return "", "", nil
	}
	if r.Resolution != nil {
		note = r.Resolution.Note
	}
	return r.Escalation.Status, note, nil
}
