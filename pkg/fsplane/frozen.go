package fsplane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/sharedos/sharedos/pkg/kernel"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Frozen paths (ProviderOptions.Frozen) are the host ceiling's files paths seen from
// inside the plane. The kernel's ceiling refuses a request whose named path is at or
// below a frozen path; the provider adds what the kernel cannot see:
//
//   - the part of an operation that reaches below its named path (walks, recursive
//     delete, directory snapshots and restores) never reaches a frozen path;
//   - names are compared under the equivalence of their directory (case folding where
//     the file system is case-insensitive, canonical Unicode equivalence always), so
//     "PRIVATE/secret.md" on a case-insensitive root is refused like "private/secret.md";
//   - entries are also compared by identity, so another name for a frozen path (an 8.3
//     short name, a hard link, a bind mount) reaches nothing more.

// nameEquivalence is how a directory's file system compares names.
type nameEquivalence struct {
	// foldCase: names differing in letter case may name the same entry.
	foldCase bool
}

// key is the form of a path segment that two names share exactly when the file system
// may treat them as one entry. It is deliberately generous (a name that only
// might be the same entry gets the same key): canonical Unicode equivalence (NFC) is
// always applied, the code points HFS+ ignores are dropped, trailing dots (which SMB
// and NTFS drop) are removed, and letter case is folded (full Unicode case folding)
// when foldCase.
func (e nameEquivalence) key(seg string) string {
	if !e.foldCase && isPlainASCII(seg) && !strings.HasSuffix(seg, ".") {
		return seg
	}
	s := strings.Map(func(r rune) rune {
		if ignorable(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(seg, "\uFFFD"))
	if e.foldCase {
		s = cases.Fold().String(norm.NFD.String(s))
	}
	s = norm.NFC.String(s)
	if t := strings.TrimRight(s, "."); t != "" {
		s = t
	}
	return s
}

// ignorable reports the code points HFS+ ignores when it compares names (the list Git
// uses for the same purpose, is_hfs_dotgit).
func ignorable(r rune) bool {
	switch {
	case r >= 0x200c && r <= 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x206a && r <= 0x206f, r == 0xfeff:
		return true
	}
	return false
}

func isPlainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// frozenNode is one segment of the tree of frozen paths; frozen marks the end of a
// frozen path (everything at and below it is out of reach).
type frozenNode struct {
	frozen   bool
	spec     string          // the frozen path, for messages
	eq       nameEquivalence // how the directory this node stands for compares names
	children map[string]*frozenNode
}

// frozenTree holds the frozen paths, each segment keyed under the equivalence of the
// directory that holds it (file systems such as ext4 with casefold decide it per
// directory). The zero value (and nil) freezes nothing.
type frozenTree struct {
	root  *frozenNode // nil: nothing frozen
	paths [][]string  // as configured, for the identity check
}

// newFrozenTree builds the tree of paths; eqAt tells how the directory at a path
// (from the root) compares names.
func newFrozenTree(paths [][]string, eqAt func(dir []string) nameEquivalence) (*frozenTree, error) {
	t := &frozenTree{}
	for _, p := range paths {
		if err := kernel.ValidatePath(p); err != nil {
			return nil, fmt.Errorf("frozen path %q: %v", strings.Join(p, "/"), err)
		}
		if t.root == nil {
			t.root = &frozenNode{eq: eqAt(nil)}
		}
		n := t.root
		for i, seg := range p {
			k := n.eq.key(seg)
			c := n.children[k]
			if c == nil {
				if n.children == nil {
					n.children = map[string]*frozenNode{}
				}
				c = &frozenNode{}
				if i < len(p)-1 {
					c.eq = eqAt(p[:i+1])
				}
				n.children[k] = c
			}
			n = c
		}
		if !n.frozen {
			n.frozen, n.spec = true, "files:"+strings.Join(p, "/")
		}
		t.paths = append(t.paths, p)
	}
	return t, nil
}

// at returns the node of path (nil when no frozen path is at or below it) and the
// frozen path that covers path, if one does ("" otherwise).
func (t *frozenTree) at(path []string) (*frozenNode, string) {
	if t == nil || t.root == nil {
		return nil, ""
	}
	n := t.root
	if n.frozen {
		return n, n.spec
	}
	for _, seg := range path {
		n = n.children[n.eq.key(seg)]
		if n == nil {
			return nil, ""
		}
		if n.frozen {
			return n, n.spec
		}
	}
	return n, ""
}

// child returns the node of the entry name inside the directory whose node is n.
func (t *frozenTree) child(n *frozenNode, name string) *frozenNode {
	if n == nil || len(n.children) == 0 {
		return nil
	}
	return n.children[n.eq.key(name)]
}

// below returns a frozen path strictly below path ("" when there is none).
func (t *frozenTree) below(path []string) string {
	n, covering := t.at(path)
	if n == nil || covering != "" {
		return ""
	}
	for n != nil {
		if n.frozen {
			return n.spec
		}
		first := ""
		for k := range n.children {
			if first == "" || k < first {
				first = k
			}
		}
		n = n.children[first]
	}
	return ""
}

// frozenErr is the refusal for an operation on (or below) a frozen path.
func frozenErr(path []string, spec string) error {
	return denied(kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied), "%s is within the frozen path %s, which the host ceiling puts out of reach", show(path), spec)
}

// checkFrozen refuses an operation whose named path is at or below a frozen path (the
// kernel refuses those too, comparing bytes; this also catches the names the root's
// file system treats as the same).
func (p *Provider) checkFrozen(path []string) error {
	if _, spec := p.frozen.at(path); spec != "" {
		return frozenErr(path, spec)
	}
	return nil
}

// ---- identities ----

// Names are not the only aliases: an 8.3 short name on SMB or NTFS ("PRIVAT~1"), a
// directory created later with other rules than the probe saw, or a bind mount reach a
// frozen entry under another name. So each operation also looks up the frozen paths
// that exist (by their configured names) and refuses or skips, whatever its name,
// every entry that is one of them (same device and inode).

// fileID is the identity of a file system object.
type fileID struct{ dev, ino uint64 }

func idOf(fi os.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}

// frozenIDs maps the identity of each frozen path that exists to its spec. Nil holds
// nothing.
type frozenIDs map[fileID]string

// of returns the frozen path fi is, or "".
func (ids frozenIDs) of(fi os.FileInfo) string {
	if len(ids) == 0 || fi == nil {
		return ""
	}
	id, ok := idOf(fi)
	if !ok {
		return ""
	}
	return ids[id]
}

func (ids frozenIDs) ofStat(st *syscall.Stat_t) string {
	return ids.ofID(uint64(st.Dev), uint64(st.Ino))
}

// ofID is the frozen path a file with this device and inode number is, or "".
func (ids frozenIDs) ofID(dev, ino uint64) string {
	if len(ids) == 0 {
		return ""
	}
	return ids[fileID{dev, ino}]
}

// frozenIdentities looks up the frozen paths that exist now. A frozen path may pass
// through a symbolic link (the operator's configuration names it, not an agent): the
// plane never follows the link, but the object the link leads to inside the root is
// frozen too, under its own name. So each frozen path contributes the entry itself and,
// resolved inside the root (os.Root never leaves it), the object it leads to.
func (p *Provider) frozenIdentities() frozenIDs {
	if p.frozen == nil {
		return nil
	}
	var ids frozenIDs
	add := func(fi os.FileInfo, spec string) {
		if id, ok := idOf(fi); ok {
			if ids == nil {
				ids = frozenIDs{}
			}
			ids[id] = spec
		}
	}
	for _, fp := range p.frozen.paths {
		if len(fp) == 0 {
			continue // the whole root: every operation is refused by name already
		}
		spec := "files:" + strings.Join(fp, "/")
		rel := strings.Join(fp, string(filepath.Separator))
		if fi, err := p.root.Lstat(rel); err == nil {
			add(fi, spec)
		}
		if fi, err := p.root.Stat(rel); err == nil {
			add(fi, spec)
		}
	}
	return ids
}

type frozenIDsKey struct{}

// withFrozenIDs hands the identities looked up for one operation to the code below it
// (the walks run in code that only receives the context).
func withFrozenIDs(ctx context.Context, ids frozenIDs) context.Context {
	if len(ids) == 0 {
		return ctx
	}
	return context.WithValue(ctx, frozenIDsKey{}, ids)
}

func frozenIDsFrom(ctx context.Context) frozenIDs {
	ids, _ := ctx.Value(frozenIDsKey{}).(frozenIDs)
	return ids
}

// checkFrozenIdentity refuses path when it, or a directory on the way to it, is a
// frozen entry under another name.
func (p *Provider) checkFrozenIdentity(path []string, ids frozenIDs) error {
	if len(ids) == 0 || len(path) == 0 {
		return nil
	}
	cur := dirRef{r: p.root}
	defer func() { cur.release() }()
	for i, seg := range path {
		fi, err := cur.r.Lstat(seg)
		if err != nil {
			return nil // the operation itself reports it
		}
		if spec := ids.of(fi); spec != "" {
			return frozenErr(path, spec)
		}
		if i == len(path)-1 || !fi.IsDir() || fi.Mode()&fs.ModeSymlink != 0 {
			return nil
		}
		next, err := openChild(cur.r, seg, path[:i+1], false)
		if err != nil {
			return nil
		}
		cur.release()
		cur = dirRef{r: next, owned: true}
	}
	return nil
}

// ---- the probe of the root's name equivalence ----

// probeDir is what the probe needs of the root: some names in it, and whether another
// spelling of a name is the same entry.
type probeDir interface {
	// Names returns up to max names of entries in the root.
	Names(max int) ([]string, error)
	// Same Lstats name and other in the root: exists reports whether other exists, same
	// whether it is the same entry as name.
	Same(name, other string) (exists, same bool, err error)
}

// probeEquivalence decides the root's equivalence without writing anything: it looks
// for an entry whose name has an ASCII letter and asks whether the same name with its
// letters' case swapped is the same entry. An answer from the root's own name in its
// parent (when on the same file system) counts as well. When nothing decides (an
// empty root whose name has no letter), it assumes a case-insensitive file system: the
// frozen paths then also hold the names that differ from them only in case, which
// refuses more, never less.
func probeEquivalence(dirs ...probeDir) nameEquivalence {
	for _, d := range dirs {
		if d == nil {
			continue
		}
		names, err := d.Names(256)
		if err != nil {
			continue
		}
		for _, n := range names {
			other := swapASCIICase(n)
			if other == n {
				continue
			}
			exists, same, err := d.Same(n, other)
			if err != nil {
				continue
			}
			return nameEquivalence{foldCase: exists && same}
		}
	}
	return nameEquivalence{foldCase: true}
}

func swapASCIICase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case 'a' <= c && c <= 'z':
			b[i] = c - 'a' + 'A'
		case 'A' <= c && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// rootProbeDir probes a directory opened inside the root.
type rootProbeDir struct{ r *os.Root }

func (d rootProbeDir) Names(max int) ([]string, error) {
	f, err := d.r.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(max)
	if len(names) > 0 {
		return names, nil
	}
	return nil, err
}

func (d rootProbeDir) Same(name, other string) (bool, bool, error) {
	a, err := d.r.Lstat(name)
	if err != nil {
		return false, false, err
	}
	b, err := d.r.Lstat(other)
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, os.SameFile(a, b), nil
}

// nameProbeDir offers one name of a directory outside the root: the root's own name
// in its parent.
type nameProbeDir struct{ dir, name string }

func (d nameProbeDir) Names(int) ([]string, error) { return []string{d.name}, nil }

func (d nameProbeDir) Same(name, other string) (bool, bool, error) {
	a, err := os.Lstat(filepath.Join(d.dir, name))
	if err != nil {
		return false, false, err
	}
	b, err := os.Lstat(filepath.Join(d.dir, other))
	if errors.Is(err, fs.ErrNotExist) {
		return false, false, nil
	}
	if err != nil {
		return false, false, err
	}
	return true, os.SameFile(a, b), nil
}

// probeAt decides the equivalence of the directory at dir (from the root) by probing
// its entries; for the root itself, its own name in its parent counts too when the
// parent is on the same file system. A directory that does not exist (or is reached
// through a link) cannot be probed: it is taken to fold case.
func (p *Provider) probeAt(dir []string) nameEquivalence {
	d, err := p.openDir(dir, false)
	if err != nil {
		return nameEquivalence{foldCase: true}
	}
	defer d.release()
	probes := []probeDir{rootProbeDir{d.r}}
	if len(dir) == 0 {
		parent := filepath.Dir(p.rootPath)
		if parent != p.rootPath {
			if a, err := os.Stat(p.rootPath); err == nil {
				if b, err := os.Stat(parent); err == nil && sameDevice(a, b) {
					probes = append(probes, nameProbeDir{dir: parent, name: filepath.Base(p.rootPath)})
				}
			}
		}
	}
	return probeEquivalence(probes...)
}

func sameDevice(a, b os.FileInfo) bool {
	sa, ok1 := a.Sys().(*syscall.Stat_t)
	sb, ok2 := b.Sys().(*syscall.Stat_t)
	return ok1 && ok2 && sa.Dev == sb.Dev
}
