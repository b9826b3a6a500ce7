package testscripts

import (
	"bufio"
	"fmt"
	"io/fs"
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

// readmeRecipes extracts the marked recipes of the README: name → script, in the order
// of first appearance.
func readmeRecipes(t *testing.T, readme string) (names []string, scripts map[string]string) {
	t.Helper()
	return markedBlocks(t, readme, recipeMark, "```sh")
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
	names, scripts := readmeRecipes(t, filepath.Join("..", "README.md"))
	for _, want := range []string{"tour", "ci"} {
		if !slices.Contains(names, want) {
			t.Fatalf("README.md has no recipe %q (recipes: %v)", want, names)
		}
	}
	self, err := exec.LookPath("sharedos")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
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
			c := exec.Command("bash", "-eo", "pipefail", "-c", script)
			c.Dir = clone
			c.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
				"HOME=" + filepath.Join(dir, "home"), "TMPDIR=" + t.TempDir(),
				"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
				"XDG_CACHE_HOME=" + filepath.Join(dir, "cache")}
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("recipe %s fails under bash -eo pipefail: %v\n--- script\n%s--- output\n%s", name, err, script, out)
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
