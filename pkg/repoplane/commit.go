package repoplane

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// CommitOutput is the output of repo.commit (see the tool's outputSchema).
type CommitOutput struct {
	Path    []string  `json:"path"`
	Hash    string    `json:"hash"`
	Parents []string  `json:"parents"`
	Branch  *string   `json:"branch"`
	Message string    `json:"message"`
	Author  Signature `json:"author"`
}

// Commit trailers naming who acted, for whom, in which world.
const (
	TrailerActedBy    = "Acted-by"
	TrailerOnBehalfOf = "On-behalf-of"
	TrailerWorld      = "World"
)

// commitMessage appends the provenance trailers to a (validated, one-line) message.
func commitMessage(msg string, actx kernel.AccessContext) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f {
				return ' '
			}
			return r
		}, s)
	}
	return msg + "\n\n" +
		TrailerActedBy + ": " + clean(actx.Actor.String()) + "\n" +
		TrailerOnBehalfOf + ": " + clean(actx.Authority.String()) + "\n" +
		TrailerWorld + ": " + clean(actx.World) + "\n"
}

// commit records the index as a new commit on the current branch (or detached HEAD).
// During a merge it records MERGE_HEAD as further parents and clears the merge state;
// during a cherry-pick, revert, rebase or am it refuses (inprogress.go says why).
// It holds index.lock for the whole operation and the branch's ref lock while moving
// it, checking under that lock that the branch still points where it did.
func (r *repo) commit(ctx context.Context, msg string, id Signature, actx kernel.AccessContext, now time.Time) (any, *opError) {
	lock, oe := acquireLock(r.git, "index")
	if oe != nil {
		return nil, oe
	}
	defer lock.release()
	idx, _, err := r.loadIndex()
	if err != nil {
		return nil, internal("read the index", err)
	}
	real := 0 // entries that go into the tree (intent-to-add ones do not)
	for _, e := range idx.entries {
		if e.stage() != 0 {
			return nil, failed(CodeUnmerged, "%s has unresolved merge conflicts; stage the resolution first", e.name)
		}
		if !e.intentToAdd() {
			real++
		}
	}
	for _, op := range r.inProgress() {
		switch op {
		case "rebase", "am", "cherry-pick", "revert":
			return nil, failed(CodeOperationInProgress, "a %s is in progress; finish it (git %s --continue) or abort it with git before committing", op, op)
		}
	}
	merges, oe := r.mergeHeads()
	if oe != nil {
		return nil, oe
	}
	head, oe := r.readHead()
	if oe != nil {
		return nil, oe
	}
	if merges != nil && head.unborn {
		return nil, failed(CodeProviderError, "MERGE_HEAD is present but HEAD has no commit")
	}
	parentTree, oe := r.commitTree(head.hash)
	if oe != nil {
		return nil, oe
	}
	tw := &treeWriter{r: r}
	tree, node, err := tw.build("", "", idx.entries, idx.tree)
	if err != nil {
		return nil, internal("write the tree", err)
	}
	if merges == nil && (real == 0 && head.unborn || tree == parentTree) {
		return nil, failed(CodeNothingToCommit, "nothing to commit: the index matches HEAD")
	}
	full := commitMessage(msg, actx)
	sig := object.Signature{Name: id.Name, Email: id.Email, When: now}
	c := &object.Commit{Author: sig, Committer: sig, Message: full, TreeHash: tree}
	if !head.unborn {
		c.ParentHashes = append([]plumbing.Hash{head.hash}, merges...)
	}
	obj := r.st.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return nil, internal("encode the commit", err)
	}
	if _, err := r.st.SetEncodedObject(obj); err != nil {
		return nil, internal("store the commit", err)
	}
	ch := obj.Hash()
	if err := ctx.Err(); err != nil {
		return nil, internal("commit", err)
	}

	target := head.ref
	if target == "" {
		target = "HEAD"
	}
	if beforeRefLock != nil {
		beforeRefLock(r)
	}
	refLock, oe := acquireLock(r.git, target)
	if oe != nil {
		return nil, oe
	}
	defer refLock.release()
	if head.ref != "" {
		cur, ok, oe := r.readRef(head.ref)
		if oe != nil {
			return nil, oe
		}
		if ok == head.unborn || cur != head.hash {
			return nil, busy("%s moved while committing; retry", head.ref)
		}
	} else {
		cur, oe := r.readHead()
		if oe != nil {
			return nil, oe
		}
		if cur.ref != "" || cur.hash != head.hash {
			return nil, busy("HEAD moved while committing; retry")
		}
	}
	if err := refLock.commit([]byte(ch.String() + "\n")); err != nil {
		return nil, internal("update "+target, err)
	}
	subject := "commit: "
	switch {
	case head.unborn:
		subject = "commit (initial): "
	case merges != nil:
		subject = "commit (merge): "
	}
	r.appendReflog(head.ref, head.hash, ch, sig, subject+msg)
	if merges != nil {
		// the merge is recorded: clear its state as git commit does
		for _, name := range mergeStateFiles {
			_ = r.git.Remove(name)
		}
	}

	// keep the index, now with a complete cache tree so the next status is cheap
	idx.tree = node
	_ = lock.commit(encodeIndex(r.prepareWrite(idx)))

	out := CommitOutput{Path: r.path, Hash: ch.String(), Parents: []string{}, Branch: head.branch(),
		Message: full, Author: sigOf(sig)}
	for _, p := range c.ParentHashes {
		out.Parents = append(out.Parents, p.String())
	}
	return out, nil
}

// beforeRefLock, when set (by tests only), runs in commit after HEAD was read and the
// commit object written, just before the ref lock is taken: the window in which
// another writer may move the branch.
var beforeRefLock func(r *repo)

// treeWriter turns index entries into tree objects, reusing every subtree whose
// cache-tree node is still valid.
//
// Intent-to-add entries (git add -N) are not part of any tree, and a directory holding
// one, directly or below, gets an invalidated cache-tree node, as git's cache_tree_update
// does: a valid node there would tell git that the directory's tree equals the index,
// and git would then take the recorded intention for a staged file (and, after a reset,
// lose it). A subdirectory holding nothing but intent-to-add entries is left out of its
// parent's tree.
type treeWriter struct{ r *repo }

func (tw *treeWriter) build(name, prefix string, ents []*idxEntry, node *cacheTree) (plumbing.Hash, *cacheTree, error) {
	if node != nil && node.count >= 0 && node.count == len(ents) && !anyIntentToAdd(ents) && tw.r.st.HasEncodedObject(plumbing.Hash(node.hash)) == nil {
		return plumbing.Hash(node.hash), &cacheTree{name: name, count: node.count, hash: node.hash, children: node.children}, nil
	}
	out := &cacheTree{name: name, count: len(ents)}
	invalid := false
	var tes []object.TreeEntry
	for i := 0; i < len(ents); {
		rest := ents[i].name[len(prefix):]
		slash := strings.IndexByte(rest, '/')
		if slash < 0 {
			if ents[i].intentToAdd() {
				invalid = true
			} else {
				tes = append(tes, object.TreeEntry{Name: rest, Mode: filemode.FileMode(ents[i].mode), Hash: ents[i].hash})
			}
			i++
			continue
		}
		sub := rest[:slash]
		j := i + 1
		for j < len(ents) && strings.HasPrefix(ents[j].name, prefix+sub+"/") {
			j++
		}
		h, child, err := tw.build(sub, prefix+sub+"/", ents[i:j], node.child(sub))
		if err != nil {
			return plumbing.ZeroHash, nil, err
		}
		out.children = append(out.children, child)
		if child.count < 0 {
			invalid = true
			if h == emptyTreeHash {
				i = j
				continue // only intentions inside: no entry in this tree
			}
		}
		tes = append(tes, object.TreeEntry{Name: sub, Mode: filemode.Dir, Hash: h})
		i = j
	}
	sort.Sort(object.TreeEntrySorter(tes))
	var buf bytes.Buffer
	for _, te := range tes {
		fmt.Fprintf(&buf, "%o %s\x00", uint32(te.Mode), te.Name)
		buf.Write(te.Hash[:])
	}
	h, err := tw.r.writeObject(plumbing.TreeObject, buf.Bytes())
	if err != nil {
		return plumbing.ZeroHash, nil, err
	}
	if invalid {
		out.count = -1
	} else {
		out.hash = h
	}
	return h, out, nil
}

// emptyTreeHash is the id of the tree with no entries.
var emptyTreeHash = plumbing.NewHash("4b825dc642cb6eb9a060e54bf8d69288fbee4904")

func anyIntentToAdd(ents []*idxEntry) bool {
	for _, e := range ents {
		if e.intentToAdd() {
			return true
		}
	}
	return false
}

// appendReflog records the update in logs/HEAD and the branch's log, as git does when
// core.logAllRefUpdates is on (the default). Failures are ignored: the commit stands.
// A log that is not a regular file with a single name (a hard link may share its
// inode with a file outside the root; a FIFO would block) is left unwritten.
func (r *repo) appendReflog(ref string, old, new plumbing.Hash, sig object.Signature, msg string) {
	if !r.reflog {
		return
	}
	line := fmt.Sprintf("%s %s %s <%s> %d %s\t%s\n", old, new, sig.Name, sig.Email,
		sig.When.Unix(), sig.When.Format("-0700"), msg)
	logs := []string{"logs/HEAD"}
	if ref != "" {
		logs = append(logs, "logs/"+ref)
	}
	for _, name := range logs {
		if err := r.git.MkdirAll(path.Dir(name), 0o777); err != nil {
			continue
		}
		f, err := r.git.OpenFile(name, openAppendNoFollow, 0o666)
		if err != nil {
			continue
		}
		if soleRegularFile(f) {
			_, _ = f.WriteString(line)
		}
		_ = f.Close()
	}
}
