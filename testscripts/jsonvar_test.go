package testscripts

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/testscript"
)

// jsonvar NAME PATH sets the environment variable NAME to the string at PATH (dotted:
// object keys and array indexes, e.g. 0.envelope.id) of the last command's stdout, a
// JSON document: what a later command names (a message id the host minted).
func jsonvar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonvar NAME PATH")
	}
	var v any
	ts.Check(json.Unmarshal([]byte(ts.ReadFile("stdout")), &v))
	for _, key := range strings.Split(args[1], ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[key]
		case []any:
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(x) {
				ts.Fatalf("jsonvar: no element %s in %s", key, args[1])
			}
			v = x[i]
		default:
			ts.Fatalf("jsonvar: %s is not reachable in stdout", args[1])
		}
	}
	s, ok := v.(string)
	if !ok {
		ts.Fatalf("jsonvar: %s is %s, not a string", args[1], fmt.Sprint(v))
	}
	ts.Setenv(args[0], s)
}
