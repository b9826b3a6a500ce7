package repoplane

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestHelperProcess is not a test: it is the body of the writer processes the
// concurrency test starts (this test binary re-executed with REPOPLANE_HELPER set).
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("REPOPLANE_HELPER")
	if mode == "" {
		return
	}
	root, id := os.Getenv("REPOPLANE_ROOT"), os.Getenv("REPOPLANE_ID")
	n, _ := strconv.Atoi(os.Getenv("REPOPLANE_N"))
	var err error
	if mode == "git" {
		err = gitWriter(filepath.Join(root, "repo"), id, n)
	} else {
		err = sharedosWriter(root, id, n)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// sharedosWriter writes, stages and commits n files, retrying while the repository is
// busy, and prints COMMIT <hash> for each commit it made.
func sharedosWriter(root, id string, n int) error {
	p, err := NewProvider(root, ProviderOptions{})
	if err != nil {
		return err
	}
	actx := kernel.AccessContext{World: "w", Actor: kernel.Address{Kind: kernel.KindAgent, ID: id},
		Authority: kernel.Address{Kind: kernel.KindHuman, ID: "h"}, Owner: kernel.Address{Kind: kernel.KindHuman, ID: "h"}}
	call := func(action string, input any) (kernel.ResourceResult, error) {
		for attempt := 0; ; attempt++ {
			rr, err := p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "op", Context: actx,
				Resource: kernel.ResourceRef{Namespace: Namespace, Path: []string{"repo"}}, Action: action, Input: input})
			if err != nil {
				return rr, err
			}
			if rr.Status == kernel.StatusSucceeded {
				return rr, nil
			}
			if rr.Error.Code != CodeRepoBusy || attempt > 2000 {
				return rr, nil
			}
			fmt.Println("BUSY", action)
			time.Sleep(time.Millisecond)
		}
	}
	for i := range n {
		name := fmt.Sprintf("%s-%02d.txt", id, i)
		if err := os.WriteFile(filepath.Join(root, "repo", name), []byte(name+"\n"), 0o644); err != nil {
			return err
		}
		rr, err := call(ActionStage, StageInput{Pathspec: [][]string{{name}}})
		if err != nil || rr.Status != kernel.StatusSucceeded {
			return fmt.Errorf("stage %s: %v %+v", name, err, rr.Error)
		}
		rr, err = call(ActionCommit, CommitInput{Message: "add " + name})
		if err != nil {
			return err
		}
		switch {
		case rr.Status == kernel.StatusSucceeded:
			fmt.Println("COMMIT", rr.Output.(CommitOutput).Hash)
		case rr.Error.Code == CodeNothingToCommit:
			// another writer's commit took our staged file along
		default:
			return fmt.Errorf("commit %s: %+v", name, rr.Error)
		}
	}
	return nil
}

// gitWriter does the same with the git binary, retrying on git's lock errors.
func gitWriter(dir, id string, n int) error {
	retry := func(args ...string) (string, error) {
		for attempt := 0; ; attempt++ {
			out, err := tryGit(dir, args...)
			if err == nil {
				return out, nil
			}
			if attempt < 2000 && (strings.Contains(out, ".lock") || strings.Contains(out, "cannot lock ref")) {
				time.Sleep(time.Millisecond)
				continue
			}
			return out, err
		}
	}
	for i := range n {
		name := fmt.Sprintf("%s-%02d.txt", id, i)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name+"\n"), 0o644); err != nil {
			return err
		}
		if out, err := retry("add", name); err != nil {
			return fmt.Errorf("git add: %v %s", err, out)
		}
		// git commit reads HEAD and the index before it takes index.lock, so when a
		// sharedos commit lands in between it can compare a stale index with a new
		// HEAD, decide there is nothing to commit, print a status that lists staged
		// changes, and exit 1 having written nothing. That is git's own race; like a
		// user, retry: the next attempt reads fresh state and commits or says
		// "nothing to commit".
		var out string
		var err error
		for race := 0; race < 50; race++ {
			out, err = retry("commit", "-q", "-m", "git add "+name)
			if err == nil || !strings.Contains(out, "Changes to be committed") {
				break
			}
			fmt.Println("GITRACE")
			time.Sleep(time.Millisecond)
		}
		if err != nil && !strings.Contains(out, "nothing to commit") && !strings.Contains(out, "nothing added") {
			return fmt.Errorf("git commit: %v %s", err, out)
		}
		if err == nil {
			h, _ := tryGit(dir, "rev-parse", "HEAD")
			fmt.Println("GITCOMMIT", strings.TrimSpace(h))
		}
	}
	return nil
}

// TestConcurrentWriters runs writer processes staging and committing in the same
// repository at once: two sharedos processes, then two sharedos processes and git.
// Afterwards the index and the object store are intact, every commit any writer
// reported is reachable from HEAD (no commit is lost) and no lock file is left.
//
// Between sharedos processes every staged file also ends up committed: both stage and
// commit read the index only while holding index.lock. git's own commit reads the
// index before it takes the lock (builtin/commit.c, prepare_index) and writes that copy
// back, so a git commit racing any stage (git add's as much as ours) can drop the
// staged entry: the file is then simply untracked again, never half-written, and no
// commit is affected. The mixed run checks exactly that.
func TestConcurrentWriters(t *testing.T) {
	type writer struct{ mode, id string }
	runs := []struct {
		name    string
		writers []writer
	}{
		{"sharedos+sharedos", []writer{{"sharedos", "alpha"}, {"sharedos", "beta"}}},
	}
	if haveGit() {
		runs = append(runs, struct {
			name    string
			writers []writer
		}{"sharedos+sharedos+git", []writer{{"sharedos", "alpha"}, {"sharedos", "beta"}, {"git", "gamma"}}})
	}
	for _, run := range runs {
		t.Run(run.name, func(t *testing.T) {
			mixed := len(run.writers) > 2
			e := newEnv(t)
			e.write("base.txt", "base\n")
			commitAll(t, e.dir, "base")
			const n = 12
			var wg sync.WaitGroup
			outs := make([]bytes.Buffer, len(run.writers))
			errs := make([]error, len(run.writers))
			for i, w := range run.writers {
				cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
				cmd.Env = append(gitEnv(), "REPOPLANE_HELPER="+w.mode, "REPOPLANE_ROOT="+e.root, "REPOPLANE_ID="+w.id,
					"REPOPLANE_N="+strconv.Itoa(n))
				cmd.Stdout = &outs[i]
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := cmd.Wait(); err != nil {
						errs[i] = fmt.Errorf("%s: %v\n%s", w.id, err, stderr.String())
					}
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			var reported []string
			busy := 0
			for _, o := range outs {
				sc := bufio.NewScanner(&o)
				for sc.Scan() {
					f := strings.Fields(sc.Text())
					switch {
					case len(f) == 2 && (f[0] == "COMMIT" || f[0] == "GITCOMMIT"):
						reported = append(reported, f[1])
					case len(f) == 2 && f[0] == "BUSY":
						busy++
					}
				}
			}
			log := e.ok(ActionLog, LogInput{MaxCount: 100}).(LogOutput)
			reachable := map[string]bool{}
			for _, c := range log.Commits {
				reachable[c.Hash] = true
			}
			for _, h := range reported {
				if !reachable[h] {
					t.Fatalf("commit %s was reported but is not reachable from HEAD (lost)", h)
				}
			}
			if len(log.Commits) != len(reported)+1 {
				t.Fatalf("%d commits in history, %d reported (+1 base)", len(log.Commits), len(reported))
			}
			st := e.status() // the index decodes and matches the tree
			dropped := 0
			for _, l := range porcelain(st) {
				if !mixed || !strings.HasPrefix(l, "?? ") {
					t.Fatalf("not every written file was committed: %v", porcelain(st))
				}
				dropped++
			}
			t.Logf("%d commits, %d busy retries, %d staged entries dropped by git's commit", len(reported), busy, dropped)
			for _, w := range run.writers {
				for i := range n {
					mustExist(t, filepath.Join(e.dir, fmt.Sprintf("%s-%02d.txt", w.id, i)), true)
				}
			}
			if haveGit() {
				runGit(t, e.dir, "fsck", "--strict", "--no-dangling")
				files := strings.Fields(runGit(t, e.dir, "ls-tree", "-r", "--name-only", "HEAD"))
				if len(files)+dropped != 1+n*len(run.writers) {
					t.Fatalf("HEAD holds %d files, %d dropped", len(files), dropped)
				}
			}
			mustExist(t, filepath.Join(e.dir, ".git", "index.lock"), false)
			mustExist(t, filepath.Join(e.dir, ".git", "refs", "heads", "main.lock"), false)
		})
	}
}

// TestLocksAreHonoured: a lock held by someone else makes writes repo_busy (retryable)
// and leaves that lock alone; reads are unaffected.
func TestLocksAreHonoured(t *testing.T) {
	e := newEnv(t)
	e.write("f", "1")
	commitAll(t, e.dir, "init")
	e.write("f", "2")
	lock := filepath.Join(e.dir, ".git", "index.lock")
	writeFile(t, lock, "someone else's")
	e.fail(ActionStage, StageInput{Pathspec: specOf("f")}, kernel.StatusFailed, CodeRepoBusy)
	e.fail(ActionCommit, CommitInput{Message: "m"}, kernel.StatusFailed, CodeRepoBusy)
	sameLines(t, porcelain(e.status()), []string{".M f"})
	if b, _ := os.ReadFile(lock); string(b) != "someone else's" {
		t.Fatal("a foreign lock was touched")
	}
	os.Remove(lock)
	e.stage("f")
	refLock := filepath.Join(e.dir, ".git", "refs", "heads", "main.lock")
	writeFile(t, refLock, "")
	e.fail(ActionCommit, CommitInput{Message: "m"}, kernel.StatusFailed, CodeRepoBusy)
	mustExist(t, lock, false) // our index lock was released on the way out
	mustExist(t, refLock, true)
	os.Remove(refLock)
	e.commit("m")
}
