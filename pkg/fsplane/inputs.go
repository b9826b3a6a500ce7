package fsplane

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/sharedos/sharedos/internal/jscompat"
)

// The provider accepts its inputs either as the typed values the tool handlers build or
// as any JSON-shaped value (map[string]any, json.RawMessage) from a direct caller; the
// latter are decoded strictly (unknown keys are invalid_input) and every value is
// checked again, since a direct caller has not been through the tool parser.

func badInput(format string, args ...any) error { return failed(CodeInvalidInput, format, args...) }

// inputObject re-encodes in as JSON and returns its members, refusing unknown keys.
func inputObject(in any, allowed ...string) (argObject, error) {
	var raw []byte
	switch v := in.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return nil, badInput("the operation input is not JSON: %v", err)
		}
		raw = b
	}
	o, err := strictArgs(raw, allowed...)
	if err != nil {
		return nil, badInput("the operation input is not valid: %v", err)
	}
	return o, nil
}

func inputErr(err error) error {
	if err == nil {
		return nil
	}
	return badInput("the operation input is not valid: %v", err)
}

func decodeSearchInput(in any) (SearchInput, error) {
	var v SearchInput
	switch t := in.(type) {
	case SearchInput:
		v = t
	case *SearchInput:
		if t != nil {
			v = *t
		}
	default:
		o, err := inputObject(in, "query", "limit")
		if err != nil {
			return v, err
		}
		q, ok, err := o.rawString("query")
		if err != nil || !ok {
			return v, badInput("search needs a query string")
		}
		v.Query = q
		if n, ok, err := o.integer("limit", 1, maxSearchLimit); err != nil {
			return v, inputErr(err)
		} else if ok {
			v.Limit = &n
		}
	}
	v.Query = jscompat.JSTrim(v.Query)
	if n := jscompat.UTF16Len(v.Query); n < 1 || n > maxQueryLen {
		return v, badInput("query must be 1 to %d characters after trimming", maxQueryLen)
	}
	if v.Limit != nil && (*v.Limit < 1 || *v.Limit > maxSearchLimit) {
		return v, badInput("limit must be an integer from 1 to %d", maxSearchLimit)
	}
	return v, nil
}

func decodeGrepInput(in any) (GrepInput, error) {
	var v GrepInput
	switch t := in.(type) {
	case GrepInput:
		v = t
	case *GrepInput:
		if t != nil {
			v = *t
		}
	default:
		a, err := inputObject(in, "pattern", "mode", "caseSensitive", "contextBefore", "contextAfter")
		if err != nil {
			return v, err
		}
		// Reuse the tool parser (defaults included) on a path-less object.
		a["path"] = json.RawMessage("[]")
		b, _ := json.Marshal(a)
		parsed, err := parseGrepArgs(b)
		if err != nil {
			return v, inputErr(err)
		}
		g := parsed.(*GrepArgs)
		v = GrepInput{Pattern: g.Pattern, Mode: g.Mode, CaseSensitive: g.CaseSensitive,
			ContextBefore: g.ContextBefore, ContextAfter: g.ContextAfter}
	}
	if n := jscompat.UTF16Len(v.Pattern); n < 1 || n > maxPatternLen {
		return v, badInput("pattern must be 1 to %d characters", maxPatternLen)
	}
	if v.Mode != ModeLiteral && v.Mode != ModeRegex {
		return v, badInput("mode must be \"literal\" or \"regex\"")
	}
	if v.ContextBefore < 0 || v.ContextBefore > maxContextLines || v.ContextAfter < 0 || v.ContextAfter > maxContextLines {
		return v, badInput("contextBefore and contextAfter must be integers from 0 to %d", maxContextLines)
	}
	return v, nil
}

func decodeWriteInput(action string, in any) (WriteInput, error) {
	var v WriteInput
	switch t := in.(type) {
	case WriteInput:
		v = t
	case *WriteInput:
		if t != nil {
			v = *t
		}
	default:
		allowed := []string{"content", "metadata"}
		switch action {
		case ActionReplace:
			allowed = []string{"content", "expectedVersion"}
		case ActionAppend:
			allowed = []string{"content", "expectedVersion", "metadata"}
		}
		o, err := inputObject(in, allowed...)
		if err != nil {
			return v, err
		}
		if v.Content, err = o.content(); err != nil {
			return v, inputErr(err)
		}
		if v.ExpectedVersion, err = o.version("expectedVersion"); err != nil {
			return v, inputErr(err)
		}
		if v.Metadata, err = o.metadata(); err != nil {
			return v, inputErr(err)
		}
		return v, nil
	}
	if len(bytes.TrimSpace(v.Content)) == 0 {
		return v, badInput("%s needs content", action)
	}
	c, err := compactJSONValue(v.Content)
	if err != nil {
		return v, badInput("content %v", err)
	}
	v.Content = c
	if action == ActionCreate && v.ExpectedVersion != nil {
		return v, badInput("create does not take expectedVersion (the path must be absent)")
	}
	if v.ExpectedVersion != nil {
		if err := checkVersionToken(*v.ExpectedVersion); err != nil {
			return v, badInput("expectedVersion %v", err)
		}
	}
	return v, nil
}

func decodeDeleteInput(in any) (DeleteInput, error) {
	var v DeleteInput
	switch t := in.(type) {
	case DeleteInput:
		v = t
	case *DeleteInput:
		if t != nil {
			v = *t
		}
	case nil:
	default:
		o, err := inputObject(in, "expectedVersion", "recursive")
		if err != nil {
			return v, err
		}
		if v.ExpectedVersion, err = o.version("expectedVersion"); err != nil {
			return v, inputErr(err)
		}
		if v.Recursive, err = o.boolean("recursive"); err != nil {
			return v, inputErr(err)
		}
		return v, nil
	}
	if v.ExpectedVersion != nil {
		if err := checkVersionToken(*v.ExpectedVersion); err != nil {
			return v, badInput("expectedVersion %v", err)
		}
	}
	return v, nil
}

func decodeSnapshotCreateInput(in any) (SnapshotCreateInput, bool, error) {
	var v SnapshotCreateInput
	switch t := in.(type) {
	case nil:
		return v, false, nil
	case SnapshotCreateInput:
		v = t
	case *SnapshotCreateInput:
		if t == nil {
			return v, false, nil
		}
		v = *t
	default:
		o, err := inputObject(in, "label")
		if err != nil {
			return v, false, err
		}
		l, ok, err := o.trimmed("label", maxLabelLen, false)
		if err != nil {
			return v, false, inputErr(err)
		}
		if !ok {
			return v, false, nil
		}
		return SnapshotCreateInput{Label: l}, true, nil
	}
	v.Label = jscompat.JSTrim(v.Label)
	if n := jscompat.UTF16Len(v.Label); n < 1 || n > maxLabelLen {
		return v, false, badInput("label must be 1 to %d characters after trimming", maxLabelLen)
	}
	return v, true, nil
}

// defaultSnapshotListLimit is the number of snapshots listed when no limit is given.
const defaultSnapshotListLimit = 100

func decodeSnapshotListInput(in any) (SnapshotListInput, error) {
	v := SnapshotListInput{Limit: defaultSnapshotListLimit}
	switch t := in.(type) {
	case nil:
		return v, nil
	case SnapshotListInput:
		v = t
	case *SnapshotListInput:
		if t != nil {
			v = *t
		}
	default:
		o, err := inputObject(in, "limit")
		if err != nil {
			return v, err
		}
		if n, ok, err := o.integer("limit", 1, maxSearchLimit); err != nil {
			return v, inputErr(err)
		} else if ok {
			v.Limit = n
		}
	}
	if v.Limit < 1 || v.Limit > maxSearchLimit {
		return v, badInput("limit must be an integer from 1 to %d", maxSearchLimit)
	}
	return v, nil
}

// validSnapshotID reports whether s matches ^[A-Za-z0-9-]{1,128}$ (a hand-written check:
// the regexp's {1,128} would cost a thousand allocations at every process start).
func validSnapshotID(s string) bool {
	if len(s) < 1 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func decodeSnapshotRestoreInput(in any) (SnapshotRestoreInput, error) {
	var v SnapshotRestoreInput
	switch t := in.(type) {
	case SnapshotRestoreInput:
		v = t
	case *SnapshotRestoreInput:
		if t != nil {
			v = *t
		}
	default:
		o, err := inputObject(in, "snapshotId", "expectedVersion")
		if err != nil {
			return v, err
		}
		id, ok, err := o.rawString("snapshotId")
		if err != nil || !ok {
			return v, badInput("snapshot.restore needs a snapshotId string")
		}
		v.SnapshotID = id
		if v.ExpectedVersion, err = o.version("expectedVersion"); err != nil {
			return v, inputErr(err)
		}
	}
	v.SnapshotID = jscompat.JSTrim(v.SnapshotID)
	if !validSnapshotID(v.SnapshotID) {
		shown := v.SnapshotID
		if utf8.RuneCountInString(shown) > 64 {
			shown = string([]rune(shown)[:64]) + "…"
		}
		return v, badInput("snapshotId %q is not a snapshot id (1 to 128 of A-Z a-z 0-9 -); list them with files.snapshot.list", shown)
	}
	if v.ExpectedVersion != nil {
		if err := checkVersionToken(*v.ExpectedVersion); err != nil {
			return v, badInput("expectedVersion %v", err)
		}
	}
	return v, nil
}
