package cmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// MaxArgumentBytes bounds --args and --args-file (spec 40 §7).
const MaxArgumentBytes = 4 << 20

// ArgsOptions are the tool-argument flags shared by `tools call` and `explain`.
type ArgsOptions struct {
	JSON    string
	jsonSet bool
	File    string
	Pairs   []string
	// Notes explain -a values the tool will refuse (see argPath); printed as warnings.
	Notes []string
}

func (a *ArgsOptions) note(n string) {
	if n != "" {
		a.Notes = append(a.Notes, n)
	}
}

func (a *ArgsOptions) bind(fs *pflag.FlagSet) {
	fs.StringVar(&a.JSON, "args", "", "tool arguments as a JSON object (-a keys are set on it)")
	fs.StringVar(&a.File, "args-file", "", "read the tool arguments (a JSON object) from FILE ('-' = stdin; -a keys are set on it)")
	fs.StringArrayVarP(&a.Pairs, "arg", "a", nil, "one argument key=value, coerced by the tool's input schema (repeatable; see the -a FORM column of 'tools describe'); replaces that key of --args")
}

const argsHint = "pass the arguments as a JSON object (--args '{\"path\":[\"notes.md\"]}') or as -a key=value"

// build returns the call's arguments: --args or --args-file as the base object, then
// each -a key=value coerced by def's input schema (def may be nil for an unknown tool:
// values stay strings). Anything that is not a JSON object, or larger than 4 MiB, is a
// usage error (exit 2, invalid_arguments).
func (a *ArgsOptions) build(in io.Reader, def *kernel.ToolDefinition) (json.RawMessage, error) {
	if a.jsonSet && a.File != "" {
		return nil, usageError("use one of them", "--args and --args-file cannot be used together")
	}
	var raw []byte
	switch {
	case a.jsonSet:
		if len(a.JSON) > MaxArgumentBytes {
			return nil, argumentsError("arguments are limited to 4 MiB", "--args is larger than 4 MiB")
		}
		raw = []byte(a.JSON)
	case a.File != "":
		var r io.Reader
		name := a.File
		if name == "-" {
			r, name = in, "stdin"
		} else {
			fh, err := os.Open(a.File)
			if err != nil {
				return nil, usageError("name a readable file, or '-' for stdin", "--args-file %s: %v", a.File, unwrapPathErr(err))
			}
			defer fh.Close()
			r = fh
		}
		b, err := io.ReadAll(io.LimitReader(r, MaxArgumentBytes+1))
		if err != nil {
			return nil, usageError("", "--args-file %s: %v", name, err)
		}
		if len(b) > MaxArgumentBytes {
			return nil, argumentsError("arguments are limited to 4 MiB", "--args-file %s is larger than 4 MiB", name)
		}
		raw = b
	}
	var obj map[string]any
	if raw != nil {
		src := "--args"
		if a.File != "" {
			src = "--args-file"
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, argumentsError(argsHint, "%s is not valid JSON: %v", src, err)
		}
		if dec.More() {
			return nil, argumentsError(argsHint, "%s holds more than one JSON value", src)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, argumentsError(argsHint, "%s holds more than one JSON value", src)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, argumentsError(argsHint, "%s must be a JSON object, not %s", src, jsonKind(v))
		}
		if len(a.Pairs) == 0 {
			return bytes.TrimSpace(raw), nil
		}
		obj = m
	}
	if obj == nil {
		obj = map[string]any{}
	}
	seen := map[string]bool{}
	for _, p := range a.Pairs {
		key, val, ok := strings.Cut(p, "=")
		if !ok || key == "" {
			return nil, usageError("write each -a as key=value, e.g. -a path=notes/todo.md", "invalid -a %q: want key=value", p)
		}
		if seen[key] {
			return nil, usageError("give each key once", "-a %s is given twice", key)
		}
		seen[key] = true
		if err := unknownArgKey(def, key); err != nil {
			return nil, err
		}
		v, err := a.coerceArg(def, key, val)
		if err != nil {
			return nil, err
		}
		if _, ok := obj[key]; ok {
			a.note(fmt.Sprintf("-a %s replaces the %s of the JSON arguments", key, key))
		}
		obj[key] = v
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, internalError(err)
	}
	if len(b) > MaxArgumentBytes {
		return nil, argumentsError("arguments are limited to 4 MiB", "the arguments are larger than 4 MiB")
	}
	return b, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return "an object"
}

// coerceArg turns the text of -a key=value into the JSON value the tool's input schema
// declares for key: a string stays a string (even "42"); integer, number and boolean are
// parsed; a path (array of strings) splits on "/" ("" is the empty path); a pathspec
// (array of paths) splits on "," then "/"; object and other arrays are parsed as JSON.
// An untyped or undeclared key stays a string.
func (a *ArgsOptions) coerceArg(def *kernel.ToolDefinition, key, val string) (any, error) {
	prop := schemaProperty(def, key)
	bad := func(want string) error {
		return usageError(fmt.Sprintf("-a %s takes %s", key, want), "invalid -a %s=%q: not %s", key, val, want)
	}
	switch schemaType(prop) {
	case "integer":
		if _, err := strconv.ParseInt(val, 10, 64); err != nil {
			return nil, bad("an integer")
		}
		return json.Number(val), nil
	case "number":
		f, err := strconv.ParseFloat(val, 64)
		if err != nil || !isJSONNumber(val) {
			_ = f
			return nil, bad("a number")
		}
		return json.Number(val), nil
	case "boolean":
		switch val {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, bad("true or false")
	case "array":
		items, _ := prop["items"].(map[string]any)
		switch schemaType(items) {
		case "string":
			path, note := argPath(key, val)
			a.note(note)
			return path, nil
		case "array":
			out := [][]string{}
			if val != "" {
				for _, p := range strings.Split(val, ",") {
					path, note := argPath(key, p)
					a.note(note)
					out = append(out, path)
				}
			}
			return out, nil
		}
		return parseJSONArg(key, val, "a JSON array")
	case "object":
		return parseJSONArg(key, val, "a JSON object")
	}
	return val, nil
}

// argPath splits the text of a path argument into its segments. One trailing "/" is
// accepted (shell completion of a directory produces it: path=src/ is src). An absolute
// path, "." or ".." segments and empty segments are passed on as written — the tool
// refuses them (failed invalid_tool_arguments, exit 4, audited like any call) — and note
// says in one line what to write instead.
func argPath(key, val string) (segs []string, note string) {
	segs = splitPath(strings.TrimSuffix(val, "/"))
	why := ""
	if strings.HasPrefix(val, "/") {
		why = "is absolute"
	} else {
		for _, seg := range segs {
			switch seg {
			case "":
				why = "has an empty segment"
			case ".", "..":
				why = "has a '" + seg + "' segment"
			default:
				continue
			}
			break
		}
	}
	if why == "" {
		return segs, ""
	}
	return splitPath(val), fmt.Sprintf("-a %s=%q %s: paths are relative to --root, with '/' between segments (e.g. -a %s=notes/todo.md); the root itself is -a %s=",
		key, val, why, key, key)
}

func splitPath(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, "/")
}

func parseJSONArg(key, val, want string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(val))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, usageError(fmt.Sprintf("-a %s takes %s", key, want), "invalid -a %s: not %s", key, want)
	}
	return v, nil
}

func isJSONNumber(s string) bool {
	var n json.Number
	return json.Unmarshal([]byte(s), &n) == nil
}

// schemaProperty returns the JSON Schema of property key of def's input schema, or nil.
func schemaProperty(def *kernel.ToolDefinition, key string) map[string]any {
	if def == nil {
		return nil
	}
	props, _ := def.InputSchema["properties"].(map[string]any)
	p, _ := props[key].(map[string]any)
	return p
}

// schemaType is the (first non-null) type a schema declares, or "".
func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, e := range t {
			if str, ok := e.(string); ok && str != "null" {
				return str
			}
		}
	case []string:
		for _, e := range t {
			if e != "null" {
				return e
			}
		}
	}
	return ""
}
