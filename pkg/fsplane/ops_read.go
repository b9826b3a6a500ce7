package fsplane

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sharedos/sharedos/pkg/kernel"
	"golang.org/x/sys/unix"
)

// MaxListEntries caps the entries files.list returns.
const MaxListEntries = 10000

// Version returns the version token of content: the first 32 hexadecimal characters
// of its SHA-256 digest.
func Version(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:16])
}

func versionOfDigest(sum []byte) string { return hex.EncodeToString(sum[:16]) }

// ListEntry is one entry of a list output. Addressable is false (and present) for a
// name that is not a valid path segment (spec 20 §1.2: a tab or another control
// character, a backslash, leading or trailing white space, bytes that are not UTF-8):
// it is listed so that nothing is hidden, but no tool can name it in a path.
type ListEntry struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Addressable *bool  `json:"addressable,omitempty"`
}

var notAddressable = new(bool) // shared false for the Addressable fields; never written

// displayName is name as a JSON string can carry it: bytes that are not UTF-8 become
// U+FFFD (only unaddressable names can hold them).
func displayName(name string) string { return strings.ToValidUTF8(name, "\uFFFD") }

// displayPath is path with displayName applied to each segment (a copy when needed).
func displayPath(path []string) []string {
	for _, s := range path {
		if !utf8.ValidString(s) {
			cp := make([]string, len(path))
			for j, t := range path {
				cp[j] = displayName(t)
			}
			return cp
		}
	}
	return path
}

// ListOutput is the output of list.
type ListOutput struct {
	Path      []string    `json:"path"`
	Entries   []ListEntry `json:"entries"`
	Truncated bool        `json:"truncated"`
}

// StatOutput is the output of stat. Version is set for files only.
type StatOutput struct {
	Path       []string `json:"path"`
	Kind       string   `json:"kind"`
	SizeBytes  int64    `json:"sizeBytes"`
	ModifiedAt string   `json:"modifiedAt"`
	Version    string   `json:"version,omitempty"`
}

// ReadOutput is the output of read. Encoding is "utf-8" (Content is the text) or
// "base64" (the bytes were not valid UTF-8). Version is that of the whole file, even
// when Truncated.
type ReadOutput struct {
	Path      []string `json:"path"`
	Version   string   `json:"version"`
	Truncated bool     `json:"truncated"`
	Encoding  string   `json:"encoding"`
	Content   string   `json:"content"`
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m.IsDir():
		return "directory"
	case m.IsRegular():
		return "file"
	}
	return "other"
}

// openTarget resolves path to its parent directory and final name, refusing a link
// as the final segment. For the root (empty path) it returns the root and ".".
func (p *Provider) openParent(path []string, mkdir bool) (dirRef, string, error) {
	if len(path) == 0 {
		return dirRef{r: p.root}, ".", nil
	}
	d, err := p.openDir(path[:len(path)-1], mkdir)
	if err != nil {
		return dirRef{}, "", err
	}
	return d, path[len(path)-1], nil
}

func (p *Provider) list(ctx context.Context, path []string) (any, error) {
	d, err := p.openDirOnly(path)
	if err != nil {
		return nil, err
	}
	defer d.release()
	f, err := d.r.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := ListOutput{Path: path, Entries: make([]ListEntry, 0, len(des))}
	node, _ := p.frozen.at(path)
	for _, de := range des {
		n := de.Name()
		if isGitName(n) || isTempName(n) {
			continue
		}
		if c := p.frozen.child(node, n); c != nil && c.frozen {
			continue // a frozen path is not even named
		}
		if ids := frozenIDsFrom(ctx); len(ids) > 0 {
			if fi, err := d.r.Lstat(n); err == nil && ids.of(fi) != "" {
				continue // nor is it under another name
			}
		}
		le := ListEntry{Name: n, Kind: kindOf(de.Type())}
		if !validName(n) {
			le.Name, le.Addressable = displayName(n), notAddressable
		}
		out.Entries = append(out.Entries, le)
	}
	sort.Slice(out.Entries, func(i, j int) bool { return out.Entries[i].Name < out.Entries[j].Name })
	if len(out.Entries) > MaxListEntries {
		out.Entries = out.Entries[:MaxListEntries]
		out.Truncated = true
	}
	size := 64 + jsonStringsLen(path)
	for i := range out.Entries {
		if size += listEntryJSONLen(&out.Entries[i]); size > p.maxOut {
			out.Entries = out.Entries[:i]
			out.Truncated = true
			break
		}
	}
	return out, ctx.Err()
}

// openDirOnly opens path as a directory, failing not_a_directory if it is a file.
func (p *Provider) openDirOnly(path []string) (dirRef, error) {
	if len(path) == 0 {
		return dirRef{r: p.root}, nil
	}
	parent, name, err := p.openParent(path, false)
	if err != nil {
		return dirRef{}, err
	}
	defer parent.release()
	fi, err := parent.r.Lstat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return dirRef{}, failed(CodeNotFound, "%s does not exist", show(path))
		}
		return dirRef{}, err
	}
	if fi.Mode()&fs.ModeSymlink == 0 && !fi.IsDir() {
		return dirRef{}, failed(CodeNotADirectory, "%s is a file, not a directory (use files.read)", show(path))
	}
	child, err := openChild(parent.r, name, path, false)
	if err != nil {
		return dirRef{}, err
	}
	return dirRef{r: child, owned: true}, nil
}

func (p *Provider) stat(ctx context.Context, path []string) (any, error) {
	parent, name, err := p.openParent(path, false)
	if err != nil {
		return nil, err
	}
	defer parent.release()
	fi, err := parent.r.Lstat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, failed(CodeNotFound, "%s does not exist", show(path))
		}
		return nil, err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return nil, escapeErr(path, false)
	}
	out := StatOutput{Path: path, Kind: kindOf(fi.Mode()), SizeBytes: fi.Size(),
		ModifiedAt: kernel.FormatTimestamp(fi.ModTime().UnixMilli())}
	if fi.Mode().IsRegular() {
		f, st, err := openFileInHook(parent.r, name, path, p.beforeOpen)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		var ust unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &ust); err != nil {
			return nil, &os.PathError{Op: "fstat", Path: name, Err: err}
		}
		if out.Version, err = p.wholeVersion(ctx, int(f.Fd()), &ust, nil); err != nil {
			return nil, err
		}
		out.SizeBytes = st.Size()
		out.ModifiedAt = kernel.FormatTimestamp(st.ModTime().UnixMilli())
	}
	if !fi.Mode().IsRegular() && !fi.IsDir() {
		out.SizeBytes = 0
	}
	return out, ctx.Err()
}

// readBudget is the JSON-encoded size files.read's content may take: the output
// budget, or more when the read limit's base64 needs it.
func (p *Provider) readBudget() int {
	b := base64.StdEncoding.EncodedLen(p.maxRead) + 2
	if b < p.maxOut {
		b = p.maxOut
	}
	return b
}

// readHead reads the first max bytes of f (fewer at its end). The buffer is sized from
// size, the file's size when opened (a small file costs a small buffer, not the read
// limit: zeroing a fresh 256 KiB buffer was 92 % of a small read), and grows if the
// file grew meanwhile.
func readHead(f io.Reader, size int64, max int) ([]byte, error) {
	n := max
	if size >= 0 && size+1 < int64(max) {
		n = int(size) + 1 // one more byte shows EOF (or growth) in the same read
		if n < 512 {
			n = 512
		}
	}
	buf := make([]byte, 0, n)
	for len(buf) < max {
		if len(buf) == cap(buf) {
			grow := cap(buf)
			if len(buf)+grow > max {
				grow = max - len(buf)
			}
			buf = append(buf[:cap(buf)], make([]byte, grow)...)[:len(buf)]
		}
		end := cap(buf)
		if end > max {
			end = max
		}
		room := end - len(buf)
		m, err := f.Read(buf[len(buf):end])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if m < room && int64(len(buf)) == size {
			// A short read of a regular file that ends where the opened file's size
			// says: its end (saves the read that would return EOF).
			return buf, nil
		}
	}
	return buf, nil
}

// fdReader reads a raw descriptor.
type fdReader int

func (r fdReader) Read(b []byte) (int, error) {
	for {
		n, err := unix.Read(int(r), b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return 0, err
		}
		if n == 0 && len(b) > 0 {
			return 0, io.EOF
		}
		return n, nil
	}
}

// openForRead opens the regular file at path (at least one segment) for reading with
// raw descriptors: each directory is opened with openat(parent, name,
// O_DIRECTORY|O_NOFOLLOW), which refuses a link (ELOOP) and holds exactly the
// directory it names, so no separate examination is needed; the file is examined with
// fstatat(AT_SYMLINK_NOFOLLOW) (a link is path_escape, a special file is never
// opened), opened with O_NOFOLLOW|O_NONBLOCK and its handle compared with what was
// examined, re-examined when a concurrent rename replaced it (as openFileIn). The same
// rules as the os.Root path of the other operations, with fewer system calls (8 per
// small read one directory down instead of 11). It returns the descriptor and its stat
// at open.
func (p *Provider) openForRead(path []string) (int, unix.Stat_t, error) {
	var none unix.Stat_t
	p.fdMu.RLock()
	defer p.fdMu.RUnlock()
	if p.rootFd < 0 {
		return -1, none, errors.New("files provider is closed")
	}
	dfd := p.rootFd
	closeDir := func() {
		if dfd != p.rootFd {
			unix.Close(dfd)
		}
	}
	defer func() { closeDir() }()
	for i, seg := range path[:len(path)-1] {
		nfd, err := openatNoFollow(dfd, seg, unix.O_RDONLY|unix.O_DIRECTORY)
		if err != nil {
			sub := path[:i+1]
			switch err {
			case unix.ELOOP:
				return -1, none, escapeErr(sub, false)
			case unix.ENOENT:
				return -1, none, failed(CodeNotFound, "%s does not exist", show(sub))
			case unix.ENOTDIR:
				// Linux reports a link opened with O_DIRECTORY|O_NOFOLLOW as ENOTDIR.
				var st unix.Stat_t
				if unix.Fstatat(dfd, seg, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
					return -1, none, escapeErr(sub, false)
				}
				return -1, none, failed(CodeNotFound, "%s is not a directory", show(sub))
			}
			return -1, none, &os.PathError{Op: "openat", Path: seg, Err: err}
		}
		closeDir()
		dfd = nfd
	}
	name := path[len(path)-1]
	for attempt := 1; ; attempt++ {
		var fi unix.Stat_t
		if err := unix.Fstatat(dfd, name, &fi, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if err == unix.ENOENT {
				return -1, none, failed(CodeNotFound, "%s does not exist", show(path))
			}
			return -1, none, &os.PathError{Op: "fstatat", Path: name, Err: err}
		}
		switch fi.Mode & unix.S_IFMT {
		case unix.S_IFREG:
		case unix.S_IFLNK:
			return -1, none, escapeErr(path, false)
		case unix.S_IFDIR:
			return -1, none, failed(CodeNotAFile, "%s is a directory, not a file (use files.list for a directory)", show(path))
		default:
			return -1, none, failed(CodeNotAFile, "%s is not a regular file (use files.list for a directory)", show(path))
		}
		if p.beforeOpen != nil {
			p.beforeOpen()
		}
		fd, err := openatNoFollow(dfd, name, unix.O_RDONLY|unix.O_NONBLOCK)
		if err == nil {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err != nil {
				unix.Close(fd)
				return -1, none, &os.PathError{Op: "fstat", Path: name, Err: err}
			}
			if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Dev == fi.Dev && st.Ino == fi.Ino {
				return fd, st, nil
			}
			unix.Close(fd) // replaced after the examination: look again
		} else if err != unix.ELOOP && err != unix.ENOENT && err != unix.ENOTDIR {
			return -1, none, &os.PathError{Op: "openat", Path: name, Err: err}
		}
		if attempt == openAttempts {
			e := failed(CodeProviderError, "%s was replaced %d times while it was being opened (concurrent writes); nothing was read, try again", show(path), openAttempts)
			e.retryable = true
			return -1, none, e
		}
	}
}

func (p *Provider) read(ctx context.Context, path []string) (any, error) {
	if len(path) == 0 {
		return nil, failed(CodeNotAFile, "the root is a directory, not a file (use files.list)")
	}
	fd, st, err := p.openForRead(path)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	head, err := readHead(fdReader(fd), st.Size, p.maxRead+1)
	if err != nil {
		return nil, err
	}
	truncated := len(head) > p.maxRead
	var version string
	if truncated {
		// The version is of the whole file: the rest is hashed, or its cached digest used
		// (O(returned bytes) for a large file that did not change).
		if version, err = p.wholeVersion(ctx, fd, &st, head); err != nil {
			return nil, err
		}
		head = head[:p.maxRead]
	} else {
		version = Version(head)
	}
	out := ReadOutput{Path: path, Version: version, Truncated: truncated}
	text := head
	if truncated {
		// Do not count a rune cut by the limit against the text.
		for i := 0; i < utf8.UTFMax-1 && len(text) > 0 && !utf8.Valid(text); i++ {
			text = text[:len(text)-1]
		}
	}
	if utf8.Valid(text) {
		out.Encoding, out.Content = "utf-8", string(text)
		// Text heavy in characters JSON escapes (control characters: 6 bytes each) is
		// cut further, at a character boundary, to keep the output within its budget.
		var cut bool
		if out.Content, cut = cutToJSONBudget(out.Content, p.readBudget()); cut {
			out.Truncated = true
		}
	} else {
		out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(head)
	}
	return out, ctx.Err()
}
