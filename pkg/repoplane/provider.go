package repoplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/memfs"
	"github.com/go-git/go-git/v5/plumbing/cache"
	gitconfig "github.com/go-git/go-git/v5/plumbing/format/config"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Error codes of the repo provider (ProtocolError.Code of denied and failed results).
const (
	// CodeNotARepository: the path is a directory without a .git directory, a bare
	// repository (its layout at the path, or core.bare set), or one whose metadata
	// cannot be read. Failed.
	CodeNotARepository kernel.ErrorCode = "not_a_repository"
	// CodeNotFound: the repository path, or a pathspec entry to stage, does not exist. Failed.
	CodeNotFound kernel.ErrorCode = "not_found"
	// CodeNothingToCommit: the index matches HEAD. Failed.
	CodeNothingToCommit kernel.ErrorCode = "nothing_to_commit"
	// CodeRepoBusy: another writer holds git's index or ref lock (index.lock,
	// <ref>.lock), or moved the branch meanwhile. Failed, retryable.
	CodeRepoBusy kernel.ErrorCode = "repo_busy"
	// CodeNotPermitted: the repository or the request would make sharedos act outside
	// the repository (gitdir files, alternates, include.path, core.worktree, symbolic
	// links, .git paths…) or uses a feature it refuses. Denied.
	CodeNotPermitted kernel.ErrorCode = "not_permitted"
	// CodePathEscape: the repository path runs through a symbolic link. Denied.
	CodePathEscape kernel.ErrorCode = "path_escape"
	// CodeInvalidInput: the operation or its input does not match the contract, or a
	// pathspec names only ignored files. Failed.
	CodeInvalidInput kernel.ErrorCode = "invalid_input"
	// CodeUnmerged: the index has unresolved merge conflicts, so nothing can be committed. Failed.
	CodeUnmerged kernel.ErrorCode = "unmerged_paths"
	// CodeOperationInProgress: a cherry-pick, revert, rebase or am is in progress, which
	// only git can finish (a merge in progress is completed by repo.commit). Failed.
	CodeOperationInProgress kernel.ErrorCode = "operation_in_progress"
	// CodeFilterRequired: a path named to stage has a filter attribute (git-lfs…):
	// staging it would need the filter's clean command, and sharedos never runs a
	// program. Failed.
	CodeFilterRequired kernel.ErrorCode = "filter_required"
	// CodeEncodingUnsupported: a file's working-tree-encoding cannot be converted to
	// UTF-8 (an encoding sharedos does not know, bytes invalid in it, a missing or
	// prohibited byte order mark); git refuses such a file too. Failed.
	CodeEncodingUnsupported kernel.ErrorCode = "encoding_unsupported"
	// CodeUnsupportedAction: the action is not one of the five. Failed.
	CodeUnsupportedAction kernel.ErrorCode = "unsupported_action"
	// CodeProviderError: the repository is corrupt or the file system failed. Failed.
	CodeProviderError kernel.ErrorCode = "provider_error"
)

// Defaults of ProviderOptions.
const (
	DefaultMaxDiffBytes = 256 << 10 // patch text returned by one diff
	DefaultMaxDiffFiles = 300       // files listed by one diff
	maxStatusEntries    = 10000
	maxConfigBytes      = 4 << 20
)

// ProviderOptions configure a Provider. Zero values select the defaults.
type ProviderOptions struct {
	// AuthorName and AuthorEmail are the commit identity (config repo.author.name and
	// repo.author.email). When empty, the identity is derived from the acting principal:
	// name = its id, email = <id>@<kind>.sharedos.invalid. Global and system git
	// configuration are never consulted.
	AuthorName  string
	AuthorEmail string
	// Now is the clock for commit times and completedAt (default time.Now).
	Now func() time.Time
	// MaxDiffBytes caps the patch text of one diff (default DefaultMaxDiffBytes).
	MaxDiffBytes int
	// MaxDiffFiles caps the files listed by one diff (default DefaultMaxDiffFiles).
	MaxDiffFiles int
	// Frozen lists root-relative paths (segments, as in a resource path) the host
	// ceiling froze in the files plane, e.g. {"workspace", "private"} for the frozen
	// path files:workspace/private. A path matches whole segments: itself and what
	// lies beneath it. Every operation on a repository at or beneath a frozen path, or
	// with a frozen path in its .git, is denied host_policy_denied. Inside a working
	// tree, status and diff omit frozen paths (they are never read, and neither is
	// their content in the index or HEAD); stage refuses a pathspec entry at or beneath
	// one (host_policy_denied) and, staging a directory that holds one, leaves the
	// frozen subtree's index entries untouched.
	Frozen [][]string
	// ExcludesFiles are ignore files (gitignore syntax, patterns relative to each
	// repository's top) that apply to every repository beneath the root, below
	// .git/info/exclude and the .gitignore files in precedence: the operator's stand-in
	// for git's core.excludesFile and global ignore file (config repo.excludesFiles;
	// the host defaults it to DefaultExcludesFile when that lies outside the root).
	// They are the only files outside the root the provider opens; they are read per
	// operation, and one that is missing or unreadable is skipped. A repository's own
	// configuration (core.excludesFile in .git/config) is never followed.
	ExcludesFiles []string
}

// Provider is the "repo" kernel.ResourceProvider: it serves the five repo actions on the
// git repositories beneath its root, using go-git and never a git binary. A resource
// path names the repository's top directory (the one holding .git), relative to root.
// It is safe for concurrent use; it holds no open repository between operations.
type Provider struct {
	root string
	opts ProviderOptions
}

var _ kernel.ResourceProvider = (*Provider)(nil)

// NewProvider returns a Provider for the repositories beneath root. It only records its
// arguments: nothing is opened or read until an operation runs.
func NewProvider(root string, opts ProviderOptions) (*Provider, error) {
	if root == "" {
		return nil, errors.New("repoplane: root is empty")
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("repoplane: resolve root %s: %w", root, err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxDiffBytes <= 0 {
		opts.MaxDiffBytes = DefaultMaxDiffBytes
	}
	if opts.MaxDiffFiles <= 0 {
		opts.MaxDiffFiles = DefaultMaxDiffFiles
	}
	if err := checkFrozen(opts.Frozen); err != nil {
		return nil, err
	}
	opts.Frozen = cloneFrozen(opts.Frozen)
	opts.ExcludesFiles = append([]string(nil), opts.ExcludesFiles...)
	for _, f := range opts.ExcludesFiles {
		if !filepath.IsAbs(f) {
			return nil, fmt.Errorf("repoplane: excludes file %s is not an absolute path", f)
		}
	}
	return &Provider{root: abs, opts: opts}, nil
}

// Namespace returns "repo".
func (p *Provider) Namespace() string { return Namespace }

// opError is an expected failure, reported as a denied or failed result.
type opError struct {
	status    kernel.ToolStatus
	code      kernel.ErrorCode
	msg       string
	retryable bool
}

func (e *opError) Error() string { return string(e.code) + ": " + e.msg }

func failed(code kernel.ErrorCode, format string, args ...any) *opError {
	return &opError{status: kernel.StatusFailed, code: code, msg: fmt.Sprintf(format, args...)}
}

func denied(code kernel.ErrorCode, format string, args ...any) *opError {
	return &opError{status: kernel.StatusDenied, code: code, msg: fmt.Sprintf(format, args...)}
}

func busy(format string, args ...any) *opError {
	e := failed(CodeRepoBusy, format, args...)
	e.retryable = true
	return e
}

// internal wraps an unexpected repository or file-system failure.
func internal(what string, err error) *opError {
	var oe *opError
	if errors.As(err, &oe) {
		return oe
	}
	var bad errBadIndexPath
	if errors.As(err, &bad) {
		return denied(CodeNotPermitted, "%s", bad.Error())
	}
	var unsup errUnsupportedIndex
	if errors.As(err, &unsup) {
		return denied(CodeNotPermitted, "%s", unsup.Error())
	}
	return failed(CodeProviderError, "%s: %v", what, err)
}

// Invoke runs one repo operation. Expected failures are results (see the Code constants);
// a Go error is returned only when ctx is done before the operation had any effect.
func (p *Provider) Invoke(ctx context.Context, op kernel.ResourceOperation) (kernel.ResourceResult, error) {
	if err := ctx.Err(); err != nil {
		return kernel.ResourceResult{}, err
	}
	out, oe := p.guardedInvoke(ctx, op)
	rr := kernel.ResourceResult{OperationID: op.OperationID,
		CompletedAt: kernel.FormatTimestamp(p.opts.Now().UnixMilli())}
	if oe != nil {
		msg := oe.msg
		if jscompat.UTF16Len(msg) > 4000 {
			msg = string([]rune(msg)[:1000]) + "…"
		}
		rr.Status = oe.status
		rr.Error = &kernel.ProtocolError{Code: oe.code, Message: msg, Retryable: kernel.BoolPtr(oe.retryable)}
		return rr, nil
	}
	rr.Status = kernel.StatusSucceeded
	rr.Output = out
	return rr, nil
}

// guardedInvoke turns a panic inside go-git (which decodes untrusted objects) into a
// failed result instead of a crashed host. Locks are released by their deferred calls.
func (p *Provider) guardedInvoke(ctx context.Context, op kernel.ResourceOperation) (out any, oe *opError) {
	defer func() {
		if v := recover(); v != nil {
			out, oe = nil, failed(CodeProviderError, "the repository could not be read: %v", v)
		}
	}()
	return p.invoke(ctx, op)
}

func (p *Provider) invoke(ctx context.Context, op kernel.ResourceOperation) (any, *opError) {
	if op.Resource.Namespace != Namespace {
		return nil, failed(CodeInvalidInput, "the repo provider serves namespace %q, not %q", Namespace, op.Resource.Namespace)
	}
	if err := kernel.ValidatePath(op.Resource.Path); err != nil {
		return nil, failed(CodeInvalidInput, "path: %v", err)
	}
	path := op.Resource.Path
	if path == nil {
		path = []string{}
	}
	for _, s := range path {
		if isDotGit(s) {
			return nil, denied(CodeNotPermitted, "the repository path must not name a .git directory")
		}
	}
	var run func(r *repo) (any, *opError)
	switch op.Action {
	case ActionStatus:
		if !noInput(op.Input) {
			return nil, failed(CodeInvalidInput, "status takes no input")
		}
		run = func(r *repo) (any, *opError) { return r.status(ctx) }
	case ActionDiff:
		var in DiffInput
		if err := decodeInput(op.Input, &in); err != nil {
			return nil, err
		}
		if in.Pathspec != nil {
			if err := checkPathspec(in.Pathspec); err != nil {
				return nil, err
			}
		}
		run = func(r *repo) (any, *opError) { return r.diff(ctx, in, p.opts) }
	case ActionLog:
		in := LogInput{MaxCount: DefaultLogCount}
		if !noInput(op.Input) {
			if err := decodeInput(op.Input, &in); err != nil {
				return nil, err
			}
			if in.MaxCount < 1 || in.MaxCount > MaxLogCount {
				return nil, failed(CodeInvalidInput, "maxCount must be an integer from 1 to %d", MaxLogCount)
			}
		}
		run = func(r *repo) (any, *opError) { return r.log(ctx, in.MaxCount) }
	case ActionStage:
		var in StageInput
		if err := decodeInput(op.Input, &in); err != nil {
			return nil, err
		}
		if err := checkPathspec(in.Pathspec); err != nil {
			return nil, err
		}
		run = func(r *repo) (any, *opError) { return r.stage(ctx, in.Pathspec) }
	case ActionCommit:
		var in CommitInput
		if err := decodeInput(op.Input, &in); err != nil {
			return nil, err
		}
		m, err := ParseMessage(in.Message)
		if err != nil {
			return nil, failed(CodeInvalidInput, "message: %v", err)
		}
		in.Message = m
		run = func(r *repo) (any, *opError) {
			return r.commit(ctx, in.Message, p.identity(op.Context), op.Context, p.opts.Now())
		}
	default:
		return nil, failed(CodeUnsupportedAction, "the repo provider has no action %q", op.Action)
	}
	frozen, oe := p.frozenFor(path)
	if oe != nil {
		return nil, oe
	}
	r, oe := p.open(path)
	if oe != nil {
		return nil, oe
	}
	defer r.close()
	r.frozen = frozen
	r.excludes = readExcludesFiles(p.opts.ExcludesFiles)
	return run(r)
}

// noInput reports whether an operation carries no input (absent, or a JSON null).
func noInput(in any) bool {
	if in == nil {
		return true
	}
	b, err := json.Marshal(in)
	return err == nil && string(bytes.TrimSpace(b)) == "null"
}

// decodeInput reads an operation input into dst: the typed struct of tools.go (value or
// pointer) or any JSON-equivalent value, decoded strictly.
func decodeInput(in any, dst any) *opError {
	switch v := in.(type) {
	case nil:
		return failed(CodeInvalidInput, "the operation needs an input")
	case DiffInput:
		if d, ok := dst.(*DiffInput); ok {
			*d = v
			return nil
		}
	case *DiffInput:
		if d, ok := dst.(*DiffInput); ok && v != nil {
			*d = *v
			return nil
		}
	case StageInput:
		if d, ok := dst.(*StageInput); ok {
			*d = v
			return nil
		}
	case *StageInput:
		if d, ok := dst.(*StageInput); ok && v != nil {
			*d = *v
			return nil
		}
	case LogInput:
		if d, ok := dst.(*LogInput); ok {
			*d = v
			return nil
		}
	case *LogInput:
		if d, ok := dst.(*LogInput); ok && v != nil {
			*d = *v
			return nil
		}
	case CommitInput:
		if d, ok := dst.(*CommitInput); ok {
			*d = v
			return nil
		}
	case *CommitInput:
		if d, ok := dst.(*CommitInput); ok && v != nil {
			*d = *v
			return nil
		}
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return failed(CodeInvalidInput, "the input is not JSON")
	}
	var perr error
	switch d := dst.(type) {
	case *DiffInput:
		var a any
		if a, perr = parseDiff(withPath(raw, "staged", "pathspec")); perr == nil {
			*d = DiffInput{Staged: a.(DiffArgs).Staged, Pathspec: a.(DiffArgs).Pathspec}
		}
	case *LogInput:
		var a any
		if a, perr = parseLog(withPath(raw, "maxCount")); perr == nil {
			if mc := a.(LogArgs).MaxCount; mc != nil {
				d.MaxCount = *mc
			} else {
				perr = errors.New("maxCount is required when an input is given")
			}
		}
	case *StageInput:
		var a any
		if a, perr = parseStage(withPath(raw, "pathspec")); perr == nil {
			d.Pathspec = a.(StageArgs).Pathspec
		}
	case *CommitInput:
		var a any
		if a, perr = parseCommit(withPath(raw, "message")); perr == nil {
			d.Message = a.(CommitArgs).Message
		}
	}
	if perr != nil {
		return failed(CodeInvalidInput, "input: %v", perr)
	}
	return nil
}

// withPath checks that raw is an object with only the allowed keys and adds an empty
// "path", so the argument parsers (which also want a path) can validate the rest. A
// rejected input comes back as a non-object, which the parsers refuse.
func withPath(raw []byte, allowed ...string) json.RawMessage {
	fields, err := kernel.StrictFields(raw, allowed...)
	if err != nil {
		return json.RawMessage(`null`)
	}
	fields["path"] = json.RawMessage(`[]`)
	out, err := json.Marshal(fields)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return out
}

// checkPathspec re-validates a pathspec at the provider boundary (it may not have come
// through ParseArguments) and refuses any entry naming .git.
func checkPathspec(ps [][]string) *opError {
	if len(ps) < 1 || len(ps) > MaxPathspecEntries {
		return failed(CodeInvalidInput, "pathspec must list 1 to %d paths", MaxPathspecEntries)
	}
	for i, p := range ps {
		if len(p) < 1 {
			return failed(CodeInvalidInput, "pathspec.%d: must have at least 1 segment", i)
		}
		if err := kernel.ValidatePath(p); err != nil {
			return failed(CodeInvalidInput, "pathspec.%d: %v", i, err)
		}
		for _, s := range p {
			if isDotGit(s) {
				return denied(CodeNotPermitted, "pathspec.%d: paths under .git are never read or staged", i)
			}
		}
	}
	return nil
}

// identity is the commit author (and committer) of an operation.
func (p *Provider) identity(actx kernel.AccessContext) Signature {
	name, email := p.opts.AuthorName, p.opts.AuthorEmail
	if name == "" {
		name = actx.Actor.ID
	}
	if email == "" {
		email = emailLocal(actx.Actor.ID) + "@" + emailLocal(string(actx.Actor.Kind)) + ".sharedos.invalid"
	}
	return Signature{Name: sanitizeIdent(name), Email: sanitizeIdent(email)}
}

// sanitizeIdent removes what git forbids in an identity: angle brackets, newlines and
// other control characters.
func sanitizeIdent(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '<' || r == '>' || r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if s == "" {
		s = "unknown"
	}
	return s
}

// emailLocal keeps an id usable as an email label: letters, digits and ._+- only.
func emailLocal(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		return "unknown"
	}
	return string(b)
}

// --- opening a repository -----------------------------------------------------------

// repo is one opened repository: the working tree and .git as descriptor-held roots,
// go-git's object store on the .git root, and the few local settings sharedos honours.
type repo struct {
	path         []string
	wt           *os.Root // the working tree (repository top directory)
	git          *os.Root // its .git directory
	gitName      string
	st           *filesystem.Storage
	objs         *objectStore // the bounded object reader (objread.go)
	frozen       frozenSet    // paths the host froze, relative to the working tree
	excludes     [][]byte     // the operator's excludes files (ProviderOptions.ExcludesFiles)
	fileMode     bool         // core.filemode
	ctime        bool         // core.trustctime
	reflog       bool         // core.logAllRefUpdates
	autocrlf     int          // core.autocrlf
	quotePath    bool         // core.quotePath (patch headers)
	idx          *gitIndex    // the index this operation loaded (for attributes files and autocrlf)
	objMu        sync.Mutex   // serialises readBlob from the walk's goroutines
	abbrevConfig int          // core.abbrev (0: auto)
	abbrevs      abbrevState
	attrOnce     sync.Once
	attrs        *attrCache
}

func (r *repo) close() {
	r.closeAbbrev()
	if r.objs != nil {
		r.objs.close()
	}
	if r.st != nil {
		_ = r.st.Close()
	}
	if r.git != nil {
		_ = r.git.Close()
	}
	if r.wt != nil {
		_ = r.wt.Close()
	}
}

// open resolves path beneath the provider root, one segment at a time without following
// symbolic links, checks the repository layout and its local configuration, and opens
// go-git's storage confined to .git.
func (p *Provider) open(path []string) (*repo, *opError) {
	cur, err := os.OpenRoot(p.root)
	if err != nil {
		return nil, failed(CodeProviderError, "the repository root is not available")
	}
	shown := kernel.JoinPath(path)
	for _, seg := range path {
		next, oe := openDir(cur, seg, shown)
		_ = cur.Close()
		if oe != nil {
			return nil, oe
		}
		cur = next
	}
	r := &repo{path: path, wt: cur, fileMode: true, ctime: true, reflog: true, quotePath: true}
	fi, err := cur.Lstat(".git")
	switch {
	case errors.Is(err, fs.ErrNotExist):
		bare := looksBare(cur)
		r.close()
		if bare {
			return nil, failed(CodeNotARepository, "%s is a bare repository (no working tree); sharedos only opens repositories with a .git directory", shown)
		}
		return nil, failed(CodeNotARepository, "%s is not the top directory of a git repository (no .git)", shown)
	case err != nil:
		r.close()
		return nil, failed(CodeProviderError, "inspect %s: %v", dotGit(shown), err)
	case fi.Mode()&fs.ModeSymlink != 0:
		r.close()
		return nil, denied(CodeNotPermitted, "%s is a symbolic link; sharedos only opens a .git directory held inside the repository", dotGit(shown))
	case fi.Mode().IsRegular():
		r.close()
		return nil, denied(CodeNotPermitted, "%s is a file (a gitdir: indirection, as in a linked worktree or a submodule); only a .git directory held inside the repository is opened", dotGit(shown))
	case !fi.IsDir():
		r.close()
		return nil, failed(CodeNotARepository, "%s is not a directory", dotGit(shown))
	}
	g, err := cur.OpenRoot(".git")
	if err != nil {
		r.close()
		return nil, failed(CodeProviderError, "open %s: %v", dotGit(shown), err)
	}
	r.git = g
	if gi, err := g.Stat("."); err != nil || !os.SameFile(fi, gi) {
		r.close()
		return nil, denied(CodeNotPermitted, "%s changed while it was opened", dotGit(shown))
	}
	r.gitName = filepath.Join(append([]string{p.root}, append(append([]string{}, path...), ".git")...)...)
	if oe := r.checkLayout(shown); oe != nil {
		r.close()
		return nil, oe
	}
	if oe := r.readConfig(shown); oe != nil {
		r.close()
		return nil, oe
	}
	r.st = filesystem.NewStorageWithOptions(&rootFS{root: g, name: r.gitName}, cache.NewObjectLRUDefault(),
		filesystem.Options{AlternatesFS: memfs.New()})
	if _, oe := r.readHead(); oe != nil {
		r.close()
		return nil, oe
	}
	return r, nil
}

// dotGit names the .git of the repository shown as shown ("/" is the root) in messages.
func dotGit(shown string) string {
	if shown == "/" {
		return ".git"
	}
	return shown + "/.git"
}

// looksBare reports whether dir holds a bare repository's layout (HEAD, objects, refs).
func looksBare(dir *os.Root) bool {
	for _, name := range []string{"HEAD", "objects", "refs"} {
		if _, err := dir.Lstat(name); err != nil {
			return false
		}
	}
	return true
}

// openDir opens the subdirectory seg of cur, refusing a symbolic link.
func openDir(cur *os.Root, seg, shown string) (*os.Root, *opError) {
	fi, err := cur.Lstat(seg)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, failed(CodeNotFound, "%s does not exist", shown)
	case err != nil:
		return nil, failed(CodeProviderError, "inspect %s: %v", shown, err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, denied(CodePathEscape, "%s runs through a symbolic link (%s)", shown, seg)
	case !fi.IsDir():
		return nil, failed(CodeNotARepository, "%s is not a directory", shown)
	}
	next, err := cur.OpenRoot(seg)
	if err != nil {
		return nil, failed(CodeProviderError, "open %s: %v", shown, err)
	}
	if ni, err := next.Stat("."); err != nil || !os.SameFile(fi, ni) {
		_ = next.Close()
		return nil, denied(CodePathEscape, "%s changed while it was opened", shown)
	}
	return next, nil
}

// checkLayout refuses the .git layouts that redirect git outside the repository, and
// symbolic links among git's own files (a link could only ever lead elsewhere).
func (r *repo) checkLayout(shown string) *opError {
	for _, name := range []string{"commondir", "objects/info/alternates", "objects/info/http-alternates"} {
		if _, err := r.git.Lstat(name); err == nil {
			return denied(CodeNotPermitted, "%s/%s points git at another object or metadata directory; such repositories are refused", dotGit(shown), name)
		}
	}
	for _, name := range []string{"HEAD", "config", "index", "objects", "refs", "packed-refs", "objects/info",
		"objects/pack", "refs/heads", "info", "info/exclude", "logs", "logs/refs", "logs/HEAD", "shallow", "hooks"} {
		fi, err := r.git.Lstat(name)
		if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return denied(CodeNotPermitted, "%s/%s is a symbolic link; such repositories are refused", dotGit(shown), name)
		}
	}
	for _, name := range []string{"objects", "refs"} {
		if fi, err := r.git.Lstat(name); err != nil || !fi.IsDir() {
			return failed(CodeNotARepository, "%s has no %s directory", dotGit(shown), name)
		}
	}
	if fi, err := r.git.Lstat("HEAD"); err != nil || !fi.Mode().IsRegular() {
		return failed(CodeNotARepository, "%s has no HEAD", dotGit(shown))
	}
	return nil
}

// readConfig reads .git/config only (system and global configuration are never read) and
// refuses settings that would make git read or act elsewhere.
func (r *repo) readConfig(shown string) *opError {
	worktreeConfig, oe := r.checkConfig(shown, "config")
	if oe != nil || !worktreeConfig {
		return oe
	}
	// extensions.worktreeConfig: git also reads config.worktree; it gets the same checks
	_, oe = r.checkConfig(shown, "config.worktree")
	return oe
}

// checkConfig reads and checks one configuration file of .git; it reports whether the
// file turns extensions.worktreeConfig on.
func (r *repo) checkConfig(shown, name string) (worktreeConfig bool, oe *opError) {
	data, err := readFileLimited(r.git, name, maxConfigBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, failed(CodeProviderError, "read %s/%s: %v", dotGit(shown), name, err)
	}
	cfg := gitconfig.New()
	if err := gitconfig.NewDecoder(bytes.NewReader(data)).Decode(cfg); err != nil {
		return false, failed(CodeNotARepository, "%s/%s cannot be parsed: %v", dotGit(shown), name, err)
	}
	for _, s := range cfg.Sections {
		switch {
		case s.IsName("include"), s.IsName("includeIf"):
			return false, denied(CodeNotPermitted, "%s/%s includes other configuration files (include.path); such repositories are refused", dotGit(shown), name)
		case s.IsName("core"):
			if s.HasOption("worktree") {
				return false, denied(CodeNotPermitted, "%s/%s sets core.worktree (a working tree elsewhere); such repositories are refused", dotGit(shown), name)
			}
			if v, ok := lastBool(s.Options, "bare"); ok && v {
				return false, failed(CodeNotARepository, "%s is a bare repository (core.bare); sharedos only opens repositories with a working tree", shown)
			}
			if v := s.Options.Get("repositoryformatversion"); v != "" {
				if n, err := strconv.Atoi(strings.TrimSpace(v)); err != nil || n < 0 || n > 1 {
					return false, denied(CodeNotPermitted, "%s uses repository format version %q, which sharedos does not read", shown, v)
				}
			}
			if v, ok := lastBool(s.Options, "filemode"); ok {
				r.fileMode = v
			}
			if v, ok := lastBool(s.Options, "trustctime"); ok {
				r.ctime = v
			}
			if v, ok := lastBool(s.Options, "logallrefupdates"); ok {
				r.reflog = v
			}
			if s.Options.Has("abbrev") {
				r.abbrevConfig = parseAbbrevConfig(s.Options.Get("abbrev"))
			}
			if v, ok := lastBool(s.Options, "quotepath"); ok {
				r.quotePath = v
			}
			if s.Options.Has("autocrlf") {
				r.autocrlf = parseAutocrlf(s.Options.Get("autocrlf"))
			}
		case s.IsName("extensions"):
			for _, o := range s.Options {
				switch strings.ToLower(o.Key) {
				case "objectformat":
					if !strings.EqualFold(strings.TrimSpace(o.Value), "sha1") {
						return false, denied(CodeNotPermitted, "%s uses object format %q, which sharedos does not read", shown, o.Value)
					}
				case "worktreeconfig":
					if v, ok := lastBool(gitconfig.Options{o}, "worktreeconfig"); ok && v {
						worktreeConfig = true
					}
				case "refstorage":
					if !strings.EqualFold(strings.TrimSpace(o.Value), "files") {
						return false, denied(CodeNotPermitted, "%s uses ref storage %q, which sharedos does not read", shown, o.Value)
					}
				}
			}
		}
	}
	return worktreeConfig, nil
}

// lastBool reads a git boolean (true/yes/on/1, false/no/off/0; a bare key is true).
func lastBool(opts gitconfig.Options, key string) (bool, bool) {
	if !opts.Has(key) {
		return false, false
	}
	switch strings.ToLower(strings.TrimSpace(opts.Get(key))) {
	case "", "true", "yes", "on", "1":
		return true, true
	case "false", "no", "off", "0":
		return false, true
	}
	return false, false
}

// readFileLimited reads a regular file through root, refusing links and huge files.
func readFileLimited(root *os.Root, name string, limit int64) ([]byte, error) {
	fi, err := root.Lstat(name)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	f, err := root.OpenFile(name, openReadNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if si, err := f.Stat(); err != nil || !si.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	return io.ReadAll(io.LimitReader(f, limit+1))
}
