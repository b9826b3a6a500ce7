package testscripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/grantfile"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// fenced is a fenced yaml or json block of a Markdown file: its language and text.
var fenced = regexp.MustCompile("(?ms)^```(yaml|json)\n(.*?)^```")

// TestDocsGrantsValidAndUnexpired: every grant shown in README.md and docs/ (a whole grant
// file, or a fragment of its grants list) and every grant file under examples/ is valid
// and unexpired at the wall clock, so a copied example is never silently useless (issue
// 25 item 9). Example dates lie far in the future.
func TestDocsGrantsValidAndUnexpired(t *testing.T) {
	now := time.Now().UnixMilli()
	checked := 0
	check := func(where string, f *grantfile.File) {
		t.Helper()
		for _, g := range f.Grants {
			checked++
			if g.Constraints.ExpiresAt == "" {
				continue
			}
			ms, err := kernel.ParseTimestamp(g.Constraints.ExpiresAt)
			if err != nil || ms <= now {
				t.Errorf("%s: grant %s expires at %s, not in the future (%v): write a date far ahead, as examples/grants/ does",
					where, g.ID, g.Constraints.ExpiresAt, err)
			}
		}
	}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append([]string{"../README.md"}, docs...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fenced.FindAllStringSubmatchIndex(string(data), -1) {
			lang, block := string(data[m[2]:m[3]]), string(data[m[4]:m[5]])
			line := strings.Count(string(data[:m[0]]), "\n") + 1
			where := doc[3:] + ":" + strconv.Itoa(line)
			if !strings.Contains(block, "subject") || strings.Contains(block, "\ntests:") || strings.Contains(block, "mcpServers") {
				continue // not grants (a config, a tokens file, a scenario)
			}
			src := block
			if lang == "yaml" && strings.HasPrefix(strings.TrimLeft(block, " "), "- id:") {
				src = "version: 1\ngrants:\n" + block // a fragment of a grants list
			}
			f, err := grantfile.Parse(where, []byte(src))
			if err != nil {
				t.Errorf("%s: the grant example does not parse: %v", where, err)
				continue
			}
			check(where, f)
		}
	}
	examples, err := filepath.Glob("../examples/grants/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range examples {
		f, err := grantfile.Load(ex)
		if err != nil {
			t.Errorf("%s: %v", ex, err)
			continue
		}
		check(ex[3:], f)
	}
	if checked < 11 {
		t.Fatalf("only %d grants found in README.md, docs/ and examples/: the extraction missed them", checked)
	}
}
