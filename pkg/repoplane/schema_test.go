package repoplane

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// checkSchema validates v (decoded JSON) against the subset of JSON Schema the repo
// tools publish: type, properties, required, additionalProperties:false, items, enum,
// minItems, maxItems, minimum, maximum, minLength, maxLength.
func checkSchema(s map[string]any, v any, at string) error {
	if t, ok := s["type"]; ok {
		types := []any{t}
		if l, ok := t.([]any); ok {
			types = l
		}
		match := false
		for _, tt := range types {
			if jsonType(v, tt.(string)) {
				match = true
			}
		}
		if !match {
			return fmt.Errorf("%s: %T is not %v", at, v, t)
		}
	}
	if e, ok := s["enum"].([]any); ok {
		found := false
		for _, x := range e {
			if x == v {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %v not in %v", at, v, e)
		}
	}
	switch x := v.(type) {
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if _, ok := x[r.(string)]; !ok {
					return fmt.Errorf("%s: missing %s", at, r)
				}
			}
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ps, ok := props[k]
			if !ok {
				if s["additionalProperties"] == false {
					return fmt.Errorf("%s: unexpected key %s", at, k)
				}
				continue
			}
			if err := checkSchema(ps.(map[string]any), x[k], at+"."+k); err != nil {
				return err
			}
		}
	case []any:
		if n, ok := s["minItems"].(int); ok && len(x) < n {
			return fmt.Errorf("%s: %d items < %d", at, len(x), n)
		}
		if n, ok := s["maxItems"].(int); ok && len(x) > n {
			return fmt.Errorf("%s: %d items > %d", at, len(x), n)
		}
		if it, ok := s["items"].(map[string]any); ok {
			for i, e := range x {
				if err := checkSchema(it, e, fmt.Sprintf("%s[%d]", at, i)); err != nil {
					return err
				}
			}
		}
	case float64:
		if n, ok := s["minimum"].(int); ok && x < float64(n) {
			return fmt.Errorf("%s: %v < %d", at, x, n)
		}
		if n, ok := s["maximum"].(int); ok && x > float64(n) {
			return fmt.Errorf("%s: %v > %d", at, x, n)
		}
	case string:
		if n, ok := s["minLength"].(int); ok && len([]rune(x)) < n {
			return fmt.Errorf("%s: too short", at)
		}
	}
	return nil
}

func jsonType(v any, t string) bool {
	switch t {
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == math.Trunc(f)
	case "number":
		_, ok := v.(float64)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func asJSON(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOutputsMatchSchemas runs every tool through a varied repository and checks each
// output against the outputSchema the tool publishes (and that the checker bites).
func TestOutputsMatchSchemas(t *testing.T) {
	schemas := map[string]map[string]any{}
	hs, _ := Tools(&stubProvider{ns: "repo"})
	for _, h := range hs {
		schemas[h.Definition.RequiredCapability.Action] = h.Definition.OutputSchema
	}
	e := newEnv(t)
	var outs []struct {
		action string
		out    any
	}
	record := func(action string, out any) {
		outs = append(outs, struct {
			action string
			out    any
		}{action, out})
	}
	record(ActionStatus, e.ok(ActionStatus, nil))
	record(ActionLog, e.ok(ActionLog, nil))
	e.write("a.txt", "a\n")
	e.write("bin", "\x00")
	e.write("d/m.txt", "m\n")
	record(ActionStage, e.ok(ActionStage, StageInput{Pathspec: specOf("a.txt", "bin", "d")}))
	record(ActionDiff, e.ok(ActionDiff, DiffInput{Staged: true}))
	record(ActionCommit, e.ok(ActionCommit, CommitInput{Message: "one"}))
	os.Rename(filepath.Join(e.dir, "d/m.txt"), filepath.Join(e.dir, "d/n.txt"))
	e.write("a.txt", "b\n")
	e.write("bin", "\x00\x01")
	e.write("u.txt", "u")
	record(ActionDiff, e.ok(ActionDiff, DiffInput{}))
	record(ActionStage, e.ok(ActionStage, StageInput{Pathspec: specOf("d")}))
	initRepo(t, filepath.Join(e.dir, "nested"))
	if st := e.ok(ActionStage, StageInput{Pathspec: specOf("nested")}).(StageOutput); len(st.Skipped) != 1 {
		t.Fatalf("nested repository not reported: %+v", st)
	} else {
		record(ActionStage, st)
	}
	record(ActionStatus, e.ok(ActionStatus, nil))
	record(ActionDiff, e.ok(ActionDiff, DiffInput{Staged: true}))
	record(ActionLog, e.ok(ActionLog, LogInput{MaxCount: 5}))
	writeFile(t, filepath.Join(e.dir, ".git", "HEAD"), *e.status().Head+"\n")
	record(ActionStatus, e.ok(ActionStatus, nil))
	record(ActionCommit, e.ok(ActionCommit, CommitInput{Message: "detached"}))
	for _, o := range outs {
		if err := checkSchema(schemas[o.action], asJSON(t, o.out), o.action); err != nil {
			t.Fatalf("%s output %s does not match its schema: %v", o.action, asJSON(t, o.out), err)
		}
	}
	bad := asJSON(t, outs[0].out).(map[string]any)
	bad["extra"] = 1
	if checkSchema(schemas[ActionStatus], bad, "status") == nil {
		t.Fatal("the schema checker accepts an unknown key")
	}
	delete(bad, "extra")
	bad["entries"] = []any{map[string]any{"path": []any{"x"}, "staging": "Z", "worktree": "."}}
	if checkSchema(schemas[ActionStatus], bad, "status") == nil {
		t.Fatal("the schema checker accepts a bad letter")
	}
}
