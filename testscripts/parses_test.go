package testscripts

import (
	"encoding/json"

	"github.com/pelletier/go-toml/v2"
	"github.com/rogpeppe/go-internal/testscript"
)

// parses json|toml [FILE] succeeds when FILE (default: the last command's stdout) is one
// valid JSON document, or a valid TOML document.
func parses(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 || (args[0] != "json" && args[0] != "toml") {
		ts.Fatalf("usage: parses json|toml [FILE]")
	}
	file := "stdout"
	if len(args) == 2 {
		file = args[1]
	}
	data := []byte(ts.ReadFile(file))
	var v any
	var err error
	if args[0] == "json" {
		err = json.Unmarshal(data, &v)
	} else {
		err = toml.Unmarshal(data, &v)
	}
	if (err == nil) == neg {
		ts.Fatalf("%s as %s: %v (neg %v)\n%s", file, args[0], err, neg, data)
	}
}
