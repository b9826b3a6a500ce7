package fsplane

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// reopen replaces the env's provider by one built with the same root, snapshot store
// and index, changed by mod.
func (e *env) reopen(mod func(*ProviderOptions)) {
	e.t.Helper()
	opts := ProviderOptions{SnapshotDir: e.snaps, Index: e.p.index,
		Now: func() time.Time { return time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC) }}
	if mod != nil {
		mod(&opts)
	}
	p, err := NewProvider(e.root, opts)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.Close() })
	e.p = p
	hs, err := Tools(p)
	if err != nil {
		e.t.Fatal(err)
	}
	e.tools = map[string]kernel.ToolHandler{}
	for _, h := range hs {
		e.tools[h.Definition.Name] = h
	}
}

// treeState records every entry under the root (content of files, type of others,
// mode bits), to prove a refused operation changed nothing.
func (e *env) treeState() map[string]string {
	e.t.Helper()
	m := map[string]string{}
	filepath.WalkDir(e.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			m[p] = "error " + err.Error()
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		v := info.Mode().String()
		if info.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			v += " " + string(b)
		}
		m[p] = v
		return nil
	})
	return m
}

func (e *env) sameTree(before map[string]string, what string) {
	e.t.Helper()
	after := e.treeState()
	for k, v := range before {
		if after[k] != v {
			e.t.Errorf("%s changed %s: %q -> %q", what, k, v, after[k])
		}
	}
	for k, v := range after {
		if _, ok := before[k]; !ok {
			e.t.Errorf("%s created %s (%q)", what, k, v)
		}
	}
}

func frozenEnv(t *testing.T, fold bool, frozen ...[]string) *env {
	e := newEnv(t)
	e.write("ws/private/secret.md", "SECRET-TEXT one\n")
	e.write("ws/private/deep/more.md", "SECRET-TEXT two\n")
	e.write("ws/pub/a.md", "public text\n")
	e.write("ws/privateer.md", "public neighbour\n")
	e.reopen(func(o *ProviderOptions) {
		o.Frozen = frozen
		o.probe = func([]string) nameEquivalence { return nameEquivalence{foldCase: fold} }
	})
	return e
}

func TestFrozenPathsOutOfReach(t *testing.T) {
	t.Parallel()
	e := frozenEnv(t, false, []string{"ws", "private"})
	before := e.treeState()

	for _, path := range [][]string{{"ws", "private"}, {"ws", "private", "secret.md"}, {"ws", "private", "nope"}} {
		for _, tc := range []struct {
			tool string
			args jobj
		}{
			{"files.read", jobj{"path": path}},
			{"files.stat", jobj{"path": path}},
			{"files.list", jobj{"path": path}},
			{"files.grep", jobj{"path": path, "pattern": "e"}},
			{"files.search", jobj{"path": path, "query": "secret"}},
			{"files.replace", jobj{"path": path, "content": "x"}},
			{"files.delete", jobj{"path": path, "recursive": true}},
			{"files.snapshot.create", jobj{"path": path}},
		} {
			e.fail(tc.tool, tc.args, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
		}
	}

	// The walks below an ancestor skip the frozen subtree; the neighbour whose name
	// merely starts the same is still reached.
	for _, path := range [][]string{{}, {"ws"}} {
		out := mustJSON(t, e.ok("files.grep", jobj{"path": path, "pattern": "e"}))
		if strings.Contains(string(out), "SECRET") || strings.Contains(string(out), `"private"`) {
			t.Errorf("grep %v reached the frozen path: %s", path, out)
		}
		if !strings.Contains(string(out), "public neighbour") {
			t.Errorf("grep %v missed the neighbour: %s", path, out)
		}
		out = mustJSON(t, e.ok("files.search", jobj{"path": path, "query": "secret text one"}))
		if strings.Contains(string(out), `"private"`) || strings.Contains(string(out), "secret.md") {
			t.Errorf("search %v reached the frozen path: %s", path, out)
		}
	}
	list := mustJSON(t, e.ok("files.list", jobj{"path": pth("ws")}))
	if strings.Contains(string(list), `"private"`) || !strings.Contains(string(list), "privateer.md") {
		t.Errorf("list names the frozen path or misses its neighbour: %s", list)
	}

	// A recursive delete of an ancestor is refused before anything is removed.
	msg := e.fail("files.delete", jobj{"path": pth("ws"), "recursive": true}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	if !strings.Contains(msg, "files:ws/private") {
		t.Errorf("delete refusal does not name the frozen path: %s", msg)
	}
	e.sameTree(before, "refused operations")
	// A sibling directory is still deletable.
	e.ok("files.delete", jobj{"path": pth("ws", "pub"), "recursive": true})
}

func TestFrozenSnapshotsNeitherCaptureNorRestore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("ws/private/secret.md", "SECRET-TEXT old\n")
	e.write("ws/pub/a.md", "public old\n")
	// A snapshot taken before the path was frozen holds the secret.
	old := e.ok("files.snapshot.create", jobj{"path": pth("ws")})["snapshotId"].(string)
	e.reopen(func(o *ProviderOptions) {
		o.Frozen = [][]string{{"ws", "private"}}
		o.probe = func([]string) nameEquivalence { return nameEquivalence{} }
	})
	snap := e.ok("files.snapshot.create", jobj{"path": pth("ws")})["snapshotId"].(string)
	rec, err := e.p.index.GetSnapshot(t.Context(), SnapshotScope{World: e.actx.World, Owner: e.actx.Owner,
		Root: e.p.rootPath, Path: pth("ws")}, snap)
	if err != nil || rec == nil {
		t.Fatal(rec, err)
	}
	for _, en := range rec.Entries {
		if en.Path[0] == "private" {
			t.Errorf("the snapshot captured the frozen %v", en.Path)
		}
	}
	// Change the frozen subtree (as the host would, outside the plane) and restore both
	// snapshots: neither touches it.
	e.write("ws/private/secret.md", "SECRET-TEXT new\n")
	e.write("ws/private/added.md", "added since\n")
	e.write("ws/pub/a.md", "public new\n")
	for _, id := range []string{snap, old} {
		e.ok("files.snapshot.restore", jobj{"path": pth("ws"), "snapshotId": id})
		if got, _ := e.readFile("ws/private/secret.md"); got != "SECRET-TEXT new\n" {
			t.Errorf("restore %s rewrote the frozen file: %q", id, got)
		}
		if _, ok := e.readFile("ws/private/added.md"); !ok {
			t.Errorf("restore %s deleted inside the frozen path", id)
		}
		if got, _ := e.readFile("ws/pub/a.md"); got != "public old\n" {
			t.Errorf("restore %s did not restore the rest: %q", id, got)
		}
		e.write("ws/pub/a.md", "public new\n")
	}
	// A snapshot holding a file where the frozen directory's parent is now.
	e.reopen(nil)
	e.write("top/ws", "a file then")
	fileThen := e.ok("files.snapshot.create", jobj{"path": pth("top")})["snapshotId"].(string)
	os.Remove(filepath.Join(e.root, "top", "ws"))
	e.write("top/ws/private/secret.md", "SECRET-TEXT kept\n")
	e.reopen(func(o *ProviderOptions) {
		o.Frozen = [][]string{{"top", "ws", "private"}}
		o.probe = func([]string) nameEquivalence { return nameEquivalence{} }
	})
	res := e.call("files.snapshot.restore", jobj{"path": pth("top"), "snapshotId": fileThen})
	if got, _ := e.readFile("top/ws/private/secret.md"); got != "SECRET-TEXT kept\n" {
		t.Errorf("restore replaced the directory holding the frozen path (%s): %q", res.Status, got)
	}
}

// TestFrozenPerDirectoryEquivalence: on a file system that decides case per directory
// (ext4 casefold), a frozen name is compared under its own directory's rules.
func TestFrozenPerDirectoryEquivalence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("ws/private/secret.md", "SECRET-TEXT\n")
	e.reopen(func(o *ProviderOptions) {
		o.Frozen = [][]string{{"ws", "private"}}
		o.probe = func(dir []string) nameEquivalence { return nameEquivalence{foldCase: len(dir) == 1 && dir[0] == "ws"} }
	})
	e.fail("files.read", jobj{"path": pth("ws", "PRIVATE", "secret.md")}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	// The root compares exactly: "WS" is another directory there.
	e.write("WS/private/other.md", "public\n")
	e.ok("files.read", jobj{"path": pth("WS", "private", "other.md")})
}

func TestFrozenUnderCaseFolding(t *testing.T) {
	t.Parallel()
	e := frozenEnv(t, true, []string{"ws", "private"})
	// This Linux file system is case-sensitive, so a differently cased directory is a
	// real one here; under the folding equivalence it is out of reach all the same.
	e.write("WS/PRIVATE/other.md", "SECRET-TEXT cased\n")
	e.write("ws/Private\u200c/zw.md", "SECRET-TEXT zero-width\n")
	before := e.treeState()
	for _, path := range [][]string{{"WS", "PRIVATE", "secret.md"}, {"ws", "Private", "secret.md"}, {"Ws", "private."}, {"ws", "Private\u200c"}} {
		e.fail("files.read", jobj{"path": path}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
		e.fail("files.delete", jobj{"path": path, "recursive": true}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	}
	out := mustJSON(t, e.ok("files.grep", jobj{"path": pth(), "pattern": "SECRET"}))
	var g GrepOutput
	json.Unmarshal(out, &g)
	if len(g.Matches) != 0 {
		t.Errorf("grep reached a case variant of the frozen path: %s", out)
	}
	e.fail("files.delete", jobj{"path": pth("WS"), "recursive": true}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	e.sameTree(before, "refused operations")
}

func TestNameEquivalenceKey(t *testing.T) {
	t.Parallel()
	sensitive, folding := nameEquivalence{}, nameEquivalence{foldCase: true}
	for _, tc := range []struct {
		a, b       string
		eq         nameEquivalence
		equivalent bool
	}{
		{"private", "private", sensitive, true},
		{"private", "PRIVATE", sensitive, false},
		{"private", "PRIVATE", folding, true},
		{"Private", "pRIVATE", folding, true},
		{"caf\u00e9", "cafe\u0301", sensitive, true}, // NFC vs NFD
		{"CAF\u00c9", "cafe\u0301", folding, true},
		{"stra\u00dfe", "STRASSE", folding, true}, // full case folding
		{"stra\u00dfe", "STRASSE", sensitive, false},
		{"\u212aelvin", "kelvin", folding, true}, // KELVIN SIGN folds to k
		{"private", "private.", sensitive, true}, // SMB drops trailing dots
		{"private", "priv\u200cate", sensitive, true},
		{"private", "\ufeffprivate", folding, true},
		{"private", "privat", folding, false},
		{"private", "privateer", folding, false},
		{"...", "...", sensitive, true},
		{"a.b", "a.b.", sensitive, true},
		{"\u0130", "i\u0307", folding, true}, // İ folds to i + combining dot
		{"\u0131", "i", folding, false},      // dotless i is its own letter
	} {
		if got := tc.eq.key(tc.a) == tc.eq.key(tc.b); got != tc.equivalent {
			t.Errorf("fold=%v: %q ~ %q = %v, want %v (keys %q, %q)", tc.eq.foldCase, tc.a, tc.b, got, tc.equivalent,
				tc.eq.key(tc.a), tc.eq.key(tc.b))
		}
	}
}

// fakeProbe answers like a directory whose names compare case-insensitively when
// insensitive, exactly otherwise.
type fakeProbe struct {
	names       []string
	insensitive bool
	err         error
}

func (f fakeProbe) Names(max int) ([]string, error) { return f.names, f.err }
func (f fakeProbe) Same(name, other string) (bool, bool, error) {
	for _, n := range f.names {
		if n == other {
			return true, false, nil // both spellings exist: two entries
		}
	}
	if f.insensitive {
		return true, true, nil
	}
	return false, false, nil
}

func TestProbeEquivalence(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		probes []probeDir
		fold   bool
	}{
		{"case-sensitive", []probeDir{fakeProbe{names: []string{"Readme.md"}}}, false},
		{"case-insensitive", []probeDir{fakeProbe{names: []string{"Readme.md"}, insensitive: true}}, true},
		{"both spellings present", []probeDir{fakeProbe{names: []string{"a", "A"}, insensitive: true}}, false},
		{"no letters: the next probe decides", []probeDir{fakeProbe{names: []string{"123", "_-"}}, fakeProbe{names: []string{"root"}}}, false},
		{"no letters anywhere: assume folding", []probeDir{fakeProbe{names: []string{"123"}}}, true},
		{"empty root: the root's own name decides", []probeDir{fakeProbe{}, fakeProbe{names: []string{"Work"}, insensitive: true}}, true},
		{"unreadable: assume folding", []probeDir{fakeProbe{err: os.ErrPermission}}, true},
		{"nothing to probe", nil, true},
	} {
		if got := probeEquivalence(tc.probes...); got.foldCase != tc.fold {
			t.Errorf("%s: foldCase = %v, want %v", tc.name, got.foldCase, tc.fold)
		}
	}
	// The real probe on this machine's (case-sensitive) temporary directory, which it
	// must leave as it was.
	dir := t.TempDir()
	root := filepath.Join(dir, "Root")
	os.MkdirAll(filepath.Join(root, "ws", "private"), 0o755)
	os.MkdirAll(filepath.Join(root, "123", "456"), 0o755)
	p, err := NewProvider(root, ProviderOptions{Frozen: [][]string{{"ws", "private", "x"}, {"123", "456", "789"}, {"gone", "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, tc := range []struct {
		dir  []string
		fold bool
	}{
		{nil, false},                      // the root's entries have letters
		{[]string{"ws"}, false},           // "private" probed as "PRIVATE"
		{[]string{"ws", "private"}, true}, // empty: cannot tell
		{[]string{"123"}, true},           // no letters
		{[]string{"gone"}, true},          // missing
	} {
		n, _ := p.frozen.at(tc.dir)
		if n == nil || n.eq.foldCase != tc.fold {
			t.Errorf("directory %v: %+v, want foldCase %v", tc.dir, n, tc.fold)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "ws")); len(ents) != 1 {
		t.Errorf("the probe left entries behind: %v", ents)
	}
	empty := filepath.Join(dir, "Empty")
	os.Mkdir(empty, 0o755)
	q, err := NewProvider(empty, ProviderOptions{Frozen: [][]string{{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if q.frozen.root.eq.foldCase {
		t.Error("an empty root named with letters, in a case-sensitive parent, probed as case-insensitive")
	}
	if _, err := NewProvider(root, ProviderOptions{Frozen: [][]string{{"a", ".."}}}); err == nil {
		t.Error("an invalid frozen path was accepted")
	}
}

func TestGitNameSpellings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		git  bool
	}{
		{".git", true}, {".GIT", true}, {".Git", true}, {".git.", true}, {".git..", true}, {"git~1", true}, {"GIT~1", true},
		{".git\u200c", true}, {"\ufeff.git", true}, {".g\u200dit", true}, {".\u0067it", true},
		{".gitignore", false}, {".github", false}, {"git", false}, {".gi", false}, {"git~2", false}, {"x.git", false}, {".git-x", false},
	} {
		if got := isGitName(tc.name); got != tc.git {
			t.Errorf("isGitName(%q) = %v, want %v", tc.name, got, tc.git)
		}
	}
	e := newEnv(t)
	for _, n := range []string{".git.", "git~1", ".GIT\u200c"} {
		e.fail("files.create", jobj{"path": pth("d", n, "config"), "content": "x"}, kernel.StatusDenied, CodeNotPermitted)
	}
	if ents, _ := os.ReadDir(e.root); len(ents) != 0 {
		t.Errorf("a refused create left %v", ents)
	}
}

// TestFrozenUnderAnotherName: an entry that is a frozen path under another name (here
// a hard link; an 8.3 short name or a bind mount alike) is refused or skipped like the
// frozen path itself.
func TestFrozenUnderAnotherName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("ws/secret.md", "SECRET-TEXT linked\n")
	e.write("ws/pub/a.md", "public\n")
	if err := os.Link(filepath.Join(e.root, "ws", "secret.md"), filepath.Join(e.root, "ws", "pub", "alias.md")); err != nil {
		t.Skip("no hard links here:", err)
	}
	snapBefore := e.ok("files.snapshot.create", jobj{"path": pth("ws", "pub")})["snapshotId"].(string)
	e.reopen(func(o *ProviderOptions) {
		o.Frozen = [][]string{{"ws", "secret.md"}}
		o.probe = func([]string) nameEquivalence { return nameEquivalence{} }
	})
	before := e.treeState()
	e.fail("files.read", jobj{"path": pth("ws", "pub", "alias.md")}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	e.fail("files.replace", jobj{"path": pth("ws", "pub", "alias.md"), "content": "x"}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	e.fail("files.delete", jobj{"path": pth("ws", "pub"), "recursive": true}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	for _, tc := range []struct {
		tool string
		args jobj
	}{
		{"files.grep", jobj{"path": pth(), "pattern": "SECRET"}},
		{"files.search", jobj{"path": pth(), "query": "secret text linked"}},
		{"files.list", jobj{"path": pth("ws", "pub")}},
	} {
		if out := mustJSON(t, e.ok(tc.tool, tc.args)); strings.Contains(string(out), "SECRET") || strings.Contains(string(out), "alias") {
			t.Errorf("%s reached the frozen file under another name: %s", tc.tool, out)
		}
	}
	id := e.ok("files.snapshot.create", jobj{"path": pth("ws", "pub")})["snapshotId"].(string)
	rec, _ := e.p.index.GetSnapshot(t.Context(), SnapshotScope{World: e.actx.World, Owner: e.actx.Owner, Root: e.p.rootPath, Path: pth("ws", "pub")}, id)
	if rec == nil || len(rec.Entries) != 1 {
		t.Errorf("the snapshot captured the frozen file under another name: %+v", rec)
	}
	// A restore from before the freeze neither rewrites nor removes it.
	e.ok("files.snapshot.restore", jobj{"path": pth("ws", "pub"), "snapshotId": id})
	e.ok("files.snapshot.restore", jobj{"path": pth("ws", "pub"), "snapshotId": snapBefore})
	e.sameTree(before, "operations on a frozen file under another name")
}

// TestFrozenPathThroughALink: a frozen path the configuration names through a link
// freezes what the link leads to, under its own name too.
func TestFrozenPathThroughALink(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("data/ws/private/secret.md", "SECRET-TEXT real\n")
	e.write("data/ws/pub.md", "public\n")
	e.symlink("data/ws", "workspace")
	e.reopen(func(o *ProviderOptions) { o.Frozen = [][]string{{"workspace", "private"}} })
	before := e.treeState()
	e.fail("files.read", jobj{"path": pth("data", "ws", "private", "secret.md")}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	e.fail("files.delete", jobj{"path": pth("data"), "recursive": true}, kernel.StatusDenied, kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied))
	if out := mustJSON(t, e.ok("files.grep", jobj{"path": pth(), "pattern": "SECRET"})); strings.Contains(string(out), "SECRET") {
		t.Errorf("grep reached the frozen target: %s", out)
	}
	e.sameTree(before, "operations on a frozen path's link target")
	e.ok("files.read", jobj{"path": pth("data", "ws", "pub.md")})
}
