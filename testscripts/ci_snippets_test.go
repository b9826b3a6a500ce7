package testscripts

import (
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// snippetMark marks the next ```yaml block of README.md as the CI snippet NAME.
var snippetMark = regexp.MustCompile(`^<!-- ci-snippet: ([a-z0-9-]+) -->$`)

// readmeSnippets returns the marked CI snippets of the README: name → YAML text.
func readmeSnippets(t *testing.T, readme string) map[string]string {
	t.Helper()
	_, snippets := markedBlocks(t, readme, snippetMark, "```yaml")
	return snippets
}

// TestReadmeCISnippets runs the README's GitHub Actions and GitLab CI snippets as those
// runners would: every `run:` step (GitHub, with GITHUB_ACTIONS=true and a step summary
// file) or `script:` line (GitLab) in order, under bash -eo pipefail, in a scratch copy of
// the clone's examples (a stub `go` links the sharedos under test for `go build`). The
// JUnit file each snippet uploads must exist and be a JUnit report with file and line
// on every case; the GitHub step summary must have been written.
func TestReadmeCISnippets(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	snippets := readmeSnippets(t, filepath.Join("..", "README.md"))
	self, err := exec.LookPath("sharedos")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"github", "gitlab"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			text, ok := snippets[name]
			if !ok {
				t.Fatalf("README.md has no ci-snippet %q", name)
			}
			var doc map[string]any
			if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
				t.Fatalf("snippet %s is not YAML: %v", name, err)
			}
			var cmds []string
			var report string
			env := []string{}
			dir := t.TempDir()
			summary := filepath.Join(dir, "summary.md")
			switch name {
			case "github":
				jobs, _ := doc["jobs"].(map[string]any)
				for _, j := range jobs {
					steps, _ := j.(map[string]any)["steps"].([]any)
					for _, s := range steps {
						st, _ := s.(map[string]any)
						if run, ok := st["run"].(string); ok {
							cmds = append(cmds, run)
						}
						if uses, _ := st["uses"].(string); strings.HasPrefix(uses, "actions/upload-artifact") {
							with, _ := st["with"].(map[string]any)
							report, _ = with["path"].(string)
						}
					}
				}
				env = append(env, "GITHUB_ACTIONS=true", "GITHUB_STEP_SUMMARY="+summary)
			case "gitlab":
				for _, j := range doc {
					job, _ := j.(map[string]any)
					script, _ := job["script"].([]any)
					for _, s := range script {
						cmds = append(cmds, fmt.Sprint(s))
					}
					arts, _ := job["artifacts"].(map[string]any)
					reports, _ := arts["reports"].(map[string]any)
					report, _ = reports["junit"].(string)
				}
			}
			if len(cmds) == 0 || report == "" {
				t.Fatalf("snippet %s: commands %q, report %q", name, cmds, report)
			}
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
			c := exec.Command("bash", "-eo", "pipefail", "-c", strings.Join(cmds, "\n"))
			c.Dir = clone
			c.Env = append(env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
				"HOME="+filepath.Join(dir, "home"), "TMPDIR="+t.TempDir(),
				"XDG_STATE_HOME="+filepath.Join(dir, "state"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))
			out, err := c.CombinedOutput()
			if err != nil {
				t.Fatalf("snippet %s fails: %v\n%s", name, err, out)
			}
			if !strings.Contains(string(out), " passed, 0 failed") {
				t.Fatalf("snippet %s: no closing line:\n%s", name, out)
			}
			data, err := os.ReadFile(filepath.Join(clone, report))
			if err != nil {
				t.Fatalf("snippet %s uploads %s, which the run did not write: %v", name, report, err)
			}
			var suites struct {
				Tests  int `xml:"tests,attr"`
				Suites []struct {
					Cases []struct {
						Classname string `xml:"classname,attr"`
						File      string `xml:"file,attr"`
						Line      int    `xml:"line,attr"`
					} `xml:"testcase"`
				} `xml:"testsuite"`
			}
			if err := xml.Unmarshal(data, &suites); err != nil || suites.Tests == 0 || len(suites.Suites) == 0 {
				t.Fatalf("%s is not a JUnit report (%v):\n%s", report, err, data)
			}
			for _, s := range suites.Suites {
				for _, cs := range s.Cases {
					if cs.File == "" || cs.Line == 0 || cs.Classname != cs.File {
						t.Fatalf("a case without file and line: %+v", cs)
					}
				}
			}
			if name == "github" {
				if b, err := os.ReadFile(summary); err != nil || !strings.Contains(string(b), "### sharedos test: ") {
					t.Fatalf("no step summary written: %q %v", b, err)
				}
			}
		})
	}
}
