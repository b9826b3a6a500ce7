package repoplane

import (
	"bytes"
	"context"
	"crypto/sha1"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"
	udiff "github.com/go-git/go-git/v5/utils/diff"
)

// DiffOutput is the output of repo.diff (see the tool's outputSchema).
type DiffOutput struct {
	Path      []string   `json:"path"`
	Staged    bool       `json:"staged"`
	Files     []DiffFile `json:"files"`
	Truncated bool       `json:"truncated"`
}

// DiffFile is one changed file of repo.diff.
type DiffFile struct {
	Path      []string `json:"path"`
	OldPath   []string `json:"oldPath,omitempty"`
	Status    string   `json:"status"`
	Additions int      `json:"additions"`
	Deletions int      `json:"deletions"`
	Binary    bool     `json:"binary"`
	// BinaryReason says why Binary is true (see binaryReasons); "" when it is not.
	BinaryReason string `json:"binaryReason,omitempty"`
	// Filter is the filter driver the path's attributes name; "" when none.
	Filter string `json:"filter,omitempty"`
	Patch  string `json:"patch"`
}

// Why repo.diff shows a file as binary (binaryReason), strongest first: a side that
// needs a filter's clean command (the working tree of a filtered path: its raw bytes
// are not what git would store); the attributes say so (-diff, binary); a side larger
// than 8 MiB; a NUL byte in the first 8000 bytes (git's own test); a side that is not
// UTF-8 (patches are JSON strings, so such text would have to be altered: its lines
// are still counted, as git's numstat does, but no patch text is given) or that its
// working-tree-encoding cannot convert.
const (
	binaryFilter    = "filter"
	binaryAttribute = "attribute"
	binarySize      = "size"
	binaryNUL       = "nul"
	binaryEncoding  = "encoding"
)

var binaryReasons = []string{binaryFilter, binaryAttribute, binarySize, binaryNUL, binaryEncoding}

// strongerReason returns the stronger of two binary reasons ("" is none).
func strongerReason(a, b string) string {
	for _, r := range binaryReasons {
		if a == r || b == r {
			return r
		}
	}
	return ""
}

const (
	maxTextBytes = 8 << 20 // larger contents are reported as binary
	binarySniff  = 8000    // git looks for a NUL byte in this many leading bytes
	diffTimeout  = 2 * time.Second
	contextLines = 3
)

// side is one side of a file diff.
type side struct {
	path string
	mode uint32
	hash plumbing.Hash
	// content source: a blob (fromBlob) or a working-tree path
	fromBlob bool
	size     int64
}

func (r *repo) diff(ctx context.Context, in DiffInput, o ProviderOptions) (any, *opError) {
	head, oe := r.readHead()
	if oe != nil {
		return nil, oe
	}
	idx, idxSec, err := r.loadIndex()
	if err != nil {
		return nil, internal("read the index", err)
	}
	spec := newPathspec(in.Pathspec)
	type pair struct {
		code     byte
		old, new *side
	}
	var pairs []pair
	if in.Staged {
		tree, oe := r.commitTree(head.hash)
		if oe != nil {
			return nil, oe
		}
		chs, err := r.stagedChanges(ctx, idx, tree, spec)
		if err != nil {
			return nil, internal("compare the index with HEAD", err)
		}
		for _, ch := range chs {
			p := pair{code: ch.code}
			if ch.code != 'A' {
				op := ch.path
				if ch.oldPath != "" {
					op = ch.oldPath
				}
				p.old = &side{path: op, mode: ch.oldMode, hash: ch.oldHash, fromBlob: true}
			}
			if ch.code != 'D' {
				p.new = &side{path: ch.path, mode: ch.newMode, hash: ch.newHash, fromBlob: true}
			}
			pairs = append(pairs, p)
		}
	} else {
		w := newWalker(ctx, r, idxSec, false, spec)
		if err := w.run(idx.entries); err != nil {
			return nil, internal("compare the working tree with the index", err)
		}
		sort.Slice(w.out, func(i, j int) bool { return w.out[i].path < w.out[j].path })
		for _, c := range w.out {
			p := pair{code: c.code}
			if c.code != 'A' {
				p.old = &side{path: c.path, mode: c.entry.mode, hash: c.entry.hash, fromBlob: true}
			}
			if c.code != 'D' {
				p.new = &side{path: c.path, mode: c.newMode, hash: c.newHash, size: int64(c.stat.size)}
			}
			pairs = append(pairs, p)
		}
	}
	out := DiffOutput{Path: r.path, Staged: in.Staged, Files: []DiffFile{}}
	if len(pairs) > o.MaxDiffFiles {
		pairs = pairs[:o.MaxDiffFiles]
		out.Truncated = true
	}
	budget := o.MaxDiffBytes
	for _, p := range pairs {
		if err := ctx.Err(); err != nil {
			return nil, internal("diff", err)
		}
		f, oe := r.filePatch(p.code, p.old, p.new, budget > 0)
		if oe != nil {
			return nil, oe
		}
		if !in.Staged && p.old != nil && p.new != nil && p.old.hash == p.new.hash && p.old.mode == p.new.mode {
			continue // stat-dirty only (git diff drops such pairs too)
		}
		switch {
		case budget <= 0:
			out.Truncated = true // this file's patch is left out
		case len(f.Patch) > budget:
			cut := strings.LastIndexByte(f.Patch[:budget], '\n')
			f.Patch = f.Patch[:cut+1]
			budget = 0
			out.Truncated = true
		default:
			budget -= len(f.Patch)
		}
		out.Files = append(out.Files, f)
	}
	return out, nil
}

// filePatch computes the counts and, when withPatch, the unified patch of one file. A
// change of kind (file, link, submodule) is two patches, a deletion and a creation, as
// git writes it (git apply accepts no other form).
func (r *repo) filePatch(code byte, old, new *side, withPatch bool) (DiffFile, *opError) {
	if old != nil && new != nil && objectKind(old.mode) != objectKind(new.mode) {
		del, oe := r.filePatch('D', old, nil, withPatch)
		if oe != nil {
			return DiffFile{}, oe
		}
		add, oe := r.filePatch('A', nil, new, withPatch)
		if oe != nil {
			return DiffFile{}, oe
		}
		add.Status = string(code)
		add.Deletions = del.Deletions
		add.Binary = add.Binary || del.Binary
		add.BinaryReason = strongerReason(add.BinaryReason, del.BinaryReason)
		add.Patch = del.Patch + add.Patch
		return add, nil
	}
	var a, b []byte
	var err error
	reason := ""
	if old != nil {
		if a, reason, err = r.content(old); err != nil {
			return DiffFile{}, internal("read "+old.path, err)
		}
	}
	if new != nil {
		var why string
		if b, why, err = r.content(new); err != nil {
			return DiffFile{}, internal("read "+new.path, err)
		}
		reason = strongerReason(reason, why)
		if !new.fromBlob && new.hash.IsZero() && b != nil {
			new.hash = blobHash(sha1.New(), b)
		}
	}
	binary := reason != ""
	f := DiffFile{Status: string(code), Binary: binary, BinaryReason: reason}
	if new != nil {
		f.Filter = r.filterOf(new.path)
	} else if old != nil {
		f.Filter = r.filterOf(old.path)
	}
	if old != nil {
		f.Path = splitPath(old.path)
	}
	if new != nil {
		f.Path = splitPath(new.path)
		if old != nil && old.path != new.path {
			f.OldPath = splitPath(old.path)
		}
	}
	var lines []diffLine
	if (!binary || reason == binaryEncoding) && !bytes.Equal(a, b) {
		// text that is not UTF-8 still has its lines counted (git's numstat)
		lines = lineDiff(string(a), string(b))
		for _, l := range lines {
			switch l.kind {
			case -1:
				f.Deletions++
			case 1:
				f.Additions++
			}
		}
	}
	if withPatch {
		var sb strings.Builder
		writeHeader(&sb, old, new, binary, len(lines) > 0, r.quotePath, r.abbrev)
		var match func(string) (string, bool)
		if binary {
			lines = nil // counted, not shown
		}
		if len(lines) > 0 {
			var p string // git asks the old side's driver first
			if old != nil {
				p = old.path
			} else {
				p = new.path
			}
			if at := r.attributes().lookup(p); at.diff.set && !at.diff.unset && at.diff.value != "" {
				match = funcMatcher(at.diff.value)
			}
		}
		writeHunks(&sb, lines, contextLines, match)
		f.Patch = sb.String()
	}
	return f, nil
}

// diffLine is one line of a line diff: kind -1 (old only), 0 (both), +1 (new only);
// text keeps its newline (the last line of a file may have none).
type diffLine struct {
	kind int8
	text string
}

// lineDiff diffs two texts by lines. Common leading and trailing lines are set aside
// first (as git's xdiff does), so a typical edit leaves little for the diff algorithm.
func lineDiff(a, b string) []diffLine {
	al, bl := splitKeep(a), splitKeep(b)
	p := 0
	for p < len(al) && p < len(bl) && al[p] == bl[p] {
		p++
	}
	q := 0
	for q < len(al)-p && q < len(bl)-p && al[len(al)-1-q] == bl[len(bl)-1-q] {
		q++
	}
	out := make([]diffLine, 0, len(al)+len(bl)-p-q)
	for _, l := range al[:p] {
		out = append(out, diffLine{0, l})
	}
	am, bm := al[p:len(al)-q], bl[p:len(bl)-q]
	switch {
	case len(am) == 0:
		for _, l := range bm {
			out = append(out, diffLine{1, l})
		}
	case len(bm) == 0:
		for _, l := range am {
			out = append(out, diffLine{-1, l})
		}
	default:
		for _, d := range udiff.DoWithTimeout(strings.Join(am, ""), strings.Join(bm, ""), diffTimeout) {
			for _, l := range splitKeep(d.Text) {
				out = append(out, diffLine{int8(d.Type), l}) // -1 deleted, 0 equal, +1 added
			}
		}
	}
	for _, l := range al[len(al)-q:] {
		out = append(out, diffLine{0, l})
	}
	return out
}

// splitKeep splits s into lines that keep their "\n".
func splitKeep(s string) []string {
	var out []string
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// writeHeader writes git's extended header of one file patch; the "---"/"+++" lines
// only come with hunks (git writes none for an empty file created or deleted). Names
// are C-quoted as git quotes them (cQuote), and a "---"/"+++" name holding a space ends
// with a tab, as in git's output.
func writeHeader(sb *strings.Builder, old, new *side, binary, hunks, quoteFull bool, abbrev func(plumbing.Hash) string) {
	q := func(prefix, p string) string { return cQuote(prefix+p, quoteFull) }
	label := func(prefix, p string) string {
		l := q(prefix, p)
		if strings.IndexByte(p, ' ') >= 0 {
			l += "\t"
		}
		return l
	}
	a, b := "/dev/null", "/dev/null"
	aName, bName := "/dev/null", "/dev/null"
	switch {
	case old != nil && new != nil:
		fmt.Fprintf(sb, "diff --git %s %s\n", q("a/", old.path), q("b/", new.path))
		if old.mode != new.mode {
			fmt.Fprintf(sb, "old mode %o\nnew mode %o\n", old.mode, new.mode)
		}
		if old.path != new.path {
			same := old.hash == new.hash
			if same {
				sb.WriteString("similarity index 100%\n")
			}
			fmt.Fprintf(sb, "rename from %s\nrename to %s\n", q("", old.path), q("", new.path))
			if same {
				return
			}
		}
		if old.hash == new.hash {
			return
		}
		if old.mode == new.mode {
			fmt.Fprintf(sb, "index %s..%s %o\n", abbrev(old.hash), abbrev(new.hash), old.mode)
		} else {
			fmt.Fprintf(sb, "index %s..%s\n", abbrev(old.hash), abbrev(new.hash))
		}
		a, b = label("a/", old.path), label("b/", new.path)
		aName, bName = q("a/", old.path), q("b/", new.path)
	case new != nil:
		fmt.Fprintf(sb, "diff --git %s %s\nnew file mode %o\nindex %s..%s\n", q("a/", new.path), q("b/", new.path), new.mode, abbrev(plumbing.ZeroHash), abbrev(new.hash))
		b, bName = label("b/", new.path), q("b/", new.path)
	case old != nil:
		fmt.Fprintf(sb, "diff --git %s %s\ndeleted file mode %o\nindex %s..%s\n", q("a/", old.path), q("b/", old.path), old.mode, abbrev(old.hash), abbrev(plumbing.ZeroHash))
		a, aName = label("a/", old.path), q("a/", old.path)
	}
	if binary {
		fmt.Fprintf(sb, "Binary files %s and %s differ\n", aName, bName)
		return
	}
	if hunks {
		fmt.Fprintf(sb, "--- %s\n+++ %s\n", a, b)
	}
}

// writeHunks writes the unified hunks of a line diff with ctx lines of context.
// match, when not nil, is the function-name rule of the file's diff driver.
func writeHunks(sb *strings.Builder, lines []diffLine, ctx int, match func(string) (string, bool)) {
	n := len(lines)
	oldNo := make([]int, n+1) // 1-based line number in the old file of lines[i] (or of the next old line)
	newNo := make([]int, n+1)
	o, w := 1, 1
	for i, l := range lines {
		oldNo[i], newNo[i] = o, w
		if l.kind <= 0 {
			o++
		}
		if l.kind >= 0 {
			w++
		}
	}
	oldNo[n], newNo[n] = o, w
	var oldLines []string // for the function context of hunk headers
	for _, l := range lines {
		if l.kind <= 0 {
			oldLines = append(oldLines, l.text)
		}
	}
	for i := 0; i < n; {
		if lines[i].kind == 0 {
			i++
			continue
		}
		start := max(i-ctx, 0)
		end := i // last changed line of the hunk
		for j := i + 1; j < n && j <= end+2*ctx+1; j++ {
			if lines[j].kind != 0 {
				end = j
			}
		}
		stop := min(end+ctx+1, n)
		oc, nc := 0, 0
		for _, l := range lines[start:stop] {
			if l.kind <= 0 {
				oc++
			}
			if l.kind >= 0 {
				nc++
			}
		}
		sb.WriteString("@@ -" + hunkRange(oldNo[start], oc) + " +" + hunkRange(newNo[start], nc) + " @@")
		if fn := funcContext(oldLines, oldNo[start]-1, match); fn != "" {
			sb.WriteString(" " + fn)
		}
		sb.WriteByte('\n')
		for _, l := range lines[start:stop] {
			switch l.kind {
			case -1:
				sb.WriteByte('-')
			case 1:
				sb.WriteByte('+')
			default:
				sb.WriteByte(' ')
			}
			sb.WriteString(l.text)
			if !strings.HasSuffix(l.text, "\n") {
				sb.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = stop
	}
}

// funcContext is the hunk-header context: the nearest line above the hunk (before old
// line index before) that the driver's patterns accept or, without a driver, git's
// default rule: a line starting with a letter, "_" or "$", cut to 80 bytes and stripped
// of trailing white space.
func funcContext(oldLines []string, before int, match func(string) (string, bool)) string {
	for i := min(before, len(oldLines)) - 1; i >= 0; i-- {
		l := oldLines[i]
		if match != nil {
			if fn, ok := match(l); ok {
				return fn
			}
			continue
		}
		if l == "" {
			continue
		}
		if c := l[0]; c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$' {
			if len(l) > 80 {
				l = l[:80]
			}
			return strings.TrimRight(l, " \t\n\r\v\f")
		}
	}
	return ""
}

// hunkRange renders "start,count" as git does: ",1" is omitted and an empty range
// names the line before it.
func hunkRange(start, count int) string {
	switch count {
	case 0:
		return strconv.Itoa(start-1) + ",0"
	case 1:
		return strconv.Itoa(start)
	}
	return strconv.Itoa(start) + "," + strconv.Itoa(count)
}

func (f DiffFile) pathString() string { return strings.Join(f.Path, "/") }

// content returns one side's bytes and, when it is to be shown as binary, why
// (binaryReasons). Text that is not UTF-8 comes back with binaryEncoding and its
// bytes (its lines are counted); other binary sides come back without bytes.
func (r *repo) content(s *side) ([]byte, string, error) {
	if s.mode == modeGitlink {
		return []byte("Subproject commit " + s.hash.String() + "\n"), "", nil
	}
	var data []byte
	if s.fromBlob {
		var err error
		if data, err = r.readBlob(s.hash); err != nil || data == nil {
			if err == nil {
				return nil, binarySize, nil // a blob too large to read is shown as binary
			}
			return nil, "", err
		}
	} else {
		fi, err := r.wt.Lstat(s.path)
		if err != nil {
			return nil, "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			t, err := r.wt.Readlink(s.path)
			if err != nil {
				return nil, "", err
			}
			data = []byte(t)
		} else {
			if r.filterOf(s.path) != "" {
				// git would diff the clean command's output, which is never run
				return nil, binaryFilter, nil
			}
			if fi.Size() > maxTextBytes {
				return nil, binarySize, nil
			}
			f, err := r.wt.OpenFile(s.path, openReadNoFollow, 0)
			if err != nil {
				return nil, "", err
			}
			si, err := f.Stat()
			if err != nil || !os.SameFile(fi, si) || !si.Mode().IsRegular() {
				f.Close()
				return nil, "", fmt.Errorf("%s changed while it was read", s.path)
			}
			data, err = io.ReadAll(io.LimitReader(f, maxTextBytes+1))
			f.Close()
			if err != nil {
				return nil, "", err
			}
		}
	}
	var at fileAttrs
	if !s.fromBlob && s.mode != modeSymlink {
		at = r.attributes().lookup(s.path)
		conv, err := r.convertToGit(s.path, data)
		if err != nil {
			return nil, binaryEncoding, nil // its working-tree-encoding cannot be converted
		}
		data = conv
	} else if s.mode != modeSymlink {
		at = r.attributes().lookup(s.path)
	}
	if !s.fromBlob && s.hash.IsZero() {
		s.hash = blobHash(sha1.New(), data)
	}
	if len(data) > maxTextBytes {
		return nil, binarySize, nil
	}
	switch {
	case at.diff.set && at.diff.unset: // -diff, binary
		return nil, binaryAttribute, nil
	case at.diff.set: // diff, diff=driver: text whatever the content
	case bytes.IndexByte(data[:min(len(data), binarySniff)], 0) >= 0:
		return nil, binaryNUL, nil
	}
	if !utf8.Valid(data) {
		// patches are JSON strings: bytes that are not UTF-8 would be replaced by
		// U+FFFD and the patch would no longer apply, so such a file is counted but
		// shown as binary instead of being silently altered
		return data, binaryEncoding, nil
	}
	return data, "", nil
}
