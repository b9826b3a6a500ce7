package jsonschema

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

// The drafts' meta-schemas are compiled on the first Compile (not in init): a schema the
// meta-schema rejects is refused by the very first Compile of the process, from any
// number of goroutines at once, and a valid one validates with instance locations.
func TestFirstCompileLoadsTheMetaSchemas(t *testing.T) {
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := NewCompiler()
			if err := c.AddResource("mem://bad.json", map[string]any{"type": 12.0}); err != nil {
				errs[i] = err
				return
			}
			_, errs[i] = c.Compile("mem://bad.json")
		}()
	}
	wg.Wait()
	for _, err := range errs {
		var sve *SchemaValidationError
		if !errors.As(err, &sve) {
			t.Fatalf("compiling {\"type\": 12}: got %v, want a *SchemaValidationError from the draft 2020-12 meta-schema", err)
		}
	}

	c := NewCompiler()
	c.AssertFormat()
	doc := map[string]any{
		"$schema":    "http://json-schema.org/draft-07/schema#",
		"type":       "object",
		"properties": map[string]any{"when": map[string]any{"type": "string", "format": "date-time"}},
	}
	if err := c.AddResource("mem://ok.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://ok.json")
	if err != nil {
		t.Fatal(err)
	}
	err = sch.Validate(map[string]any{"when": "yesterday"})
	if err == nil || !strings.Contains(err.Error(), "/when") {
		t.Fatalf("validating a bad date-time: got %v, want an error at /when", err)
	}
}
