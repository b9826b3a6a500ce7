package repoplane

import (
	"container/heap"
	"context"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// LogOutput is the output of repo.log (see the tool's outputSchema).
type LogOutput struct {
	Path    []string    `json:"path"`
	Commits []LogCommit `json:"commits"`
}

// LogCommit is one commit of repo.log.
type LogCommit struct {
	Hash      string    `json:"hash"`
	Parents   []string  `json:"parents"`
	Author    Signature `json:"author"`
	Committer Signature `json:"committer"`
	Message   string    `json:"message"`
}

// Signature is a commit's author or committer: a name, an email and a time (RFC 3339
// with the offset the commit records).
type Signature struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Time  string `json:"time"`
}

func sigOf(s object.Signature) Signature {
	return Signature{Name: s.Name, Email: s.Email, Time: s.When.Format(time.RFC3339)}
}

// commitQueue orders commits newest committer time first (git log's default walk).
type commitQueue []*object.Commit

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	if !q[i].Committer.When.Equal(q[j].Committer.When) {
		return q[i].Committer.When.After(q[j].Committer.When)
	}
	return q[i].Hash.String() < q[j].Hash.String()
}
func (q commitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)   { *q = append(*q, x.(*object.Commit)) }
func (q *commitQueue) Pop() any {
	old := *q
	c := old[len(old)-1]
	*q = old[:len(old)-1]
	return c
}

// log walks from HEAD and stops after n commits: only those commits and the parents
// queued on the way are ever read.
func (r *repo) log(ctx context.Context, n int) (any, *opError) {
	head, oe := r.readHead()
	if oe != nil {
		return nil, oe
	}
	out := LogOutput{Path: r.path, Commits: []LogCommit{}}
	if head.unborn {
		return out, nil
	}
	seen := map[plumbing.Hash]bool{}
	q := &commitQueue{}
	push := func(h plumbing.Hash) *opError {
		if seen[h] {
			return nil
		}
		seen[h] = true
		c, err := r.getCommit(h)
		if err != nil {
			return failed(CodeProviderError, "read commit %s: %v", h, err)
		}
		heap.Push(q, c)
		return nil
	}
	if oe := push(head.hash); oe != nil {
		return nil, oe
	}
	for q.Len() > 0 && len(out.Commits) < n {
		if err := ctx.Err(); err != nil {
			return nil, internal("log", err)
		}
		c := heap.Pop(q).(*object.Commit)
		lc := LogCommit{Hash: c.Hash.String(), Parents: make([]string, len(c.ParentHashes)),
			Author: sigOf(c.Author), Committer: sigOf(c.Committer), Message: c.Message}
		for i, p := range c.ParentHashes {
			lc.Parents[i] = p.String()
		}
		out.Commits = append(out.Commits, lc)
		if len(out.Commits) == n {
			break
		}
		for _, p := range c.ParentHashes {
			if oe := push(p); oe != nil {
				return nil, oe
			}
		}
	}
	return out, nil
}
