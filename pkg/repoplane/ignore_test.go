package repoplane

import (
	"os"
	"path/filepath"
	"testing"
)

// ignoreCase is one fact about git's exclude rules: with these ignore files, path (a
// file, or a directory when it ends in "/") is or is not ignored. Every case is also
// checked against the real git check-ignore, and the whole tree against git status.
type ignoreCase struct {
	name    string
	files   map[string]string // ignore files by path (".git/info/exclude" allowed)
	ignored []string
	shown   []string
}

var ignoreCases = []ignoreCase{
	{name: "negated class [!o] (t3070)", files: map[string]string{".gitignore": "f[!o]o\nb[^a]r\n"},
		ignored: []string{"fao", "f!o", "bor"}, shown: []string{"foo", "bar"}},
	{name: "byte order mark before the first pattern", files: map[string]string{".gitignore": "\xef\xbb\xbfbom.txt\nsecond.txt\n"},
		ignored: []string{"bom.txt", "second.txt"}, shown: []string{"other.txt"}},
	{name: "logs/** then !logs/.gitkeep", files: map[string]string{".gitignore": "logs/**\n!logs/.gitkeep\n"},
		ignored: []string{"logs/a.log", "logs/sub/b.log"}, shown: []string{"logs/.gitkeep", "logsx"}},
	{name: "t0008 layout", files: map[string]string{
		".gitignore":                 "one\nignored-*\ntop-level-dir/\n",
		"a/.gitignore":               "two*\n*three\n",
		"a/b/.gitignore":             "four\nfive\n# this comment should affect the line numbers\nsix\nignored-dir/\n# and so should this blank line:\n\n!on*\n!two\n",
		"a/b/ignored-dir/.gitignore": "seven\n",
		".git/info/exclude":          "per-repo\n",
	},
		ignored: []string{"one", "a/one", "a/3-three", "a/b/ignored-dir/foo", "a/b/ignored-dir/twoooo", "a/b/ignored-dir/seven",
			"a/b/twooo", "per-repo", "a/per-repo", "ignored-and-untracked", "a/ignored-and-untracked", "a/b/four", "a/b/six"},
		shown: []string{"not-ignored", "a/not-ignored", "a/three-not-this-one", "a/b/one", "a/b/on", "a/b/two", "a/b/not-ignored", "b/globaltwo"}},
	{name: "trailing spaces trimmed unless escaped", files: map[string]string{".gitignore": "trailing   \nesc\\ \n"},
		ignored: []string{"trailing", "esc ", "d/esc "}, shown: []string{"d/trailing ", "esc"}},
	{name: "CRLF ignore file", files: map[string]string{".gitignore": "crlf.txt\r\n*.tmp\r\n"},
		ignored: []string{"crlf.txt", "x.tmp"}, shown: []string{"crlf.txtx"}},
	{name: "leading slash anchors", files: map[string]string{".gitignore": "/rooted\n"},
		ignored: []string{"rooted"}, shown: []string{"sub/rooted"}},
	{name: "trailing slash: directories only", files: map[string]string{".gitignore": "dironly/\n"},
		ignored: []string{"dironly/f", "x/dironly/g"}, shown: []string{"y/dironly"}},
	{name: "negation re-includes a file", files: map[string]string{".gitignore": "*.o\n!keep.o\n"},
		ignored: []string{"x.o", "d/y.o"}, shown: []string{"keep.o", "d/keep.o"}},
	{name: "escaped # and !", files: map[string]string{".gitignore": "\\#hash\n\\!bang\n#comment\n"},
		ignored: []string{"#hash", "!bang"}, shown: []string{"comment", "#comment"}},
	{name: "a slash inside anchors to the ignore file's directory", files: map[string]string{".gitignore": "doc/*.txt\n", "sub/.gitignore": "foo/bar\n"},
		ignored: []string{"doc/a.txt", "sub/foo/bar"}, shown: []string{"doc/sub/b.txt", "foo/bar", "x/doc/a.txt"}},
	{name: "**/ and /**/", files: map[string]string{".gitignore": "**/deep\na/**/z\n"},
		ignored: []string{"deep", "x/y/deep", "a/z", "a/b/c/z"}, shown: []string{"a/zz", "b/z"}},
	{name: "an excluded directory cannot be re-entered", files: map[string]string{".gitignore": "build/\n!build/keep\nout/*\n!out/keep\n"},
		ignored: []string{"build/keep", "build/x", "out/x"}, shown: []string{"out/keep"}},
	{name: "deeper ignore files override shallower ones and info/exclude", files: map[string]string{
		".git/info/exclude": "*.log\n", ".gitignore": "!top.log\n*.bak\n", "sub/.gitignore": "!keep.bak\n*.txt\n"},
		ignored: []string{"a.log", "x.bak", "sub/a.txt", "sub/deeper/b.txt"}, shown: []string{"top.log", "sub/keep.bak", "a.txt"}},
	{name: "character classes and ranges", files: map[string]string{".gitignore": "[[:digit:]]x\n[a-c]y\n"},
		ignored: []string{"1x", "by"}, shown: []string{"ax", "dy"}},
	{name: "blank and whitespace-only lines", files: map[string]string{".gitignore": "\n   \n\t\nreal\n"},
		ignored: []string{"real"}, shown: []string{"other"}},
	{name: "a star does not cross a slash, ** does", files: map[string]string{".gitignore": "a*/x\nb**\n"},
		ignored: []string{"ab/x", "bz/q/r"}, shown: []string{"ab/c/x"}},
}

func TestIgnoreRulesAgreeWithGit(t *testing.T) {
	needGit(t)
	for _, c := range ignoreCases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			for p, content := range c.files {
				writeFile(t, filepath.Join(e.dir, p), content)
			}
			for _, p := range append(append([]string{}, c.ignored...), c.shown...) {
				writeFile(t, filepath.Join(e.dir, p), "x\n")
			}
			r, oe := e.p.open([]string{"repo"})
			if oe != nil {
				t.Fatal(oe)
			}
			defer r.close()
			check := func(p string, want bool) {
				t.Helper()
				_, err := tryGit(e.dir, "check-ignore", "-q", "--no-index", "--", p)
				if gitSays := err == nil; gitSays != want {
					t.Fatalf("git check-ignore %q = %v; the case says %v", p, gitSays, want)
				}
				if got := r.ignoredPath(p); got != want {
					t.Errorf("ignored(%q) = %v, want %v (as git)", p, got, want)
				}
			}
			for _, p := range c.ignored {
				check(p, true)
			}
			for _, p := range c.shown {
				check(p, false)
			}
			sameLines(t, porcelain(e.status()), gitPorcelain(t, e.dir))
			// staging a directory stages exactly what git add would
			theirs := filepath.Join(e.root, "theirs")
			cloneDir(t, e.dir, theirs)
			runGit(t, theirs, "add", "-A")
			tops, _ := os.ReadDir(e.dir)
			var spec []string
			for _, d := range tops {
				if _, err := tryGit(e.dir, "check-ignore", "-q", "--no-index", "--", d.Name()); err != nil && d.Name() != ".git" {
					spec = append(spec, d.Name())
				}
			}
			e.stage(spec...)
			if got, want := runGit(t, e.dir, "ls-files", "-s"), runGit(t, theirs, "ls-files", "-s"); got != want {
				t.Fatalf("staged:\n%s\ngit add -A:\n%s", got, want)
			}
		})
	}
}

func TestIgnoreMissingDirectoryRulesNotRead(t *testing.T) {
	e := newEnv(t)
	e.write(".gitignore", "ignored/\n")
	e.write("ignored/.gitignore", "!*\n")
	e.write("ignored/x", "x")
	if s := porcelain(e.status()); len(s) != 1 || s[0] != "?? .gitignore" {
		t.Fatalf("status: %v", s)
	}
}
