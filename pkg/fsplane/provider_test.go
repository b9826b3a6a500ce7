package fsplane

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

type jobj = map[string]any

func TestListStatRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("Workspace/public/summary.md", "Project Atlas ships in Q3.\n")
	e.write("Workspace/b.txt", "bee")
	e.mkdir("Workspace/empty")
	e.mkdir("Workspace/.git")
	e.mkdir("Workspace/.GIT")
	e.write("Workspace/"+TempPrefix+"stale", "half")
	e.symlink("../outside", "Workspace/link")

	out := e.ok("files.list", jobj{"path": pth("Workspace")})
	got := fmt.Sprint(out["entries"])
	want := "[map[kind:file name:b.txt] map[kind:directory name:empty] map[kind:symlink name:link] map[kind:directory name:public]]"
	if got != want {
		t.Fatalf("list entries = %s, want %s", got, want)
	}
	if out["truncated"] != false {
		t.Fatalf("truncated = %v", out["truncated"])
	}
	root := e.ok("files.list", jobj{"path": pth()})
	if fmt.Sprint(root["entries"]) != "[map[kind:directory name:Workspace]]" || fmt.Sprint(root["path"]) != "[]" {
		t.Fatalf("root list = %v", root)
	}

	st := e.ok("files.stat", jobj{"path": pth("Workspace", "public", "summary.md")})
	if st["kind"] != "file" || st["sizeBytes"] != float64(27) || !hex32.MatchString(st["version"].(string)) {
		t.Fatalf("stat = %v", st)
	}
	if _, err := kernel.ParseTimestamp(st["modifiedAt"].(string)); err != nil {
		t.Fatalf("modifiedAt %v: %v", st["modifiedAt"], err)
	}
	dst := e.ok("files.stat", jobj{"path": pth("Workspace")})
	if dst["kind"] != "directory" || dst["version"] != nil {
		t.Fatalf("dir stat = %v", dst)
	}
	e.ok("files.stat", jobj{"path": pth()})

	rd := e.ok("files.read", jobj{"path": pth("Workspace", "public", "summary.md")})
	if rd["content"] != "Project Atlas ships in Q3.\n" || rd["truncated"] != false || rd["encoding"] != "utf-8" ||
		rd["version"] != st["version"] || rd["version"] != Version([]byte("Project Atlas ships in Q3.\n")) {
		t.Fatalf("read = %v", rd)
	}

	e.fail("files.read", jobj{"path": pth("Workspace")}, kernel.StatusFailed, CodeNotAFile)
	e.fail("files.read", jobj{"path": pth()}, kernel.StatusFailed, CodeNotAFile)
	e.fail("files.read", jobj{"path": pth("Workspace", "nope.md")}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.read", jobj{"path": pth("Workspace", "b.txt", "x")}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.list", jobj{"path": pth("Workspace", "b.txt")}, kernel.StatusFailed, CodeNotADirectory)
	e.fail("files.list", jobj{"path": pth("nope")}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.stat", jobj{"path": pth("nope")}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.list", jobj{"path": pth("Workspace", "link")}, kernel.StatusDenied, CodePathEscape)
	e.fail("files.stat", jobj{"path": pth("Workspace", "link")}, kernel.StatusDenied, CodePathEscape)
	e.fail("files.read", jobj{"path": pth("Workspace", ".git")}, kernel.StatusDenied, CodeNotPermitted)
	e.fail("files.list", jobj{"path": pth("Workspace", ".Git")}, kernel.StatusDenied, CodeNotPermitted)
	e.fail("files.read", jobj{"path": pth("Workspace", TempPrefix+"stale")}, kernel.StatusDenied, CodeNotPermitted)
}

func TestReadTruncationAndBinary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p, err := NewProvider(e.root, ProviderOptions{MaxReadBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	e.write("long.txt", "héllo wörld, long text")
	e.write("bin", "\xff\xfe\x00\x01abc")
	e.write("cut.txt", "123456789é") // é straddles the 10-byte limit
	e.p = p
	hs, _ := Tools(p)
	for _, h := range hs {
		e.tools[h.Definition.Name] = h
	}
	rd := e.ok("files.read", jobj{"path": pth("long.txt")})
	if rd["truncated"] != true || rd["content"] != "héllo wö" || rd["version"] != Version([]byte("héllo wörld, long text")) {
		t.Fatalf("truncated read = %v", rd)
	}
	bin := e.ok("files.read", jobj{"path": pth("bin")})
	if bin["encoding"] != "base64" || bin["content"] != base64.StdEncoding.EncodeToString([]byte("\xff\xfe\x00\x01abc")) {
		t.Fatalf("binary read = %v", bin)
	}
	cut := e.ok("files.read", jobj{"path": pth("cut.txt")})
	if cut["encoding"] != "utf-8" || cut["content"] != "123456789" || cut["truncated"] != true {
		t.Fatalf("cut read = %v", cut)
	}
}

func TestListCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.mkdir("many")
	for i := 0; i < MaxListEntries+5; i++ {
		f, err := os.Create(filepath.Join(e.root, "many", fmt.Sprintf("f%05d", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	out := e.ok("files.list", jobj{"path": pth("many")})
	if out["truncated"] != true || len(out["entries"].([]any)) != MaxListEntries {
		t.Fatalf("list cap: truncated=%v n=%d", out["truncated"], len(out["entries"].([]any)))
	}
}

func TestCreateReplaceAppend(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cr := e.ok("files.create", jobj{"path": pth("Workspace", "scratch", "notes.md"), "content": "hello notes", "metadata": jobj{"k": 1}})
	if cr["version"] != Version([]byte("hello notes")) || cr["bytes"] != float64(11) {
		t.Fatalf("create = %v", cr)
	}
	if s, _ := e.readFile("Workspace/scratch/notes.md"); s != "hello notes" {
		t.Fatalf("content = %q", s)
	}
	e.fail("files.create", jobj{"path": pth("Workspace", "scratch", "notes.md"), "content": "clobber"}, kernel.StatusFailed, CodeAlreadyExists)
	e.fail("files.create", jobj{"path": pth("Workspace", "scratch"), "content": "x"}, kernel.StatusFailed, CodeAlreadyExists)
	if s, _ := e.readFile("Workspace/scratch/notes.md"); s != "hello notes" {
		t.Fatalf("create clobbered: %q", s)
	}
	// JSON content is stored compact.
	js := e.ok("files.create", jobj{"path": pth("data.json"), "content": jobj{"b": []any{1, 2}, "a": "x"}})
	if s, _ := e.readFile("data.json"); s != `{"a":"x","b":[1,2]}` || js["bytes"] != float64(len(s)) {
		t.Fatalf("json content = %q", s)
	}
	raw := e.ok("files.create", `{"path":["raw.json"],"content": { "z" : 1.50 , "a":[ true ,null] }}`)
	if s, _ := e.readFile("raw.json"); s != `{"z":1.50,"a":[true,null]}` || raw["version"] != Version([]byte(s)) {
		t.Fatalf("raw json content = %q", s)
	}

	v1 := cr["version"].(string)
	rp := e.ok("files.replace", jobj{"path": pth("Workspace", "scratch", "notes.md"), "content": "second", "expectedVersion": v1})
	if rp["version"] != Version([]byte("second")) {
		t.Fatalf("replace = %v", rp)
	}
	msg := e.fail("files.replace", jobj{"path": pth("Workspace", "scratch", "notes.md"), "content": "third", "expectedVersion": v1}, kernel.StatusFailed, CodeVersionConflict)
	if !strings.Contains(msg, rp["version"].(string)) {
		t.Fatalf("conflict message should name the current version: %s", msg)
	}
	if s, _ := e.readFile("Workspace/scratch/notes.md"); s != "second" {
		t.Fatalf("conflict changed content: %q", s)
	}
	e.fail("files.replace", jobj{"path": pth("Workspace", "missing.md"), "content": "x"}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.replace", jobj{"path": pth("Workspace", "missing.md"), "content": "x", "expectedVersion": v1}, kernel.StatusFailed, CodeVersionConflict)
	e.fail("files.replace", jobj{"path": pth("nodir", "missing.md"), "content": "x"}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.replace", jobj{"path": pth("Workspace", "scratch"), "content": "x"}, kernel.StatusFailed, CodeNotAFile)
	if _, err := os.Stat(filepath.Join(e.root, "nodir")); err == nil {
		t.Fatal("replace created a directory")
	}

	ap := e.ok("files.append", jobj{"path": pth("Workspace", "scratch", "notes.md"), "content": " plus", "expectedVersion": rp["version"]})
	if s, _ := e.readFile("Workspace/scratch/notes.md"); s != "second plus" || ap["bytes"] != float64(11) || ap["version"] != Version([]byte(s)) {
		t.Fatalf("append: %q %v", s, ap)
	}
	e.fail("files.append", jobj{"path": pth("Workspace", "scratch", "notes.md"), "content": "x", "expectedVersion": rp["version"]}, kernel.StatusFailed, CodeVersionConflict)
	e.ok("files.append", jobj{"path": pth("new", "log.txt"), "content": "first"})
	if s, _ := e.readFile("new/log.txt"); s != "first" {
		t.Fatalf("append to missing = %q", s)
	}
	e.fail("files.append", jobj{"path": pth("new", "other.txt"), "content": "x", "expectedVersion": v1}, kernel.StatusFailed, CodeVersionConflict)
	e.fail("files.append", jobj{"path": pth("new"), "content": "x"}, kernel.StatusFailed, CodeNotAFile)

	// Mode is kept across a replace.
	full := filepath.Join(e.root, "Workspace", "scratch", "notes.md")
	os.Chmod(full, 0o600)
	e.ok("files.replace", jobj{"path": pth("Workspace", "scratch", "notes.md"), "content": "mode"})
	if fi, _ := os.Stat(full); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode = %v", fi.Mode())
	}
	// No temporary file is left behind.
	assertNoTemps(t, e.root)
}

func assertNoTemps(t *testing.T, root string) {
	t.Helper()
	filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasPrefix(info.Name(), TempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return nil
	})
}

func TestStaleTempsCleaned(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("d/a.txt", "a")
	e.write("d/"+TempPrefix+"deadbeef", "partial")
	list := e.ok("files.list", jobj{"path": pth("d")})
	if len(list["entries"].([]any)) != 1 {
		t.Fatalf("temp file shown: %v", list)
	}
	g := e.ok("files.grep", jobj{"path": pth(), "pattern": "partial"})
	if len(g["matches"].([]any)) != 0 {
		t.Fatalf("grep saw a temp file: %v", g)
	}
	e.ok("files.replace", jobj{"path": pth("d", "a.txt"), "content": "b"})
	assertNoTemps(t, e.root)
}

func TestDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("a.txt", "a")
	e.write("dir/x.txt", "x")
	e.write("dir/sub/y.txt", "y")
	e.mkdir("emptydir")
	e.write("repo/.git/config", "[core]")
	e.write("repo/readme", "r")
	e.symlink(e.outside, "dir/sub/link")

	e.fail("files.delete", jobj{"path": pth("a.txt"), "expectedVersion": Version([]byte("b"))}, kernel.StatusFailed, CodeVersionConflict)
	e.ok("files.delete", jobj{"path": pth("a.txt"), "expectedVersion": Version([]byte("a"))})
	if _, ok := e.readFile("a.txt"); ok {
		t.Fatal("a.txt still there")
	}
	e.fail("files.delete", jobj{"path": pth("a.txt")}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.delete", jobj{"path": pth("a.txt"), "expectedVersion": "v1"}, kernel.StatusFailed, CodeVersionConflict)
	e.fail("files.delete", jobj{"path": pth("dir")}, kernel.StatusFailed, CodeNotEmpty)
	e.fail("files.delete", jobj{"path": pth("dir"), "recursive": true, "expectedVersion": "v1"}, kernel.StatusFailed, CodeInvalidInput)
	e.ok("files.delete", jobj{"path": pth("emptydir")})
	e.fail("files.delete", jobj{"path": pth("repo"), "recursive": true}, kernel.StatusDenied, CodeNotPermitted)
	if _, ok := e.readFile("repo/.git/config"); !ok {
		t.Fatal(".git was touched")
	}
	before := e.snapshotOutside()
	out := e.ok("files.delete", jobj{"path": pth("dir"), "recursive": true})
	if out["deleted"] != true {
		t.Fatalf("delete = %v", out)
	}
	if _, err := os.Lstat(filepath.Join(e.root, "dir")); err == nil {
		t.Fatal("dir still there")
	}
	if fmt.Sprint(before) != fmt.Sprint(e.snapshotOutside()) {
		t.Fatal("recursive delete changed something outside the root")
	}
	// The root itself (direct caller; the tool schema needs a path).
	rr := e.op(ActionDelete, pth(), DeleteInput{Recursive: true})
	if rr.Status != kernel.StatusDenied || rr.Error.Code != CodeNotPermitted {
		t.Fatalf("delete root = %+v", rr)
	}
}

func TestSearch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("docs/atlas.md", "Atlas overview. The atlas project ships.")
	e.write("docs/notes.md", "atlas atlas atlas launch date")
	e.write("docs/other.md", "nothing relevant")
	e.write("docs/launch.md", "The launch of Atlas.")
	e.write("docs/bin.dat", "atlas\x00launch")
	e.write("z/zz.md", "LAUNCH atlas")
	e.symlink(e.outside+"/secret.txt", "docs/secret-link.md")
	e.write(".git/atlas", "atlas launch")

	out := e.ok("files.search", jobj{"path": pth(), "query": "  Atlas   launch "})
	hits := out["hits"].([]any)
	var got []string
	for _, h := range hits {
		m := h.(map[string]any)
		got = append(got, fmt.Sprint(m["path"]))
		if !hex32.MatchString(m["version"].(string)) {
			t.Fatalf("hit version %v", m["version"])
		}
	}
	// launch.md has both terms and "launch" in its name; then both-term files;
	// atlas.md has "atlas" in its name but only one term.
	want := "[[docs launch.md] [docs notes.md] [z zz.md] [docs atlas.md]]"
	if fmt.Sprint(got) != want {
		t.Fatalf("search order = %v, want %s", got, want)
	}
	first := hits[0].(map[string]any)
	if first["score"] != float64(1) || !strings.Contains(first["excerpt"].(string), "launch of Atlas") {
		t.Fatalf("first hit = %v", first)
	}
	if first["version"] != Version([]byte("The launch of Atlas.")) {
		t.Fatal("hit version is not the file's version")
	}
	for i := 1; i < len(hits); i++ {
		prev, cur := hits[i-1].(map[string]any)["score"].(float64), hits[i].(map[string]any)["score"].(float64)
		if !(cur > 0 && cur <= prev && cur < 1) {
			t.Fatalf("scores not relative to the best hit: %v", hits)
		}
	}
	lim := e.ok("files.search", jobj{"path": pth("docs"), "query": "atlas", "limit": 1})
	if len(lim["hits"].([]any)) != 1 {
		t.Fatalf("limit not honoured: %v", lim)
	}
	one := e.ok("files.search", jobj{"path": pth("docs", "notes.md"), "query": "atlas"})
	if len(one["hits"].([]any)) != 1 {
		t.Fatalf("search of a file: %v", one)
	}
	none := e.ok("files.search", jobj{"path": pth(), "query": "TOP-SECRET"})
	if len(none["hits"].([]any)) != 0 {
		t.Fatalf("search followed a link: %v", none)
	}
	e.fail("files.search", jobj{"path": pth("nope"), "query": "x"}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.search", jobj{"path": pth("docs", "secret-link.md"), "query": "x"}, kernel.StatusDenied, CodePathEscape)
	// Excerpt around the first hit in a long file.
	e.write("long/l.txt", strings.Repeat("filler ", 200)+"NEEDLE here"+strings.Repeat(" tail", 200))
	l := e.ok("files.search", jobj{"path": pth("long"), "query": "needle"})
	ex := l["hits"].([]any)[0].(map[string]any)["excerpt"].(string)
	if !strings.Contains(ex, "NEEDLE here") || len([]rune(ex)) > 240 {
		t.Fatalf("excerpt = %q", ex)
	}
	// Non-ASCII text whose lower case changes length keeps a correct excerpt.
	e.write("u/u.txt", "İİİİ "+strings.Repeat("x", 100)+" Zielwort")
	u := e.ok("files.search", jobj{"path": pth("u"), "query": "zielwort"})
	if ex := u["hits"].([]any)[0].(map[string]any)["excerpt"].(string); !strings.Contains(ex, "Zielwort") {
		t.Fatalf("unicode excerpt = %q", ex)
	}
}

func TestGrep(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("b/two.txt", "alpha\nBeta ships\ngamma\nships again\n")
	e.write("a/one.txt", "zero\nships here\n")
	e.write("a/bin.dat", "ships\x00")
	e.write("c.txt", "no match")
	e.write("long.txt", strings.Repeat("é", 1500)+" ships\n")
	e.symlink(e.outside+"/secret.txt", "a/link.txt")

	out := e.ok("files.grep", jobj{"path": pth(), "pattern": "SHIPS"})
	var got []string
	for _, m := range out["matches"].([]any) {
		mm := m.(map[string]any)
		got = append(got, fmt.Sprintf("%v:%v", mm["path"], mm["line"]))
	}
	want := "[[a one.txt]:2 [b two.txt]:2 [b two.txt]:4 [long.txt]:1]"
	if fmt.Sprint(got) != want {
		t.Fatalf("grep = %v, want %s", got, want)
	}
	lm := out["matches"].([]any)[3].(map[string]any)
	if lm["truncated"] != true || len([]rune(lm["text"].(string))) != MaxGrepLineChars {
		t.Fatalf("long line not cut: truncated=%v len=%d", lm["truncated"], len([]rune(lm["text"].(string))))
	}
	cs := e.ok("files.grep", jobj{"path": pth("b"), "pattern": "Beta", "caseSensitive": true, "contextBefore": 1, "contextAfter": 5})
	m := cs["matches"].([]any)
	if len(m) != 1 || fmt.Sprint(m[0].(map[string]any)["context"]) != "[alpha Beta ships gamma ships again]" {
		t.Fatalf("context = %v", m)
	}
	if n := len(e.ok("files.grep", jobj{"path": pth("b"), "pattern": "beta", "caseSensitive": true})["matches"].([]any)); n != 0 {
		t.Fatalf("case-sensitive matched %d", n)
	}
	re := e.ok("files.grep", jobj{"path": pth("b", "two.txt"), "pattern": `^s\w+s again$`, "mode": "regex"})
	if len(re["matches"].([]any)) != 1 {
		t.Fatalf("regex = %v", re)
	}
	e.fail("files.grep", jobj{"path": pth(), "pattern": `(?<=x)`, "mode": "regex"}, kernel.StatusFailed, CodeInvalidInput)
	e.fail("files.grep", jobj{"path": pth("missing"), "pattern": "x"}, kernel.StatusFailed, CodeNotFound)
	if n := len(e.ok("files.grep", jobj{"path": pth(), "pattern": "SECRET"})["matches"].([]any)); n != 0 {
		t.Fatal("grep followed a link")
	}
	// Cap at 1,000 matches, in path order.
	var sb strings.Builder
	for i := 0; i < 700; i++ {
		sb.WriteString("hit\n")
	}
	for _, n := range []string{"m/1.txt", "m/2.txt", "m/0.txt"} {
		e.write(n, sb.String())
	}
	capped := e.ok("files.grep", jobj{"path": pth("m"), "pattern": "hit"})
	ms := capped["matches"].([]any)
	if capped["truncated"] != true || len(ms) != MaxGrepMatches {
		t.Fatalf("cap: truncated=%v n=%d", capped["truncated"], len(ms))
	}
	if fmt.Sprint(ms[0].(map[string]any)["path"]) != "[m 0.txt]" || fmt.Sprint(ms[999].(map[string]any)["path"]) != "[m 1.txt]" ||
		ms[999].(map[string]any)["line"] != float64(300) {
		t.Fatalf("cap order: first %v last %v", ms[0], ms[999])
	}
}

func TestSnapshotsFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("Workspace/scratch/draft.md", "seed draft")
	c1 := e.ok("files.snapshot.create", jobj{"path": pth("Workspace", "scratch", "draft.md"), "label": "  before edit "})
	if c1["label"] != "before edit" || c1["kind"] != "file" || !validSnapshotID(c1["snapshotId"].(string)) {
		t.Fatalf("create = %v", c1)
	}
	e.ok("files.replace", jobj{"path": pth("Workspace", "scratch", "draft.md"), "content": "edited"})
	c2 := e.ok("files.snapshot.create", jobj{"path": pth("Workspace", "scratch", "draft.md")})
	if c2["label"] != nil {
		t.Fatalf("label = %v", c2["label"])
	}
	ls := e.ok("files.snapshot.list", jobj{"path": pth("Workspace", "scratch", "draft.md")})
	snaps := ls["snapshots"].([]any)
	if len(snaps) != 2 || snaps[0].(map[string]any)["snapshotId"] != c2["snapshotId"] {
		t.Fatalf("list = %v", ls)
	}
	if l1 := e.ok("files.snapshot.list", jobj{"path": pth("Workspace", "scratch", "draft.md"), "limit": 1}); len(l1["snapshots"].([]any)) != 1 {
		t.Fatalf("limit: %v", l1)
	}
	if other := e.ok("files.snapshot.list", jobj{"path": pth("Workspace")}); len(other["snapshots"].([]any)) != 0 {
		t.Fatalf("other path: %v", other)
	}
	id1 := c1["snapshotId"].(string)
	e.fail("files.snapshot.restore", jobj{"path": pth("Workspace", "scratch", "draft.md"), "snapshotId": id1, "expectedVersion": "v0"}, kernel.StatusFailed, CodeVersionConflict)
	if s, _ := e.readFile("Workspace/scratch/draft.md"); s != "edited" {
		t.Fatal("conflicting restore changed the file")
	}
	r := e.ok("files.snapshot.restore", jobj{"path": pth("Workspace", "scratch", "draft.md"), "snapshotId": id1, "expectedVersion": Version([]byte("edited"))})
	if s, _ := e.readFile("Workspace/scratch/draft.md"); s != "seed draft" || r["version"] != Version([]byte("seed draft")) || r["restored"] != float64(1) {
		t.Fatalf("restore: %q %v", s, r)
	}
	again := e.ok("files.snapshot.restore", jobj{"path": pth("Workspace", "scratch", "draft.md"), "snapshotId": id1})
	if again["restored"] != float64(0) {
		t.Fatalf("idempotent restore wrote: %v", again)
	}
	// Restoring a deleted file brings it (and its directory) back.
	e.ok("files.delete", jobj{"path": pth("Workspace"), "recursive": true})
	e.ok("files.snapshot.restore", jobj{"path": pth("Workspace", "scratch", "draft.md"), "snapshotId": id1})
	if s, _ := e.readFile("Workspace/scratch/draft.md"); s != "seed draft" {
		t.Fatalf("restore after delete: %q", s)
	}
	e.fail("files.snapshot.restore", jobj{"path": pth("Workspace", "scratch", "draft.md"), "snapshotId": "nope-1"}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.snapshot.restore", jobj{"path": pth("Workspace", "scratch", "draft.md"), "snapshotId": "bad id!"}, kernel.StatusFailed, CodeInvalidInput)
	e.fail("files.snapshot.restore", jobj{"path": pth("Workspace", "other.md"), "snapshotId": id1}, kernel.StatusFailed, CodeNotFound)
	e.fail("files.snapshot.create", jobj{"path": pth("missing")}, kernel.StatusFailed, CodeNotFound)
	// A directory where the file was.
	e.ok("files.delete", jobj{"path": pth("Workspace", "scratch", "draft.md")})
	e.mkdir("Workspace/scratch/draft.md")
	e.fail("files.snapshot.restore", jobj{"path": pth("Workspace", "scratch", "draft.md"), "snapshotId": id1}, kernel.StatusFailed, CodeNotAFile)
	// Blobs are outside the root.
	if _, err := os.Stat(filepath.Join(e.snaps, "blobs")); err != nil {
		t.Fatalf("no blob store: %v", err)
	}
}

func TestSnapshotsDirectory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("proj/a.txt", "A")
	e.write("proj/sub/b.txt", "B")
	e.write("proj/sub/deep/c.txt", "C")
	e.mkdir("proj/keep-empty")
	e.write("proj/lib/.git/HEAD", "ref")
	e.write("proj/lib/tracked.txt", "T")
	e.symlink(e.outside, "proj/outlink")
	s := e.ok("files.snapshot.create", jobj{"path": pth("proj"), "label": "start"})
	if s["kind"] != "directory" {
		t.Fatalf("kind = %v", s)
	}
	id := s["snapshotId"].(string)
	// An agent's changes.
	e.ok("files.replace", jobj{"path": pth("proj", "a.txt"), "content": "changed"})
	e.ok("files.delete", jobj{"path": pth("proj", "sub", "deep"), "recursive": true})
	e.ok("files.create", jobj{"path": pth("proj", "new", "n.txt"), "content": "N"})
	e.ok("files.create", jobj{"path": pth("proj", "sub", "extra.txt"), "content": "E"})
	e.ok("files.delete", jobj{"path": pth("proj", "sub", "b.txt")})
	e.mkdir("proj/sub/b.txt") // a directory where a file was
	e.ok("files.replace", jobj{"path": pth("proj", "lib", "tracked.txt"), "content": "T2"})
	e.ok("files.create", jobj{"path": pth("proj", "lib", "untracked.txt"), "content": "U"})
	before := e.snapshotOutside()

	msg := e.fail("files.snapshot.restore", jobj{"path": pth("proj"), "snapshotId": id, "expectedVersion": Version([]byte("A"))}, kernel.StatusFailed, CodeInvalidInput)
	if !strings.Contains(msg, "expectedVersion") {
		t.Fatalf("message: %s", msg)
	}
	r := e.ok("files.snapshot.restore", jobj{"path": pth("proj"), "snapshotId": id})
	if r["kind"] != "directory" || r["restored"] != float64(3) || r["removed"] != float64(2) || r["preserved"] != float64(1) {
		t.Fatalf("restore = %v", r)
	}
	// The repository below is left as it is, working tree included (as delete refuses it).
	for rel, want := range map[string]string{"proj/a.txt": "A", "proj/sub/b.txt": "B", "proj/sub/deep/c.txt": "C", "proj/lib/.git/HEAD": "ref",
		"proj/lib/tracked.txt": "T2", "proj/lib/untracked.txt": "U"} {
		if got, _ := e.readFile(rel); got != want {
			t.Fatalf("%s = %q, want %q", rel, got, want)
		}
	}
	for _, gone := range []string{"proj/new", "proj/sub/extra.txt"} {
		if _, err := os.Lstat(filepath.Join(e.root, gone)); err == nil {
			t.Fatalf("%s survived the restore", gone)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.root, "proj", "keep-empty")); err != nil {
		t.Fatal("restore removed a directory that was empty at snapshot time")
	}
	if fi, err := os.Lstat(filepath.Join(e.root, "proj", "outlink")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("restore touched a link that was not in the way")
	}
	if fmt.Sprint(before) != fmt.Sprint(e.snapshotOutside()) {
		t.Fatal("restore changed something outside the root")
	}
	again := e.ok("files.snapshot.restore", jobj{"path": pth("proj"), "snapshotId": id})
	if again["restored"] != float64(0) || again["removed"] != float64(0) {
		t.Fatalf("second restore not a no-op: %v", again)
	}
	// A whole-root snapshot, restored by a direct caller.
	root := e.ok("files.snapshot.create", jobj{"path": pth()})
	e.ok("files.create", jobj{"path": pth("top.txt"), "content": "T"})
	rr := e.op(ActionSnapshotRestore, pth(), SnapshotRestoreInput{SnapshotID: root["snapshotId"].(string)})
	if rr.Status != kernel.StatusSucceeded {
		t.Fatalf("root restore: %+v", rr.Error)
	}
	if _, ok := e.readFile("top.txt"); ok {
		t.Fatal("root restore kept a file created since")
	}
	// A file where the directory was.
	e.fail("files.delete", jobj{"path": pth("proj"), "recursive": true}, kernel.StatusDenied, CodeNotPermitted) // holds .git
}

func TestSnapshotsShareIndexAcrossRoots(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	idx := NewMemoryIndex()
	var ps []*Provider
	for _, n := range []string{"r1", "r2"} {
		os.MkdirAll(filepath.Join(base, n), 0o755)
		os.WriteFile(filepath.Join(base, n, "f.txt"), []byte(n), 0o644)
		p, err := NewProvider(filepath.Join(base, n), ProviderOptions{SnapshotDir: filepath.Join(base, "snaps"), Index: idx})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		ps = append(ps, p)
	}
	ctx := context.Background()
	op := func(p *Provider, action string, in any) kernel.ResourceResult {
		rr, err := p.Invoke(ctx, kernel.ResourceOperation{OperationID: "o", Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"f.txt"}}, Action: action, Input: in})
		if err != nil {
			t.Fatal(err)
		}
		return rr
	}
	c := op(ps[0], ActionSnapshotCreate, nil)
	id := c.Output.(SnapshotCreateOutput).SnapshotID
	if l := op(ps[1], ActionSnapshotList, nil).Output.(SnapshotListOutput); len(l.Snapshots) != 0 {
		t.Fatalf("root 2 sees root 1's snapshots: %v", l)
	}
	if r := op(ps[1], ActionSnapshotRestore, SnapshotRestoreInput{SnapshotID: id}); r.Status != kernel.StatusFailed || r.Error.Code != CodeNotFound {
		t.Fatalf("cross-root restore: %+v", r)
	}
}

func TestNewProviderRefusals(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	root := filepath.Join(base, "root")
	os.MkdirAll(root, 0o755)
	if _, err := NewProvider(root, ProviderOptions{SnapshotDir: filepath.Join(root, "snaps")}); err == nil {
		t.Fatal("snapshot dir inside the root accepted")
	}
	if _, err := NewProvider(root, ProviderOptions{SnapshotDir: root}); err == nil {
		t.Fatal("snapshot dir = root accepted")
	}
	os.Symlink(root, filepath.Join(base, "alias"))
	if _, err := NewProvider(root, ProviderOptions{SnapshotDir: filepath.Join(base, "alias", "x")}); err == nil {
		t.Fatal("snapshot dir inside the root through a link accepted")
	}
	if _, err := NewProvider(filepath.Join(base, "missing"), ProviderOptions{}); err == nil {
		t.Fatal("missing root accepted")
	}
	os.WriteFile(filepath.Join(base, "file"), nil, 0o644)
	if _, err := NewProvider(filepath.Join(base, "file"), ProviderOptions{}); err == nil {
		t.Fatal("file root accepted")
	}
	p, err := NewProvider(root, ProviderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rr, _ := p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o", Resource: kernel.ResourceRef{Namespace: "files", Path: []string{}}, Action: ActionSnapshotCreate})
	if rr.Status != kernel.StatusFailed || rr.Error.Code != CodeUnsupportedAction {
		t.Fatalf("snapshots without a store: %+v", rr)
	}
}

func TestProviderDirectInputs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("a.txt", "hello")
	cases := []struct {
		name   string
		action string
		path   []string
		input  any
		status kernel.ToolStatus
		code   kernel.ErrorCode
	}{
		{"unknown action", "move", pth("a.txt"), nil, kernel.StatusFailed, CodeUnsupportedAction},
		{"bad namespace", ActionRead, pth("a.txt"), nil, kernel.StatusFailed, CodeInvalidInput},
		{"search map input", ActionSearch, pth(), map[string]any{"query": "hello"}, kernel.StatusSucceeded, ""},
		{"search no query", ActionSearch, pth(), map[string]any{}, kernel.StatusFailed, CodeInvalidInput},
		{"search blank query", ActionSearch, pth(), SearchInput{Query: "  "}, kernel.StatusFailed, CodeInvalidInput},
		{"search unknown key", ActionSearch, pth(), map[string]any{"query": "x", "extra": 1}, kernel.StatusFailed, CodeInvalidInput},
		{"search limit", ActionSearch, pth(), map[string]any{"query": "x", "limit": 0}, kernel.StatusFailed, CodeInvalidInput},
		{"grep raw input", ActionGrep, pth(), []byte(`{"pattern":"hel"}`), kernel.StatusSucceeded, ""},
		{"grep bad mode", ActionGrep, pth(), GrepInput{Pattern: "x", Mode: "glob"}, kernel.StatusFailed, CodeInvalidInput},
		{"grep bad context", ActionGrep, pth(), GrepInput{Pattern: "x", Mode: ModeLiteral, ContextAfter: 101}, kernel.StatusFailed, CodeInvalidInput},
		{"grep nil", ActionGrep, pth(), nil, kernel.StatusFailed, CodeInvalidInput},
		{"create no content", ActionCreate, pth("b.txt"), map[string]any{}, kernel.StatusFailed, CodeInvalidInput},
		{"create typed empty", ActionCreate, pth("b.txt"), WriteInput{}, kernel.StatusFailed, CodeInvalidInput},
		{"create with version", ActionCreate, pth("b.txt"), WriteInput{Content: []byte(`"x"`), ExpectedVersion: strp("v")}, kernel.StatusFailed, CodeInvalidInput},
		{"replace bad version", ActionReplace, pth("a.txt"), map[string]any{"content": "x", "expectedVersion": " v"}, kernel.StatusFailed, CodeInvalidInput},
		{"replace metadata", ActionReplace, pth("a.txt"), map[string]any{"content": "x", "metadata": map[string]any{}}, kernel.StatusFailed, CodeInvalidInput},
		{"delete nil input", ActionDelete, pth("a.txt"), nil, kernel.StatusSucceeded, ""},
		{"snapshot label blank", ActionSnapshotCreate, pth(), SnapshotCreateInput{Label: " "}, kernel.StatusFailed, CodeInvalidInput},
		{"snapshot list limit", ActionSnapshotList, pth(), SnapshotListInput{Limit: 101}, kernel.StatusFailed, CodeInvalidInput},
		{"restore no id", ActionSnapshotRestore, pth("a.txt"), map[string]any{}, kernel.StatusFailed, CodeInvalidInput},
		{"path dotdot", ActionRead, pth("..", "outside"), nil, kernel.StatusDenied, CodeInvalidPath},
		{"path 65 segments", ActionRead, make65(), nil, kernel.StatusDenied, CodeInvalidPath},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ns := "files"
			if c.name == "bad namespace" {
				ns = "repo"
			}
			rr, err := e.p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o", Context: e.actx,
				Resource: kernel.ResourceRef{Namespace: ns, Path: c.path}, Action: c.action, Input: c.input})
			if err != nil {
				t.Fatal(err)
			}
			if rr.Status != c.status || (c.code != "" && (rr.Error == nil || rr.Error.Code != c.code)) {
				t.Fatalf("got %s %+v", rr.Status, rr.Error)
			}
			if rr.Error != nil && (rr.Error.Retryable == nil || rr.Error.Message == "") {
				t.Fatalf("error without retryable or message: %+v", rr.Error)
			}
		})
	}
}

func strp(s string) *string { return &s }

func make65() []string {
	out := make([]string, 65)
	for i := range out {
		out[i] = "d"
	}
	return out
}

func TestCancelledContext(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("a.txt", "a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rr, err := e.p.Invoke(ctx, kernel.ResourceOperation{OperationID: "o", Resource: kernel.ResourceRef{Namespace: "files", Path: []string{"a.txt"}},
		Action: ActionReplace, Input: WriteInput{Content: []byte(`"b"`)}})
	if err != nil || rr.Status != kernel.StatusFailed || rr.Error.Code != CodeCancelled || *rr.Error.Retryable != true {
		t.Fatalf("cancelled: %+v %v", rr, err)
	}
	if s, _ := e.readFile("a.txt"); s != "a" {
		t.Fatal("cancelled write took effect")
	}
	_ = time.Now
}

func TestSnapshotDamagedStore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("f.txt", "one")
	id := e.ok("files.snapshot.create", jobj{"path": pth("f.txt")})["snapshotId"]
	e.ok("files.replace", jobj{"path": pth("f.txt"), "content": "two"})
	blob := filepath.Join(e.snaps, "blobs", Version([]byte("one"))[:2])
	matches, _ := filepath.Glob(filepath.Join(blob, "*"))
	if len(matches) != 1 {
		t.Fatalf("blob files: %v", matches)
	}
	os.WriteFile(matches[0], []byte("tampered"), 0o600)
	e.fail("files.snapshot.restore", jobj{"path": pth("f.txt"), "snapshotId": id}, kernel.StatusFailed, CodeSnapshotDamaged)
	os.Remove(matches[0])
	e.fail("files.snapshot.restore", jobj{"path": pth("f.txt"), "snapshotId": id}, kernel.StatusFailed, CodeSnapshotDamaged)
	if s, _ := e.readFile("f.txt"); s != "two" {
		t.Fatalf("a failed restore changed the file: %q", s)
	}
}

// brokenIndex is a snapshot index that is down.
type brokenIndex struct{}

func (brokenIndex) PutSnapshot(context.Context, SnapshotRecord) error { return fmt.Errorf("db down") }
func (brokenIndex) ListSnapshots(context.Context, SnapshotScope, int) ([]SnapshotRecord, error) {
	return nil, fmt.Errorf("db down")
}
func (brokenIndex) GetSnapshot(context.Context, SnapshotScope, string) (*SnapshotRecord, error) {
	return nil, fmt.Errorf("db down")
}

func TestSnapshotIndexOutage(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	os.MkdirAll(filepath.Join(base, "root"), 0o755)
	os.WriteFile(filepath.Join(base, "root", "f"), []byte("x"), 0o644)
	p, err := NewProvider(filepath.Join(base, "root"), ProviderOptions{SnapshotDir: filepath.Join(base, "s"), Index: brokenIndex{}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	hs, _ := Tools(p)
	for _, c := range []struct {
		h    kernel.ToolHandler
		args string
	}{{hs[9], `{"path":["f"]}`}, {hs[10], `{"path":["f"]}`}, {hs[11], `{"path":["f"],"snapshotId":"abc"}`}} {
		parsed, err := c.h.ParseArguments(json.RawMessage(c.args))
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.h.Invoke(context.Background(), kernel.AccessContext{}, kernel.ParsedToolCall{ToolCall: kernel.ToolCall{ID: "c"}, Parsed: parsed})
		if err != nil || res.Status != kernel.StatusFailed || res.Error.Code != CodeSnapshotIndexUnavailable ||
			!*res.Error.Retryable || !strings.Contains(res.Error.Message, "db down") {
			t.Fatalf("%s: an index outage must fail snapshot_index_unavailable naming the cause, got %+v %v", c.h.Definition.Name, res.Error, err)
		}
	}
}

func TestSpecialAndUnaddressableEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("d/ok.txt", "needle")
	e.write("d/bad\nname.txt", "needle")
	e.write("d/ bad.txt", "needle")
	if err := syscall.Mkfifo(filepath.Join(e.root, "d", "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	ls := e.ok("files.list", jobj{"path": pth("d")})
	if fmt.Sprint(ls["entries"]) != "[map[addressable:false kind:file name: bad.txt] map[addressable:false kind:file name:bad\nname.txt] map[kind:other name:fifo] map[kind:file name:ok.txt]]" {
		t.Fatalf("list = %v", ls["entries"])
	}
	e.fail("files.read", jobj{"path": pth("d", "fifo")}, kernel.StatusFailed, CodeNotAFile)
	if st := e.ok("files.stat", jobj{"path": pth("d", "fifo")}); st["kind"] != "other" || st["version"] != nil {
		t.Fatalf("stat fifo = %v", st)
	}
	done := make(chan map[string]any)
	go func() { done <- e.ok("files.grep", jobj{"path": pth("d"), "pattern": "needle"}) }()
	select {
	case g := <-done:
		if len(g["matches"].([]any)) != 3 {
			t.Fatalf("grep = %v", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("grep blocked on a FIFO")
	}
	e.fail("files.replace", jobj{"path": pth("d", "fifo"), "content": "x"}, kernel.StatusFailed, CodeNotAFile)
	e.fail("files.delete", jobj{"path": pth("d", "fifo"), "expectedVersion": "v"}, kernel.StatusFailed, CodeNotAFile)
	e.ok("files.delete", jobj{"path": pth("d", "fifo")})
}

func TestRestoreRemovesDirectoryInTheWay(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("p/x", "file x")
	e.write("p/keep/k.txt", "k")
	id := e.ok("files.snapshot.create", jobj{"path": pth("p")})["snapshotId"]
	e.ok("files.delete", jobj{"path": pth("p", "x")})
	e.write("p/x/a.txt", "a")
	e.write("p/x/deeper/b.txt", "b")
	e.write("p/keep/new/n.txt", "n")
	r := e.ok("files.snapshot.restore", jobj{"path": pth("p"), "snapshotId": id})
	if r["removed"] != float64(3) || r["restored"] != float64(1) {
		t.Fatalf("restore = %v", r)
	}
	if s, _ := e.readFile("p/x"); s != "file x" {
		t.Fatalf("p/x = %q", s)
	}
	if _, err := os.Lstat(filepath.Join(e.root, "p", "keep", "new")); err == nil {
		t.Fatal("a directory created since survived")
	}
	// A repository in the way is never removed: it is preserved, and said so.
	e.ok("files.delete", jobj{"path": pth("p", "x")})
	e.write("p/x/.git/HEAD", "ref")
	e.write("p/x/work.txt", "w")
	r = e.ok("files.snapshot.restore", jobj{"path": pth("p"), "snapshotId": id})
	if r["preserved"] != float64(1) {
		t.Fatalf("restore = %v", r)
	}
	if s, _ := e.readFile("p/x/.git/HEAD"); s != "ref" {
		t.Fatal(".git was touched")
	}
	if s, _ := e.readFile("p/x/work.txt"); s != "w" {
		t.Fatal("the repository's working tree was touched")
	}
	// Restoring the repository itself is refused, as deleting it is.
	e.fail("files.snapshot.restore", jobj{"path": pth("p", "x"), "snapshotId": id}, kernel.StatusFailed, CodeNotFound)
	xid := e.ok("files.snapshot.create", jobj{"path": pth("p", "x")})["snapshotId"]
	e.write("p/x/work.txt", "changed")
	e.fail("files.snapshot.restore", jobj{"path": pth("p", "x"), "snapshotId": xid}, kernel.StatusDenied, CodeNotPermitted)
	if s, _ := e.readFile("p/x/work.txt"); s != "changed" {
		t.Fatal("a refused restore changed the working tree")
	}
	// A file where the snapshot's directory was.
	os.RemoveAll(filepath.Join(e.root, "p"))
	e.write("p", "now a file")
	e.fail("files.snapshot.restore", jobj{"path": pth("p"), "snapshotId": id}, kernel.StatusFailed, CodeInvalidInput)
}

func TestDirectInputsMaps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("a.txt", "a")
	if rr := e.op(ActionSnapshotCreate, pth("a.txt"), map[string]any{"label": " L "}); rr.Status != kernel.StatusSucceeded ||
		*rr.Output.(SnapshotCreateOutput).Label != "L" {
		t.Fatalf("create: %+v", rr)
	}
	if rr := e.op(ActionSnapshotList, pth("a.txt"), map[string]any{"limit": 1}); rr.Status != kernel.StatusSucceeded ||
		len(rr.Output.(SnapshotListOutput).Snapshots) != 1 {
		t.Fatalf("list: %+v", rr)
	}
	if rr := e.op(ActionSnapshotList, pth("a.txt"), map[string]any{"limit": "x"}); rr.Status != kernel.StatusFailed {
		t.Fatalf("list bad limit: %+v", rr)
	}
	if rr := e.op(ActionDelete, pth("a.txt"), map[string]any{"recursive": "no"}); rr.Status != kernel.StatusFailed || rr.Error.Code != CodeInvalidInput {
		t.Fatalf("delete bad recursive: %+v", rr)
	}
	if rr := e.op(ActionDelete, pth("a.txt"), &DeleteInput{ExpectedVersion: strp(" v")}); rr.Status != kernel.StatusFailed || rr.Error.Code != CodeInvalidInput {
		t.Fatalf("delete bad version: %+v", rr)
	}
	if rr := e.op(ActionSnapshotRestore, pth("a.txt"), map[string]any{"snapshotId": "x", "expectedVersion": ""}); rr.Status != kernel.StatusFailed {
		t.Fatalf("restore bad version: %+v", rr)
	}
	if rr := e.op(ActionDelete, pth("a.txt"), map[string]any{"recursive": false}); rr.Status != kernel.StatusSucceeded {
		t.Fatalf("delete: %+v", rr)
	}
	long := strings.Repeat("ü/", 3000)
	if rr := e.op(ActionRead, []string{long}, nil); rr.Status != kernel.StatusDenied || len(rr.Error.Message) > 4096 {
		t.Fatalf("long path message: %d", len(rr.Error.Message))
	}
}

// TestReadHead: the buffer is sized from the size seen at open, but the content read
// is the file's, whatever that size said (the file may grow or shrink meanwhile).
func TestReadHead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	content := strings.Repeat("0123456789", 300) // 3,000 bytes
	f := filepath.Join(dir, "f")
	os.WriteFile(f, []byte(content), 0o644)
	for _, c := range []struct {
		size int64
		max  int
		want int
	}{
		{3000, 1 << 20, 3000}, {20, 1 << 20, 3000}, {0, 1 << 20, 3000}, {-1, 1 << 20, 3000},
		{1 << 30, 1 << 20, 3000}, {3000, 1000, 1000}, {20, 2999, 2999}, {3000, 3001, 3000}, {3000, 3000, 3000},
	} {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := readHead(fh, c.size, c.max)
		fh.Close()
		if err != nil || string(got) != content[:c.want] {
			t.Fatalf("size %d max %d: %d bytes, %v (want %d)", c.size, c.max, len(got), err, c.want)
		}
	}
}
