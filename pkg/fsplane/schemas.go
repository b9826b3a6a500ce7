package fsplane

// Output schemas: the pinned output shapes of spec 10 §7.1 (plus this package's
// additions), published as each tool's outputSchema. Every object is closed
// (additionalProperties:false) so a test can prove the provider emits exactly them.

func obj(props map[string]any, required ...string) map[string]any {
	req := make([]any, len(required))
	for i, r := range required {
		req[i] = r
	}
	return map[string]any{"type": "object", "properties": props, "required": req,
		"additionalProperties": false}
}

func arr(items map[string]any) map[string]any {
	return map[string]any{"type": "array", "items": items}
}

func str() map[string]any { return map[string]any{"type": "string"} }

func boolean() map[string]any { return map[string]any{"type": "boolean"} }

func nonNegInt() map[string]any { return map[string]any{"type": "integer", "minimum": 0} }

func enumStr(vals ...string) map[string]any {
	e := make([]any, len(vals))
	for i, v := range vals {
		e[i] = v
	}
	return map[string]any{"type": "string", "enum": e}
}

func outPath() map[string]any {
	return map[string]any{"type": "array", "items": str(), "maxItems": 128}
}

func versionOut() map[string]any {
	// Opaque to callers: this package's provider emits 32 lower-case hex characters, but
	// the tools may wrap any files provider.
	return map[string]any{"type": "string", "minLength": 1, "maxLength": maxVersionLen}
}

func timestampOut() map[string]any {
	return map[string]any{"type": "string", "format": "date-time"}
}

func listOutputSchema() map[string]any {
	return obj(map[string]any{
		"path": outPath(),
		"entries": arr(obj(map[string]any{
			"name":        str(),
			"kind":        enumStr("file", "directory", "symlink", "other"),
			"addressable": map[string]any{"const": false},
		}, "name", "kind")),
		"truncated": boolean(),
	}, "path", "entries", "truncated")
}

func statOutputSchema() map[string]any {
	return obj(map[string]any{
		"path":       outPath(),
		"kind":       enumStr("file", "directory", "other"),
		"sizeBytes":  nonNegInt(),
		"modifiedAt": timestampOut(),
		"version":    versionOut(),
	}, "path", "kind", "sizeBytes", "modifiedAt")
}

func readOutputSchema() map[string]any {
	return obj(map[string]any{
		"path":      outPath(),
		"version":   versionOut(),
		"truncated": boolean(),
		"encoding":  enumStr("utf-8", "base64"),
		"content":   str(),
	}, "path", "version", "truncated", "encoding", "content")
}

func searchOutputSchema() map[string]any {
	return obj(map[string]any{
		"path": outPath(),
		"hits": arr(obj(map[string]any{
			"path":        outPath(),
			"score":       map[string]any{"type": "number", "minimum": 0, "maximum": 1},
			"excerpt":     str(),
			"version":     versionOut(),
			"addressable": map[string]any{"const": false},
		}, "path", "score", "excerpt", "version")),
		"truncated": map[string]any{"const": true},
	}, "path", "hits")
}

func grepOutputSchema() map[string]any {
	return obj(map[string]any{
		"path": outPath(),
		"matches": arr(obj(map[string]any{
			"path":        outPath(),
			"line":        map[string]any{"type": "integer", "minimum": 1},
			"text":        str(),
			"context":     arr(str()),
			"truncated":   boolean(),
			"invalidUtf8": boolean(),
			"addressable": map[string]any{"const": false},
		}, "path", "line", "text", "context")),
		"truncated": boolean(),
	}, "path", "matches", "truncated")
}

func writeOutputSchema() map[string]any {
	return obj(map[string]any{
		"path":    outPath(),
		"version": versionOut(),
		"bytes":   nonNegInt(),
	}, "path", "version", "bytes")
}

func deleteOutputSchema() map[string]any {
	return obj(map[string]any{
		"path":    outPath(),
		"deleted": map[string]any{"const": true},
	}, "path", "deleted")
}

func nullableStr() map[string]any {
	return map[string]any{"type": []any{"string", "null"}}
}

func snapshotCreateOutputSchema() map[string]any {
	return obj(map[string]any{
		"path":       outPath(),
		"snapshotId": str(),
		"label":      nullableStr(),
		"kind":       enumStr("file", "directory"),
	}, "path", "snapshotId", "label", "kind")
}

func snapshotListOutputSchema() map[string]any {
	return obj(map[string]any{
		"path": outPath(),
		"snapshots": arr(obj(map[string]any{
			"snapshotId": str(),
			"label":      nullableStr(),
			"kind":       enumStr("file", "directory"),
			"createdAt":  timestampOut(),
		}, "snapshotId", "label", "kind", "createdAt")),
	}, "path", "snapshots")
}

func snapshotRestoreOutputSchema() map[string]any {
	return obj(map[string]any{
		"path":       outPath(),
		"snapshotId": str(),
		"kind":       enumStr("file", "directory"),
		"version":    versionOut(),
		"restored":   nonNegInt(),
		"removed":    nonNegInt(),
		"preserved":  nonNegInt(),
	}, "path", "snapshotId", "kind", "restored", "removed")
}
