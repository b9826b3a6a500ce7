package repoplane

import (
	"container/heap"
	"context"

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
// with the offset the commit records, always numeric: "+00:00", never "Z", as git log's
// %aI prints it).
type Signature struct {
	Name  string `json:"name"`
	Email string `json:"email"`
	Time  string `json:"time"`
}

const isoStrict = "2006-01-02T15:04:05-07:00"

func sigOf(s object.Signature) Signature {
	return Signature{Name: s.Name, Email: s.Email, Time: s.When.Format(isoStrict)}
}

// commitQueue orders commits newest committer time first and, among equal times, in
// the order they were queued (git log's default walk inserts each parent after the
// queued commits of the same date), which keeps a child before its parents whenever
// git does.
type commitQueue []queued

type queued struct {
	c   *object.Commit
	seq int
}

func (q commitQueue) Len() int { return len(q) }
func (q commitQueue) Less(i, j int) bool {
	if ti, tj := q[i].c.Committer.When.Unix(), q[j].c.Committer.When.Unix(); ti != tj {
		return ti > tj
	}
	return q[i].seq < q[j].seq
}
func (q commitQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *commitQueue) Push(x any)   { *q = append(*q, x.(queued)) }
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
	seq := 0
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
		heap.Push(q, queued{c: c, seq: seq})
		seq++
		return nil
	}
	if oe := push(head.hash); oe != nil {
		return nil, oe
	}
	for q.Len() > 0 && len(out.Commits) < n {
		if err := ctx.Err(); err != nil {
			return nil, internal("log", err)
		}
		c := heap.Pop(q).(queued).c
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
