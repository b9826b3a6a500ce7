package cmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestWriteYAMLNeverFails: whatever text a result holds (every C0 and C1 control, DEL,
// invalid UTF-8, line separators), the YAML printer writes a document that parses back
// to the same text, and never fails after the call took effect.
func TestWriteYAMLNeverFails(t *testing.T) {
	t.Parallel()
	var texts []string
	for r := rune(0); r < 0xa0; r++ {
		texts = append(texts, "x"+string(r)+"y")
	}
	texts = append(texts, "\xff\xfe", "a\u2028b\u2029c", "\ufeffbom", "- item", "key: value", "#comment", "'q'", "\"dq\"", "  lead")
	for _, s := range texts {
		var out bytes.Buffer
		if err := writeYAML(&out, map[string]any{"content": s}); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		var back map[string]string
		if err := yaml.Unmarshal(out.Bytes(), &back); err != nil {
			t.Fatalf("%q: output does not parse: %v\n%s", s, err, out.String())
		}
		var want map[string]string
		j, _ := json.Marshal(map[string]any{"content": s}) // what the JSON output says
		_ = json.Unmarshal(j, &want)
		if back["content"] != want["content"] {
			t.Errorf("%q: read back %q, the JSON output says %q", s, back["content"], want["content"])
		}
	}
}

// TestEscapeText: table and line output never carry a control character or invalid
// UTF-8 from agent text; clean text is unchanged.
func TestEscapeText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain name.md":         "plain name.md",
		"é ü 日本":                "é ü 日本",
		"\x1b[2J\x1b[HAPPROVED": `\x1b[2J\x1b[HAPPROVED`,
		"a\nforged\trow":        `a\nforged\trow`,
		"c1\u009bx":             `c1\u009bx`,
		"del\x7f":               `del\x7f`,
		"bad\xff":               `bad\xff`,
		`back\slash`:            `back\\slash`,
		`"quoted"`:              `"quoted"`,
	} {
		if got := escapeText(in); got != want {
			t.Errorf("escapeText(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzConfigFile: the config loader never panics, and on success every key it returns is
// one of the schema's, each value of the type the schema gives (no partial result beside
// an error).
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{
		"root: a\nceiling:\n  frozenPaths: [\"files:private\"]\n",
		"ceiling: {}\nceiling: {}\n",
		"limits:\n  maxGrants: 010\n",
		"grants: [a, b]\noutput: json\n",
		"- not a map\n",
		"a: &x 1\nb: *x\n",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, doc string) {
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		m, err := loadConfigFile(path, "")
		if err != nil {
			if m != nil {
				t.Fatalf("a result beside the error %v", err)
			}
			return
		}
		for k := range m {
			if _, ok := configSchema[k]; !ok {
				t.Fatalf("unknown key %q accepted", k)
			}
		}
	})
}
