package fsplane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/sharedos/sharedos/pkg/kernel"
	"golang.org/x/sys/unix"
)

// Provider error codes (ProtocolError.Code of a denied or failed ResourceResult). The
// first three are "denied" (the path itself is refused; retrying cannot help), the
// others "failed". None is retryable unless noted.
const (
	CodeInvalidPath       kernel.ErrorCode = "invalid_path"       // denied: a segment breaks the path rules, or the path is too long for the file system
	CodePathEscape        kernel.ErrorCode = "path_escape"        // denied: a symbolic link in the path, or the path changed while in use
	CodeNotPermitted      kernel.ErrorCode = "not_permitted"      // denied: a .git or temporary-file segment, or deleting the root
	CodeNotFound          kernel.ErrorCode = "not_found"          // nothing at the path (or a parent is a file), or no such snapshot
	CodeVersionConflict   kernel.ErrorCode = "version_conflict"   // expectedVersion differs from the current version (or the file is absent)
	CodeAlreadyExists     kernel.ErrorCode = "already_exists"     // create on an existing path
	CodeNotEmpty          kernel.ErrorCode = "not_empty"          // delete of a non-empty directory without recursive:true
	CodeNotAFile          kernel.ErrorCode = "not_a_file"         // a file action on a directory or special file
	CodeNotADirectory     kernel.ErrorCode = "not_a_directory"    // list on a file
	CodeInvalidInput      kernel.ErrorCode = "invalid_input"      // malformed operation input (bad regex, bad snapshot id, …)
	CodeUnsupportedAction kernel.ErrorCode = "unsupported_action" // unknown action, or snapshots not configured
	CodeProviderError     kernel.ErrorCode = "provider_error"     // the file system failed (permissions, disk full, …); retryable
	CodeCancelled         kernel.ErrorCode = "cancelled"          // the context ended before the operation took effect; retryable

	CodeSnapshotIndexUnavailable kernel.ErrorCode = "snapshot_index_unavailable" // the snapshot index failed (its error is in the message); retryable
	CodeSnapshotStoreUnavailable kernel.ErrorCode = "snapshot_store_unavailable" // the snapshot blob store could not be written (disk full, permissions); retryable
	CodeSnapshotDamaged          kernel.ErrorCode = "snapshot_damaged"           // the snapshot's record or stored content is damaged or missing
	CodeTooLarge                 kernel.ErrorCode = "too_large"                  // a snapshot would exceed ProviderOptions.MaxSnapshotBytes
)

// TempPrefix starts the name of every temporary file the provider writes. Such files
// are hidden from list, search and grep, a path segment starting with it (any case) is
// refused not_permitted, and stale ones are removed by the next write in their directory.
const TempPrefix = ".sharedos-tmp-"

// DefaultMaxReadBytes is the read limit when ProviderOptions.MaxReadBytes is 0.
const DefaultMaxReadBytes = 256 << 10

// DefaultMaxSnapshotBytes is the snapshot size limit when
// ProviderOptions.MaxSnapshotBytes is 0.
const DefaultMaxSnapshotBytes = 8 << 30

// ProviderOptions configure a Provider.
type ProviderOptions struct {
	// SnapshotDir holds the content-addressed snapshot blobs (created if missing). It
	// must lie outside the root. Empty means snapshots are not available
	// (snapshot actions fail unsupported_action).
	SnapshotDir string
	// Index stores snapshot metadata. Nil means an in-memory index (NewMemoryIndex)
	// that lives as long as the provider.
	Index SnapshotIndex
	// Now is the clock (completedAt, snapshot times). Nil means time.Now.
	Now func() time.Time
	// MaxReadBytes caps the content files.read returns. 0 means DefaultMaxReadBytes.
	MaxReadBytes int
	// MaxSnapshotBytes caps the content one snapshot captures (a file, or the sum of
	// a directory's files); a larger snapshot fails too_large and records nothing. 0
	// means DefaultMaxSnapshotBytes. Content is streamed, so this bounds the snapshot
	// store's disk use, not memory.
	MaxSnapshotBytes int64
	// Frozen are the root-relative paths no operation may reach (the host ceiling's
	// "files:" paths, split into segments; an empty path freezes the whole root). A
	// path matches whole segments only, under the root's name equivalence (see
	// NewProvider). An operation named at or below a frozen path is refused
	// host_policy_denied; what a recursive operation does with a frozen path below its
	// named path is said in the package documentation.
	Frozen [][]string

	// MaxOutputBytes is the output budget (JSON-encoded size) of list, grep and search,
	// and the least budget of read. 0 means DefaultMaxOutputBytes.
	MaxOutputBytes int

	// Digests remembers content digests of large files (DigestCacheMinSize or more), so
	// that files.read and files.stat report the version of such a file without hashing
	// all of it when it has not changed (see RacyGranularity for when an entry is
	// trusted). Nil: every version is hashed. Write preconditions (expectedVersion) never
	// use it.
	Digests kernel.FileDigestCache

	// probe replaces the probe of a directory's name equivalence (tests).
	probe func(dir []string) nameEquivalence
}

// Provider is the files ResourceProvider over one directory. It is safe for
// concurrent use by many goroutines, and its writes are safe against other processes
// using a Provider on the same directory.
type Provider struct {
	root        *os.Root
	rootPath    string // absolute, symbolic links resolved
	blobDir     string // "" when snapshots are off
	index       SnapshotIndex
	now         func() time.Time
	maxRead     int
	maxSnapshot int64
	maxOut      int
	workers     int
	frozen      *frozenTree // nil: nothing frozen
	digests     kernel.FileDigestCache
	digestMin   int64            // DigestCacheMinSize (tests lower it)
	wallClock   func() time.Time // the racy rule's clock (tests); nil: time.Now
	// beforeOpen, when set (tests only), runs in read and stat between examining the
	// file's name and opening it.
	beforeOpen func()
	// rootFd is a raw descriptor of the root directory (the one p.root holds), for the
	// read path (ops_read.go); -1 once closed. fdMu guards its use against Close.
	fdMu   sync.RWMutex
	rootFd int
}

// NewProvider opens root (which must be an existing directory) as the files plane. It
// does no work proportional to the tree. It fails if opts.SnapshotDir is inside root or
// a frozen path is not a valid path.
//
// With frozen paths, it then probes how the file system compares names in each
// directory a frozen path passes through (the root, and each existing ancestor of a
// frozen path), without writing anything: it looks up an entry of the directory (or,
// for the root, the root's own name in its parent) with its letters' case swapped. A
// case-insensitive directory, or one the probe cannot decide (missing, empty, or whose
// names have no letter), compares the frozen names in it with full Unicode case
// folding; every directory compares them under canonical Unicode equivalence (NFC),
// without the code points HFS+ ignores and without trailing dots. Where a directory's
// rules change after the probe (casefold set on it, a file system mounted there), the
// identity check every operation makes (see the package documentation) still covers
// the frozen paths that exist.
func NewProvider(root string, opts ProviderOptions) (*Provider, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("files root %s: %w", root, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("files root %s: %w", root, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("files root %s: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("files root %s is not a directory", root)
	}
	p := &Provider{rootPath: real, index: opts.Index, now: opts.Now, maxRead: opts.MaxReadBytes,
		workers: runtime.GOMAXPROCS(0), digests: opts.Digests, digestMin: DigestCacheMinSize}
	if p.now == nil {
		p.now = time.Now
	}
	if p.maxRead <= 0 {
		p.maxRead = DefaultMaxReadBytes
	}
	if p.maxSnapshot = opts.MaxSnapshotBytes; p.maxSnapshot <= 0 {
		p.maxSnapshot = DefaultMaxSnapshotBytes
	}
	p.maxOut = opts.MaxOutputBytes
	if p.maxOut <= 0 {
		p.maxOut = DefaultMaxOutputBytes
	}
	if p.index == nil {
		p.index = NewMemoryIndex()
	}
	if opts.SnapshotDir != "" {
		dir, err := checkSnapshotDir(real, opts.SnapshotDir)
		if err != nil {
			return nil, err
		}
		p.blobDir = filepath.Join(dir, "blobs")
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("open files root %s: %w", root, err)
	}
	p.root = r
	if p.rootFd, err = dupRootFd(r); err != nil {
		r.Close()
		return nil, fmt.Errorf("open files root %s: %w", root, err)
	}
	if len(opts.Frozen) > 0 {
		probe := opts.probe
		if probe == nil {
			probe = p.probeAt
		}
		t, err := newFrozenTree(opts.Frozen, probe)
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("files root %s: %w", root, err)
		}
		p.frozen = t
	}
	return p, nil
}

// checkSnapshotDir creates dir if needed and refuses it when it resolves to a place
// inside (or equal to) the root.
func checkSnapshotDir(rootReal, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("snapshot directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("create snapshot directory %s: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("snapshot directory %s: %w", dir, err)
	}
	rel, err := filepath.Rel(rootReal, real)
	if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("snapshot directory %s is inside the files root %s; it must be outside it", dir, rootReal)
	}
	return real, nil
}

// Namespace returns "files".
func (p *Provider) Namespace() string { return Namespace }

// RootPath returns the absolute, link-free path of the root (the key snapshots are
// stored under).
func (p *Provider) RootPath() string { return p.rootPath }

// Close releases the root. Operations after Close fail.
func (p *Provider) Close() error {
	p.fdMu.Lock()
	if p.rootFd >= 0 {
		unix.Close(p.rootFd)
		p.rootFd = -1
	}
	p.fdMu.Unlock()
	return p.root.Close()
}

// opError is an expected failure that becomes a denied or failed ResourceResult.
type opError struct {
	status    kernel.ToolStatus
	code      kernel.ErrorCode
	msg       string
	retryable bool
}

func (e *opError) Error() string { return string(e.code) + ": " + e.msg }

func denied(code kernel.ErrorCode, format string, args ...any) *opError {
	return &opError{status: kernel.StatusDenied, code: code, msg: capMessage(fmt.Sprintf(format, args...))}
}

func failed(code kernel.ErrorCode, format string, args ...any) *opError {
	return &opError{status: kernel.StatusFailed, code: code, msg: capMessage(fmt.Sprintf(format, args...))}
}

// capMessage keeps a message within the contract's 4,096 characters.
func capMessage(m string) string {
	const max = 2000
	if len(m) <= max {
		return m
	}
	r := []rune(strings.ToValidUTF8(m, "\uFFFD"))
	if len(r) <= max {
		return string(r)
	}
	return string(r[:max]) + "…"
}

// show renders a path for a message, abbreviated when very long.
func show(path []string) string {
	if len(path) == 0 {
		return "the root"
	}
	s := strings.Join(path, "/")
	if r := []rune(s); len(r) > 300 {
		s = string(r[:140]) + "…" + string(r[len(r)-140:])
	}
	return s
}

// fsError maps an error from the file system for the object at path onto an opError.
func fsError(path []string, err error) error {
	var oe *opError
	if errors.As(err, &oe) {
		return oe
	}
	switch {
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		e := failed(CodeCancelled, "the operation was cancelled before it took effect")
		e.retryable = true
		return e
	case errors.Is(err, fs.ErrNotExist):
		return failed(CodeNotFound, "%s does not exist", show(path))
	case errors.Is(err, syscall.ENOTDIR):
		return failed(CodeNotFound, "%s does not exist (a parent is not a directory)", show(path))
	case errors.Is(err, syscall.ENAMETOOLONG):
		return denied(CodeInvalidPath, "%s is too long for the file system", show(path))
	case errors.Is(err, syscall.ELOOP) || strings.Contains(err.Error(), "path escapes"):
		return denied(CodePathEscape, "%s passes through a symbolic link; links are never followed", show(path))
	case errors.Is(err, fs.ErrPermission):
		return failed(CodeProviderError, "the operating system refused access to %s", show(path))
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		e := failed(CodeProviderError, "no space left on the device while writing %s", show(path))
		e.retryable = true
		return e
	}
	e := failed(CodeProviderError, "the file system failed on %s", show(path))
	e.retryable = true
	return e
}

// checkSegments applies the provider's own path rules after kernel.ValidatePath.
func checkSegments(path []string) error {
	for _, s := range path {
		if isGitName(s) {
			return denied(CodeNotPermitted, "%s: the files plane never touches a .git directory (use the repo tools)", show(path))
		}
		if isTempName(s) {
			return denied(CodeNotPermitted, "%s: names starting with %s are reserved for the provider's temporary files", show(path), TempPrefix)
		}
	}
	return nil
}

// isGitName reports whether s may name a .git entry on some file system: ".git" in any
// case, and (as Git itself refuses them) the spellings a file system may take for it —
// trailing dots (NTFS, SMB), the 8.3 short name "git~1", and the code points HFS+ ignores
// or that Unicode case folding or normalisation removes.
func isGitName(s string) bool {
	if len(s) < 4 {
		return false
	}
	if isPlainASCII(s) {
		return strings.EqualFold(strings.TrimRight(s, "."), ".git") || strings.EqualFold(s, "git~1")
	}
	return nameEquivalence{foldCase: true}.key(s) == ".git"
}

func isTempName(s string) bool {
	return len(s) >= len(TempPrefix) && strings.EqualFold(s[:len(TempPrefix)], TempPrefix)
}

// hidden reports whether a directory entry is invisible to list, search, grep and
// snapshots: .git, temporary files, and names that are not valid path segments (they
// could never be addressed by a tool).
func hidden(name string) bool { return isGitName(name) || isTempName(name) || !validName(name) }

// validName is kernel.ValidatePathSegment with a fast path for plain ASCII names.
func validName(name string) bool {
	if len(name) == 0 || len(name) > 256 {
		return len(name) > 0 && utf8.ValidString(name) && kernel.ValidatePathSegment(name) == nil
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c >= 0x7f || c == '\\' {
			return utf8.ValidString(name) && kernel.ValidatePathSegment(name) == nil
		}
	}
	return name != "." && name != ".."
}

// Invoke executes one operation. Every expected failure is a denied or failed result,
// an outage of the snapshot index or blob store included (snapshot_index_unavailable,
// snapshot_store_unavailable, snapshot_damaged); the returned error is reserved for
// faults of the provider itself.
func (p *Provider) Invoke(ctx context.Context, op kernel.ResourceOperation) (kernel.ResourceResult, error) {
	out, err := p.invoke(ctx, op)
	res := kernel.ResourceResult{OperationID: op.OperationID, CompletedAt: kernel.FormatTimestamp(p.now().UnixMilli())}
	if err != nil {
		var oe *opError
		if !errors.As(err, &oe) {
			return kernel.ResourceResult{}, err
		}
		res.Status = oe.status
		res.Error = &kernel.ProtocolError{Code: oe.code, Message: oe.msg, Retryable: kernel.BoolPtr(oe.retryable)}
		return res, nil
	}
	res.Status = kernel.StatusSucceeded
	res.Output = out
	return res, nil
}

func (p *Provider) invoke(ctx context.Context, op kernel.ResourceOperation) (any, error) {
	if op.Resource.Namespace != Namespace {
		return nil, failed(CodeInvalidInput, "resource namespace %q is not %q", op.Resource.Namespace, Namespace)
	}
	path := op.Resource.Path
	if err := kernel.ValidatePath(path); err != nil {
		return nil, denied(CodeInvalidPath, "the path is not valid: %v", err)
	}
	if err := checkSegments(path); err != nil {
		return nil, err
	}
	if err := p.checkFrozen(path); err != nil {
		return nil, err
	}
	ids := p.frozenIdentities()
	if err := p.checkFrozenIdentity(path, ids); err != nil {
		return nil, err
	}
	ctx = withFrozenIDs(ctx, ids)
	if err := ctx.Err(); err != nil {
		return nil, fsError(path, err)
	}
	path = clonePath(path)
	var out any
	var err error
	switch op.Action {
	case ActionList:
		out, err = p.list(ctx, path)
	case ActionStat:
		out, err = p.stat(ctx, path)
	case ActionRead:
		out, err = p.read(ctx, path)
	case ActionSearch:
		var in SearchInput
		if in, err = decodeSearchInput(op.Input); err == nil {
			out, err = p.search(ctx, path, in)
		}
	case ActionGrep:
		var in GrepInput
		if in, err = decodeGrepInput(op.Input); err == nil {
			out, err = p.grep(ctx, path, in)
		}
	case ActionCreate, ActionReplace, ActionAppend:
		var in WriteInput
		if in, err = decodeWriteInput(op.Action, op.Input); err == nil {
			out, err = p.write(ctx, op.Action, path, in)
		}
	case ActionDelete:
		var in DeleteInput
		if in, err = decodeDeleteInput(op.Input); err == nil {
			out, err = p.delete(ctx, path, in)
		}
	case ActionSnapshotCreate:
		var in SnapshotCreateInput
		var has bool
		if in, has, err = decodeSnapshotCreateInput(op.Input); err == nil {
			var label *string
			if has {
				label = &in.Label
			}
			out, err = p.snapshotCreate(ctx, p.snapshotScope(op, path), label)
		}
	case ActionSnapshotList:
		var in SnapshotListInput
		if in, err = decodeSnapshotListInput(op.Input); err == nil {
			out, err = p.snapshotList(ctx, p.snapshotScope(op, path), in.Limit)
		}
	case ActionSnapshotRestore:
		var in SnapshotRestoreInput
		if in, err = decodeSnapshotRestoreInput(op.Input); err == nil {
			out, err = p.snapshotRestore(ctx, p.snapshotScope(op, path), in)
		}
	default:
		return nil, failed(CodeUnsupportedAction, "the files plane has no action %q", op.Action)
	}
	if err != nil {
		return nil, fsError(path, err)
	}
	return out, nil
}
