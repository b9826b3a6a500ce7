package scenario

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Update writes the observed values into the expect blocks of the failing steps of rep
// (golden mode): each failing step's expect becomes one flow mapping (JSON, which is
// also YAML) with the same keys, the failed ones set to what was observed, the others
// kept. Passing steps, and everything else in the file, are left byte for byte. A key
// whose observed value is empty (a code on a succeeded call) is dropped; a failed output
// assertion becomes output: {equals: …}. It returns the files it rewrote; each is
// written atomically.
func Update(rep *Report) ([]string, error) {
	var changed []string
	for _, fr := range rep.Files {
		if fr.File == nil {
			continue
		}
		type edit struct {
			from, to int
			text     string
		}
		var edits []edit
		offsets := lineOffsets(fr.File.data)
		for _, tr := range fr.Tests {
			if tr.Outcome != Failed {
				continue
			}
			for _, sr := range tr.Steps {
				s := sr.step
				if sr.Passed || s == nil || s.Expect == nil || s.expectNode == nil {
					continue
				}
				v, err := updatedExpect(fr.File, s, sr)
				if err != nil {
					return changed, fmt.Errorf("%s:%d: %v", fr.Path, s.Line, err)
				}
				b, err := json.Marshal(v)
				if err != nil {
					return changed, err
				}
				if ext := filepath.Ext(fr.Path); ext != ".json" {
					b = []byte(flowYAML(v))
				}
				from, to, ok := valueSpan(fr.File.data, offsets, s.expectNode)
				if !ok {
					return changed, fmt.Errorf("%s:%d: cannot locate the expect block", fr.Path, s.Line)
				}
				text := string(b)
				if s.expectNode.Style&yaml.FlowStyle == 0 {
					text = " " + text + "\n"
					// a block mapping starts on the line after `expect:`; replace from the colon
					from = bytes.LastIndexByte(fr.File.data[:from], ':') + 1
				}
				edits = append(edits, edit{from, to, text})
			}
		}
		if len(edits) == 0 {
			continue
		}
		sort.Slice(edits, func(i, j int) bool { return edits[i].from > edits[j].from })
		out := slices.Clone(fr.File.data)
		for _, e := range edits {
			out = slices.Concat(out[:e.from], []byte(e.text), out[e.to:])
		}
		if _, err := Parse(fr.Path, out); err != nil {
			return changed, fmt.Errorf("the updated %s would not parse: %v", fr.Path, err)
		}
		if err := writeAtomic(fr.Path, out); err != nil {
			return changed, err
		}
		changed = append(changed, fr.Path)
	}
	return changed, nil
}

// orderedMap marshals its keys in order.
type orderedMap struct {
	keys []string
	vals map[string]any
}

func (m orderedMap) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range m.keys {
		if i > 0 {
			b.WriteString(", ")
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(m.vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteString(": ")
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func updatedExpect(f *File, s *Step, sr *StepResult) (orderedMap, error) {
	failed := map[string]bool{}
	for _, m := range sr.Mismatches {
		key := m.Key
		if len(key) > 6 && key[:6] == "output" {
			key = "output"
		}
		failed[key] = true
	}
	p := &parser{file: f.Path}
	orig := map[string]*yaml.Node{}
	for i := 0; i+1 < len(s.expectNode.Content); i += 2 {
		orig[s.expectNode.Content[i].Value] = s.expectNode.Content[i+1]
	}
	o := sr.Observed
	out := orderedMap{vals: map[string]any{}}
	set := func(k string, v any) {
		out.keys = append(out.keys, k)
		out.vals[k] = v
	}
	for _, k := range s.Expect.keys {
		if !failed[k] {
			v, err := p.value(orig[k], k)
			if err != nil {
				return out, err
			}
			set(k, v)
			continue
		}
		str := func(v string) {
			if v != "" {
				set(k, v)
			}
		}
		switch k {
		case "status":
			str(o.Status)
		case "code":
			str(o.Code)
		case "gate":
			str(o.Gate)
		case "cause":
			str(o.Cause)
		case "grant":
			str(o.Grant)
		case "rejected":
			set(k, o.Rejected)
		case "output":
			if o.Status == "succeeded" {
				set(k, map[string]any{"equals": o.Output})
			}
		case "audit", "contains":
			set(k, o.Audit)
		case "excludes":
			if s.Kind == KindAudit {
				var keep []AuditMatch
				for _, a := range s.Expect.Absent {
					hit := false
					for _, r := range o.Audit {
						hit = hit || a.matches(r)
					}
					if !hit {
						keep = append(keep, a)
					}
				}
				set(k, orEmpty(keep))
			} else {
				var keep []string
				for _, x := range s.Expect.Excludes {
					if !slices.Contains(o.Tools, x) {
						keep = append(keep, x)
					}
				}
				set(k, orEmpty(keep))
			}
		case "includes":
			set(k, o.Tools)
		case "exit":
			set(k, o.Exit)
		case "allowed":
			if o.Allowed != nil {
				set(k, *o.Allowed)
			}
		case "fixes":
			set(k, orEmpty(o.Fixes))
		case "enabled":
			set(k, orEmpty(o.Enabled))
		}
	}
	return out, nil
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func lineOffsets(data []byte) []int {
	offs := []int{0}
	for i, c := range data {
		if c == '\n' {
			offs = append(offs, i+1)
		}
	}
	return offs
}

// valueSpan returns the byte span of a mapping value: a flow mapping from its { to its
// matching }, a block mapping from its first key to the end of its last line.
func valueSpan(data []byte, offs []int, n *yaml.Node) (from, to int, ok bool) {
	if n.Line < 1 || n.Line > len(offs) {
		return 0, 0, false
	}
	from = offs[n.Line-1] + n.Column - 1
	if from >= len(data) {
		return 0, 0, false
	}
	if n.Style&yaml.FlowStyle != 0 {
		if data[from] != '{' {
			return 0, 0, false
		}
		depth := 0
		var quote byte
		for i := from; i < len(data); i++ {
			c := data[i]
			switch {
			case quote != 0:
				if c == '\\' && quote == '"' {
					i++
				} else if c == quote {
					quote = 0
				}
			case c == '"' || c == '\'':
				quote = c
			case c == '{' || c == '[':
				depth++
			case c == '}' || c == ']':
				depth--
				if depth == 0 {
					return from, i + 1, true
				}
			}
		}
		return 0, 0, false
	}
	indent := n.Column - 1
	to = len(data)
	for l := n.Line; l < len(offs); l++ {
		line := data[offs[l]:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		t := bytes.TrimLeft(line, " ")
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		if len(line)-len(t) < indent {
			to = offs[l]
			break
		}
	}
	// keep the blank and comment lines that precede the next entry
	for to > from {
		prev := bytes.LastIndexByte(data[:to-1], '\n') + 1
		t := bytes.TrimSpace(data[prev:to])
		if len(t) != 0 && t[0] != '#' {
			break
		}
		to = prev
	}
	return from, to, true
}

func writeAtomic(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// flowYAML writes v (orderedMap, maps, lists, strings, numbers, booleans, null) as one
// YAML flow value, quoting only the strings that need it.
func flowYAML(v any) string {
	var b bytes.Buffer
	writeFlow(&b, v)
	return b.String()
}

func writeFlow(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case orderedMap:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeFlow(b, k)
			b.WriteString(": ")
			writeFlow(b, x.vals[k])
		}
		b.WriteByte('}')
	case map[string]any, map[string]string:
		// through JSON, for one ordering and one set of types
		var m map[string]any
		raw, _ := json.Marshal(x)
		_ = json.Unmarshal(raw, &m)
		keys := sortedKeys(m)
		om := orderedMap{keys: keys, vals: map[string]any{}}
		for _, k := range keys {
			om.vals[k] = m[k]
		}
		writeFlow(b, om)
	case string:
		if plainSafe(x) {
			b.WriteString(x)
		} else {
			q, _ := json.Marshal(x)
			b.Write(q)
		}
	case nil, bool, int, float64, json.Number:
		q, _ := json.Marshal(x)
		b.Write(q)
	default:
		// lists and records: through JSON
		raw, err := json.Marshal(x)
		if err != nil {
			b.WriteString("null")
			return
		}
		var g any
		_ = json.Unmarshal(raw, &g)
		if l, ok := g.([]any); ok {
			b.WriteByte('[')
			for i, e := range l {
				if i > 0 {
					b.WriteString(", ")
				}
				writeFlow(b, e)
			}
			b.WriteByte(']')
			return
		}
		if m, ok := g.(map[string]any); ok {
			writeFlow(b, m)
			return
		}
		b.Write(raw)
	}
}

// plainSafe: s reads back as the same string when written unquoted in a flow mapping.
func plainSafe(s string) bool {
	if s == "" || strings.ContainsAny(s[:1], "-?:,[]{}#&*!|>'\"%@` ") || strings.HasSuffix(s, " ") {
		return false
	}
	if strings.ContainsAny(s, ",[]{}#\"'\n\t") || strings.Contains(s, ": ") || strings.HasSuffix(s, ":") {
		return false
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(s), &n); err != nil || len(n.Content) != 1 {
		return false
	}
	c := n.Content[0]
	return c.Kind == yaml.ScalarNode && c.Tag == "!!str" && c.Value == s
}

// FlowYAML writes v (maps, lists, strings, numbers, booleans, null) as one YAML flow
// value, map keys sorted, quoting only the strings that need it: what `audit export
// --as-test` and --update write into scenario files.
func FlowYAML(v any) string { return flowYAML(v) }
