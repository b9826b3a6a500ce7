package grantfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// fuzzSeeds adds every fixture with the given extension, plus inline cases.
func fuzzSeeds(f *testing.F, ext string, extra ...string) {
	paths, err := filepath.Glob(filepath.Join("testdata", "*"+ext))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range extra {
		f.Add([]byte(s))
	}
}

// checkParse asserts the parser's contract on arbitrary input: no panic, no partial
// File beside an error, a one-line *Error, and on success valid grants that survive
// FormatGrantYAML and FormatGrantJSON unchanged.
func checkParse(t *testing.T, name string, data []byte) {
	f, err := Parse(name, data)
	if err != nil {
		if f != nil {
			t.Fatalf("Parse returned a File beside %v", err)
		}
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("Parse error %T is not *Error: %v", err, err)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error spans several lines: %q", err.Error())
		}
		return
	}
	if f.Derived == nil {
		t.Fatal("Derived is nil")
	}
	for _, g := range f.Grants {
		if err := g.Validate(); err != nil {
			t.Fatalf("grant %q fails Validate: %v", g.ID, err)
		}
		roundTrip(t, g)
	}
}

func FuzzParseYAML(f *testing.F) {
	fuzzSeeds(f, ".yaml",
		yamlFile("  - id: g1\n"+okGrantYAML),
		yamlFile("  - id: g1\n    metadata: {a: 1e400, b: !!float 1e400, c: 0x10, d: [~, yes, 2026-01-01]}\n"+okGrantYAML),
		yamlFile("  - id: g1\n    subject: &a agent:x\n"),
		"version: 1\ngrants: []\n---\n",
		lintFile(parentP, lg{id: "C", parent: "P", issued: "-"}),
	)
	f.Fuzz(func(t *testing.T, data []byte) { checkParse(t, "f.yaml", data) })
}

func FuzzParseJSON(f *testing.F) {
	fuzzSeeds(f, ".json",
		`{"version": 1, "grants": [`+jsonGrant1("g1")+`]}`,
		`{"version": 1, "grants": [{"id": "g", "subject": "agent:a", "issuer": "human:b", "capabilities": [{"resource": {"namespace": "n", "path": ["\u0085x"]}, "actions": ["a"], "scope": "exact"}], "metadata": {"n": 1e400, "s": "\ud800", "l": [1.0, -0, true, null]}}]}`,
		`{"version": 1, "version": 1}`,
		`{"s": ["\ud83d\ude00", "\ud800\u0041", "\udc00", "\ud800", "\ud800\\", "\/\b\f\n\r\t\"\\", "\u00e9\u0000"], "n": [-0.0e+5, 0, 1E9, -12.5e-3], "l": [true, false, null, {}, []]}`,
		`{"version": 1, "grants": []} trailing`,
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		checkJSONScanner(t, data)
		checkParse(t, "f.json", data)
	})
}

// checkJSONScanner compares the grant-file JSON scanner with encoding/json: the same
// inputs are valid (except that duplicate keys are refused), and the tree re-encodes to
// the same value.
func checkJSONScanner(t *testing.T, data []byte) {
	if !utf8.Valid(data) {
		return
	}
	root, terr := jsonTree(data)
	valid := json.Valid(data)
	if terr == nil && !valid {
		t.Fatalf("scanner accepted invalid JSON %q", data)
	}
	if terr != nil {
		if valid && !strings.Contains(terr.msg, "duplicate key") && !strings.Contains(terr.msg, "nested too deeply") {
			t.Fatalf("scanner refused valid JSON %q: %s", data, terr.msg)
		}
		return
	}
	decode := func(b []byte) any {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("decode %q: %v", b, err)
		}
		return v
	}
	if got, want := decode(appendJSON(nil, root)), decode(data); !reflect.DeepEqual(got, want) {
		t.Fatalf("scanner read %q as %#v, encoding/json as %#v", data, got, want)
	}
}

// FuzzDecodeSnapshot feeds damaged cache payloads (as if authenticated, so the
// structural decoder is exercised) to the decoder: it must never panic nor return files
// beside an error.
func FuzzDecodeSnapshot(f *testing.F) {
	for _, name := range []string{"full.yaml", "example.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		file, err := Parse(name, data)
		if err != nil {
			f.Fatal(err)
		}
		snap, err := encodeSnapshot([]*File{file}, nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(snap)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		files, hashes, err := decodeSnapshot(payload)
		if err != nil && (files != nil || hashes != nil) {
			t.Fatal("files beside an error")
		}
	})
}
