package testscripts

import (
	"bufio"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// recipeMark is the line that marks the next ```sh block of README.md as part of recipe
// NAME; the blocks of one recipe run, in order, as one script.
var recipeMark = regexp.MustCompile(`^<!-- recipe: ([a-z0-9-]+) -->$`)

// hiddenFailure is a command substitution whose status export or local discards.
var hiddenFailure = regexp.MustCompile(`(?m)^\s*(export|local|readonly|declare)\s+\w+=[^\n]*\$\(`)

// readmeRecipes extracts the marked recipes of the README: name → script, in the order
// of first appearance.
func readmeRecipes(t *testing.T, readme string) (names []string, scripts map[string]string) {
	t.Helper()
	return markedBlocks(t, readme, recipeMark, "```sh")
}

// allRecipes is readmeRecipes over README.md and every docs/*.md: a recipe's name is
// unique across the files.
func allRecipes(t *testing.T) (names []string, scripts map[string]string) {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join("..", "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	scripts = map[string]string{}
	for _, file := range append([]string{filepath.Join("..", "README.md")}, docs...) {
		n, s := readmeRecipes(t, file)
		for _, name := range n {
			if _, dup := scripts[name]; dup {
				t.Fatalf("%s: recipe %q is also in another file", file, name)
			}
			names, scripts[name] = append(names, name), s[name]
		}
	}
	return names, scripts
}

// operatorState makes the operator's own ~/.config/sharedos under home — a tokens file
// holding a token laptop, as the README's own recipe would have left it — and returns
// its files' bytes, for a recipe to leave byte for byte as they are.
func operatorState(t *testing.T, self, home string) map[string]string {
	t.Helper()
	dir := filepath.Join(home, ".config", "sharedos")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(self, "--as", "agent:mine", "tokens", "create", "--id", "laptop", "--tokens", filepath.Join(dir, "tokens.yaml"), "-o", "json")
	c.Env = []string{"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config")}
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("the operator's token: %v\n%s", err, out)
	}
	return snapshotTree(t, filepath.Join(home, ".config", "sharedos"))
}

// snapshotTree maps each file under root (relative) to its content.
func snapshotTree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, rel := range listFiles(t, root) {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err == nil {
			out[rel] = string(b)
		}
	}
	return out
}

// markedBlocks extracts the fenced blocks of a Markdown file that follow a line matching
// mark (its first group names the block; the fence must open with fence): name → text,
// the blocks of one name joined in order, and the names in order of first appearance.
func markedBlocks(t *testing.T, file string, mark *regexp.Regexp, fence string) (names []string, blocks map[string]string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	blocks = map[string]string{}
	sc := bufio.NewScanner(f)
	var cur string
	var in bool
	var b strings.Builder
	lineNo := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		switch {
		case in && line == "```":
			blocks[cur] += b.String()
			in, cur = false, ""
			b.Reset()
		case in:
			b.WriteString(line + "\n")
		case cur != "":
			if line != fence {
				t.Fatalf("%s:%d: the mark of %s must be followed by a %s block", file, lineNo, cur, fence)
			}
			in = true
		default:
			if m := mark.FindStringSubmatch(line); m != nil {
				cur = m[1]
				if _, ok := blocks[cur]; !ok {
					names = append(names, cur)
					blocks[cur] = ""
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if in || cur != "" {
		t.Fatalf("%s: unterminated block %s", file, cur)
	}
	return names, blocks
}

// TestReadmeRecipes runs every recipe of README.md as pasted, under bash -eo pipefail
// (as a GitHub Actions step runs it), in a scratch copy of the clone's examples with a
// sandboxed HOME and XDG directories. `go build -o sharedos .` is the one line that is
// not run as written: a stub `go` links the sharedos under test instead of compiling.
// Afterwards the copy of the clone holds exactly the files it started with (the tour
// leaves nothing behind, e.g. no result.json).
func TestReadmeRecipes(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	if _, err := exec.LookPath("jq"); err != nil {
		t.Fatal("the CI recipe needs jq (as GitHub's runners have); install it")
	}
	names, scripts := allRecipes(t)
	for _, want := range []string{"tour", "ci", "mcp-http"} {
		if !slices.Contains(names, want) {
			t.Fatalf("README.md has no recipe %q (recipes: %v)", want, names)
		}
	}
	self, err := exec.LookPath("sharedos")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		// `export VAR=$(cmd)` exits 0 whatever cmd did: bash -e cannot stop on it.
		if m := hiddenFailure.FindString(scripts[name]); m != "" {
			t.Errorf("recipe %s hides a failing command: %q; write VAR=$(…); export VAR", name, m)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			clone := filepath.Join(dir, "clone")
			if err := os.CopyFS(filepath.Join(clone, "examples"), os.DirFS(filepath.Join("..", "examples"))); err != nil {
				t.Fatal(err)
			}
			bin := filepath.Join(dir, "bin")
			if err := os.MkdirAll(bin, 0o755); err != nil {
				t.Fatal(err)
			}
			stub := fmt.Sprintf("#!/bin/sh\nif [ \"$*\" = \"build -o sharedos .\" ]; then exec ln -sf %q sharedos; fi\necho \"go stub: unexpected: go $*\" >&2\nexit 1\n", self)
			if err := os.WriteFile(filepath.Join(bin, "go"), []byte(stub), 0o755); err != nil {
				t.Fatal(err)
			}
			script := scripts[name]
			if name != "tour" {
				// Every recipe but the tour starts from a built binary.
				script = "go build -o sharedos .\n" + script
			}
			before := listFiles(t, clone)
			// The operator's own state exists already (issue 25 item 7): a recipe must not
			// touch it. HOME and the XDG folders are as on a workstation.
			home := filepath.Join(dir, "home")
			mine := operatorState(t, self, home)
			c := exec.Command("bash", "-eo", "pipefail", "-c", script)
			c.Dir = clone
			c.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
				"HOME=" + home, "TMPDIR=" + t.TempDir(),
				"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
				"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("recipe %s fails under bash -eo pipefail: %v\n--- script\n%s--- output\n%s", name, err, script, out)
			}
			if now := snapshotTree(t, filepath.Join(home, ".config", "sharedos")); !maps.Equal(now, mine) {
				t.Fatalf("recipe %s changed the operator's own ~/.config/sharedos:\nbefore %q\nafter  %q", name, mine, now)
			}
			after := listFiles(t, clone)
			after = slices.DeleteFunc(after, func(p string) bool { return p == "sharedos" })
			if !slices.Equal(before, after) {
				t.Fatalf("recipe %s changed the clone:\nbefore %v\nafter  %v", name, before, after)
			}
		})
	}
}

func listFiles(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
