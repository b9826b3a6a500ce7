package repoplane

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// eolCase is one fact about git's end-of-line handling: with these attributes files
// and configuration, files committed (by git) with the first content and then
// rewritten with the second are seen by status, diff and stage exactly as git sees them.
type eolCase struct {
	name    string
	config  string            // appended to .git/config
	before  map[string]string // attributes files and files, committed by git
	after   map[string]string // rewritten (same bytes: touched only)
	stage   []string
	cleanAt []string // paths that must be clean in status after the rewrite (the point of the case)
	remove  []string // deleted after the rewrite
}

var eolCases = []eolCase{
	{name: "text=auto: a CRLF copy of an LF blob is clean when only touched",
		before: map[string]string{".gitattributes": "* text=auto\n", "a.txt": "one\r\ntwo\r\n"},
		after:  map[string]string{"a.txt": "one\r\ntwo\r\n"}, stage: []string{"a.txt"}, cleanAt: []string{"a.txt"}},
	{name: "text=auto: CRLF rewrite of the same size-changing content",
		before: map[string]string{".gitattributes": "* text=auto\n", "a.txt": "one\ntwo\n"},
		after:  map[string]string{"a.txt": "one\r\ntwo\r\nthree\r\n"}, stage: []string{"a.txt"}},
	{name: "eol=crlf makes a file text (git/git's *.bat)",
		before: map[string]string{".gitattributes": "*.bat eol=crlf\n", "x.bat": "@echo off\r\nrem\r\n", "y.txt": "raw\r\n"},
		after:  map[string]string{"x.bat": "@echo off\r\nrem\r\n", "y.txt": "raw\r\n"}, stage: []string{"x.bat", "y.txt"}, cleanAt: []string{"x.bat"}},
	{name: "eol=lf",
		before: map[string]string{".gitattributes": "*.sh eol=lf\n", "s.sh": "echo\r\n"},
		after:  map[string]string{"s.sh": "echo\r\nmore\r\n"}, stage: []string{"s.sh"}},
	{name: "-text keeps CR",
		before: map[string]string{".gitattributes": "* text=auto\n*.raw -text\n", "a.raw": "x\r\n", "b.txt": "y\r\n"},
		after:  map[string]string{"a.raw": "x\r\nz\r\n", "b.txt": "y\r\nz\r\n"}, stage: []string{"a.raw", "b.txt"}},
	{name: "text converts CRLF but keeps a lone CR",
		before: map[string]string{".gitattributes": "*.txt text\n", "a.txt": "a\rb\r\n"},
		after:  map[string]string{"a.txt": "a\rb\r\nc\r\n"}, stage: []string{"a.txt"}},
	{name: "text=auto leaves a file alone when the index copy has CRLF",
		before: map[string]string{".gitattributes": "*.txt -text\n", "a.txt": "a\r\n"},
		after:  map[string]string{".gitattributes": "*.txt text=auto\n", "a.txt": "a\r\nb\r\n"}, stage: []string{"a.txt", ".gitattributes"}},
	{name: "a removed .gitattributes no longer applies to what is staged with it",
		before: map[string]string{".gitattributes": "* text=auto\n", "a.txt": "a\n", "b.txt": "b\n"},
		after:  map[string]string{"a.txt": "a\r\nb\r\n", "b.txt": "b\r\nc\r\n"}, stage: []string{".gitattributes", "a.txt"}, remove: []string{".gitattributes"}},
	{name: "text=auto does not convert what looks binary",
		before: map[string]string{".gitattributes": "* text=auto\n", "b.bin": "x\x00y\r\n"},
		after:  map[string]string{"b.bin": "x\x00y\r\nz\r\n"}, stage: []string{"b.bin"}},
	{name: "core.autocrlf=true without attributes", config: "[core]\n\tautocrlf = true\n",
		before: map[string]string{"a.txt": "one\r\n"},
		after:  map[string]string{"a.txt": "one\r\n"}, stage: []string{"a.txt"}, cleanAt: []string{"a.txt"}},
	{name: "core.autocrlf=input", config: "[core]\n\tautocrlf = input\n",
		before: map[string]string{"a.txt": "one\r\n"},
		after:  map[string]string{"a.txt": "one\r\ntwo\r\n"}, stage: []string{"a.txt"}},
	{name: "attributes override core.autocrlf", config: "[core]\n\tautocrlf = true\n",
		before: map[string]string{".gitattributes": "*.keep -text\n", "a.keep": "one\r\n"},
		after:  map[string]string{"a.keep": "one\r\ntwo\r\n"}, stage: []string{"a.keep"}},
	{name: "legacy crlf attribute", config: "[core]\n\tautocrlf = false\n",
		before: map[string]string{".gitattributes": "*.c crlf\n*.h -crlf\n*.in crlf=input\n", "a.c": "c\r\n", "a.h": "h\r\n", "a.in": "i\r\n"},
		after:  map[string]string{"a.c": "c\r\n", "a.h": "h\r\n", "a.in": "i\r\n"}, stage: []string{"a.c", "a.h", "a.in"}, cleanAt: []string{"a.c", "a.h", "a.in"}},
	{name: "deeper .gitattributes and info/attributes take precedence",
		before: map[string]string{".gitattributes": "* text=auto\n", "sub/.gitattributes": "*.txt -text\n", ".git/info/attributes": "top.txt -text\n",
			"sub/a.txt": "a\r\n", "top.txt": "t\r\n", "other.txt": "o\r\n"},
		after: map[string]string{"sub/a.txt": "a\r\nb\r\n", "top.txt": "t\r\nu\r\n", "other.txt": "o\r\np\r\n"}, stage: []string{"sub", "top.txt", "other.txt"}},
	{name: "binary macro and user macros",
		before: map[string]string{".gitattributes": "[attr]mine -text -diff\n* text=auto\n*.png binary\n*.m mine\n", "p.png": "\x89PNG\r\n", "x.m": "m\r\n"},
		after:  map[string]string{"p.png": "\x89PNG\r\nmore\r\n", "x.m": "m\r\nn\r\n"}, stage: []string{"p.png", "x.m"}},
	{name: "diff forces text, -diff binary",
		before: map[string]string{".gitattributes": "*.dat diff\n*.txt -diff\n", "a.dat": "x\x00\ny\n", "b.txt": "plain\n"},
		after:  map[string]string{"a.dat": "x\x00\nz\n", "b.txt": "plain\nmore\n"}, stage: []string{"a.dat", "b.txt"}},
	{name: "quoted pattern and ! unspecify",
		before: map[string]string{".gitattributes": "* text=auto\n\"with space.txt\" -text\n*.u !text\n", "with space.txt": "w\r\n", "a.u": "u\r\n"},
		after:  map[string]string{"with space.txt": "w\r\nx\r\n", "a.u": "u\r\nv\r\n"}, stage: []string{"with space.txt", "a.u"}},
}

func TestLineEndingsAgreeWithGit(t *testing.T) {
	needGit(t)
	for _, c := range eolCases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			if c.config != "" {
				f, err := os.OpenFile(filepath.Join(e.dir, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				f.WriteString(c.config)
				f.Close()
			}
			for p, content := range c.before {
				writeFile(t, filepath.Join(e.dir, p), content)
			}
			runGit(t, e.dir, "add", "-A")
			runGit(t, e.dir, "commit", "-q", "-m", "init")
			later := time.Now().Add(time.Hour)
			for p, content := range c.after {
				fp := filepath.Join(e.dir, p)
				writeFile(t, fp, content)
				os.Chtimes(fp, later, later) // stat-dirty: the content has to be looked at
			}
			for _, p := range c.remove {
				os.Remove(filepath.Join(e.dir, p))
			}
			theirs := filepath.Join(e.root, "theirs")
			cloneDir(t, e.dir, theirs)
			ours := porcelain(e.status())
			sameLines(t, ours, gitPorcelain(t, theirs))
			for _, p := range c.cleanAt {
				for _, l := range ours {
					if strings.HasSuffix(l, " "+p) {
						t.Fatalf("%s is not clean: %s", p, l)
					}
				}
			}
			sameLines(t, numstat(diffOf(t, e, DiffInput{})), gitNumstat(t, theirs))
			e.stage(c.stage...)
			runGit(t, theirs, append([]string{"-c", "core.safecrlf=false", "add", "--"}, c.stage...)...)
			if got, want := runGit(t, e.dir, "ls-files", "-s"), runGit(t, theirs, "ls-files", "-s"); got != want {
				t.Fatalf("staged:\n%s\ngit add:\n%s", got, want)
			}
			sameLines(t, porcelain(e.status()), gitPorcelain(t, theirs))
			sameLines(t, numstat(diffOf(t, e, DiffInput{Staged: true})), gitNumstat(t, theirs, "--cached"))
			// git agrees that what we staged is clean against the working tree
			if out := runGit(t, e.dir, "-c", "core.safecrlf=false", "diff", "--name-only"); out != runGit(t, theirs, "-c", "core.safecrlf=false", "diff", "--name-only") {
				t.Fatalf("git diff after our stage: %q", out)
			}
		})
	}
}

// numstat renders a diff like git diff --numstat (binary files as "-\t-").
func numstat(d DiffOutput) []string {
	var out []string
	for _, f := range d.Files {
		p := strings.Join(f.Path, "/")
		if f.OldPath != nil {
			p = strings.Join(f.OldPath, "/") + " => " + p
		}
		if f.Binary && f.BinaryReason != binaryEncoding { // text that is not UTF-8 is counted, as by git
			out = append(out, "-\t-\t"+p)
		} else {
			out = append(out, strconv.Itoa(f.Additions)+"\t"+strconv.Itoa(f.Deletions)+"\t"+p)
		}
	}
	sort.Strings(out)
	return out
}

func gitNumstat(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	out := runGit(t, dir, append([]string{"--no-pager", "-c", "core.quotePath=false", "-c", "core.safecrlf=false", "diff", "--numstat", "--no-renames"}, args...)...)
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if l != "" {
			lines = append(lines, unquoteStatusPaths(l))
		}
	}
	sort.Strings(lines)
	return lines
}
