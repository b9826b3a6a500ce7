package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sharedos/sharedos/internal/textdist"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Mismatch is one expectation a step did not meet.
type Mismatch struct {
	Key      string `json:"key"`
	Expected any    `json:"expected"`
	Observed any    `json:"observed"`
}

// AuditRecord is the part of an audit event a scenario asserts on.
type AuditRecord struct {
	Type       string `json:"type"`
	Outcome    string `json:"outcome"`
	Code       string `json:"code,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Grant      string `json:"grant,omitempty"`
	Cause      string `json:"cause,omitempty"`
	Action     string `json:"action,omitempty"`
	Consumed   *bool  `json:"consumed,omitempty"`
	FailClosed bool   `json:"failClosed,omitempty"`
}

func recordOf(ev kernel.AuditEvent) AuditRecord {
	return AuditRecord{Type: string(ev.Type), Outcome: string(ev.Outcome), Code: string(ev.Reason), Tool: ev.Tool,
		Grant: ev.GrantID, Cause: string(ev.Cause), Action: ev.Action, Consumed: ev.Consumed, FailClosed: ev.FailClosed}
}

func (a AuditMatch) matches(r AuditRecord) bool {
	eq := func(want, got string) bool { return want == "" || want == got }
	return eq(a.Type, r.Type) && eq(a.Outcome, r.Outcome) && eq(a.Code, r.Code) && eq(a.Tool, r.Tool) &&
		eq(a.Grant, r.Grant) && eq(a.Cause, r.Cause) && eq(a.Action, r.Action) &&
		(a.Consumed == nil || r.Consumed != nil && *a.Consumed == *r.Consumed) &&
		(a.FailClosed == nil || *a.FailClosed == r.FailClosed)
}

// MarshalJSON writes the fields a match names.
func (a AuditMatch) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	for k, v := range map[string]string{"type": a.Type, "outcome": a.Outcome, "code": a.Code, "tool": a.Tool,
		"grant": a.Grant, "cause": a.Cause, "action": a.Action} {
		if v != "" {
			m[k] = v
		}
	}
	if a.Consumed != nil {
		m["consumed"] = *a.Consumed
	}
	if a.FailClosed != nil {
		m["failClosed"] = *a.FailClosed
	}
	return json.Marshal(m)
}

// unmatched returns the matches of want that no distinct record of got satisfies (each
// record satisfies at most one match, in order).
func unmatched(want []AuditMatch, got []AuditRecord) []AuditMatch {
	used := make([]bool, len(got))
	var miss []AuditMatch
	for _, w := range want {
		found := false
		for i, r := range got {
			if !used[i] && w.matches(r) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			miss = append(miss, w)
		}
	}
	return miss
}

// outputContains: some string anywhere in the output contains s, or the output's compact
// JSON text does.
func outputContains(out any, s string) bool {
	found := false
	var walk func(v any)
	walk = func(v any) {
		if found {
			return
		}
		switch x := v.(type) {
		case string:
			found = strings.Contains(x, s)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(out)
	if found {
		return true
	}
	b, _ := json.Marshal(out)
	return bytes.Contains(b, []byte(s))
}

// normalize round-trips v through JSON (numbers as json.Number), so that outputs and
// expectations compare as JSON values.
func normalize(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var out any
	if err := d.Decode(&out); err != nil {
		return v
	}
	return out
}

// jsonEqual compares two JSON values; numbers compare by value.
func jsonEqual(a, b any) bool {
	a, b = normalize(a), normalize(b)
	return equalNorm(a, b)
}

func equalNorm(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return false
		}
		if x == y {
			return true
		}
		fx, e1 := x.Float64()
		fy, e2 := y.Float64()
		return e1 == nil && e2 == nil && fx == fy
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalNorm(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !equalNorm(v, w) {
				return false
			}
		}
		return true
	}
	return a == b
}

// pathStep is one step of a JSONPath: an object key or an array index.
type pathStep struct {
	key   string
	index int
	isIdx bool
}

// parseJSONPath parses the subset of JSONPath a scenario uses: $ then .key, ['key'] or
// ["key"], and [N] (N ≥ 0), e.g. $.entries[0].name. Wildcards, filters and slices are
// not supported (a path names one value).
func parseJSONPath(p string) ([]pathStep, error) {
	if !strings.HasPrefix(p, "$") {
		return nil, errors.New("a path starts with $")
	}
	var out []pathStep
	s := p[1:]
	for s != "" {
		switch s[0] {
		case '.':
			s = s[1:]
			i := strings.IndexAny(s, ".[")
			if i < 0 {
				i = len(s)
			}
			if i == 0 {
				return nil, errors.New("empty key after a dot")
			}
			if strings.ContainsAny(s[:i], "*]'\"") {
				return nil, fmt.Errorf("unsupported key %q (wildcards and filters are not supported)", s[:i])
			}
			out = append(out, pathStep{key: s[:i]})
			s = s[i:]
		case '[':
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return nil, errors.New("unclosed [")
			}
			in := s[1:end]
			switch {
			case len(in) >= 2 && (in[0] == '\'' && in[len(in)-1] == '\'' || in[0] == '"' && in[len(in)-1] == '"'):
				out = append(out, pathStep{key: in[1 : len(in)-1]})
			default:
				n, err := strconv.Atoi(in)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("[%s]: want an index ≥ 0 or a quoted key", in)
				}
				out = append(out, pathStep{index: n, isIdx: true})
			}
			s = s[end+1:]
		default:
			return nil, fmt.Errorf("unexpected %q", s[:1])
		}
	}
	return out, nil
}

// lookupPath returns the value at path in v (normalized), and whether it exists.
func lookupPath(v any, path string) (any, bool) {
	steps, err := parseJSONPath(path)
	if err != nil {
		return nil, false
	}
	cur := normalize(v)
	for _, st := range steps {
		if st.isIdx {
			a, ok := cur.([]any)
			if !ok || st.index >= len(a) {
				return nil, false
			}
			cur = a[st.index]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[st.key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// nearest is the allowed key closest to s (edit distance ≤ 2), or "".
func nearest(s string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := textdist.Levenshtein(s, a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func missing(want, got []string) []string {
	var out []string
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, w)
		}
	}
	return out
}
