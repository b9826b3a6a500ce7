package repoplane

import (
	"errors"
	"io/fs"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Operations git can leave in progress, as repo.status reports them (inProgress) and
// repo.commit treats them. The decision, per operation:
//
//   - merge (MERGE_HEAD): repo.commit completes it exactly as git commit does: every
//     commit MERGE_HEAD lists becomes a further parent, the commit is made even when its
//     tree equals HEAD's (a merge that took ours), and MERGE_HEAD, MERGE_MSG,
//     MERGE_MODE and AUTO_MERGE are removed once the branch has moved. Staging the
//     resolution and committing is the whole of what a user does to finish a merge, so
//     refusing would only push the agent to a one-parent commit elsewhere; recording a
//     one-parent commit (what sharedos did before) silently lost the merge.
//   - cherry-pick (CHERRY_PICK_HEAD), revert (REVERT_HEAD), rebase (rebase-merge/,
//     rebase-apply/) and am (rebase-apply/applying): refused with
//     operation_in_progress. git commit there takes its author and message from the
//     picked commit and leaves the sequencer's remaining steps to a --continue that
//     sharedos cannot run; a plain commit would record the change under the wrong author
//     or detach it from the rebase. The user finishes or aborts with git.
//   - bisect (BISECT_LOG): reported only; git commit is allowed while bisecting and
//     touches none of the bisect state, so repo.commit is too.
var inProgressFiles = []struct{ name, op string }{
	{"rebase-merge", "rebase"},
	{"rebase-apply/applying", "am"},
	{"rebase-apply", "rebase"},
	{"MERGE_HEAD", "merge"},
	{"CHERRY_PICK_HEAD", "cherry-pick"},
	{"REVERT_HEAD", "revert"},
	{"BISECT_LOG", "bisect"},
}

// mergeStateFiles are the files git commit removes when it completes a merge.
var mergeStateFiles = []string{"MERGE_HEAD", "MERGE_MSG", "MERGE_MODE", "AUTO_MERGE"}

// inProgress lists the operations in progress in the repository, in a fixed order.
func (r *repo) inProgress() []string {
	out := []string{}
	seen := map[string]bool{}
	for _, f := range inProgressFiles {
		if seen[f.op] || f.op == "rebase" && seen["am"] {
			continue
		}
		if _, err := r.git.Lstat(f.name); err == nil {
			seen[f.op] = true
			out = append(out, f.op)
		}
	}
	return out
}

// mergeHeads reads MERGE_HEAD: one commit id per line (several for an octopus merge).
// It returns nil when no merge is in progress.
func (r *repo) mergeHeads() ([]plumbing.Hash, *opError) {
	data, err := readFileLimited(r.git, "MERGE_HEAD", 1<<16)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, failed(CodeProviderError, "read MERGE_HEAD: %v", err)
	}
	var out []plumbing.Hash
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if len(l) != 40 || !plumbing.IsHash(l) {
			return nil, failed(CodeProviderError, "MERGE_HEAD holds %q, which is not a commit id", l)
		}
		h := plumbing.NewHash(l)
		if _, oe := r.commitTree(h); oe != nil {
			return nil, failed(CodeProviderError, "MERGE_HEAD names %s, which is not a readable commit", l)
		}
		out = append(out, h)
	}
	if len(out) == 0 {
		return nil, failed(CodeProviderError, "MERGE_HEAD is empty")
	}
	return out, nil
}
