package repoplane

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// allocated runs f and returns the bytes it allocated on the heap (cumulative, so a
// buffer inflated and dropped still counts).
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

const allocBound = 64 << 20 // what one operation on a crafted repository may allocate

// hugeBlobEntry is the packed 3 GiB zero blob (a 3 MiB stream).
func hugeBlobEntry() packObj {
	return packObj{typ: packBlob, size: hugeBlobSize, z: zlibRepeated(nil, 0, hugeBlobSize),
		name: plumbing.NewHash(hugeBlobName)}
}

// TestHugeBlobIsBinary: a 3 GiB blob (loose or packed, a few MB on disk) in HEAD and in
// the index is shown by repo.diff as a binary change, without being inflated; status
// and log work.
func TestHugeBlobIsBinary(t *testing.T) {
	for _, packed := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			e := newEnv(t)
			g := filepath.Join(e.dir, ".git")
			huge := plumbing.NewHash(hugeBlobName)
			if packed {
				writePack(t, g, []packObj{hugeBlobEntry()})
			} else {
				looseFile(t, g, huge, zlibRepeated([]byte(fmt.Sprintf("blob %d\x00", hugeBlobSize)), 0, hugeBlobSize))
			}
			small := loose(t, g, packBlob, []byte("small\n"))
			tree := loose(t, g, packTree, treeData(
				treeEnt{"big.bin", filemode.Regular, huge},
				treeEnt{"old.bin", filemode.Regular, huge},
				treeEnt{"small.txt", filemode.Regular, small}))
			setBranch(t, g, loose(t, g, packCommit, commitData(tree, "huge\n")))
			// old.bin deleted in the index (a staged change of the huge blob); big.bin
			// modified in the working tree (an unstaged one)
			setIndex(t, g, treeEnt{"big.bin", filemode.Regular, huge}, treeEnt{"small.txt", filemode.Regular, small})
			e.write("big.bin", "now small\n")
			e.write("small.txt", "small\n")

			var staged, unstaged DiffOutput
			var st StatusOutput
			var lg LogOutput
			n := allocated(func() {
				staged = e.ok(ActionDiff, DiffInput{Staged: true}).(DiffOutput)
				unstaged = e.ok(ActionDiff, DiffInput{}).(DiffOutput)
				st = e.status()
				lg = e.ok(ActionLog, nil).(LogOutput)
			})
			if n > allocBound {
				t.Fatalf("diff, status and log allocated %d bytes: the huge blob was inflated", n)
			}
			if len(staged.Files) != 1 || staged.Files[0].pathString() != "old.bin" || staged.Files[0].Status != "D" ||
				!staged.Files[0].Binary || !strings.Contains(staged.Files[0].Patch, "Binary files a/old.bin and /dev/null differ") {
				t.Fatalf("staged diff: %+v", staged.Files)
			}
			if len(unstaged.Files) != 1 || unstaged.Files[0].pathString() != "big.bin" || !unstaged.Files[0].Binary ||
				!strings.Contains(unstaged.Files[0].Patch, "Binary files a/big.bin and b/big.bin differ") {
				t.Fatalf("unstaged diff: %+v", unstaged.Files)
			}
			sameLines(t, porcelain(st), []string{".M big.bin", "D. old.bin"})
			if len(lg.Commits) != 1 || lg.Commits[0].Message != "huge\n" {
				t.Fatalf("log: %+v", lg)
			}
		})
	}
}

// TestHugeCommitRefused: a HEAD commit with a 2 GiB message (loose or packed) makes
// status, log and the staged diff fail cleanly (provider_error naming the commit and
// its size), without inflating it; the unstaged diff, which needs no commit, works.
func TestHugeCommitRefused(t *testing.T) {
	for _, packed := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			e := newEnv(t)
			g := filepath.Join(e.dir, ".git")
			huge := plumbing.NewHash(hugeCommitName)
			header := []byte(hugeCommitHeader)
			if packed {
				writePack(t, g, []packObj{baseEntry(packTree, nil),
					{typ: packCommit, size: int64(len(header)) + hugeCommitMsg, z: zlibRepeated(header, 'a', hugeCommitMsg), name: huge}})
			} else {
				loose(t, g, packTree, nil)
				looseFile(t, g, huge, zlibRepeated(fmt.Appendf(nil, "commit %d\x00%s", int64(len(header))+hugeCommitMsg, header), 'a', hugeCommitMsg))
			}
			setBranch(t, g, huge)
			before := snapshot(t, e.root)
			n := allocated(func() {
				for _, c := range []struct {
					action string
					input  any
				}{{ActionStatus, nil}, {ActionLog, nil}, {ActionDiff, DiffInput{Staged: true}}} {
					pe := e.fail(c.action, c.input, kernel.StatusFailed, CodeProviderError)
					if !strings.Contains(pe.Message, "commit "+hugeCommitName) || !strings.Contains(pe.Message, fmt.Sprint(int64(len(header))+hugeCommitMsg)) {
						t.Errorf("%s: %s", c.action, pe.Message)
					}
				}
				e.ok(ActionDiff, DiffInput{})
			})
			if n > allocBound {
				t.Fatalf("allocated %d bytes: the huge commit was inflated", n)
			}
			if after := snapshot(t, e.root); after != before {
				t.Fatalf("the refused operations changed the root:\n%s\n---\n%s", before, after)
			}
		})
	}
}

// TestCommitSizeBoundary: a commit of exactly maxCommitBytes is read, one byte more is
// refused.
func TestCommitSizeBoundary(t *testing.T) {
	e := newEnv(t)
	g := filepath.Join(e.dir, ".git")
	empty := loose(t, g, packTree, nil)
	head := commitData(empty, "")
	msg := strings.Repeat("m", maxCommitBytes-len(head))
	setBranch(t, g, loose(t, g, packCommit, commitData(empty, msg)))
	if lg := e.ok(ActionLog, nil).(LogOutput); len(lg.Commits) != 1 || lg.Commits[0].Message != msg {
		t.Fatalf("a commit of maxCommitBytes was not read whole")
	}
	setBranch(t, g, loose(t, g, packCommit, commitData(empty, msg+"m")))
	e.fail(ActionLog, nil, kernel.StatusFailed, CodeProviderError)
}

// TestDeepDeltaChain: a commit stored at the end of a delta chain of maxDeltaDepth
// links is resolved (offset and reference deltas); one link more makes status, log and
// the staged diff fail cleanly. git accepts both packs.
func TestDeepDeltaChain(t *testing.T) {
	for _, ref := range []bool{false, true} {
		for _, depth := range []int{maxDeltaDepth, maxDeltaDepth + 1} {
			t.Run(fmt.Sprintf("ref=%v/depth=%d", ref, depth), func(t *testing.T) {
				e := newEnv(t)
				g := filepath.Join(e.dir, ".git")
				objs := append([]packObj{baseEntry(packTree, nil)}, deltaChain(packCommit, depth, chainCommit, ref)...)
				for i := 2; i < len(objs); i++ {
					objs[i].base++ // the tree comes first
				}
				pack := writePack(t, g, objs)
				if haveGit() {
					runGit(t, e.dir, "verify-pack", pack)
				}
				setBranch(t, g, objs[len(objs)-1].name)
				if depth <= maxDeltaDepth {
					lg := e.ok(ActionLog, nil).(LogOutput)
					if len(lg.Commits) != 1 || lg.Commits[0].Message != fmt.Sprintf("chain %07d\n", depth) {
						t.Fatalf("log: %+v", lg)
					}
					e.status()
					return
				}
				before := snapshot(t, e.root)
				for _, c := range []struct {
					action string
					input  any
				}{{ActionStatus, nil}, {ActionLog, nil}, {ActionDiff, DiffInput{Staged: true}}} {
					pe := e.fail(c.action, c.input, kernel.StatusFailed, CodeProviderError)
					if !strings.Contains(pe.Message, "delta chain deeper than 4095") {
						t.Errorf("%s: %s", c.action, pe.Message)
					}
				}
				if after := snapshot(t, e.root); after != before {
					t.Fatal("the refused operations changed the root")
				}
			})
		}
	}
}

// TestDeltaCycleRefused: reference deltas that name each other never loop.
func TestDeltaCycleRefused(t *testing.T) {
	e := newEnv(t)
	g := filepath.Join(e.dir, ".git")
	a, b := chainCommit(1), chainCommit(2)
	za, zb := zlibOf(makeDelta(b, a)), zlibOf(makeDelta(a, b))
	objs := []packObj{
		{typ: packRefDelta, size: int64(len(makeDelta(b, a))), z: za, base: 1, name: objName(packCommit, a)},
		{typ: packRefDelta, size: int64(len(makeDelta(a, b))), z: zb, base: 0, name: objName(packCommit, b)},
	}
	writePack(t, g, objs)
	setBranch(t, g, objs[0].name)
	pe := e.fail(ActionLog, nil, kernel.StatusFailed, CodeProviderError)
	if !strings.Contains(pe.Message, "deeper") {
		t.Fatal(pe.Message)
	}
}

// TestDeltaThroughHugeBase: a small blob stored as a delta of a 3 GiB blob is refused
// (its chain passes through an object larger than maxChainObjectBytes) instead of
// inflating the base; a base within the bound is resolved.
func TestDeltaThroughHugeBase(t *testing.T) {
	e := newEnv(t)
	g := filepath.Join(e.dir, ".git")
	small := []byte("small\n")
	d := append(leb(hugeBlobSize), leb(int64(len(small)))...)
	d = append(append(d, byte(len(small))), small...)
	objs := []packObj{hugeBlobEntry(), {typ: packOfsDelta, size: int64(len(d)), z: zlibOf(d), base: 0, name: objName(packBlob, small)}}
	writePack(t, g, objs)
	tree := loose(t, g, packTree, treeData(treeEnt{"f.txt", filemode.Regular, objs[1].name}))
	setBranch(t, g, loose(t, g, packCommit, commitData(tree, "m\n")))
	setIndex(t, g)
	n := allocated(func() {
		pe := e.fail(ActionDiff, DiffInput{Staged: true}, kernel.StatusFailed, CodeProviderError)
		if !strings.Contains(pe.Message, "larger than") {
			t.Fatal(pe.Message)
		}
	})
	if n > allocBound {
		t.Fatalf("allocated %d bytes", n)
	}
}

// TestCorruptObjectsRefused: an object whose content does not match its name, a loose
// object longer or shorter than its header, and a bad zlib checksum all fail cleanly.
func TestCorruptObjectsRefused(t *testing.T) {
	body := commitData(plumbing.NewHash(emptyTreeName), "m\n")
	full := fmt.Appendf(nil, "commit %d\x00%s", len(body), body)
	cases := map[string][]byte{
		"wrong content": zlibOf(fmt.Appendf(nil, "commit %d\x00%s", len(body), bytes.Replace(body, []byte("m\n"), []byte("n\n"), 1))),
		"longer":        zlibOf(append(bytes.Clone(full), 'x')),
		"shorter":       zlibOf(full[:len(full)-1]),
		"bad header":    zlibOf(append([]byte("commit 0x10\x00"), body...)),
		"bad checksum": func() []byte {
			z := zlibOf(full)
			z[len(z)-1] ^= 1
			return z
		}(),
		"not zlib": []byte("plain text"),
	}
	for name, z := range cases {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			g := filepath.Join(e.dir, ".git")
			loose(t, g, packTree, nil)
			h := objName(packCommit, body)
			looseFile(t, g, h, z)
			setBranch(t, g, h)
			e.fail(ActionLog, nil, kernel.StatusFailed, CodeProviderError)
		})
	}
}

// TestGitPacksReadBack: every object of packs git wrote (offset deltas, then reference
// deltas, both with deep chains) is read back by the bounded reader (which checks each
// against its name), and log and status agree with git.
func TestGitPacksReadBack(t *testing.T) {
	needGit(t)
	e := newEnv(t)
	var sb strings.Builder
	for i := range 60 {
		fmt.Fprintf(&sb, "line %d of a file that changes a little every commit\n", i)
		e.write("f.txt", sb.String())
		e.write(fmt.Sprintf("d%d/g.txt", i%5), strings.Repeat(fmt.Sprintf("g %d\n", i), 50))
		commitAll(t, e.dir, fmt.Sprintf("commit %d", i))
	}
	for _, offset := range []string{"true", "false"} {
		runGit(t, e.dir, "-c", "repack.useDeltaBaseOffset="+offset, "repack", "-a", "-d", "-f", "-q", "--depth=100", "--window=50")
		idxs, _ := filepath.Glob(filepath.Join(e.dir, ".git", "objects", "pack", "*.idx"))
		if len(idxs) != 1 {
			t.Fatalf("packs: %v", idxs)
		}
		vp := runGit(t, e.dir, "verify-pack", "-v", idxs[0])
		if !strings.Contains(vp, "chain length = 2") {
			t.Fatalf("git wrote no delta chains:\n%s", vp)
		}
		r, oe := e.p.open([]string{"repo"})
		if oe != nil {
			t.Fatal(oe)
		}
		list := runGit(t, e.dir, "cat-file", "--batch-all-objects", "--batch-check=%(objectname) %(objecttype)")
		for _, l := range strings.Split(strings.TrimSpace(list), "\n") {
			h, typ, _ := strings.Cut(l, " ")
			pt, _ := plumbing.ParseObjectType(typ)
			if _, err := r.readObject(plumbing.NewHash(h), pt, 1<<30); err != nil {
				t.Fatalf("useDeltaBaseOffset=%s: %s %s: %v", offset, h, typ, err)
			}
		}
		r.close()
		lg := e.ok(ActionLog, LogInput{MaxCount: 100}).(LogOutput)
		var got []string
		for _, c := range lg.Commits {
			got = append(got, c.Hash)
		}
		sameLines(t, got, strings.Fields(runGit(t, e.dir, "log", "--format=%H")))
		sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
	}
}

// TestBrokenPackIndexRefused: a pack index whose size does not fit its object count is
// refused cleanly.
func TestBrokenPackIndexRefused(t *testing.T) {
	e := newEnv(t)
	g := filepath.Join(e.dir, ".git")
	objs := deltaChain(packCommit, 3, chainCommit, false)
	pack := writePack(t, g, objs)
	setBranch(t, g, objs[3].name)
	idx := strings.TrimSuffix(pack, ".pack") + ".idx"
	data, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(idx, 0o644)
	os.WriteFile(idx, data[:len(data)-1], 0o644)
	pe := e.fail(ActionLog, nil, kernel.StatusFailed, CodeProviderError)
	if !strings.Contains(pe.Message, "wrong size") {
		t.Fatal(pe.Message)
	}
}

// TestLogCommitBudget: an octopus merge of 70 commits of almost 1 MiB each makes log
// fail cleanly once 64 MiB of commits were read, instead of holding them all; log of
// the merge alone works.
func TestLogCommitBudget(t *testing.T) {
	e := newEnv(t)
	g := filepath.Join(e.dir, ".git")
	empty := loose(t, g, packTree, nil)
	var parents strings.Builder
	for i := range 70 {
		msg := fmt.Sprintf("%03d %s", i, strings.Repeat("m", maxCommitBytes-1000))
		fmt.Fprintf(&parents, "parent %s\n", loose(t, g, packCommit, commitData(empty, msg)))
	}
	merge := fmt.Appendf(nil, "tree %s\n%sauthor A <a@example.invalid> 1700000000 +0000\ncommitter A <a@example.invalid> 1700000000 +0000\n\noctopus\n", empty, parents.String())
	setBranch(t, g, loose(t, g, packCommit, merge))
	if lg := e.ok(ActionLog, LogInput{MaxCount: 1}).(LogOutput); len(lg.Commits) != 1 || len(lg.Commits[0].Parents) != 70 {
		t.Fatalf("log 1: %+v", lg.Commits)
	}
	pe := e.fail(ActionLog, LogInput{MaxCount: 20}, kernel.StatusFailed, CodeProviderError)
	if !strings.Contains(pe.Message, "bytes of commits") {
		t.Fatal(pe.Message)
	}
}

// TestTreeDepthBound: a HEAD tree nested deeper than maxTreeDepth makes the staged diff
// and status fail cleanly (no unbounded recursion); a deep but bounded one works.
func TestTreeDepthBound(t *testing.T) {
	for _, depth := range []int{200, maxTreeDepth + 1} {
		t.Run(fmt.Sprint(depth), func(t *testing.T) {
			e := newEnv(t)
			g := filepath.Join(e.dir, ".git")
			h := loose(t, g, packBlob, []byte("leaf\n"))
			tree := loose(t, g, packTree, treeData(treeEnt{"f", filemode.Regular, h}))
			for range depth - 1 {
				tree = loose(t, g, packTree, treeData(treeEnt{"d", filemode.Dir, tree}))
			}
			setBranch(t, g, loose(t, g, packCommit, commitData(tree, "deep\n")))
			setIndex(t, g)
			if depth <= maxTreeDepth {
				if st := e.status(); len(st.Entries) != 1 || st.Entries[0].Staging != "D" {
					t.Fatalf("status: %v", porcelain(st))
				}
				return
			}
			pe := e.fail(ActionStatus, nil, kernel.StatusFailed, CodeProviderError)
			if !strings.Contains(pe.Message, "nested deeper than 4096") {
				t.Fatal(pe.Message)
			}
			e.fail(ActionDiff, DiffInput{Staged: true}, kernel.StatusFailed, CodeProviderError)
		})
	}
}
